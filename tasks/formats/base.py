"""The task format interface, and helpers that more than one format needs.

A format reads a path into TaskPackages, one at a time, so that one broken task is reported as a
ReadFailure (naming where it came from and what is wrong) while the others carry on. Formats that
support export also write packages back out.

Exact round trips: the catalog keeps a task's meaning (rubric, λ, checker entry, files), not how its
source file happened to spell it (a key present with its default value, a rubric rule without a weight,
a list in a different order). Where the source spelling differs from what the writer would produce, the
reader records the source spelling in `entry_extra["_layout"][<format name>]`; the writer uses it again
only while it still describes the task exactly (checked by reading the result back), so an edited task
is always written from its current content.
"""

import hashlib
import json
import os
import stat
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from ..package import LAYOUT_KEY, PackageError, PackageFile, TaskPackage, level_label
from ..paths import MAX_PATH_CHARS, MAX_PATH_DEPTH, TaskFileError, is_text, normalize_path, printable
from .safe_parse import load_json


class FormatError(ValueError):
    """The input as a whole cannot be read: unknown format name, unrecognisable or unsafe input."""


@dataclass(frozen=True)
class ReadFailure:
    """One task that could not be read. `source` says which (task folder, JSONL line, markdown file)."""

    source: str
    error: str


class TaskFormat(ABC):
    name: str = ""
    label: str = ""
    can_export: bool = False

    @abstractmethod
    def sniff(self, path: Path) -> bool:
        """True when `path` looks like input in this format."""

    @abstractmethod
    def count(self, path: Path) -> int:
        """How many tasks `read(path)` will yield (tasks and failures), for progress reports."""

    @abstractmethod
    def read(self, path: Path) -> Iterator[TaskPackage | ReadFailure]:
        """Yield one TaskPackage (or ReadFailure) per task found under `path`."""

    def write(self, packages: Iterable[TaskPackage], out: Path) -> int:
        """Write the packages to `out`; returns how many were written."""
        raise FormatError(f"the {self.name} format is import only")


# --- reading files safely -------------------------------------------------------------------------


def read_regular_file(path: Path, shown: str) -> bytes:
    """Read a file that must be a plain file (not a symlink, device or fifo) within the size limit."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise PackageError("file not found", shown) from None
    if stat.S_ISLNK(st.st_mode):
        raise PackageError("symbolic links are not allowed", shown)
    if not stat.S_ISREG(st.st_mode):
        raise PackageError("not a regular file", shown)
    if st.st_size > settings.CLAWGYM_MAX_FILE_BYTES:
        raise PackageError(
            f"file is {st.st_size} bytes, over the limit of {settings.CLAWGYM_MAX_FILE_BYTES} bytes", shown
        )
    # O_NOFOLLOW: the file cannot be swapped for a symlink between the check and the read.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def read_tree(root: Path, role: str, shown_prefix: str) -> list[PackageFile]:
    """Every file under `root` as PackageFiles of `role`, paths relative to `root`.

    Symlinks (to files or folders) and special files are refused with an error naming the file: an imported folder
    must not be able to pull in files from elsewhere on the machine. So are names that are not UTF-8 and folders
    nested deeper than a task file may be (tasks.paths): the walk keeps its own stack and stops there, so no tree,
    however deep, can exhaust the interpreter's recursion or the OS's path length.
    """
    files = []
    pending = [""]  # folders to read, relative to root; popped last-first, pushed in reverse: sorted pre-order
    while pending:
        rel_dir = pending.pop()
        here = root / rel_dir if rel_dir else root
        with os.scandir(here) as scan:
            entries = sorted(scan, key=lambda e: e.name)
        folders = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            shown = _shown(shown_prefix, rel)
            if not is_text(entry.name):
                raise PackageError("the name is not UTF-8 text (its other bytes are shown as \\xNN)", shown)
            if entry.is_symlink():
                raise PackageError("symbolic links are not allowed", shown)
            if entry.is_dir(follow_symlinks=False):
                if rel.count("/") + 1 > MAX_PATH_DEPTH:
                    raise PackageError(f"folders are nested more than {MAX_PATH_DEPTH} deep", shown)
                if len(rel) > MAX_PATH_CHARS:
                    raise PackageError(f"path is longer than {MAX_PATH_CHARS} characters", shown)
                folders.append(rel)
                continue
            try:
                normalize_path(rel)
            except TaskFileError as exc:
                raise PackageError(exc.problem, shown) from None
            files.append(PackageFile(path=rel, data=read_regular_file(here / entry.name, shown), role=role))
        pending.extend(reversed(folders))
    return files


def _shown(prefix: str, rel: str) -> str:
    """A path for a message: printable, and its middle left out when it is long (a deep path can be kilobytes)."""
    text = printable(prefix + rel)
    return text if len(text) <= 160 else f"{text[:100]}…{text[-50:]}"


def write_file(path: Path, data: bytes) -> None:
    """Write an exported file; scripts (content starting with '#!', e.g. reward.sh) are made executable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, 0o755 if data.startswith(b"#!") else 0o644)


def parse_json_text(data: bytes, shown: str):
    try:
        return load_json(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise PackageError("not UTF-8 text", shown) from None
    except json.JSONDecodeError as exc:
        raise PackageError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})", shown) from None


def stable_id(prefix: str, doc) -> str:
    """A task id derived from content, for sources that give none: equal content, equal id."""
    text = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return f"{prefix}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


# --- rubrics written as prose ---------------------------------------------------------------------


def rule_from_text(name: str, text: str, weight: float = 1.0) -> dict:
    """A rubric rule with the five graded descriptions derived from one free-text requirement."""
    text = text.strip()
    return {
        "name": name,
        "target_file": "",
        "scores": {
            "0": f"Does not meet the requirement, or contradicts it: {text}",
            "0.25": f"Barely meets the requirement; most of it is missing or wrong: {text}",
            "0.5": f"Partly meets the requirement; important parts are missing or wrong: {text}",
            "0.75": f"Mostly meets the requirement, with minor gaps: {text}",
            "1": f"Fully meets the requirement: {text}",
        },
        "weight": weight,
    }


def fill_score_levels(levels: dict[str, str]) -> dict[str, str]:
    """A rule's levels as a source states them, with 0 and 1 described when it leaves them out.

    A source's own levels stand (PinchBench may score in steps of 0.2, or give only 1, 0.5 and 0); only the ends of
    the scale are added, so the judge can always say "not at all" and "fully".
    """
    out = {level_label(float(k)): v for k, v in levels.items()}
    stated = sorted(out, key=float)
    if "0" not in out:
        out["0"] = f"Falls clearly short of the description for {stated[0]}: {out[stated[0]]}"
    if "1" not in out:
        out["1"] = f"Goes clearly beyond the description for {stated[-1]}: {out[stated[-1]]}"
    return {label: out[label] for label in sorted(out, key=float)}


# --- remembering how the source spelled things (see the module docstring) -----------------------------


_ABSENT = object()


def remember_spelling(package: TaskPackage, fmt: str, raw: dict, written: dict, *, stored: dict | None = None) -> None:
    """Record the top-level keys where the source `raw` differs from what the writer produced (`written`).

    `stored` may give a compact stand-in for a key's raw value (e.g. a file list without contents).
    """
    values, absent = {}, []
    for key in list(raw) + [k for k in written if k not in raw]:
        mine, theirs = raw.get(key, _ABSENT), written.get(key, _ABSENT)
        if mine is _ABSENT:
            absent.append(key)
        elif theirs is _ABSENT or mine != theirs:
            values[key] = stored[key] if stored and key in stored else mine
    if values or absent:
        package.entry_extra[LAYOUT_KEY] = {fmt: {"values": values, "absent": absent}}


def remembered_spelling(package: TaskPackage, fmt: str) -> dict | None:
    layout = package.entry_extra.get(LAYOUT_KEY)
    memo = layout.get(fmt) if isinstance(layout, dict) else None
    if not isinstance(memo, dict) or not isinstance(memo.get("values", {}), dict):
        return None
    return memo


def apply_spelling(written: dict, memo: dict, fill=None) -> dict:
    """`written` with the remembered spelling put back; `fill(key, stored)` expands compact stand-ins."""
    out = {k: v for k, v in written.items() if k not in memo.get("absent", [])}
    for key, value in memo.get("values", {}).items():
        out[key] = fill(key, value) if fill else value
    return out


def same_task(a: TaskPackage, b: TaskPackage) -> bool:
    """True when both packages hold the same task, whatever their remembered spellings."""

    def key(p: TaskPackage) -> str:
        clone = TaskPackage(
            external_id=p.external_id,
            instruction=p.instruction,
            metadata=p.metadata,
            files=p.files,
            rubric=p.rubric,
            code_weight=p.code_weight,
            checker_entry=p.checker_entry,
            entry_extra={k: v for k, v in p.entry_extra.items() if k != LAYOUT_KEY},
        )
        return clone.content_hash()

    return key(a) == key(b)


def extras_to_write(package: TaskPackage) -> dict:
    return {k: v for k, v in package.entry_extra.items() if k != LAYOUT_KEY}
