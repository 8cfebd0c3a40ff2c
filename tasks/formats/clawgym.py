"""ClawGym task folders: `<task_id>/data_entry.json`, `input_files/`, `reward/` and `solution/`.

data_entry.json holds `task_id`, `user_query` and `metadata` ({category, grading_type, ...}); our optional
top-level keys are `rubric` (rules, see tasks.package.validate_rubric), `lambda` (λ, the code weight,
default 0.7) and `checker_entry` (default "bash reward/reward.sh"). Every other top-level key (such as
`input_mount_dir`) is kept in TaskPackage.entry_extra and written back unchanged.

Input is one task folder or a folder of task folders. Plain files beside the task folders (a README)
and hidden entries are ignored; a sub-folder without data_entry.json is reported as a failed task.
"""

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..package import (
    DEFAULT_CHECKER_ENTRY,
    DEFAULT_CODE_WEIGHT,
    PackageError,
    PackageFile,
    TaskPackage,
    validate_code_weight,
    validate_rubric,
)
from ..paths import printable
from .base import (
    LAYOUT_KEY,
    FormatError,
    ReadFailure,
    TaskFormat,
    apply_spelling,
    extras_to_write,
    parse_json_text,
    read_regular_file,
    read_tree,
    remember_spelling,
    remembered_spelling,
    same_task,
    write_file,
)

ENTRY_FILE = "data_entry.json"
ROLE_DIRS = {"input": "input_files", "reward": "reward", "solution": "solution"}
ALLOWED_ENTRIES = {ENTRY_FILE, *ROLE_DIRS.values()}
# Keys of data_entry.json that map onto TaskPackage fields; all others go to entry_extra.
FIELD_KEYS = {"task_id", "user_query", "metadata", "rubric", "lambda", "checker_entry"}


def is_task_folder(path: Path) -> bool:
    return (path / ENTRY_FILE).is_file()


def _skipped(path: Path) -> bool:
    return path.name.startswith(".") or path.name == "__MACOSX"


def package_from_entry(entry, files: list[PackageFile], where: str) -> TaskPackage:
    """Build a package from a parsed data_entry.json; errors name `where` (the data_entry.json)."""
    if not isinstance(entry, dict):
        raise PackageError("must hold a JSON object", where)
    task_id = entry.get("task_id")
    if not isinstance(task_id, str) or not task_id.strip():
        raise PackageError("needs 'task_id', a non-empty string", where)
    query = entry.get("user_query")
    if not isinstance(query, str) or not query.strip():
        raise PackageError("needs 'user_query', a non-empty string", where)
    metadata = entry.get("metadata")
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict):
        raise PackageError("'metadata' must be an object", where)
    if LAYOUT_KEY in entry:
        raise PackageError(f"the key {LAYOUT_KEY!r} is reserved", where)
    try:
        rubric = validate_rubric(entry.get("rubric"))
        code_weight = validate_code_weight(entry.get("lambda", DEFAULT_CODE_WEIGHT))
    except PackageError as exc:
        raise PackageError(str(exc), where) from None
    checker_entry = entry.get("checker_entry", DEFAULT_CHECKER_ENTRY)
    if not isinstance(checker_entry, str) or not checker_entry.strip():
        raise PackageError("'checker_entry' must be a non-empty command", where)
    return TaskPackage(
        external_id=task_id,
        instruction=query,
        metadata=metadata,
        files=files,
        rubric=rubric,
        code_weight=code_weight,
        checker_entry=checker_entry,
        entry_extra={k: v for k, v in entry.items() if k not in FIELD_KEYS},
    )


def entry_from_package(package: TaskPackage) -> dict:
    """data_entry.json as this writer spells it: optional keys only when they differ from the default."""
    entry = {"task_id": package.external_id, "user_query": package.instruction, "metadata": package.metadata}
    # An extra key that collides with a field key (possible only for tasks made elsewhere) is left out:
    # the field is the task's truth.
    entry.update((k, v) for k, v in extras_to_write(package).items() if k not in FIELD_KEYS)
    if package.rubric:
        entry["rubric"] = package.rubric
    if float(package.code_weight) != DEFAULT_CODE_WEIGHT:
        entry["lambda"] = package.code_weight
    if package.checker_entry != DEFAULT_CHECKER_ENTRY:
        entry["checker_entry"] = package.checker_entry
    return entry


class ClawGymFolder(TaskFormat):
    name = "clawgym"
    label = "ClawGym task folders"
    can_export = True

    def sniff(self, path: Path) -> bool:
        if not path.is_dir():
            return False
        return is_task_folder(path) or any(c.is_dir() and is_task_folder(c) for c in path.iterdir())

    def task_dirs(self, path: Path) -> list[Path]:
        if is_task_folder(path):
            return [path]
        return [c for c in sorted(path.iterdir()) if not _skipped(c) and (c.is_dir() or c.is_symlink())]

    def count(self, path: Path) -> int:
        return len(self.task_dirs(path))

    def read(self, path: Path) -> Iterator[TaskPackage | ReadFailure]:
        for folder in self.task_dirs(path):
            shown = printable(folder.name)  # a name that is not UTF-8 is still shown (and stored in the report)
            try:
                yield self.read_task(folder, shown)
            except (PackageError, OSError) as exc:
                yield ReadFailure(source=shown, error=_message(exc))

    def read_task(self, folder: Path, shown: str) -> TaskPackage:
        if folder.is_symlink():
            raise PackageError("symbolic links are not allowed", shown)
        if not is_task_folder(folder):
            raise PackageError(f"not a task folder: it has no {ENTRY_FILE}", shown)
        for name in sorted(os.listdir(folder)):
            if name not in ALLOWED_ENTRIES:
                raise PackageError(
                    f"unexpected entry {printable(name)!r} in the task folder "
                    f"(allowed: {ENTRY_FILE}, input_files/, reward/, solution/)",
                    shown,
                )
        where = f"{shown}/{ENTRY_FILE}"
        entry = parse_json_text(read_regular_file(folder / ENTRY_FILE, where), where)
        files = []
        for role, dirname in ROLE_DIRS.items():
            sub = folder / dirname
            if not os.path.lexists(sub):
                continue
            if sub.is_symlink() or not sub.is_dir():
                raise PackageError("must be a folder (symbolic links are not allowed)", f"{shown}/{dirname}")
            files += read_tree(sub, role, f"{shown}/{dirname}/")
        package = package_from_entry(entry, files, where)
        package.origin = shown
        remember_spelling(package, self.name, entry, entry_from_package(package))
        return package

    def entry_to_write(self, package: TaskPackage) -> dict:
        written = entry_from_package(package)
        memo = remembered_spelling(package, self.name)
        if memo:
            candidate = apply_spelling(written, memo)
            try:
                back = package_from_entry(candidate, package.files, ENTRY_FILE)
            except PackageError:
                back = None
            # The remembered spelling is used only while it still says exactly what the task holds.
            if back is not None and same_task(back, package):
                return candidate
        return written

    def write(self, packages: Iterable[TaskPackage], out: Path) -> int:
        out.mkdir(parents=True, exist_ok=True)
        count = 0
        for package in packages:
            task_id = package.external_id
            if not task_id or "/" in task_id or task_id in (".", "..") or task_id.startswith("."):
                raise FormatError(f"task id {task_id!r} cannot be used as a folder name")
            folder = out / task_id
            if os.path.lexists(folder):
                raise FormatError(f"{folder} already exists; export into a new or empty folder")
            entry = self.entry_to_write(package)
            text = json.dumps(entry, indent=2, ensure_ascii=False) + "\n"
            write_file(folder / ENTRY_FILE, text.encode("utf-8"))
            for f in package.files:
                write_file(folder / ROLE_DIRS[f.role] / f.path, f.data)
            count += 1
        return count


def _message(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")
    return str(exc)
