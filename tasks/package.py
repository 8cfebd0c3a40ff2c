"""TaskPackage: a task as plain data, the currency between formats, services and the API."""

import hashlib
import json
from dataclasses import dataclass, field

DEFAULT_CHECKER_ENTRY = "bash reward/reward.sh"
DEFAULT_CODE_WEIGHT = 0.7
RUBRIC_SCORES = ("0", "0.25", "0.5", "0.75", "1")
ROLES = ("input", "reward", "solution")


@dataclass(frozen=True)
class PackageFile:
    path: str  # relative to the role's root: input files to the workspace, reward files to reward/
    data: bytes
    role: str = "input"


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


def validate_rubric(rules) -> list[dict]:
    """Return the rubric in canonical form, or raise PackageError saying which rule is wrong and why.

    A rule is {"name", "target_file" (may be empty), "scores": {"0","0.25","0.5","0.75","1": text}, "weight" > 0}.
    """
    if rules in (None, ""):
        return []
    if not isinstance(rules, list):
        raise PackageError("rubric must be a list of rules")
    out = []
    names = set()
    for i, rule in enumerate(rules):
        where = f"rubric rule {i + 1}"
        if not isinstance(rule, dict):
            raise PackageError(f"{where} must be an object")
        name = rule.get("name")
        if not isinstance(name, str) or not name.strip():
            raise PackageError(f"{where} needs a non-empty 'name'")
        if name in names:
            raise PackageError(f"{where}: the name {name!r} is used twice")
        names.add(name)
        scores = rule.get("scores")
        if not isinstance(scores, dict):
            raise PackageError(f"{where} ({name}) needs 'scores': descriptions for 0, 0.25, 0.5, 0.75 and 1")
        canonical = {}
        for key, text in scores.items():
            try:
                level = float(key)
            except (TypeError, ValueError):
                raise PackageError(f"{where} ({name}): score level {key!r} is not a number") from None
            label = next((s for s in RUBRIC_SCORES if float(s) == level), None)
            if label is None:
                raise PackageError(f"{where} ({name}): score level {key!r} is not one of 0, 0.25, 0.5, 0.75, 1")
            if not isinstance(text, str) or not text.strip():
                raise PackageError(f"{where} ({name}): the description for score {label} is empty")
            canonical[label] = text
        missing = [s for s in RUBRIC_SCORES if s not in canonical]
        if missing:
            raise PackageError(f"{where} ({name}): missing descriptions for score {', '.join(missing)}")
        weight = rule.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
            raise PackageError(f"{where} ({name}): weight must be a positive number")
        target = rule.get("target_file", "") or ""
        if not isinstance(target, str):
            raise PackageError(f"{where} ({name}): target_file must be a string")
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
