"""The demo judge: a verdict of the shape each judging prompt asks for, from the few facts its prompt states.

    qa:<stage>      synthesis.qa_prompts.SCHEMAS: plausible, no leak, every requirement covered, the rubric
                    complementary; the difficulty is the demo kind's own (3 when the task is none of them)
    rubric judging  tasks.judging: the top score level when the rule's target file holds text (or, without a
                    target, the agent gave a final reply), the lowest otherwise
    categorizing    tasks.categorizing: the listed category sharing most words with the instruction
    annotating      synthesis.annotation.ANNOTATION_SCHEMA: a text-only, low-risk skill needing no account
    diagnosis       review.diagnosis.DIAGNOSIS_SCHEMA: two faults of the demo generator's own tasks, each with its
                    complete replacement (so "apply suggested fix" can be tried): a lenient check where a text
                    output's "complete" check pays for the right lines among wrong ones, and a vague instruction where
                    the checker wants JSON numbers the instruction never asks for; no issue on anything else

A demo judge reads no meaning into anything: it lets the pipeline, the scores and the review pages be tried end
to end, and its reasons say that they are a demo's.
"""

from __future__ import annotations

import ast
import json
import re

from .kinds import kind_in

WORD = re.compile(r"[a-z]{4,}")
LEVELS = re.compile(r"the score must be one of ([^)]*)\)")
CATEGORY = re.compile(r"^- `([^`]+)` \(([^)]*)\): (.*)$", re.M)
NOTE = " (demo judge: a scripted answer, not a model's reading)"


def qa(stage: str, user: str) -> dict | None:
    if stage == "plausibility":
        return {"plausible": True, "reason": "The files hold what the instruction relies on." + NOTE, "problems": []}
    if stage == "difficulty":
        kind = kind_in(user)
        return {"level": kind.difficulty if kind else 3, "reason": "A few direct steps over small files." + NOTE}
    if stage == "leak":
        return {"leaks": False, "reason": "The instruction states the format, not the results." + NOTE, "leaked": []}
    if stage == "alignment":
        requirement = {
            "requirement": "write the output files the instruction names",
            "covered": True,
            "by": "reward/check.py",
        }
        return {"requirements": [requirement], "over_strict": [], "reason": "The checker tests each output." + NOTE}
    if stage == "rubric":
        return {
            "complementary": True,
            "reason": "The rules judge wording, which code cannot." + NOTE,
            "redundant_rules": [],
        }
    return None


def rubric_verdict(user: str) -> dict:
    found = LEVELS.search(user)
    levels = sorted(float(label) for label in found.group(1).split(",")) if found else [0.0, 1.0]
    target = user.split("## The workspace's target file", 1)[-1].split("## The agent's final reply", 1)[0]
    if "names no target file" in target:
        has_work = "(The agent gave no final reply.)" not in user
    else:
        has_work = "<<<FILE>>>" in target
    if has_work:
        return {"score": levels[-1], "reason": "The target holds text, which is all a demo judge checks." + NOTE}
    return {"score": levels[0], "reason": "There is nothing to read in the target." + NOTE}


def category(user: str) -> dict | None:
    categories, _, instruction = user.partition("## Instruction")
    listed = CATEGORY.findall(categories)
    if not listed:
        return None
    words = set(WORD.findall(instruction.lower()))

    def overlap(entry):
        return len(words & set(WORD.findall(" ".join(entry[1:]).lower())))

    slug = max(listed, key=overlap)[0]
    return {"category": slug, "reason": "It shares the most words with this category's description." + NOTE}


def annotation() -> dict:
    return {
        "summary": "A skill for work on local text files." + NOTE,
        "core_content": "Reading and writing files.",
        "auth_required": False,
        "required_env": [],
        "input_format": "text files",
        "output_format": "text files",
        "text_only_compatible": True,
        "risk": "low",
        "risk_reason": "It changes files in its workspace only.",
    }


# The demo generator's checker (demo.kinds.CHECK_PY): what its faults look like there, and their fixes.
LENIENT_LINE = 'checks[name + "_complete"] = int(bool(want) and all(line in lines for line in want))'
STRICT_LINE = 'checks[name + "_complete"] = int(bool(want) and sorted(set(lines)) == sorted(set(want)))'
NUMBERS_SENTENCE = " Write every amount or count as a JSON number (e.g. 12.5), not as a string."
EXPECTED = re.compile(r"^EXPECTED = json\.loads\((.*)\)$", re.M)
FILE = re.compile(r"^### `([^`]+)` \([^)]*\)\n<<<FILE>>>\n(.*?)\n<<<END FILE>>>", re.M | re.S)


def _section(user: str, title: str) -> str:
    """The text under the diagnosis prompt's `## <title>…` heading (review.diagnosis.diagnosis_messages)."""
    found = re.search(rf"^## {re.escape(title)}[^\n]*\n(.*?)(?=^## |\Z)", user, re.M | re.S)
    return found.group(1).strip() if found else ""


def _expected(checker: str) -> dict:
    """The EXPECTED table of a demo generator's checker ({path: [kind, value]}), or {} for any other checker."""
    found = EXPECTED.search(checker)
    if not found:
        return {}
    try:
        table = json.loads(ast.literal_eval(found.group(1)))
    except (ValueError, SyntaxError):
        return {}
    return table if isinstance(table, dict) else {}


def _has_number(value) -> bool:
    if isinstance(value, dict):
        return any(_has_number(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_number(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def diagnosis(user: str = "") -> dict:
    instruction = _section(user, "Instruction")
    checkers = dict(FILE.findall(_section(user, "Checker")))
    issues = []
    for path, text in checkers.items():
        expected = _expected(text)
        if LENIENT_LINE in text and any(kind == "lines" for kind, _ in expected.values()):
            issues.append(
                {
                    "component": "checker",
                    "path": path,
                    "severity": "major",
                    "problem": "The completeness check of a text output is lenient: it pays for the expected lines "
                    "even when wrong lines are written beside them.",
                    "evidence": f"`{LENIENT_LINE}` only asks that each expected line appear somewhere in the file.",
                    "suggested_fix": "Make the completeness check ask for exactly the expected lines, in any order.",
                    "replacement": text.replace(LENIENT_LINE, STRICT_LINE),
                }
            )
        wants_numbers = any(kind == "json" and _has_number(want) for kind, want in expected.values())
        # An instruction that says neither "number" nor how to round or count leaves the values' form open.
        said = any(word in instruction.lower() for word in ("number", "round", "count"))
        if wants_numbers and instruction and not said:
            issues.append(
                {
                    "component": "instruction",
                    "path": "",
                    "severity": "minor",
                    "problem": "The instruction is vague about the values' type: the checker accepts only JSON "
                    "numbers, so an agent that writes amounts as strings scores 0 without being told why.",
                    "evidence": f"`{path}` compares values with isinstance(got, (int, float)); the instruction never "
                    "says numbers.",
                    "suggested_fix": "Say in the instruction that the values are JSON numbers.",
                    "replacement": instruction + NUMBERS_SENTENCE,
                }
            )
    if not issues:
        return {"overall": "No issue found." + NOTE, "issues": []}
    return {"overall": f"{len(issues)} issue(s) found, each with a suggested fix." + NOTE, "issues": issues}
