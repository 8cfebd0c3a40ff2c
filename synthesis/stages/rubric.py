"""Rubric: rules an LLM judge scores, for what code cannot check (tone, clarity, faithfulness of a summary, …).

The generator says whether the task has qualitative requirements. If not, the stage is skipped with its reason
(a skipped rubric passes the item on: the task is scored by its checker alone). If so, it writes rules: name,
target_file, the five score texts (0, 0.25, 0.5, 0.75, 1) and a weight; the task's score is then
λ·s_code + (1−λ)·s_rubric with λ = 0.7. Rules the catalog would refuse (tasks.package.validate_rubric) reject
the item at "rubric" with the reason.
"""

from __future__ import annotations

from tasks.package import DEFAULT_CODE_WEIGHT, RUBRIC_SCORES, PackageError, validate_rubric

from ..llm_json import ask_json
from ..pipeline import FAIL, PASS, SKIPPED, StageResult
from . import PROMPT_VERSIONS, messages, quoted

STAGE = "rubric"
PROMPT_VERSION = PROMPT_VERSIONS["rubric"]
CODE_WEIGHT = DEFAULT_CODE_WEIGHT  # λ = 0.7

SCHEMA = {
    "type": "object",
    "properties": {
        "needed": {"type": "boolean"},
        "reason": {"type": "string", "minLength": 1},
        "rules": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "target_file": {"type": "string"},
                    "scores": {
                        "type": "object",
                        "properties": {level: {"type": "string", "minLength": 1} for level in RUBRIC_SCORES},
                        "required": list(RUBRIC_SCORES),
                        "additionalProperties": False,
                    },
                    "weight": {"type": "number", "exclusiveMinimum": 0},
                },
                "required": ["name", "target_file", "scores", "weight"],
            },
        },
    },
    "required": ["needed", "reason", "rules"],
}

SYSTEM = (
    "You decide whether a workspace task has qualitative requirements that its code checker cannot judge (tone, "
    "clarity, completeness of prose, faithfulness of a summary), and if so write rubric rules an LLM judge will "
    "score. Each rule names the output file it judges (target_file), describes what each of the five levels 0, "
    "0.25, 0.5, 0.75 and 1 means for that rule, and has a weight. Rules must judge what code cannot: never repeat "
    "a check the checker makes. When the checker covers everything, answer needed=false, rules=[] and say why."
)


def prompt(draft: dict) -> list[dict]:
    user = (
        f"## Instruction\n{quoted('INSTRUCTION', draft['instruction'])}\n\n"
        f"## Expected behaviour\n{draft['expected_behavior']}\n\n"
        f"## The code checker (reward/check.py)\n{quoted('CHECKER', draft['checker']['check.py'])}"
    )
    return messages(SYSTEM, user, SCHEMA)


def run(item, ctx):
    answer, call = ask_json(item, ctx.generator, STAGE, prompt(item.draft), SCHEMA)
    if not answer["needed"] or not answer["rules"]:
        return StageResult(
            SKIPPED, answer["reason"], data={"rubric": [], "code_weight": CODE_WEIGHT}, details={"model_call": call.pk}
        )
    try:
        rules = validate_rubric(answer["rules"])
    except PackageError as exc:
        return StageResult(FAIL, f"the rubric is not valid: {exc}", details={"model_call": call.pk})
    outputs = set(item.draft.get("output_files") or []) | set(item.draft.get("files") or {})
    unknown = [r["target_file"] for r in rules if r["target_file"] and r["target_file"] not in outputs]
    if unknown:
        return StageResult(
            FAIL, f"rubric rules judge files the task has no: {', '.join(unknown)}", details={"model_call": call.pk}
        )
    return StageResult(
        PASS,
        answer["reason"],
        data={"rubric": rules, "code_weight": CODE_WEIGHT},
        details={"model_call": call.pk, "rules": len(rules)},
    )
