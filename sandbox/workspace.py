"""Workspace: a fresh folder holding a task's files, snapshotted and diffed after untrusted code touched it.

Everything under the folder was possibly written by an agent, so reading it back never follows a symlink (a link is
recorded as a link, with its target), never opens anything but a regular file, and never holds more than a bounded
number of bytes: a file past the bound is recorded as too large, with its size and sha256, not its contents.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .errors import WorkspaceError
from .limits import MiB

EntryKind = Literal["file", "dir", "symlink", "too_large", "special"]

DEFAULT_MAX_FILE_BYTES = 64 * MiB  # matches Limits.max_file_bytes: nothing larger can be written in a sandbox
DEFAULT_MAX_TOTAL_BYTES = 256 * MiB
DEFAULT_MAX_ENTRIES = 20_000


@dataclass(frozen=True)
class Entry:
    """One path in a snapshot. Equal entries mean an unchanged path."""

    kind: EntryKind
    content: bytes = b""  # kind "file" only
    target: str = ""  # kind "symlink": where the link points, never followed
    size: int = 0  # kind "file" and "too_large"
    sha256: str = ""  # kind "too_large": identifies contents that were not kept
    executable: bool = False  # kind "file" and "too_large"
    detail: str = ""  # kind "special": fifo, socket, char device, block device, unreadable file or folder

    @classmethod
    def file(cls, content: bytes, executable: bool = False) -> Entry:
        return cls("file", content=content, size=len(content), executable=executable)


@dataclass(frozen=True)
class Snapshot(Mapping[str, Entry]):
    """Every path under a workspace (POSIX separators, relative), directories included."""

    entries: dict[str, Entry]
    # True when the walk stopped at max_entries: paths past that point are missing from `entries`.
    truncated: bool = False

    @classmethod
    def from_files(cls, files: Mapping[str, bytes] | Iterable[tuple[str, bytes]]) -> Snapshot:
        """The snapshot a workspace created from `files` has, without touching the disk."""
        entries: dict[str, Entry] = {}
        for path, content in _validated(files):
            parts = path.split("/")
            for depth in range(1, len(parts)):
                entries["/".join(parts[:depth])] = Entry("dir")
            entries[path] = Entry.file(content)
        return cls(entries)

    def __getitem__(self, path: str) -> Entry:
        return self.entries[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def files(self) -> dict[str, bytes]:
        """Regular files with their contents (too-large files left out: see `too_large`)."""
        return {path: e.content for path, e in self.entries.items() if e.kind == "file"}

    @property
    def too_large(self) -> dict[str, Entry]:
        return {path: e for path, e in self.entries.items() if e.kind == "too_large"}


@dataclass(frozen=True)
class WorkspaceDiff:
    """A later state against an initial one. `deleted` holds the entries as they were."""

    added: dict[str, Entry] = field(default_factory=dict)
    modified: dict[str, Entry] = field(default_factory=dict)
    deleted: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def between(cls, initial: Mapping[str, Entry], final: Mapping[str, Entry]) -> WorkspaceDiff:
        return cls(
            added={p: e for p, e in final.items() if p not in initial},
            modified={p: e for p, e in final.items() if p in initial and initial[p] != e},
            deleted={p: e for p, e in initial.items() if p not in final},
        )

    @property
    def empty(self) -> bool:
        return not (self.added or self.modified or self.deleted)


class Workspace:
    """A folder on the host that backends mount as the sandbox's only writable place."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise WorkspaceError(f"workspace folder {self.root} does not exist")
        self.initial: Snapshot | None = None

    @classmethod
    def create(
        cls,
        files: Mapping[str, bytes] | Iterable[tuple[str, bytes]] = (),
        base_dir: str | os.PathLike[str] | None = None,
    ) -> Workspace:
        """Materialise `files` into a new folder under `base_dir` (default: the system temp folder).

        The folder is private to its owner (0700); a backend that runs code as another uid hands it over.
        The snapshot taken right after is kept as `initial`, the default base of `diff()`.
        """
        validated = list(_validated(files))
        if base_dir is not None:
            Path(base_dir).mkdir(parents=True, exist_ok=True)
        workspace = cls(tempfile.mkdtemp(prefix="clawgym-ws-", dir=base_dir))
        try:
            for path, content in validated:
                target = workspace.root / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
            workspace.initial = workspace.snapshot()
        except BaseException:
            workspace.cleanup()
            raise
        return workspace

    def snapshot(
        self,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> Snapshot:
        """Read the whole tree back. A file over `max_file_bytes`, or one that would take the contents read so
        far past `max_total_bytes`, is recorded as too large (size and sha256, streamed, not kept)."""
        entries: dict[str, Entry] = {}
        budget = max_total_bytes
        # fwalk hands out directory fds and never follows symlinks, so a link swapped in cannot lead us out.
        for dirpath, dirnames, filenames, dirfd in os.fwalk(self.root, follow_symlinks=False):
            rel_dir = os.path.relpath(dirpath, self.root)
            prefix = "" if rel_dir == "." else rel_dir + "/"
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                if len(entries) >= max_entries:
                    return Snapshot(entries, truncated=True)
                entry = _read_entry(dirfd, name, max_file_bytes, budget)
                budget -= len(entry.content)
                entries[prefix + name] = entry
        return Snapshot(entries)

    def files(self, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> dict[str, bytes]:
        """The regular files now in the workspace, {path: bytes} (links, folders, too-large files left out)."""
        return self.snapshot(max_file_bytes=max_file_bytes).files

    def diff(self, initial: Snapshot | Mapping[str, bytes] | None = None) -> WorkspaceDiff:
        """What changed since `initial` (default: the state right after `create`)."""
        if initial is None:
            if self.initial is None:
                raise WorkspaceError("this workspace was not made by Workspace.create: pass the initial snapshot")
            initial = self.initial
        if not isinstance(initial, Snapshot):
            initial = Snapshot.from_files(initial)
        return WorkspaceDiff.between(initial, self.snapshot())

    def chown_tree(self, uid: int, gid: int) -> None:
        """Hand every path to `uid` (needs root), so code running as that uid can write its workspace."""
        os.chown(self.root, uid, gid)
        for _dirpath, dirnames, filenames, dirfd in os.fwalk(self.root, follow_symlinks=False):
            for name in dirnames + filenames:
                os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)

    def cleanup(self) -> None:
        """Delete the folder, even where the code inside removed its own permissions (chmod 000 folders)."""
        if not self.root.exists():
            return
        try:
            shutil.rmtree(self.root)
        except PermissionError:
            self._unlock_folders()
            shutil.rmtree(self.root)

    def _unlock_folders(self) -> None:
        os.chmod(self.root, stat.S_IRWXU)
        # Top-down: each folder is opened up before the walk lists it. Links are left alone, never followed.
        for dirpath, dirnames, _filenames in os.walk(self.root):
            for name in dirnames:
                path = os.path.join(dirpath, name)
                if not os.path.islink(path):
                    os.chmod(path, stat.S_IRWXU)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"


def _read_entry(dirfd: int, name: str, max_file_bytes: int, budget: int) -> Entry:
    st = os.lstat(name, dir_fd=dirfd)
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return Entry("symlink", target=os.readlink(name, dir_fd=dirfd))
    if stat.S_ISDIR(mode):
        try:
            os.close(os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dirfd))
        except PermissionError:
            # chmod 000 by the code inside: a caller without root cannot look in, and the walk skips it.
            return Entry("special", detail="unreadable folder")
        return Entry("dir")
    if not stat.S_ISREG(mode):
        kind = {stat.S_IFIFO: "fifo", stat.S_IFSOCK: "socket", stat.S_IFCHR: "char device"}
        return Entry("special", detail=kind.get(stat.S_IFMT(mode), "block device"))
    executable = bool(mode & stat.S_IXUSR)
    # O_NOFOLLOW|O_NONBLOCK: should the name have become a link or fifo since lstat, fail instead of following it
    # or hanging on it.
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dirfd)
    except PermissionError:
        return Entry("special", detail="unreadable file")
    with os.fdopen(fd, "rb") as handle:
        keep = min(max_file_bytes, budget)
        head = handle.read(keep + 1)
        if len(head) <= keep:
            return Entry.file(head, executable=executable)
        digest = hashlib.sha256(head)
        size = len(head)
        while chunk := handle.read(1 * MiB):
            digest.update(chunk)
            size += len(chunk)
        return Entry("too_large", size=size, sha256=digest.hexdigest(), executable=executable)


def _validated(files: Mapping[str, bytes] | Iterable[tuple[str, bytes]]) -> Iterator[tuple[str, bytes]]:
    """Check every path is a plain relative POSIX path and no file is also used as a folder."""
    items = files.items() if isinstance(files, Mapping) else files
    seen: set[str] = set()
    dirs: set[str] = set()
    for path, content in items:
        if not isinstance(path, str) or not path or "\0" in path or path.startswith("/"):
            raise WorkspaceError(f"workspace path {path!r} must be a non-empty relative path")
        parts = path.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise WorkspaceError(f"workspace path {path!r} may not contain empty, '.' or '..' parts")
        if not isinstance(content, bytes):
            raise WorkspaceError(f"contents of {path!r} must be bytes, got {type(content).__name__}")
        parents = {"/".join(parts[:depth]) for depth in range(1, len(parts))}
        if path in seen or path in dirs or parents & seen:
            raise WorkspaceError(f"workspace path {path!r} is given twice or is both a file and a folder")
        seen.add(path)
        dirs |= parents
        yield path, content
