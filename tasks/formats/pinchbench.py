"""PinchBench task markdown (import only): a folder holding `tasks/*.md` and the `assets/` they name.

Each task file has YAML front matter (`id`, `name`, `category`, `grading_type` automated|llm_judge|hybrid,
`timeout_seconds`, `workspace_files`, `grading_weights`) and `##` sections: Prompt, Expected Behavior,
Grading Criteria, Automated Checks (a ```python block defining `grade(transcript, workspace_path) -> dict`)
and LLM Judge Rubric (`### Criterion N: Name (Weight: 30%)` with `**Score 1.0**: ...` lines: any levels in [0, 1]).

How a task maps onto ours, mirroring how PinchBench itself grades:
- `workspace_files` entries are `{source, dest}` (source under assets/, or in `tasks/<task file stem>/`),
  `{path, content}` (inline text) or a bare name (source = dest); they become input files.
- The Automated Checks code becomes the checker: reward/grade_impl.py (verbatim), reward/check.py (calls
  grade() with the transcript from the reward payload and the workspace, prints clamped sub-scores)
  and the standard reward/reward.sh.
- The LLM Judge Rubric becomes rubric rules (weights from the rubric), each with the score levels its criterion
  states (1.0/0.75/…/0, or steps of 0.2, …; 0 and 1 are described when left out). An llm_judge task without a
  rubric section is judged on its Grading Criteria checklist, one rule per item, as PinchBench does.
- λ (the code weight): automated 1 (no rubric), llm_judge 0, hybrid = automated share of
  `grading_weights` (PinchBench's default 0.5/0.5). An llm_judge task without Automated Checks gets a
  checker that reports no sub-scores: with λ = 0 its code score does not count, and every task still has
  the same checker entry.
- Metadata keeps the front matter (name, category, grading_type, timeout_seconds, ...) and the texts of
  Expected Behavior, Grading Criteria and any other section.
README.md and TASK_TEMPLATE.md in tasks/ are documentation, not tasks, and are skipped.
"""

import datetime
import os
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

from ..package import STANDARD_REWARD_SH, PackageError, PackageFile, TaskPackage, level_label, validate_rubric
from ..paths import TaskFileError, normalize_path, printable
from .base import ReadFailure, TaskFormat, fill_score_levels, read_regular_file, rule_from_text
from .safe_parse import YAMLRefused, load_yaml

GRADING_TYPES = ("automated", "llm_judge", "hybrid")
NOT_TASKS = {"readme.md", "task_template.md"}
MAX_FRONT_MATTER_CHARS = 256 * 1024  # front matter may hold small input files inline (workspace_files content)

CHECK_PY = '''"""Checker for an imported PinchBench task: runs its grade(transcript, workspace_path).

The transcript comes from the reward payload named by OPENCLAW_REWARD_PAYLOAD; the workspace is the
folder holding reward/. Prints the sub-scores as one JSON object, each clamped to [0, 1].
"""

import contextlib
import json
import math
import os
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here))


def load_transcript():
    name = os.environ.get("OPENCLAW_REWARD_PAYLOAD")
    if not name:
        return []  # run by hand, without a payload: grade on the workspace alone
    payload = json.loads(Path(name).read_text(encoding="utf-8"))
    transcript = payload.get("transcript") if isinstance(payload, dict) else None
    return transcript if isinstance(transcript, list) else []


def clamp(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if math.isnan(value) else min(1.0, max(0.0, value))


def main():
    transcript = load_transcript()
    # grade() may print as it works; only the scores may reach stdout.
    with contextlib.redirect_stdout(sys.stderr):
        from grade_impl import grade

        scores = grade(transcript, str(here.parent))
    if not isinstance(scores, dict):
        scores = {}
    print(json.dumps({str(name): clamp(value) for name, value in scores.items()}))


if __name__ == "__main__":
    main()
'''

NO_CHECKS_PY = '''"""Checker for an imported PinchBench llm_judge task: it has no automated checks.

The task is scored by its rubric alone (λ = 0), so it reports no sub-scores.
"""

print("{}")
'''

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)
_SECTION = re.compile(r"^##\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE = re.compile(r"```(?:python|py)?[ \t]*\r?\n(.*?)```", re.DOTALL)
_CRITERION = re.compile(
    r"^###\s+(?:Criterion\s+\d+\s*[:.\-–—]\s*)?(?P<name>.+?)"
    r"\s*(?:\(\s*weight\s*:?\s*(?P<weight>\d+(?:\.\d+)?)\s*%?\s*\))?\s*$",
    re.IGNORECASE,
)
_SCORE = re.compile(
    r"^\s*(?:[-*]\s*)?\*\*\s*(?:score\s*)?(?P<level>\d+(?:\.\d+)?)\s*:?\s*\*\*\s*:?\s*(?P<text>.*)$", re.IGNORECASE
)
_CHECKBOX = re.compile(r"^\s*[-*]\s+\[[ xX]\]\s+(.+)$")


def split_sections(body: str) -> dict[str, str]:
    """`## Title` sections of the body (headings inside code fences do not count)."""
    sections: dict[str, list[str]] = {}
    current = None
    fence = None
    for line in body.splitlines():
        marker = _FENCE.match(line)
        if marker:
            fence = None if fence == marker.group(1) else (fence or marker.group(1))
        heading = _SECTION.match(line) if fence is None else None
        if heading:
            current = heading.group(1).strip()
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    out = {}
    for title, lines in sections.items():
        text = "\n".join(lines).strip()
        # Sections are often separated by a horizontal rule; it belongs to neither.
        text = re.sub(r"(?:\n|\A)\s*---\s*\Z", "", text).strip()
        out[title] = text
    return out


def _section(sections: dict[str, str], *names: str) -> str:
    wanted = {n.lower() for n in names}
    return next((text for title, text in sections.items() if title.lower() in wanted), "")


def parse_rubric(text: str) -> list[dict]:
    """Rubric rules from an LLM Judge Rubric section (criteria with score lines, or free text)."""
    criteria = []
    current = None
    level = None
    for line in text.splitlines():
        heading = _CRITERION.match(line)
        if heading:
            weight = float(heading.group("weight")) if heading.group("weight") else 1.0
            current = {"name": heading.group("name").strip(), "weight": weight, "levels": {}, "about": []}
            criteria.append(current)
            level = None
            continue
        if current is None:
            continue
        score = _SCORE.match(line)
        if score:
            value = float(score.group("level"))
            if not 0.0 <= value <= 1.0:
                raise PackageError(
                    f"LLM Judge Rubric, {current['name']!r}: score level {score.group('level')} is not in [0, 1]"
                )
            level = level_label(value)
            if level in current["levels"]:
                raise PackageError(
                    f"LLM Judge Rubric, {current['name']!r}: score level {score.group('level')} is given twice"
                )
            current["levels"][level] = score.group("text").strip()
        elif line.strip() and line.strip() != "---":
            if level is None:
                current["about"].append(line.strip())
            else:
                current["levels"][level] = (current["levels"][level] + " " + line.strip()).strip()
    if not criteria:
        return [rule_from_text("rubric", text)] if text.strip() else []
    rules, names = [], set()
    for c in criteria:
        name = c["name"]
        n = 2
        while name in names:
            name, n = f"{c['name']} ({n})", n + 1
        names.add(name)
        levels = {k: v for k, v in c["levels"].items() if v}
        if levels:
            rules.append({"name": name, "target_file": "", "scores": fill_score_levels(levels), "weight": c["weight"]})
        else:
            rules.append(rule_from_text(name, " ".join(c["about"]) or name, c["weight"]))
    return rules


def _jsonable(value):
    """Front matter as JSON: YAML dates become ISO strings."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def _code_weight(grading_type: str, weights) -> float:
    if grading_type == "automated":
        return 1.0
    if grading_type == "llm_judge":
        return 0.0
    if weights is None:
        return 0.5
    if not isinstance(weights, dict):
        raise PackageError("grading_weights must map automated and llm_judge to numbers")
    auto, judge = weights.get("automated", 0.5), weights.get("llm_judge", 0.5)
    for key, value in (("automated", auto), ("llm_judge", judge)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise PackageError(f"grading_weights.{key} must be a number ≥ 0, got {value!r}")
    if auto + judge <= 0:
        raise PackageError("grading_weights add up to 0")
    return auto / (auto + judge)


class PinchBench(TaskFormat):
    name = "pinchbench"
    label = "PinchBench task markdown (import only)"

    def sniff(self, path: Path) -> bool:
        return path.is_dir() and bool(self._task_files(path))

    def _task_files(self, path: Path) -> list[Path]:
        tasks = path / "tasks"
        if not tasks.is_dir():
            return []
        return sorted(p for p in tasks.glob("*.md") if p.name.lower() not in NOT_TASKS)

    def count(self, path: Path) -> int:
        return len(self._task_files(path))

    def read(self, path: Path) -> Iterator[TaskPackage | ReadFailure]:
        for md in self._task_files(path):
            shown = f"tasks/{printable(md.name)}"
            try:
                yield self.read_task(path, md, shown)
            except PackageError as exc:
                yield ReadFailure(source=shown, error=f"{shown}: {exc}")

    def read_task(self, root: Path, md: Path, shown: str) -> TaskPackage:
        try:
            text = read_regular_file(md, "").decode("utf-8")
        except UnicodeDecodeError:
            raise PackageError("not UTF-8 text") from None
        match = _FRONT_MATTER.match(text)
        if not match:
            raise PackageError("no YAML front matter (the file must start with a '---' block)")
        try:
            front = load_yaml(match.group(1), max_chars=MAX_FRONT_MATTER_CHARS)
        except YAMLRefused as exc:
            raise PackageError(f"front matter refused: {exc}") from None
        except yaml.YAMLError as exc:
            raise PackageError(f"front matter is not valid YAML: {exc}") from None
        if not isinstance(front, dict):
            raise PackageError("front matter must be a YAML mapping")
        sections = split_sections(match.group(2))

        task_id = front.get("id", md.stem)
        if not isinstance(task_id, str) or not task_id.strip():
            raise PackageError("'id' must be a non-empty string")
        prompt = _section(sections, "Prompt")
        if not prompt:
            raise PackageError("no '## Prompt' section, or it is empty")
        grading_type = front.get("grading_type", "automated")
        if grading_type not in GRADING_TYPES:
            raise PackageError(f"grading_type {grading_type!r} is not one of {', '.join(GRADING_TYPES)}")
        code_weight = _code_weight(grading_type, front.get("grading_weights"))

        files = self._workspace_files(root, md, front.get("workspace_files"))
        files += self._checker(_section(sections, "Automated Checks"), grading_type)
        rubric = []
        if grading_type != "automated":
            rubric = self._rubric(sections)

        metadata = _jsonable({k: v for k, v in front.items() if k not in ("id", "workspace_files")})
        metadata.setdefault("grading_type", grading_type)
        known = {"prompt", "automated checks", "llm judge rubric"}
        for title, body in sections.items():
            if title.lower() in known or not body:
                continue
            key = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")
            if key in ("expected_behavior", "grading_criteria", "additional_notes"):
                metadata[key] = body
            else:
                metadata.setdefault("other_sections", {})[title] = body
        return TaskPackage(
            external_id=task_id,
            instruction=prompt,
            metadata=metadata,
            files=files,
            rubric=rubric,
            code_weight=code_weight,
            origin=shown,
        )

    def _rubric(self, sections: dict[str, str]) -> list[dict]:
        text = _section(sections, "LLM Judge Rubric")
        if text:
            rules = parse_rubric(text)
        else:
            criteria = _section(sections, "Grading Criteria")
            items = [m.group(1).strip() for m in map(_CHECKBOX.match, criteria.splitlines()) if m]
            if items:
                rules = [rule_from_text(f"Criterion {i}", item) for i, item in enumerate(items, start=1)]
            elif criteria:
                rules = [rule_from_text("rubric", criteria)]
            else:
                raise PackageError("an llm_judge/hybrid task needs an LLM Judge Rubric or Grading Criteria section")
        try:
            return validate_rubric(rules)
        except PackageError as exc:
            raise PackageError(f"LLM Judge Rubric: {exc}") from None

    def _checker(self, section: str, grading_type: str) -> list[PackageFile]:
        match = _CODE.search(section)
        code = match.group(1) if match else (section if "def grade" in section else "")
        if not code.strip():
            if grading_type != "llm_judge":
                raise PackageError(
                    f"grading_type {grading_type} needs an '## Automated Checks' section with a ```python block "
                    "defining grade(transcript, workspace_path)"
                )
            return [
                PackageFile(path="check.py", data=NO_CHECKS_PY.encode(), role="reward"),
                PackageFile(path="reward.sh", data=STANDARD_REWARD_SH.encode(), role="reward"),
            ]
        if "def grade" not in code:
            raise PackageError("the Automated Checks code does not define grade(transcript, workspace_path)")
        return [
            PackageFile(path="grade_impl.py", data=code.encode("utf-8"), role="reward"),
            PackageFile(path="check.py", data=CHECK_PY.encode(), role="reward"),
            PackageFile(path="reward.sh", data=STANDARD_REWARD_SH.encode(), role="reward"),
        ]

    def _workspace_files(self, root: Path, md: Path, specs) -> list[PackageFile]:
        if specs is None:
            return []
        if not isinstance(specs, list):
            raise PackageError("workspace_files must be a list")
        files, seen = [], set()
        for i, spec in enumerate(specs):
            where = f"workspace_files[{i}]"
            if isinstance(spec, str):
                spec = {"source": spec}
            if not isinstance(spec, dict):
                raise PackageError(f"{where} must be a file name or a mapping with source/dest or path/content")
            if "content" in spec:
                dest = spec.get("path", spec.get("dest"))
                content = spec["content"]
                if not isinstance(content, str):
                    raise PackageError(f"{where}: content must be text")
                data = content.encode("utf-8")
            elif "source" in spec:
                source = spec["source"]
                dest = spec.get("dest", source)
                data = self._asset(root, md, source, where)
            else:
                raise PackageError(f"{where} needs 'source' (a file under assets/) or 'path' and 'content'")
            if not isinstance(dest, str):
                raise PackageError(f"{where}: the destination path must be a string")
            try:
                dest = normalize_path(dest[2:] if dest.startswith("./") else dest)
            except TaskFileError as exc:
                raise PackageError(f"{where}: destination {exc}") from None
            if dest in seen:
                raise PackageError(f"{where}: {dest!r} is written twice")
            seen.add(dest)
            files.append(PackageFile(path=dest, data=data, role="input"))
        return files

    def _asset(self, root: Path, md: Path, source, where: str) -> bytes:
        if not isinstance(source, str):
            raise PackageError(f"{where}: source must be a path")
        try:
            rel = normalize_path(source)
        except TaskFileError as exc:
            raise PackageError(f"{where}: source {exc}") from None
        # PinchBench keeps shared files in assets/ and some per-task files beside the task markdown.
        candidates = [("assets", root / "assets"), (f"tasks/{md.stem}", md.parent / md.stem)]
        for label, base in candidates:
            path = base / rel
            if not os.path.lexists(path):
                continue
            _refuse_links(root, path, f"{label}/{rel}")
            return read_regular_file(path, f"{label}/{rel}")
        raise PackageError(f"{where}: {source!r} not found in assets/ or tasks/{md.stem}/")


def _refuse_links(root: Path, path: Path, shown: str) -> None:
    """No part of the path below the imported folder may be a symbolic link (it could point anywhere)."""
    here = root
    for part in path.relative_to(root).parts:
        here = here / part
        if here.is_symlink():
            raise PackageError("symbolic links are not allowed", shown)
