"""Training samples of one rollout, built from its proxied calls' exact tokens.

An agent run is a chain of model calls; each call's prompt is (for a prefix-preserving chat template) the previous
call's prompt and completion followed by what the environment added: the end-of-turn newline, tool results, the next
generation prompt. So a sample is built by chaining the calls on exact token prefixes:

    prompt_ids     = the first call's prompt tokens
    completion_ids = call 1's completion, then for each later call: its new prompt tokens (environment), its completion
    env_mask       = 1 on the policy's sampled tokens, 0 on environment tokens
    logprobs       = the policy's logprob of each sampled token, 0.0 on environment tokens

`env_mask` follows TRL 1.16's convention (GRPOTrainer._generate: a rollout_func's `env_mask` becomes its tool_mask,
"model tokens (1) vs external tokens (0)", and the loss mask is completion_mask * tool_mask): 1 = trained on.

A call whose prompt does not extend the chain (the harness rewrote its history: compaction, a trimmed tool result,
a template that re-renders earlier turns) starts a new sample of the same rollout; parallel tool calls are simply part
of one completion. Calls that got no answer (errors, refusals) are skipped: they sampled nothing.

Only the session's main chain may be trained (evaluation.trajectories.chain_roles, on the calls' messages): a call
that does not continue the previous main call's prompt and answer, or whose prompt carries an assistant turn that
is no answer the proxy recorded, is a side call. The agent holds its proxy token and can send any prompt with it,
so a side call is the agent's choice of what to train: its sample is kept (`side`, counted) but never trained
(training.rl.groups.main_samples), and it never joins a main chain's sample, nor a main call a side one's.

Exact tokens are the ModelCallTokens the proxy stored (llm.tokens). A call without them (the upstream gave no token
ids, or the Responses API) is re-tokenized from its text with the policy's tokenizer (`retokenize`): its sample is
flagged `exact=False` and counted as inexact, since the text's tokens need not be the ones sampled. Re-tokenized
completion tokens have logprob None (unknown): TRL 1.16 turns a None sampling logprob into NaN and gives it no
importance-sampling correction (ratio 1).

Plain Python over the calls; transformers is needed only for an inexact call, and then only through the tokenizer the
caller passes (or loads lazily from a path).
"""

from dataclasses import dataclass, field

from django.core.exceptions import ObjectDoesNotExist

from evaluation.trajectories import MAIN, _reply, _request_messages, _tools, chain_roles
from llm.models import ModelCall
from training.masks import chat_messages


class SampleError(ValueError):
    """The calls cannot be made into samples (a call without tokens and no tokenizer to re-tokenize it)."""


@dataclass
class Sample:
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    exact: bool = True
    call_ids: list[int] = field(default_factory=list)
    side: bool = False  # made of side calls: never trained

    @property
    def policy_tokens(self) -> int:
        return sum(self.env_mask)

    def segments(self) -> list[tuple[int, list[int], list[float | None]]]:
        """The completion cut into runs of equal mask: [(mask, ids, logprobs)] (policy turns and environment between)."""
        runs = []
        for token, mask, logprob in zip(self.completion_ids, self.env_mask, self.logprobs, strict=True):
            if not runs or runs[-1][0] != mask:
                runs.append((mask, [], []))
            runs[-1][1].append(token)
            runs[-1][2].append(logprob)
        return runs

    def as_dict(self) -> dict:
        return {
            "prompt_ids": self.prompt_ids,
            "completion_ids": self.completion_ids,
            "logprobs": self.logprobs,
            "env_mask": self.env_mask,
            "exact": self.exact,
            "call_ids": self.call_ids,
            "side": self.side,
        }


@dataclass
class CallTokens:
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float | None]
    exact: bool


def answered(call) -> bool:
    """A call the policy answered: it sampled something to train on (a Responses stream cut off holds no answer)."""
    return not call.error and call.status_code == 200 and _reply(call.response) is not None


def build_samples(calls, tokenizer=None) -> list[Sample]:
    """The samples of one rollout's calls, in the order they were made. `tokenizer` (a transformers tokenizer, or
    the path of one, loaded on first use) re-tokenizes calls without exact tokens; without one such a call raises
    SampleError."""
    lazy = _LazyTokenizer(tokenizer)
    calls = list(calls)
    roles = chain_roles([{"request": c.request, "response": c.response, "error": c.error} for c in calls])
    samples: list[Sample] = []
    current: dict[bool, Sample | None] = {False: None, True: None}  # the latest main and side samples
    for call, role in zip(calls, roles, strict=True):
        if not answered(call):
            continue
        side = role != MAIN
        tokens = exact_tokens(call)
        if tokens is None:
            tokens = retokenize(call, lazy.get(call))
        if (sample := current[side]) is not None and _extends(tokens.prompt_ids, sample):
            env = tokens.prompt_ids[len(sample.prompt_ids) + len(sample.completion_ids) :]
            sample.completion_ids += env + tokens.completion_ids
            sample.env_mask += [0] * len(env) + [1] * len(tokens.completion_ids)
            sample.logprobs += [0.0] * len(env) + tokens.logprobs
            sample.exact = sample.exact and tokens.exact
            sample.call_ids.append(call.pk)
            continue
        current[side] = Sample(
            prompt_ids=list(tokens.prompt_ids),
            completion_ids=list(tokens.completion_ids),
            logprobs=list(tokens.logprobs),
            env_mask=[1] * len(tokens.completion_ids),
            exact=tokens.exact,
            call_ids=[call.pk],
            side=side,
        )
        samples.append(current[side])
    return samples


def _extends(prompt: list[int], sample: Sample) -> bool:
    """Whether `prompt` starts with the sample's whole chain (compared in two slices: no copy of the chain)."""
    head, body = len(sample.prompt_ids), len(sample.completion_ids)
    return (
        len(prompt) >= head + body
        and prompt[:head] == sample.prompt_ids
        and prompt[head : head + body] == sample.completion_ids
    )


def exact_tokens(call) -> CallTokens | None:
    """The proxy's recorded tokens of a call, None when it has none."""
    try:
        row = call.tokens
    except ObjectDoesNotExist:  # the call has no tokens row
        return None
    if row is None:
        return None
    logprobs = list(row.completion_logprobs)
    if len(logprobs) != len(row.completion_token_ids):
        raise SampleError(f"call #{call.pk}: {len(logprobs)} logprobs for {len(row.completion_token_ids)} tokens")
    return CallTokens(row.prompt_ids(), list(row.completion_token_ids), logprobs, row.exact)


def retokenize(call, tokenizer) -> CallTokens:
    """A call's tokens from its text: the request's messages (and tools) rendered with a generation prompt are the
    prompt; the answer's message rendered after them, up to and with the end-of-turn token, is the completion.
    Either API (a Responses call's input items and answer read as the trajectory builder reads them). Inexact: the
    text's tokens, not necessarily the ones sampled; their logprobs unknown (None)."""
    message = _reply(call.response)
    if message is None:
        raise SampleError(f"call #{call.pk}: the response holds no answer to re-tokenize")
    messages = chat_messages(_request_messages(call.request, {}))
    tools = _tools(call.request) or None
    prompt = _ids(tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True))
    whole = _ids(tokenizer.apply_chat_template(messages + chat_messages([message]), tools=tools, tokenize=True))
    # What follows the generation prompt; a template that renders the answered turn's head otherwise than its
    # generation prompt (some add an empty reasoning block) shares less: then what follows the common part.
    shared = next((i for i, (a, b) in enumerate(zip(prompt, whole)) if a != b), min(len(prompt), len(whole)))
    completion = whole[shared:]
    eos = tokenizer.eos_token_id
    if eos in completion:  # the policy stopped at its end-of-turn token; what the template adds after is not its
        completion = completion[: completion.index(eos) + 1]
    return CallTokens(prompt, completion, [None] * len(completion), exact=False)


def _ids(encoded) -> list[int]:
    """apply_chat_template(tokenize=True) gives a list in some transformers versions, a BatchEncoding in others."""
    if hasattr(encoded, "keys") and "input_ids" in encoded:
        encoded = encoded["input_ids"]
    return list(encoded)


class _LazyTokenizer:
    def __init__(self, tokenizer):
        self._given = tokenizer
        self._loaded = None

    def get(self, call):
        if self._given is None:
            raise SampleError(f"call #{call.pk} has no exact tokens; pass the policy's tokenizer to re-tokenize it")
        if not isinstance(self._given, str):
            return self._given
        if self._loaded is None:
            from transformers import AutoTokenizer  # only an inexact call needs it

            self._loaded = AutoTokenizer.from_pretrained(self._given)
        return self._loaded


def rollout_calls(rollout):
    """The proxied calls of a rollout's last attempt (earlier attempts failed for infra reasons), in order."""
    if rollout.proxy_session_id is None:
        return []
    return (
        ModelCall.objects.filter(session_id=rollout.proxy_session_id)
        .select_related("tokens")
        .order_by("created_at", "id")
        .with_requests()
    )


def samples_for_rollout(rollout, tokenizer=None) -> list[Sample]:
    """The samples of a rollout (its last attempt's calls), [] when it made no call."""
    return build_samples(rollout_calls(rollout), tokenizer)


def inexact_count(samples: list[Sample]) -> int:
    return sum(1 for s in samples if not s.exact)
