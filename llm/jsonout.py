"""Getting one JSON object out of a model's answer, and checking it against a JSON schema.

Models wrap JSON in reasoning blocks (<think>…</think>), code fences and prose. `extract_json` strips the
reasoning, then takes the first balanced {...} that parses (a fenced one first), so an answer like
"Sure! ```json {...} ```" or "<think>maybe {a}</think>{...}" gives the intended object.
"""

import json
import re

import jsonschema

# Reasoning blocks several open models emit before the answer; an unclosed one runs to the end of the text.
_REASONING = re.compile(r"<(think|thinking|reasoning|reflection)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


class JsonAnswerError(ValueError):
    """The answer holds no JSON object, or the object does not match the schema. The message says which."""


def strip_reasoning(text: str) -> str:
    return _REASONING.sub("", text)


def _balanced_objects(text: str):
    """Yield each top-level {...} substring in order, respecting strings and escapes."""
    depth, start, in_string, escaped = 0, None, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"' and depth > 0:
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                yield text[start : i + 1]


def _first_object(text: str):
    for candidate in _balanced_objects(text):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def extract_json(text: str) -> dict:
    """The first JSON object in `text` (fenced blocks first, reasoning ignored); JsonAnswerError if none."""
    if not text or not text.strip():
        raise JsonAnswerError("the answer is empty; expected a JSON object")
    cleaned = strip_reasoning(text)
    for block in _FENCE.findall(cleaned):
        value = _first_object(block)
        if value is not None:
            return value
    value = _first_object(cleaned)
    if value is not None:
        return value
    preview = cleaned.strip()[:200]
    raise JsonAnswerError(f"the answer holds no JSON object; it begins: {preview!r}")


def validate(value: dict, schema: dict) -> None:
    """JsonAnswerError naming the first problem (with its path) when `value` does not match `schema`."""
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    errors = sorted(validator_cls(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(the top level)"
        more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        raise JsonAnswerError(f"at {where}: {first.message}{more}")


def parse_answer(text: str, schema: dict | None) -> dict:
    value = extract_json(text)
    if schema is not None:
        validate(value, schema)
    return value
