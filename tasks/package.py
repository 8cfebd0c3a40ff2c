"""TaskPackage: a task as plain data, the currency between formats, services and the API."""

import hashlib
import json
from dataclasses import dataclass, field

DEFAULT_CHECKER_ENTRY = "bash reward/reward.sh"
DEFAULT_CODE_WEIGHT = 0.7
# The score levels of a rubric rule we write; imported rules may state other levels in [0, 1] (validate_rubric).
RUBRIC_SCORES = ("0", "0.25", "0.5", "0.75", "1")
MAX_RUBRIC_RULES = 100
MAX_RUBRIC_LEVELS = 21  # steps of 0.05
MAX_RULE_NAME_CHARS = 200
ROLES = ("input", "reward", "solution")


@dataclass(frozen=True)
class PackageFile:
    path: str  # relative to the role's root: input files to the workspace, reward files to reward/
    data: bytes
    role: str = "input"


# entry_extra's key for how each format's source spelled the task (tasks.formats.base): spelling, not meaning.
LAYOUT_KEY = "_layout"


@dataclass
class TaskPackage:
    external_id: str
    instruction: str
    metadata: dict = field(default_factory=dict)
    files: list[PackageFile] = field(default_factory=list)
    rubric: list[dict] = field(default_factory=list)
    code_weight: float = DEFAULT_CODE_WEIGHT
    checker_entry: str = DEFAULT_CHECKER_ENTRY
    entry_extra: dict = field(default_factory=dict)
    # Where the task came from (a path, an archive member, a JSONL line) for error messages.
    origin: str = ""

    def content_hash(self) -> str:
        """A hash of everything that makes up a revision; equal content gives an equal hash."""
        doc = {
            "instruction": self.instruction,
            "metadata": self.metadata,
            "entry_extra": self.entry_extra,
            "rubric": self.rubric,
            "code_weight": float(self.code_weight),
            "checker_entry": self.checker_entry,
            "files": sorted((f.role, f.path, hashlib.sha256(f.data).hexdigest()) for f in self.files),
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def files_with_role(self, role: str) -> list[PackageFile]:
        return sorted((f for f in self.files if f.role == role), key=lambda f: f.path)


class PackageError(ValueError):
    """The task as a whole is not acceptable. `path` names the file concerned, when there is one."""

    def __init__(self, message: str, path: str = ""):
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


def level_label(value: float) -> str:
    """A score level as a rubric key: the shortest text of the number ("1", "0.8", "0.25"), so 1.0 and "1" are one."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def rule_levels(rule: dict) -> list[tuple[float, str, str]]:
    """A (validated) rule's levels as (value, label, description), lowest first."""
    return sorted((float(label), label, text) for label, text in rule["scores"].items())


def validate_rubric(rules) -> list[dict]:
    """Return the rubric in canonical form, or raise PackageError saying which rule is wrong and why.

    A rule is {"name", "target_file" (may be empty), "scores": {level: description}, "weight" > 0}. The levels are
    the scores a judge may give for that rule: at least two distinct numbers in [0, 1], each with a description
    (RUBRIC_SCORES, five levels, is the default for rubrics we write; imported ones may state others, e.g. steps of
    0.2). The canonical form spells each level with level_label() and lists them lowest first.
    """
    if rules in (None, ""):
        return []
    if not isinstance(rules, list):
        raise PackageError("rubric must be a list of rules")
    if len(rules) > MAX_RUBRIC_RULES:
        raise PackageError(f"rubric has {len(rules)} rules, more than the {MAX_RUBRIC_RULES} allowed")
    out = []
    names = set()
    for i, rule in enumerate(rules):
        where = f"rubric rule {i + 1}"
        if not isinstance(rule, dict):
            raise PackageError(f"{where} must be an object")
        name = rule.get("name")
        if not isinstance(name, str) or not name.strip():
            raise PackageError(f"{where} needs a non-empty 'name'")
        if len(name) > MAX_RULE_NAME_CHARS:
            raise PackageError(f"{where}: the name is {len(name)} characters, over the limit of {MAX_RULE_NAME_CHARS}")
        if name in names:
            raise PackageError(f"{where}: the name {name!r} is used twice")
        names.add(name)
        scores = rule.get("scores")
        if not isinstance(scores, dict) or not scores:
            raise PackageError(
                f"{where} ({name}) needs 'scores': a description for each level it may score, e.g. for "
                + ", ".join(RUBRIC_SCORES)
            )
        if len(scores) > MAX_RUBRIC_LEVELS:
            raise PackageError(
                f"{where} ({name}): {len(scores)} score levels, more than the {MAX_RUBRIC_LEVELS} allowed"
            )
        levels: dict[float, str] = {}
        for key, text in scores.items():
            try:
                level = float(key)
            except (TypeError, ValueError):
                raise PackageError(f"{where} ({name}): score level {key!r} is not a number") from None
            if not 0.0 <= level <= 1.0:  # NaN fails this too
                raise PackageError(f"{where} ({name}): score level {key!r} is not in [0, 1]")
            label = level_label(level)
            if level in levels:
                raise PackageError(f"{where} ({name}): score level {label} is given twice")
            if not isinstance(text, str) or not text.strip():
                raise PackageError(f"{where} ({name}): the description for score {label} is empty")
            levels[level] = text
        if len(levels) < 2:
            raise PackageError(f"{where} ({name}): needs at least two score levels, e.g. 0 and 1")
        weight = rule.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < float("inf"):
            raise PackageError(f"{where} ({name}): weight must be a positive number")
        target = rule.get("target_file", "") or ""
        if not isinstance(target, str):
            raise PackageError(f"{where} ({name}): target_file must be a string")
        canonical = {level_label(level): levels[level] for level in sorted(levels)}
        out.append({"name": name, "target_file": target, "scores": canonical, "weight": weight})
    return out


def validate_code_weight(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise PackageError(f"code weight λ must be a number in [0, 1], got {value!r}")
    return float(value)


# The standard checker entry: runs reward/check.py (which prints a JSON object of named sub-scores in [0, 1]),
# echoes the sub-scores, then prints their mean as the last line, which is the code score.
STANDARD_REWARD_SH = """#!/usr/bin/env bash
# ClawGym checker entry: run check.py, show its sub-scores, print their mean as the last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
scores="$(python3 "$here/check.py")"
printf '%s\\n' "$scores"
printf '%s' "$scores" | python3 -c 'import json, sys
s = json.load(sys.stdin)
v = [float(x) for x in s.values()]
print(round(sum(v) / len(v), 6) if v else 0.0)'
"""
