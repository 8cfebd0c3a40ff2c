"""Scratch folders for jobs that run untrusted code (a sanity check's workspaces, a rollout's workspace and run dir).

A worker can die at any instruction (kill -9, the OOM killer, a lost container), and then no `finally` runs: its
folders stay on disk. So each folder is *held*: beside `NAME/` lies `NAME.lock`, locked with flock(2) by the process
that made the folder for as long as it uses it. The kernel drops that lock when the process dies, however it dies, so
a folder whose lock can be taken is orphaned, and `sweep()` removes it. No pid files, no clocks, no guessing: whoever
finds the holder gone (a worker starting on the same host, the job reaper, the rollout command waiting for its
rollouts) removes the folder before it records the job as lost, so a job seen lost has no folder left on that host.

Order makes it safe to sweep at any moment from any process:
- made lock first, folder second; removed folder first, lock last. A folder never exists without its lock file
  (except during its removal), and a lock file whose folder cannot be removed stays, so a later sweep tries again;
- flock, not fcntl locks: flock conflicts between two open files of the same process too, so a sweep in one thread
  never takes a folder another thread of the same process holds;
- the lock files are opened close-on-exec, so a sandbox started by the holder never inherits (or keeps) the lock;
- the root must be on a local filesystem: over NFS, Linux emulates flock with POSIX locks, which a process's threads
  share.

The processes of a killed worker's sandbox die with it (bubblewrap's --die-with-parent), but not in the same instant:
removal retries for a moment while the last of them may still create files.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)

LOCK_SUFFIX = ".lock"
FOLDER_MODE = 0o711  # a root worker runs its sandbox as an unprivileged uid: it must traverse into the workspace
REMOVE_ATTEMPTS = 50
REMOVE_PAUSE_SECONDS = 0.1
_LABEL = re.compile(r"[a-z0-9][a-z0-9-]{0,60}")


class ScratchError(RuntimeError):
    """The scratch root is unusable (someone else's, writable by others, not a folder)."""


def scratch_root() -> Path:
    """settings.CLAWGYM_SCRATCH_DIR, created when missing; refused when another user could change what is in it."""
    root = Path(settings.CLAWGYM_SCRATCH_DIR)
    try:
        os.mkdir(root, FOLDER_MODE)
        os.chmod(root, FOLDER_MODE)  # mkdir's mode passes through the umask
    except FileExistsError:
        pass
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode):
        raise ScratchError(f"the scratch folder {root} (CLAWGYM_SCRATCH_DIR) is not a folder")
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        # Under a shared /tmp anyone may have made it first: whoever can write there can swap a workspace.
        raise ScratchError(
            f"the scratch folder {root} (CLAWGYM_SCRATCH_DIR) must belong to uid {os.geteuid()} and be writable by "
            f"it alone (it belongs to uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o})"
        )
    return root


class ScratchFolder:
    """A folder this process holds until `release()`; `path` is where to put the work."""

    def __init__(self, path: Path, lock_fd: int):
        self.path = path
        self._lock_fd: int | None = lock_fd

    @classmethod
    def hold(cls, label: str) -> ScratchFolder:
        """Make and hold a new folder named `<label>-<random>` under the scratch root.

        `label` names what the folder is for (lowercase letters, digits, hyphens), so that its owner can sweep just
        its own (`sweep(f"{label}-")`).
        """
        if not _LABEL.fullmatch(label):
            raise ValueError(f"scratch label {label!r}: use lowercase letters, digits and hyphens")
        root = scratch_root()
        while True:
            fd, lock_name = tempfile.mkstemp(prefix=f"{label}-", suffix=LOCK_SUFFIX, dir=root)
            lock_path = Path(lock_name)
            try:
                # A sweep may have opened the new file and taken its lock for a moment: wait for it, then check it did
                # not unlink the file meanwhile (it removes lock files it could lock).
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not _same_file(lock_path, fd):
                    os.close(fd)
                    continue
                folder = lock_path.with_name(lock_path.name[: -len(LOCK_SUFFIX)])
                os.mkdir(folder, FOLDER_MODE)
                os.chmod(folder, FOLDER_MODE)
            except BaseException:
                _unlink(lock_path, fd)
                os.close(fd)
                raise
            return cls(folder, fd)

    def release(self) -> bool:
        """Remove the folder and its lock. False (logged) when the folder could not be removed: its lock file then
        stays, so the next sweep removes it."""
        if self._lock_fd is None:
            return True
        fd, self._lock_fd = self._lock_fd, None
        lock_path = self.path.with_name(self.path.name + LOCK_SUFFIX)
        try:
            removed = remove_tree(self.path)
            if removed:
                _unlink(lock_path, fd)
            else:
                log.error("could not remove the scratch folder %s; a later sweep will try again", self.path)
            return removed
        finally:
            os.close(fd)

    def __enter__(self) -> ScratchFolder:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"ScratchFolder({str(self.path)!r})"


@contextmanager
def scratch_folder(label: str) -> Iterator[Path]:
    """`with scratch_folder("sanity") as folder:` a held folder, removed at the end of the block (and by a sweep
    should this process die inside it)."""
    held = ScratchFolder.hold(label)
    try:
        yield held.path
    finally:
        held.release()


def sweep(prefix: str = "") -> list[Path]:
    """Remove every folder under the scratch root whose name starts with `prefix` and whose holder is gone.

    Folders a live process holds are left alone, whatever process or thread holds them. Returns the removed folders.
    """
    root = scratch_root()
    removed = []
    for lock_path in sorted(root.glob(f"{glob_escape(prefix)}*{LOCK_SUFFIX}")):
        try:
            fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # released meanwhile, or not a plain file: never ours to follow
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its holder is alive
            if not _same_file(lock_path, fd):
                continue  # released by its holder (or swept) between our open and our lock
            folder = lock_path.with_name(lock_path.name[: -len(LOCK_SUFFIX)])
            if remove_tree(folder):
                _unlink(lock_path, fd)
                removed.append(folder)
            else:
                log.error("could not remove the orphaned scratch folder %s; a later sweep will try again", folder)
        finally:
            os.close(fd)
    if removed:
        log.warning(
            "removed %d scratch folder(s) left by dead processes: %s", len(removed), ", ".join(p.name for p in removed)
        )
    return removed


def folders(prefix: str = "") -> list[Path]:
    """The folders under the scratch root whose names start with `prefix`: held ones and orphans not yet swept."""
    root = scratch_root()
    return sorted(p for p in root.glob(f"{glob_escape(prefix)}*") if not p.name.endswith(LOCK_SUFFIX))


def remove_tree(path: Path) -> bool:
    """Remove `path` and everything under it, never following a link; True once nothing is left at `path`.

    Retries for a moment (REMOVE_ATTEMPTS × REMOVE_PAUSE_SECONDS at most): a dying sandbox may still be adding files.
    Folders the code inside made unreadable (chmod 000) are opened up first; a root caller needs no such help.
    """
    for _ in range(REMOVE_ATTEMPTS):
        if not os.path.lexists(path):
            return True
        try:
            if os.path.islink(path) or not os.path.isdir(path):
                os.unlink(path)
            else:
                shutil.rmtree(path)  # fd-based on Linux: a link swapped in is removed, never followed
        except FileNotFoundError:
            continue
        except PermissionError:
            _open_up(path)
        except OSError:
            time.sleep(REMOVE_PAUSE_SECONDS)  # "directory not empty": something still writes there
    return not os.path.lexists(path)


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _open_up(root: Path) -> None:
    # Only a non-root caller gets here; the sandbox then ran as this same uid, so a link swapped in between the
    # check and the chmod can reach nothing this uid could not change anyway. Top-down: each folder is opened up
    # before the walk lists it.
    try:
        os.chmod(root, stat.S_IRWXU)
    except OSError:
        pass
    for dirpath, dirnames, _filenames in os.walk(root):
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                try:
                    os.chmod(path, stat.S_IRWXU)
                except OSError:
                    pass


def _same_file(path: Path, fd: int) -> bool:
    try:
        on_disk = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)


def _unlink(lock_path: Path, fd: int) -> None:
    """Unlink the lock file we hold, if it is still the one we hold."""
    if _same_file(lock_path, fd):
        lock_path.unlink(missing_ok=True)
