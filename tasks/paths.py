"""Validation of task file paths and sizes. Every way into the catalog goes through `validate_files`."""

import posixpath
from collections.abc import Iterable

from django.conf import settings

MAX_PATH_CHARS = 500
MAX_PATH_DEPTH = 64  # folders a task file may be nested in


def printable(name: str) -> str:
    """A file name as it may be shown and stored. Bytes that were not UTF-8 reach Python as lone surrogates (the
    OS and tarfile decode names with "surrogateescape"); they are shown as \\xNN, so a message naming the file
    can always be stored, logged and rendered."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte decodes to (e.g. from JSON "\\ud800")
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def is_text(name: str) -> bool:
    """True when `name` is valid Unicode text (no lone surrogates), i.e. it came from UTF-8."""
    return not any(0xD800 <= ord(ch) <= 0xDFFF for ch in name)


class TaskFileError(ValueError):
    """A task's file is not acceptable. The message names the file."""

    def __init__(self, path: str, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"{path!r}: {problem}")


def normalize_path(path: str) -> str:
    """Return the canonical relative POSIX form of `path`, or raise TaskFileError.

    Accepted: relative paths with '/' separators. Refused: empty paths, absolute paths, '..' segments,
    NUL and control characters, backslashes (a Windows separator smuggling a '..'), and paths that
    only normalise to something else ('a//b', './a') so that stored paths are always canonical.
    """
    if not isinstance(path, str) or path == "":
        raise TaskFileError(str(path), "empty path")
    if "\x00" in path:
        raise TaskFileError(path.replace("\x00", "\\0"), "path contains a NUL byte")
    if not is_text(path):
        raise TaskFileError(printable(path), "the name is not UTF-8 text (its other bytes are shown as \\xNN)")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
        raise TaskFileError(path, "path contains a control character")
    if "\\" in path:
        raise TaskFileError(path, "path contains a backslash; use '/' separators")
    if path.startswith("/"):
        raise TaskFileError(path, "absolute paths are not allowed")
    parts = path.split("/")
    if ".." in parts:
        raise TaskFileError(path, "'..' is not allowed in a path")
    normalized = posixpath.normpath(path)
    if normalized != path.rstrip("/") or path.endswith("/"):
        raise TaskFileError(path, f"path is not normalised (use {normalized!r})")
    if normalized in {".", ""}:
        raise TaskFileError(path, "path names no file")
    if len(normalized) > MAX_PATH_CHARS:
        raise TaskFileError(path[:80] + "…", f"path is longer than {MAX_PATH_CHARS} characters")
    if normalized.count("/") > MAX_PATH_DEPTH:
        raise TaskFileError(path[:80] + "…", f"folders are nested more than {MAX_PATH_DEPTH} deep")
    return normalized


def validate_files(files: Iterable[tuple[str, str, bytes]]) -> None:
    """Check (role, path, data) triples against the catalog limits. Raises TaskFileError naming the file."""
    count = 0
    total = 0
    seen: set[tuple[str, str]] = set()
    for role, path, data in files:
        normalize_path(path)
        key = (role, path)
        if key in seen:
            raise TaskFileError(path, f"listed twice as a {role} file")
        seen.add(key)
        if not isinstance(data, (bytes, bytearray)):
            raise TaskFileError(path, "file content must be bytes")
        count += 1
        total += len(data)
        if len(data) > settings.CLAWGYM_MAX_FILE_BYTES:
            raise TaskFileError(
                path, f"file is {len(data)} bytes, over the limit of {settings.CLAWGYM_MAX_FILE_BYTES} bytes"
            )
        if count > settings.CLAWGYM_MAX_FILES_PER_TASK:
            raise TaskFileError(path, f"task has more than {settings.CLAWGYM_MAX_FILES_PER_TASK} files")
        if total > settings.CLAWGYM_MAX_TASK_BYTES:
            raise TaskFileError(path, f"task files total more than {settings.CLAWGYM_MAX_TASK_BYTES} bytes")
