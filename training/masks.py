"""Multi-turn loss masks: which tokens of a conversation are the model's own (1) and which are not (0).

The model's own tokens are what it generated in each assistant turn: its reasoning, its content, its tool calls and
the end-of-turn token; the system prompt, the tools header, user messages, tool results and the role headers are 0.
`tokenize_sample` gets them in one pass from the chat template's `{% generation %}` markers (transformers'
`return_assistant_tokens_mask`), so the template must carry them: TRL ships training variants of the common
templates (its Qwen3 one is what `training.tiny_model` uses).

`reference_masks` is the per-prefix re-render method the paper's trainer used: render the conversation up to each
assistant turn with a generation prompt and again with the turn, tokenize both, mark the tokens between. It is
quadratic in the number of turns; `check_masks` proves the two agree on every sample, and that decoding the
masked-in tokens gives exactly the assistant turns as the template renders them.

Messages are OpenAI chat messages as evaluation.models.Trajectory stores them; `chat_messages` normalises what chat
templates need. The tokenizer is a transformers tokenizer (imported by the caller: nothing here imports
transformers).
"""

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

GENERATION_MARKER = re.compile(r"\{%-?\s*generation\s*-?%\}")  # as trl.chat_template_utils.has_generation_markers


class MaskError(ValueError):
    """The tokenizer's chat template cannot give assistant masks (no generation markers, not prefix-preserving)."""


def chat_messages(messages: list[dict]) -> list[dict]:
    """Trajectory messages in the shape chat templates render: text content as one string (content parts joined, a
    missing content empty), tool-call arguments as objects (the JSON string a model sent, parsed; left as sent
    when it is not a JSON object), reasoning as `reasoning_content`, a developer message as a system one."""
    normalised = []
    for message in messages:
        role = message.get("role", "user")
        out = {"role": "system" if role == "developer" else role, "content": _text(message.get("content"))}
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if role == "assistant" and isinstance(reasoning, str) and reasoning:
            out["reasoning_content"] = reasoning
        if role == "assistant" and message.get("tool_calls"):
            out["tool_calls"] = [_tool_call(call) for call in message["tool_calls"]]
        for key in ("tool_call_id", "name"):
            if message.get(key):
                out[key] = message[key]
        normalised.append(out)
    return normalised


def _text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return str(content)


def _tool_call(call: dict) -> dict:
    function = call.get("function") or call
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        arguments = parsed if isinstance(parsed, dict) else arguments
    out = {"type": "function", "function": {"name": function.get("name", ""), "arguments": arguments or {}}}
    if call.get("id"):
        out["id"] = call["id"]
    return out


def require_generation_markers(tokenizer) -> None:
    """Raise MaskError naming the fix when the tokenizer's chat template has no `{% generation %}` markers."""
    template = tokenizer.chat_template
    if isinstance(template, dict):
        template = template.get("default", "")
    if template and GENERATION_MARKER.search(template):
        return
    raise MaskError(
        "the tokenizer's chat template has no {% generation %} markers, so assistant masks cannot be computed from "
        "it. Use TRL's training template for the model: `from trl.chat_template_utils import "
        "get_training_chat_template; tokenizer.chat_template = get_training_chat_template(tokenizer)` (TRL ships "
        "training variants of the Qwen3, Llama 3, Gemma, DeepSeek, … templates; for Qwen3: "
        "`trl.chat_template_utils.qwen3_training_chat_template`), then `tokenizer.save_pretrained(PATH)`; or set "
        "the base model's chat_template to it. For a template TRL does not know, wrap each assistant turn's output "
        "(content, reasoning, tool calls, end-of-turn token) in {% generation %}…{% endgeneration %} as "
        "trl/chat_templates/*_training.jinja do."
        + ("" if template else " (This tokenizer has no chat template at all.)")
    )


def tokenize_sample(sample: dict, tokenizer, max_length: int | None = None) -> dict:
    """{"input_ids", "assistant_masks", "length"} of one sample {"messages", "tools"}, cut to max_length tokens."""
    require_generation_markers(tokenizer)
    encoded = tokenizer.apply_chat_template(
        chat_messages(sample["messages"]),
        tools=sample.get("tools") or None,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    input_ids, masks = list(encoded["input_ids"]), list(encoded["assistant_masks"])
    if max_length is not None:
        input_ids, masks = input_ids[:max_length], masks[:max_length]
    return {"input_ids": input_ids, "assistant_masks": masks, "length": len(input_ids)}


def assistant_turns(sample: dict, tokenizer) -> list[tuple[str, str]]:
    """Per assistant turn: (the conversation rendered up to it with a generation prompt, and with it)."""
    messages, tools = chat_messages(sample["messages"]), sample.get("tools") or None
    turns = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        if i == 0:
            raise MaskError("the conversation starts with an assistant turn: there is no prompt to render before it")
        prompt = tokenizer.apply_chat_template(messages[:i], tools=tools, tokenize=False, add_generation_prompt=True)
        turns.append((prompt, tokenizer.apply_chat_template(messages[: i + 1], tools=tools, tokenize=False)))
    return turns


def reference_masks(sample: dict, tokenizer) -> dict:
    """The per-prefix re-render method: {"input_ids", "assistant_masks", "length"} like tokenize_sample.

    Raises MaskError when a rendered prefix is not a prefix of the whole conversation (the template rewrites
    earlier turns, so neither method gives meaningful masks)."""
    messages, tools = chat_messages(sample["messages"]), sample.get("tools") or None
    whole = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    input_ids = _ids(tokenizer, whole)
    masks = [0] * len(input_ids)
    for prompt, with_turn in assistant_turns(sample, tokenizer):
        if not whole.startswith(with_turn) or not with_turn.startswith(prompt):
            raise MaskError(
                "the chat template is not prefix-preserving: a turn renders differently once later turns "
                "follow it; use TRL's training template (get_training_chat_template)"
            )
        start, end = len(_ids(tokenizer, prompt)), len(_ids(tokenizer, with_turn))
        masks[start:end] = [1] * (end - start)
    return {"input_ids": input_ids, "assistant_masks": masks, "length": len(input_ids)}


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@dataclass
class MaskReport:
    samples: int = 0
    agree: int = 0  # masks equal the reference and the masked-in tokens decode to the assistant turns
    tokens: int = 0
    masked_tokens: int = 0
    failures: list[dict] = field(default_factory=list)  # {"sample", "reason"}; the first 20

    @property
    def ok(self) -> bool:
        return self.samples == self.agree

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def check_masks(samples, tokenizer, max_failures: int = 20) -> MaskReport:
    """Prove the masks of every sample: they equal the per-prefix reference, and decoding each run of masked-in
    tokens gives exactly one assistant turn as the template renders it (in order, none missing, nothing else).

    samples: {"messages", "tools"} dicts, or a TrainingDataset (its samples in order)."""
    require_generation_markers(tokenizer)
    report = MaskReport()
    for index, sample in enumerate(_samples(samples)):
        report.samples += 1
        reason = _disagreement(sample, tokenizer, report)
        if reason is None:
            report.agree += 1
        elif len(report.failures) < max_failures:
            report.failures.append({"sample": index, "reason": reason})
    return report


def _disagreement(sample: dict, tokenizer, report: MaskReport) -> str | None:
    fast = tokenize_sample(sample, tokenizer)
    report.tokens += fast["length"]
    report.masked_tokens += sum(fast["assistant_masks"])
    try:
        reference = reference_masks(sample, tokenizer)
    except MaskError as exc:
        return str(exc)
    if fast["input_ids"] != reference["input_ids"]:
        return "the one-pass and the re-rendered tokenizations differ"
    if fast["assistant_masks"] != reference["assistant_masks"]:
        first = next(i for i, (a, b) in enumerate(zip(fast["assistant_masks"], reference["assistant_masks"])) if a != b)
        return f"masks differ from the reference, first at token {first}"
    expected = [with_turn[len(prompt) :] for prompt, with_turn in assistant_turns(sample, tokenizer)]
    decoded = [tokenizer.decode(run, skip_special_tokens=False) for run in masked_runs(fast)]
    if decoded != expected:
        return f"the masked-in tokens decode to {decoded!r}, the assistant turns render as {expected!r}"
    return None


def masked_runs(tokenized: dict) -> list[list[int]]:
    """The token ids of each contiguous run of masked-in tokens."""
    runs, current = [], []
    for token, mask in zip(tokenized["input_ids"], tokenized["assistant_masks"]):
        if mask:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


def _samples(samples) -> Iterable[dict]:
    if hasattr(samples, "samples"):  # a TrainingDataset
        rows = samples.samples.order_by("position").values_list("trajectory__messages", "trajectory__tools")
        return ({"messages": messages, "tools": tools or []} for messages, tools in rows.iterator(chunk_size=200))
    return samples
