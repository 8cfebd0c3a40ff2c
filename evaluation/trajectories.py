"""Multi-turn trajectories rebuilt from a rollout's recorded model calls.

An agent harness re-sends the whole conversation on every model call, so call j continues call i when j's
messages begin with i's messages followed by i's answer. Linking each call to its longest (then latest) such
predecessor gives a tree of calls; every leaf's path is a chain, and the chains that no other chain contains
are the trajectories. Branches (a retry that got another answer) give one trajectory each; a request that
rewrites history (a compaction summary) extends nothing and starts a new one.

Messages are compared after normalisation (content parts vs a string, whitespace at the ends, key order, tool
call ids, reasoning fields), because harnesses re-serialise history slightly differently from how the model
sent it. The Responses API shape (`instructions`, `input`/`output` items, `previous_response_id`) is turned
into chat messages first, so one algorithm serves both APIs.

History is the agent's word, answers are the record's: the agent sends the whole conversation, assistant turns
included, and could send turns its model never said. So every assistant turn of a trajectory must be the answer of a
call of the same session recorded before (compared by the same normalised key: content, tool calls and their
arguments; one hash per recorded answer); it is kept as sent but for what the key does not cover (its reasoning is
the recorded one's, other fields are dropped), and any other is listed in `unverified_turns` (the training dataset
leaves such a trajectory out). `chain_roles` tells the session's main chain (each call continuing the previous one's
prompt and answer with tool results or user turns only) from side calls (anything else: a retry, a forged prompt,
a call answering a heartbeat): only the main chain is trained by RL (training_jobs.rl.samples).

Pure logic on plain dicts: no Django models (`TrajectoryRules.from_settings` reads settings lazily).
"""

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields

PROMPT_ROLES = frozenset({"system", "developer", "user"})
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})

# Anchored at the start of the message: OpenClaw's own system prompt *mentions* heartbeats, and must survive.
DEFAULT_AUXILIARY_PROMPTS = (
    r"^\s*\[heartbeat\]",
    r"^\s*HEARTBEAT\b",
    r"^\s*Read HEARTBEAT\.md\b",  # OpenClaw's default heartbeat prompt
    r"^\s*\[cron(?:[:\s][^\]]*)?\]",  # "[cron] …", "[cron:job-id] …"
)
DEFAULT_INJECTED_BLOCKS = (
    r"<internal-context\b[^>]*>.*?</internal-context>",
    # What OpenClaw 2026.9.6 really sends (recorded): a user message appended to every request, never kept in history.
    r"<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>.*?<<<END_OPENCLAW_INTERNAL_CONTEXT>>>",
)
# OpenClaw's workspace tools; the builtin harness offers read, write, edit, ls and exec.
DEFAULT_SUPPORTED_TOOLS = frozenset({"read", "write", "edit", "exec", "ls", "apply_patch", "process"})


@dataclass(frozen=True)
class TrajectoryRules:
    """What to strip from recorded conversations, and which tools a kept trajectory may call.

    auxiliary_prompts: regexes (`re.search`, DOTALL) tried on the text of each system/developer/user message,
        after injected blocks are cut. A match makes the message an auxiliary prompt (a heartbeat or cron nudge
        from the harness, not the task); it is removed together with the assistant and tool messages answering
        it, up to the next system/developer/user message.
    injected_blocks: regexes (DOTALL) whose matches are cut out of system/developer/user/tool content, e.g.
        internal-context blocks wrapped around the real text. A prompt message left empty is dropped.
    supported_tools: tool names a trajectory may call; calling any other marks it excluded. None allows all.
    drop_auxiliary_calls: a call answering an auxiliary prompt is left out (True), or returned on its own as an
        excluded trajectory, as recorded, so it can still be inspected (False). Either way it never joins a chain.
    """

    auxiliary_prompts: tuple[str, ...] = DEFAULT_AUXILIARY_PROMPTS
    injected_blocks: tuple[str, ...] = DEFAULT_INJECTED_BLOCKS
    supported_tools: frozenset[str] | None = DEFAULT_SUPPORTED_TOOLS
    drop_auxiliary_calls: bool = True
    _auxiliary: tuple = field(default=(), init=False, repr=False, compare=False)
    _injected: tuple = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self):
        for name, attr in (("auxiliary_prompts", "_auxiliary"), ("injected_blocks", "_injected")):
            patterns = getattr(self, name)
            if isinstance(patterns, str):
                raise TypeError(f"{name} must be a list of regexes, not one string: {patterns!r}")
            object.__setattr__(self, name, tuple(patterns))
            object.__setattr__(self, attr, tuple(_compile(name, pattern) for pattern in patterns))
        if isinstance(self.supported_tools, str):
            raise TypeError(f"supported_tools must be a list of names, not one string: {self.supported_tools!r}")
        if self.supported_tools is not None:
            object.__setattr__(self, "supported_tools", frozenset(self.supported_tools))

    @classmethod
    def from_dict(cls, data: Mapping) -> "TrajectoryRules":
        """Rules from a plain dict (settings, JSON); keys are the field names, missing ones keep the defaults."""
        known = {f.name for f in fields(cls) if f.init}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown trajectory rule(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**dict(data))

    @classmethod
    def from_settings(cls) -> "TrajectoryRules":
        """Rules from `settings.CLAWGYM_TRAJECTORY_RULES` (a dict; empty means the defaults)."""
        from django.conf import settings

        return cls.from_dict(settings.CLAWGYM_TRAJECTORY_RULES)


def _compile(name: str, pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern, re.DOTALL)
    except re.error as exc:
        raise ValueError(f"{name}: bad regex {pattern!r}: {exc}") from None


@dataclass
class TrajectoryStats:
    turns: int = 0  # assistant messages
    prompt_tokens: int = 0  # summed over the chain's calls, from their usage
    completion_tokens: int = 0
    total_tokens: int = 0
    tool_calls: int = 0
    tool_types: list[str] = field(default_factory=list)  # sorted distinct tool names called


@dataclass
class TrajectoryData:
    messages: list[dict]  # the whole conversation in chat format, ending with the last call's answer
    tools: list[dict]  # chat-format tool definitions offered by the chain's last request
    call_indices: list[int]  # positions in the recorded calls, in order
    stats: TrajectoryStats
    excluded: bool = False
    exclusion_reason: str = ""
    model: str = ""
    # Indices in `messages` of assistant turns that are no answer recorded in the session before (forged history).
    unverified_turns: list[int] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> "TrajectoryData":
        return cls(**{**data, "stats": TrajectoryStats(**data.get("stats", {}))})


@dataclass
class _Call:
    index: int
    recorded: list[dict]  # the request as chat messages, nothing removed
    messages: list[dict]  # the same with auxiliary prompts and injected blocks removed
    reply: dict
    tools: list[dict]
    usage: tuple[int, int, int]
    model: str
    answers_auxiliary: str | None  # the pattern that matched the prompt this call answers, if auxiliary
    failed: bool = False  # recorded with an error (a cut-off stream): its answer may be partial


def rebuild_trajectories(calls: list[dict], *, rules: TrajectoryRules | None = None) -> list[TrajectoryData]:
    """The trajectories in one rollout's model calls (`{"request": …, "response": …}`, in recording order).

    Calls without a usable answer (an error, a cut-off stream) are skipped: nothing can continue them.
    """
    rules = rules or TrajectoryRules()
    parsed = _parse_calls(calls, rules)
    answers = recorded_answers(parsed)
    by_index = {call.index: call for call in parsed}
    hashes: dict[int, list[str]] = {}
    parent: dict[int, int | None] = {}
    latest_with: dict[str, int] = {}  # hash of a call's whole conversation -> the latest call that had it
    for call in parsed:
        if call.answers_auxiliary:
            continue
        prefixes = _prefix_hashes(call.messages + [call.reply])
        hashes[call.index] = prefixes
        # Longest first; the request's own messages only (prefixes[:-1]), so a call never extends itself.
        parent[call.index] = next((latest_with[h] for h in reversed(prefixes[:-1]) if h in latest_with), None)
        latest_with[prefixes[-1]] = call.index

    has_child = set(parent.values())
    leaves = [i for i in hashes if i not in has_child]
    inside_another = {h for i in leaves for h in hashes[i][:-1]}
    last_leaf_with = {hashes[i][-1]: i for i in leaves}  # identical conversations: keep the later one
    trajectories = []
    for leaf in leaves:
        if hashes[leaf][-1] in inside_another or last_leaf_with[hashes[leaf][-1]] != leaf:
            continue
        chain = [leaf]
        while parent[chain[-1]] is not None:
            chain.append(parent[chain[-1]])
        chain_calls = [by_index[i] for i in reversed(chain)]
        trajectories.append(
            _trajectory(chain_calls, chain_calls[-1].messages + [chain_calls[-1].reply], rules, answers)
        )

    if not rules.drop_auxiliary_calls:
        for call in parsed:
            if call.answers_auxiliary:
                trajectory = _trajectory([call], call.recorded + [call.reply], rules, answers)
                trajectory.excluded = True
                trajectory.exclusion_reason = f"auxiliary call: answers a prompt matching {call.answers_auxiliary!r}"
                trajectories.append(trajectory)
    trajectories.sort(key=lambda t: (t.call_indices[0], t.call_indices[-1]))
    return trajectories


def _trajectory(chain: list[_Call], messages: list[dict], rules: TrajectoryRules, answers: dict) -> TrajectoryData:
    messages, unverified = _as_recorded(messages, before=chain[-1].index, answers=answers)
    names = [_tool_name(c) for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    stats = TrajectoryStats(
        turns=sum(1 for m in messages if m.get("role") == "assistant"),
        prompt_tokens=sum(c.usage[0] for c in chain),
        completion_tokens=sum(c.usage[1] for c in chain),
        total_tokens=sum(c.usage[2] for c in chain),
        tool_calls=len(names),
        tool_types=sorted(set(names)),
    )
    trajectory = TrajectoryData(
        messages, chain[-1].tools, [c.index for c in chain], stats, model=chain[-1].model, unverified_turns=unverified
    )
    if rules.supported_tools is not None:
        unsupported = [name for name in stats.tool_types if name not in rules.supported_tools]
        if unsupported:
            trajectory.excluded = True
            trajectory.exclusion_reason = f"calls unsupported tools: {', '.join(unsupported)}"
    return trajectory


# --- recorded answers and the main chain ------------------------------------------------------------------------

MAIN, SIDE = "main", "side"
PROMPT_OR_TOOL_ROLES = PROMPT_ROLES | {"tool"}


def recorded_answers(parsed: list[_Call]) -> dict[str, tuple[int, dict]]:
    """The session's recorded answers by their normalised key: (the first call that answered it, its answer)."""
    answers: dict[str, tuple[int, dict]] = {}
    for call in parsed:
        answers.setdefault(_answer_hash(call.reply), (call.index, call.reply))
    return answers


def _answer_hash(message: Mapping) -> str:
    return hashlib.blake2b(_key(message).encode(), digest_size=16).hexdigest()


def _recorded_before(message: Mapping, before: int, answers: dict) -> dict | None:
    """The recorded answer `message` repeats, if a call recorded before call `before` gave it."""
    found = answers.get(_answer_hash(message))
    return found[1] if found is not None and found[0] < before else None


def _as_recorded(messages: list[dict], *, before: int, answers: dict) -> tuple[list[dict], list[int]]:
    """The conversation with each assistant turn but the last (the call's own answer) held to the recorded answer it
    repeats (_as_answered), and the indices of those that repeat none."""
    out, unverified = [], []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and index < len(messages) - 1:
            answer = _recorded_before(message, before, answers)
            if answer is None:
                unverified.append(index)
            else:
                message = _as_answered(message, answer)
        out.append(message)
    return out, unverified


def _as_answered(sent: Mapping, answer: Mapping) -> dict:
    """An assistant turn as the harness sent it (what the model saw: its serialisation, its tool call ids), keeping
    only what the comparison key covers (so it equals the recorded answer) and, where the harness sent reasoning, the
    recorded answer's own: nothing the agent slipped in beside (reasoning, extra fields) rides along into training."""
    message = {key: sent[key] for key in ("role", "content", "tool_calls") if key in sent}
    if (sent.get("reasoning_content") or sent.get("reasoning")) and answer.get("reasoning_content"):
        message["reasoning_content"] = answer["reasoning_content"]
    return message


def unverified_in(messages: list[dict], earlier_responses: Iterable) -> list[int]:
    """The indices of a stored conversation's assistant turns (all but its last message, the call's own answer) that
    repeat no answer among `earlier_responses` (the response bodies of the session's calls before its last one)."""
    known = {_answer_hash(reply) for reply in map(_reply, earlier_responses) if reply is not None}
    return [
        i
        for i, m in enumerate(messages[:-1])
        if isinstance(m, Mapping) and m.get("role") == "assistant" and _answer_hash(m) not in known
    ]


def chain_roles(calls: list[dict], *, rules: TrajectoryRules | None = None) -> list[str]:
    """Per recorded call (the shape rebuild_trajectories takes, with its `error`): MAIN when it continues the
    session's main chain, SIDE when not, "" when it holds no answer.

    The chain starts at the first call whose conversation holds no assistant turn; a later call continues it when its
    messages (auxiliary prompts and injected blocks removed, as for trajectories) begin with the last main call's
    messages and answer and add only system, user or tool turns. A call that failed (a cut-off stream), answers an
    auxiliary prompt, or carries any assistant turn that is no answer recorded before it, is a side call."""
    rules = rules or TrajectoryRules()
    parsed = _parse_calls(calls, rules)
    answers = recorded_answers(parsed)
    roles = [""] * len(calls)
    head: list[str] | None = None  # prefix hashes of the last main call's conversation, its answer included
    for call in parsed:
        roles[call.index] = SIDE
        if call.failed or call.answers_auxiliary:
            continue
        if any(
            m.get("role") == "assistant" and _recorded_before(m, call.index, answers) is None for m in call.recorded
        ):
            continue
        hashes = _prefix_hashes(call.messages)
        start = 0 if head is None else len(head)
        if head is not None and (len(hashes) < start or hashes[start - 1] != head[-1]):
            continue
        if any(m.get("role") not in PROMPT_OR_TOOL_ROLES for m in call.messages[start:]):
            continue
        roles[call.index] = MAIN
        head = _prefix_hashes(call.messages + [call.reply])
    return roles


# --- reading recorded calls ---------------------------------------------------------------------------------


def _parse_calls(calls: list[dict], rules: TrajectoryRules) -> list[_Call]:
    parsed = []
    conversations: dict[str, list[dict]] = {}  # Responses API response id -> its whole conversation
    for index, call in enumerate(calls):
        if not isinstance(call, Mapping):
            raise TypeError(f"call {index} must be a dict with 'request' and 'response', not {type(call).__name__}")
        request, response = call.get("request"), call.get("response")
        reply = _reply(response)
        if not isinstance(request, Mapping) or reply is None:
            continue
        recorded = _request_messages(request, conversations)
        if response.get("id"):
            conversations[response["id"]] = recorded + [reply]
        messages, answers_auxiliary = _strip(recorded, rules)
        model = request.get("model") or response.get("model") or ""
        parsed.append(
            _Call(
                index,
                recorded,
                messages,
                reply,
                _tools(request),
                _usage(response),
                model,
                answers_auxiliary,
                failed=bool(call.get("error")),
            )
        )
    return parsed


def _request_messages(request: Mapping, conversations: dict[str, list[dict]]) -> list[dict]:
    if "messages" in request:
        return [dict(m) for m in request.get("messages") or [] if isinstance(m, Mapping)]
    messages = []
    if request.get("instructions"):
        messages.append({"role": "system", "content": request["instructions"]})
    earlier = conversations.get(request.get("previous_response_id") or "", [])
    if messages and earlier and earlier[0].get("role") == "system":
        earlier = earlier[1:]  # instructions are not inherited from the previous response: these replace them
    messages += earlier
    items = request.get("input")
    messages += _items_to_messages([{"role": "user", "content": items}] if isinstance(items, str) else items or [])
    return messages


def _items_to_messages(items: list) -> list[dict]:
    """Responses API items as chat messages; consecutive function calls join the assistant message before them."""
    messages: list[dict] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            role, content = item.get("role", "user"), _chat_content(item.get("content"))
            if role == "assistant" and isinstance(content, list) and all(_is_text(p) for p in content):
                content = _text(content)  # as a chat completion would have answered
            messages.append({"role": role, "content": content})
        elif kind in ("function_call", "custom_tool_call"):
            if not messages or messages[-1]["role"] != "assistant":
                messages.append({"role": "assistant", "content": None})
            arguments = item.get("arguments", item.get("input", ""))
            messages[-1].setdefault("tool_calls", []).append(
                {
                    "id": item.get("call_id") or item.get("id"),
                    "type": "function",
                    "function": {"name": item.get("name", ""), "arguments": arguments},
                }
            )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": _chat_content(item.get("output"))}
            )
        # reasoning and hosted-tool items hold nothing a chat conversation can carry
    return messages


def _chat_content(content):
    if not isinstance(content, list):
        return content
    return [
        {"type": "text", "text": p["text"]}
        if _is_text(p)
        else {"type": "image_url", "image_url": {"url": p.get("image_url")}}
        if p.get("type") == "input_image"
        else p
        for p in content
        if isinstance(p, Mapping)
    ]


def _reply(response) -> dict | None:
    """The answer as one chat assistant message, or None when the response holds no answer."""
    if not isinstance(response, Mapping):
        return None
    if "choices" in response:
        choices = response.get("choices") or []
        message = choices[0].get("message") if choices and isinstance(choices[0], Mapping) else None
        if not isinstance(message, Mapping):
            return None
        reply = {"role": "assistant", "content": message.get("content")}
        for key in ("tool_calls", "reasoning_content"):
            if message.get(key):
                reply[key] = message[key]
        return reply
    if not isinstance(response.get("output"), list) or response.get("status") in ("failed", "incomplete_stream"):
        return None
    converted = [m for m in _items_to_messages(response["output"]) if m["role"] == "assistant"]
    if not converted:
        return None
    reply = {"role": "assistant", "content": "".join(_text(m["content"]) for m in converted) or None}
    calls = [c for m in converted for c in m.get("tool_calls", [])]
    if calls:
        reply["tool_calls"] = calls
    return reply


def _tools(request: Mapping) -> list[dict]:
    tools = []
    for tool in request.get("tools") or []:
        if isinstance(tool, Mapping) and tool.get("type") == "function" and "function" not in tool:
            keys = ("name", "description", "parameters", "strict")  # Responses API: the function is inline
            tool = {"type": "function", "function": {k: tool[k] for k in keys if k in tool}}
        tools.append(tool)
    return tools


def _usage(response: Mapping) -> tuple[int, int, int]:
    usage = response.get("usage") if isinstance(response.get("usage"), Mapping) else {}
    prompt = usage.get("prompt_tokens", usage.get("input_tokens")) or 0
    completion = usage.get("completion_tokens", usage.get("output_tokens")) or 0
    return prompt, completion, usage.get("total_tokens") or prompt + completion


def _tool_name(call) -> str:
    function = call.get("function") if isinstance(call, Mapping) else None
    return (function or {}).get("name") or "?"


# --- auxiliary prompts ----------------------------------------------------------------------------------------


def _strip(messages: list[dict], rules: TrajectoryRules) -> tuple[list[dict], str | None]:
    """(messages without auxiliary prompts, their answers and injected blocks; the pattern of the last prompt
    when that prompt was auxiliary, i.e. when the call is answering a heartbeat rather than the task)."""
    kept, auxiliary = [], None
    for message in messages:
        role = message.get("role")
        if role in PROMPT_ROLES or role == "tool":
            message, cut = _cut_blocks(message, rules)
        if role in PROMPT_ROLES:
            if cut and message.get("content") in ("", []):
                continue  # nothing but injected context: not a prompt of its own
            text = _text(message.get("content"))
            auxiliary = next((p.pattern for p in rules._auxiliary if p.search(text)), None)
        if not auxiliary:
            kept.append(message)
    return kept, auxiliary


def _cut_blocks(message: dict, rules: TrajectoryRules) -> tuple[dict, bool]:
    def cut(text: str) -> str:
        for pattern in rules._injected:
            text = pattern.sub("", text)
        return text

    content = message.get("content")
    if isinstance(content, str):
        remaining = cut(content)
        return ({**message, "content": remaining.strip()}, True) if remaining != content else (message, False)
    if not isinstance(content, list):
        return message, False
    parts, changed = [], False
    for part in content:
        if _is_text(part) and (remaining := cut(part["text"])) != part["text"]:
            changed = True
            if not remaining.strip():
                continue
            part = {**part, "text": remaining.strip()}
        parts.append(part)
    return ({**message, "content": parts}, True) if changed else (message, False)


def _is_text(part) -> bool:
    return isinstance(part, Mapping) and part.get("type") in TEXT_PART_TYPES and isinstance(part.get("text"), str)


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(p["text"] for p in content if _is_text(p))
    return content if isinstance(content, str) else ""


# --- comparing messages ---------------------------------------------------------------------------------------


def _key(message: Mapping) -> str:
    """What makes two messages the same message, whatever the serialisation (ids and reasoning ignored)."""
    content = message.get("content")
    other = [p for p in content if not _is_text(p)] if isinstance(content, list) else []
    key = {"role": message.get("role"), "text": _text(content).strip(), "other": other}
    if message.get("tool_calls"):
        key["tool_calls"] = [[_tool_name(c), _arguments_key(c)] for c in message["tool_calls"]]
    return json.dumps(key, sort_keys=True, ensure_ascii=False, default=str)


def _arguments_key(call):
    arguments = ((call.get("function") if isinstance(call, Mapping) else None) or {}).get("arguments")
    if isinstance(arguments, str):  # re-dumped arguments differ in spacing and key order: compare them parsed
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments.strip()
    return arguments


def _prefix_hashes(messages: list[dict]) -> list[str]:
    """hashes[k] identifies messages[:k + 1]: prefix tests become set lookups."""
    digest, hashes = hashlib.blake2b(digest_size=16), []
    for message in messages:
        digest.update(_key(message).encode() + b"\0")  # JSON escapes NUL, so it cannot occur inside a key
        hashes.append(digest.hexdigest())
    return hashes
