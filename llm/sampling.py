"""The run's sampling, held by the recording proxy: in a rollout the agent chooses its messages and its tools, never
how its model samples.

A session opened with a sampling policy (ProxySession.sampling: every rollout's, from `policy_for(endpoint)`, the
endpoint's `sampling` settings being the run's) has each request body checked before it goes upstream:

- set: the sampling knobs the run owns (RUN_OWNED: temperature, top_p, seed, penalties, …) are the run's values
  whatever the agent sent, and removed when the run names none (the upstream's default, the same for every call);
  `n` is 1. So the seed is the run's `sampling.seed` or none: an agent's own seed would let it pick among
  repeatable samples. A seeded run gives each of its samples a seed of its own (derived_seed: a rollout's from the
  run's seed, its task and its repeat), so that repeats are independent samples and a rerun draws them again;
- capped: the output cap (max_completion_tokens / max_tokens / max_output_tokens) is at most the endpoint's limit
  (its sampling's max_tokens, else CLAWGYM_PROXY_MAX_OUTPUT_TOKENS), and added when the agent sent none;
- refused, with a 400 `sampling_not_allowed` that is recorded like any call: every other field, unless it is known
  not to change what the model samples (PASSED), and the checked ones (CHECKED) outside their harmless values. That
  covers ignore_eos, min_tokens, logit_bias, logprobs settings, guided decoding (guided_*, structured_outputs, a
  response_format other than text, tool_choice "required" or a named tool), beam search, and what would change the
  prompt without the messages showing it (chat_template, continue_final_message, add_generation_prompt, echo,
  truncation). An allow-list, not a deny-list: an upstream's next sampling extension is refused until someone decides
  it is harmless. A refusal is clearer than dropping such a field: the agent learns that it was not obeyed.

What was set, capped or refused is recorded on the call (ModelCall.sampling_changes: {field, action, asked, sent}).
Sessions without a policy (`proxy_session` for a person's own use) pass the body on as it came.

Plain Python over the request body: no Django models, no I/O.
"""

import hashlib
import json
from dataclasses import dataclass, field

from django.conf import settings

CHAT, RESPONSES = "chat", "responses"  # ModelEndpoint.ApiStyle's values
SAMPLING_NOT_ALLOWED = "sampling_not_allowed"  # the error type and code of a refused call

# The run's knobs: the run's value is sent (or none, when the run names none), never the agent's.
RUN_OWNED = {
    CHAT: (
        "temperature",
        "top_p",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "top_k",
        "min_p",
        "repetition_penalty",
    ),
    RESPONSES: ("temperature", "top_p"),
}
OUTPUT_CAPS = {CHAT: ("max_completion_tokens", "max_tokens"), RESPONSES: ("max_output_tokens",)}
# Fields that change nothing about how the model samples: what to answer (the conversation, the tools), how the answer
# is delivered (streaming, usage) and bookkeeping the upstream keeps (store, metadata, cache keys).
PASSED = {
    CHAT: {
        "model",
        "messages",
        "tools",
        "parallel_tool_calls",
        "stream",
        "stream_options",
        "stop",
        "user",
        "metadata",
        "store",
        "prompt_cache_key",
        "safety_identifier",
        "service_tier",
        "reasoning_effort",
    },
    RESPONSES: {
        "model",
        "input",
        "instructions",
        "previous_response_id",
        "tools",
        "parallel_tool_calls",
        "stream",
        "stream_options",
        "user",
        "metadata",
        "store",
        "prompt_cache_key",
        "safety_identifier",
        "service_tier",
        "reasoning",
        "include",
    },
}
MAX_RECORDED_VALUE = 200  # characters of an asked value kept in the record (a chat_template can be long)


def _harmless_tool_choice(value) -> bool:
    return value in (None, "auto", "none")  # "required" and a named tool are guided decoding in vLLM


def _off(value) -> bool:
    return value in (None, False, 0)


def _text_format(value) -> bool:
    return value is None or (isinstance(value, dict) and value.get("type") == "text")


def _responses_text(value) -> bool:
    if value is None:
        return True
    return isinstance(value, dict) and set(value) <= {"format", "verbosity"} and _text_format(value.get("format"))


# Fields passed only with these values (anything else is refused): the harmless settings of a knob that has others.
CHECKED = {
    CHAT: {
        "tool_choice": _harmless_tool_choice,
        "logprobs": _off,
        "top_logprobs": _off,
        "response_format": _text_format,
    },
    RESPONSES: {
        "tool_choice": _harmless_tool_choice,
        "top_logprobs": _off,
        "text": _responses_text,
        "truncation": lambda v: v in (None, "disabled"),
    },  # "auto" drops input the record still shows
}


def derived_seed(seed, *parts) -> int:
    """One sample's own seed in a run seeded with `seed` (e.g. a rollout's: its task and its repeat as `parts`). The
    same seed and parts give the same seed on every machine and every run (sha256 of their JSON, not Python's salted
    hash); other parts give an unrelated one. Below 2**31, which every server takes."""
    text = json.dumps([seed, *parts], sort_keys=True, default=str)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") % 2**31


def policy_for(endpoint, *, seed: int | None = None) -> dict:
    """The sampling a rollout's session holds its calls to: the endpoint's `sampling` settings (the run's: an RL run
    registers its policy endpoint with its temperature and max_completion_length, an evaluation run uses the
    endpoint's own), the output cap being their max_tokens or else CLAWGYM_PROXY_MAX_OUTPUT_TOKENS. `seed`, the
    sample's own (derived_seed), replaces the endpoint's."""
    sampling = dict(endpoint.sampling or {})
    if seed is not None:
        sampling["seed"] = seed
    names = [name for name in ("max_completion_tokens", "max_tokens", "max_output_tokens") if name in sampling]
    caps = [value for value in map(sampling.pop, names) if _whole_number(value) and value > 0]
    sampling.pop("n", None)
    policy = {"set": sampling, "max_output_tokens": min(caps) if caps else settings.CLAWGYM_PROXY_MAX_OUTPUT_TOKENS}
    if names:
        policy["cap_field"] = names[0]  # the field added to a call that names none: the one the endpoint uses
    return policy


@dataclass
class Held:
    """What holding one request to its session's sampling did: the changes (to record) and whether it is refused."""

    changes: list[dict] = field(default_factory=list)

    @property
    def refused(self) -> list[str]:
        return [c["field"] for c in self.changes if c["action"] == "refused"]

    def note(self, name: str, action: str, asked, sent=None) -> None:
        entry = {"field": name, "action": action, "asked": _recordable(asked)}
        if action != "refused" and action != "removed":
            entry["sent"] = sent
        self.changes.append(entry)

    def refusal(self) -> dict:
        names = ", ".join(self.refused)
        return {
            "error": {
                "message": f"the proxy does not pass {names} for this rollout: its sampling is the run's, and "
                f"{'these change' if len(self.refused) > 1 else 'this changes'} how the model samples or what "
                "it is shown (send the conversation and the tools; temperature, top_p, seed and the output "
                "cap are set here)",
                "type": SAMPLING_NOT_ALLOWED,
                "code": SAMPLING_NOT_ALLOWED,
                "param": self.refused[0],
            }
        }


def _recordable(value):
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= MAX_RECORDED_VALUE else f"{text[:MAX_RECORDED_VALUE]}… ({len(text)} characters)"


def _whole_number(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def hold_to_sampling(api: str, body: dict, policy: dict) -> Held:
    """Hold `body` (in place) to `policy` (policy_for's shape). The body is only worth sending when nothing was
    refused; the changes are recorded either way."""
    held = Held()
    owned, caps = RUN_OWNED[api], OUTPUT_CAPS[api]
    run = policy.get("set") or {}
    for name in sorted(set(body) - PASSED[api] - set(owned) - set(caps) - set(run) - {"n"}):
        check = CHECKED[api].get(name)
        if check is None or not check(body[name]):
            held.note(name, "refused", body[name])
    for name in [*owned, *(k for k in run if k not in owned)]:
        if name in run:
            if body.get(name) != run[name] or name not in body:
                if name in body:
                    held.note(name, "set", body[name], run[name])
                body[name] = run[name]
        elif name in body:
            held.note(name, "removed", body.pop(name))
    if api == CHAT and "n" in body and body["n"] != 1:
        held.note("n", "set", body["n"], 1)
        body["n"] = 1
    limit = int(policy["max_output_tokens"])
    asked = [name for name in caps if body.get(name) is not None]
    added = policy.get("cap_field") if policy.get("cap_field") in caps else caps[0]
    for name in asked or [added]:
        value = body.get(name)
        if not (_whole_number(value) and 0 < value <= limit):
            held.note(name, "capped", value, limit)
            body[name] = limit
    return held
