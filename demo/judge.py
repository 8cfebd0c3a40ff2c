"""The demo judge: a verdict of the shape each judging prompt asks for, from the few facts its prompt states.

    qa:<stage>      synthesis.qa_prompts.SCHEMAS: plausible, no leak, every requirement covered, the rubric
                    complementary; the difficulty is the demo kind's own (3 when the task is none of them)
    rubric judging  tasks.judging: the top score level when the rule's target file holds text (or, without a
                    target, the agent gave a final reply), the lowest otherwise
    categorizing    tasks.categorizing: the listed category sharing most words with the instruction
    annotating      synthesis.annotation.ANNOTATION_SCHEMA: a text-only, low-risk skill needing no account
    diagnosis       review.diagnosis.DIAGNOSIS_SCHEMA: no issue found

A demo judge reads no meaning into anything: it lets the pipeline, the scores and the review pages be tried end
to end, and its reasons say that they are a demo's.
"""

from __future__ import annotations

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


def diagnosis() -> dict:
    return {"overall": "No issue found." + NOTE, "issues": []}
