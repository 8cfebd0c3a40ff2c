"""ClawGym JSONL: one task a line.

    {"task_id": "...", "prompt": "...", "hook_code": "<check.py source>",
     "input_files": [{"file_path": "notes.md", "content": "..."},
                     {"file_path": "reward/data.json", "content": "...", "encoding": "base64"}],
     "rule": <rubric or null>, "origin_template": "...", "metadata": {...}}

- `input_files` entries under `reward/` are checker files, the others the workspace's input files;
  `"encoding": "base64"` marks binary content. `solution_files` (same shape) holds the reference
  solution, our addition.
- `hook_code` is the checker program: it becomes reward/check.py unless input_files already has one;
  reward/reward.sh is the standard entry (tasks.package.STANDARD_REWARD_SH) unless given.
- `rule` is a list of rubric rules, `{"rules": [...], "lambda": λ}`, or free text (one rule named
  "rubric" whose five graded descriptions are derived from the text).
- `task_id` and `metadata` are read and written when present; without `task_id`, the id is derived
  from the line's content (`jsonl-<sha256 prefix>`), so importing the same line twice finds the same task.
- Any other key (`origin_template`, ...) is kept in entry_extra and written back.
"""

import base64
import binascii
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..package import (
    DEFAULT_CHECKER_ENTRY,
    DEFAULT_CODE_WEIGHT,
    STANDARD_REWARD_SH,
    PackageError,
    PackageFile,
    TaskPackage,
    validate_code_weight,
    validate_rubric,
)
from ..paths import TaskFileError, normalize_path, printable
from .base import (
    LAYOUT_KEY,
    FormatError,
    ReadFailure,
    TaskFormat,
    apply_spelling,
    extras_to_write,
    remember_spelling,
    remembered_spelling,
    rule_from_text,
    same_task,
    stable_id,
)
from .safe_parse import load_json

FIELD_KEYS = {"task_id", "prompt", "hook_code", "input_files", "solution_files", "rule", "metadata", "checker_entry"}
FILE_LISTS = {"input_files": "input", "solution_files": "solution"}
REWARD_PREFIX = "reward/"
CHECK_PY = "check.py"
REWARD_SH = "reward.sh"


class _Stale(Exception):
    """A remembered spelling no longer matches the task's files."""


def _decode_files(entries, key: str) -> list[PackageFile]:
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise PackageError(f"'{key}' must be a list of {{file_path, content}} objects")
    files, seen = [], set()
    for i, item in enumerate(entries):
        where = f"{key}[{i}]"
        if not isinstance(item, dict):
            raise PackageError(f"{where} must be an object with file_path and content")
        path = item.get("file_path")
        if not isinstance(path, str):
            raise PackageError(f"{where} needs 'file_path', a string")
        where = f"{where} ({path!r})"
        try:
            normalize_path(path)
        except TaskFileError as exc:
            raise PackageError(f"{where}: {exc.problem}") from None
        content = item.get("content")
        if not isinstance(content, str):
            raise PackageError(f"{where} needs 'content', a string")
        encoding = item.get("encoding", "utf-8")
        if encoding == "base64":
            try:
                data = base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                raise PackageError(f"{where}: content is not valid base64") from None
        elif encoding in ("utf-8", "utf8"):
            data = content.encode("utf-8", errors="surrogatepass")
        else:
            raise PackageError(f"{where}: unknown encoding {encoding!r} (use 'base64', or none for text)")
        role = FILE_LISTS[key]
        if role == "input" and path.startswith(REWARD_PREFIX):
            role, path = "reward", path[len(REWARD_PREFIX) :]
        if (role, path) in seen:
            raise PackageError(f"{where}: the same file is listed twice")
        seen.add((role, path))
        files.append(PackageFile(path=path, data=data, role=role))
    return files


def _parse_rule(rule, *, nested: bool = False) -> tuple[list[dict], float]:
    if rule is None:
        return [], DEFAULT_CODE_WEIGHT
    if isinstance(rule, str):
        return ([rule_from_text("rubric", rule)] if rule.strip() else []), DEFAULT_CODE_WEIGHT
    if isinstance(rule, list):
        return validate_rubric(rule), DEFAULT_CODE_WEIGHT
    if isinstance(rule, dict) and not nested:
        unknown = sorted(set(rule) - {"rules", "lambda"})
        if unknown:
            raise PackageError(f"'rule' has unknown keys {', '.join(unknown)} (allowed: rules, lambda)")
        rubric, _ = _parse_rule(rule.get("rules"), nested=True)
        return rubric, validate_code_weight(rule.get("lambda", DEFAULT_CODE_WEIGHT))
    raise PackageError('\'rule\' must be a list of rules, {"rules": [...], "lambda": λ}, free text, or null')


def package_from_line(line) -> TaskPackage:
    if not isinstance(line, dict):
        raise PackageError("the line must hold a JSON object")
    if LAYOUT_KEY in line:
        raise PackageError(f"the key {LAYOUT_KEY!r} is reserved")
    prompt = line.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise PackageError("missing 'prompt' (the task instruction, a non-empty string)")
    if "task_id" in line:
        task_id = line["task_id"]
        if not isinstance(task_id, str) or not task_id.strip():
            raise PackageError("'task_id' must be a non-empty string")
    else:
        task_id = stable_id("jsonl", line)
    metadata = line.get("metadata")
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict):
        raise PackageError("'metadata' must be an object")
    files = _decode_files(line.get("input_files"), "input_files") + _decode_files(
        line.get("solution_files"), "solution_files"
    )
    reward = {f.path for f in files if f.role == "reward"}
    hook = line.get("hook_code")
    if hook is not None and not isinstance(hook, str):
        raise PackageError("'hook_code' must be a string (the checker program) or null")
    if hook and CHECK_PY not in reward:
        files.append(PackageFile(path=CHECK_PY, data=hook.encode("utf-8", errors="surrogatepass"), role="reward"))
        reward.add(CHECK_PY)
    if CHECK_PY in reward and REWARD_SH not in reward:
        files.append(PackageFile(path=REWARD_SH, data=STANDARD_REWARD_SH.encode(), role="reward"))
    rubric, code_weight = _parse_rule(line.get("rule"))
    checker_entry = line.get("checker_entry", DEFAULT_CHECKER_ENTRY)
    if not isinstance(checker_entry, str) or not checker_entry.strip():
        raise PackageError("'checker_entry' must be a non-empty command")
    return TaskPackage(
        external_id=task_id,
        instruction=prompt,
        metadata=metadata,
        files=files,
        rubric=rubric,
        code_weight=code_weight,
        checker_entry=checker_entry,
        entry_extra={k: v for k, v in line.items() if k not in FIELD_KEYS},
    )


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _entry(file_path: str, data: bytes) -> dict:
    text = _text(data)
    if text is None:
        return {"file_path": file_path, "content": base64.b64encode(data).decode("ascii"), "encoding": "base64"}
    return {"file_path": file_path, "content": text}


def line_from_package(package: TaskPackage) -> dict:
    """The line as this writer spells it."""
    by_role = {role: package.files_with_role(role) for role in ("input", "reward", "solution")}
    for f in by_role["input"]:
        if f.path.startswith(REWARD_PREFIX):
            raise FormatError(
                f"{package.external_id}: input file {f.path!r} cannot be written to JSONL, where reward/ "
                "paths are checker files"
            )
    reward = {f.path: f for f in by_role["reward"]}
    check = reward.get(CHECK_PY)
    hook = _text(check.data) if check else None
    implied = set()
    if hook is not None:
        implied.add(CHECK_PY)
    if check and REWARD_SH in reward and reward[REWARD_SH].data == STANDARD_REWARD_SH.encode():
        implied.add(REWARD_SH)
    input_files = [_entry(f.path, f.data) for f in by_role["input"]]
    input_files += [_entry(REWARD_PREFIX + f.path, f.data) for f in by_role["reward"] if f.path not in implied]
    if not package.rubric and float(package.code_weight) == DEFAULT_CODE_WEIGHT:
        rule = None
    elif float(package.code_weight) == DEFAULT_CODE_WEIGHT:
        rule = package.rubric
    else:
        rule = {"rules": package.rubric, "lambda": package.code_weight}
    line = {
        "task_id": package.external_id,
        "prompt": package.instruction,
        "hook_code": hook or "",
        "input_files": input_files,
        "rule": rule,
    }
    if by_role["solution"]:
        line["solution_files"] = [_entry(f.path, f.data) for f in by_role["solution"]]
    if package.metadata:
        line["metadata"] = package.metadata
    if package.checker_entry != DEFAULT_CHECKER_ENTRY:
        line["checker_entry"] = package.checker_entry
    line.update((k, v) for k, v in extras_to_write(package).items() if k not in FIELD_KEYS)
    return line


def _file_layout(entries):
    """A file list without contents: enough to write it again in the same order and encodings."""
    if not isinstance(entries, list):
        return entries
    return [{k: v for k, v in e.items() if k != "content"} for e in entries]


def _refill(package: TaskPackage):
    files = {(f.role, f.path): f for f in package.files}

    def fill(key, value):
        if key not in FILE_LISTS or not isinstance(value, list):
            return value
        out = []
        for item in value:
            path = item["file_path"]
            role = FILE_LISTS[key]
            if role == "input" and path.startswith(REWARD_PREFIX):
                role, path = "reward", path[len(REWARD_PREFIX) :]
            f = files.get((role, path))
            if f is None:
                raise _Stale()
            if item.get("encoding") == "base64":
                content = base64.b64encode(f.data).decode("ascii")
            else:
                content = _text(f.data)
                if content is None:
                    raise _Stale()
            out.append({**item, "content": content})
        return out

    return fill


class ClawGymJsonl(TaskFormat):
    name = "clawgym-jsonl"
    label = "ClawGym JSONL (one task a line)"
    can_export = True

    def sniff(self, path: Path) -> bool:
        if path.is_file():
            return path.suffix.lower() == ".jsonl"
        return path.is_dir() and bool(self._files(path))

    def _files(self, path: Path) -> list[Path]:
        if path.is_file():
            return [path]
        return sorted(p for p in path.iterdir() if p.suffix.lower() == ".jsonl" and not p.name.startswith("."))

    def count(self, path: Path) -> int:
        total = 0
        for f in self._files(path):
            with open(f, "rb") as fh:
                total += sum(1 for raw in fh if raw.strip())
        return total

    def read(self, path: Path) -> Iterator[TaskPackage | ReadFailure]:
        for f in self._files(path):
            name = printable(f.name)  # a name that is not UTF-8 is still shown (and stored in the report)
            if f.is_symlink() or not f.is_file():
                yield ReadFailure(source=name, error=f"{name}: not a regular file (symbolic links are not allowed)")
                continue
            with open(f, "rb") as fh:
                for number, raw in enumerate(fh, start=1):
                    if not raw.strip():
                        continue
                    source = f"{name} line {number}"
                    try:
                        yield self.read_line(raw, source)
                    except PackageError as exc:
                        yield ReadFailure(source=source, error=f"{source}: {exc}")

    def read_line(self, raw: bytes, source: str) -> TaskPackage:
        try:
            line = load_json(raw.decode("utf-8").strip())
        except UnicodeDecodeError:
            raise PackageError("not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise PackageError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        package = package_from_line(line)
        package.origin = source
        stored = {k: _file_layout(line.get(k)) for k in FILE_LISTS}
        remember_spelling(package, self.name, line, line_from_package(package), stored=stored)
        return package

    def line_to_write(self, package: TaskPackage) -> dict:
        written = line_from_package(package)
        memo = remembered_spelling(package, self.name)
        if memo:
            try:
                candidate = apply_spelling(written, memo, _refill(package))
                back = package_from_line(candidate)
            except (_Stale, PackageError, KeyError, TypeError, AttributeError):
                back = None
            # The remembered spelling is used only while it still says exactly what the task holds.
            if back is not None and same_task(back, package):
                return candidate
        return written

    def write(self, packages: Iterable[TaskPackage], out: Path) -> int:
        if out.is_dir():
            raise FormatError(f"{out} is a folder; the JSONL export writes a file")
        out.parent.mkdir(parents=True, exist_ok=True)
        count = 0
        # Written beside the target and moved into place, so a failed export leaves no half file.
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                for package in packages:
                    fh.write(json.dumps(self.line_to_write(package), ensure_ascii=False) + "\n")
                    count += 1
            os.chmod(tmp, 0o644)
            os.replace(tmp, out)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return count
