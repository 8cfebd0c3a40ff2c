"""Opening import input: a folder, a .jsonl file, or a .tar/.tar.gz/.tgz/.zip of either, extracted safely.

Archives come from uploads, so every member is distrusted: members are written one by one by this
code (never `extractall`), only regular files and folders are accepted, no member may name a path
outside the extraction root, and both the member count and the bytes actually written are bounded
(settings.CLAWGYM_MAX_ARCHIVE_MEMBERS / CLAWGYM_MAX_ARCHIVE_EXPANDED_BYTES); sizes claimed by headers
are never trusted, which is what stops zip bombs.
"""

import contextlib
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from django.conf import settings

from .base import FormatError

CHUNK = 1024 * 1024
ONLY_FILES = "only files and folders are allowed"


class ArchiveError(FormatError):
    """The archive is unsafe or unreadable. The message names the member concerned."""


class _Budget:
    def __init__(self):
        self.members = 0
        self.bytes = 0
        self.max_members = settings.CLAWGYM_MAX_ARCHIVE_MEMBERS
        self.max_bytes = settings.CLAWGYM_MAX_ARCHIVE_EXPANDED_BYTES

    def member(self, name: str) -> None:
        self.members += 1
        if self.members > self.max_members:
            raise ArchiveError(f"the archive has more than {self.max_members} members (stopped at {name!r})")

    def add(self, n: int, name: str) -> None:
        self.bytes += n
        if self.bytes > self.max_bytes:
            raise ArchiveError(
                f"the archive expands to more than {self.max_bytes} bytes (stopped while extracting {name!r})"
            )


def _target(root: Path, name: str) -> Path | None:
    """Where member `name` goes below `root`, or None for the root itself; refuses escaping names."""
    if "\x00" in name:
        raise ArchiveError(f"member {name!r}: the name contains a NUL byte")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(f"member {name!r}: absolute paths are not allowed")
    if "\\" in name:
        raise ArchiveError(f"member {name!r}: backslashes are not allowed in member names")
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"member {name!r}: '..' would place it outside the extraction folder")
    if not parts:
        return None
    target = root.joinpath(*parts)
    # Belt and braces: nothing written so far is a link, so the real path must stay inside the root.
    real_root = os.path.realpath(root)
    if os.path.commonpath([real_root, os.path.realpath(target)]) != real_root:
        raise ArchiveError(f"member {name!r} would be extracted outside the extraction folder")
    return target


def _copy(src, target: Path, name: str, budget: _Budget) -> None:
    if os.path.lexists(target) and not target.is_file():
        raise ArchiveError(f"member {name!r}: a folder of the same name is already in the archive")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as out:
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                break
            budget.add(len(chunk), name)
            out.write(chunk)


def _extract_tar(path: Path, root: Path) -> None:
    budget = _Budget()
    try:
        with tarfile.open(path, "r:*") as tar:
            # Iterating reads one header at a time, so the member bound applies before a huge index is built.
            for member in tar:
                budget.member(member.name)
                target = _target(root, member.name)
                if member.issym() or member.islnk():
                    kind = "symbolic link" if member.issym() else "hard link"
                    raise ArchiveError(f"member {member.name!r} is a {kind}; links are not allowed")
                if member.ischr() or member.isblk() or member.isfifo():
                    raise ArchiveError(f"member {member.name!r} is a device or fifo; {ONLY_FILES}")
                if member.isdir():
                    if target is not None:
                        target.mkdir(parents=True, exist_ok=True)
                    continue
                if not member.isreg():
                    raise ArchiveError(f"member {member.name!r} is not a regular file or folder")
                if target is None:
                    raise ArchiveError(f"member {member.name!r} has no usable name")
                src = tar.extractfile(member)
                with contextlib.closing(src):
                    _copy(src, target, member.name, budget)
    except tarfile.TarError as exc:
        raise ArchiveError(f"{path.name} is not a readable tar archive: {exc}") from None
    except (EOFError, OSError) as exc:
        raise ArchiveError(f"{path.name} could not be read (damaged or truncated?): {exc}") from None


def _extract_zip(path: Path, root: Path) -> None:
    budget = _Budget()
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                budget.member(info.filename)
                target = _target(root, info.filename)
                # Zips made on Unix keep the file type in the high bits of external_attr (often only
                # permissions are set: no type means a plain file or folder).
                kind = stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0
                if kind == stat.S_IFLNK:
                    raise ArchiveError(f"member {info.filename!r} is a symbolic link; links are not allowed")
                if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                    raise ArchiveError(f"member {info.filename!r} is a device or fifo; {ONLY_FILES}")
                if info.flag_bits & 0x1:
                    raise ArchiveError(f"member {info.filename!r} is encrypted")
                if info.is_dir():
                    if target is not None:
                        target.mkdir(parents=True, exist_ok=True)
                    continue
                if target is None:
                    raise ArchiveError(f"member {info.filename!r} has no usable name")
                with zf.open(info) as src:
                    _copy(src, target, info.filename, budget)
    except zipfile.BadZipFile as exc:
        raise ArchiveError(f"{path.name} is not a readable zip archive: {exc}") from None
    except (EOFError, OSError, NotImplementedError, RuntimeError) as exc:
        raise ArchiveError(f"{path.name} could not be read: {exc}") from None


def archive_kind(path: Path) -> str | None:
    """'zip', 'tar' or None (not an archive). Content decides, so an upload's name cannot mislead."""
    if not path.is_file() or path.suffix.lower() == ".jsonl":
        return None
    if zipfile.is_zipfile(path):
        return "zip"
    try:
        if tarfile.is_tarfile(path):
            return "tar"
    except EOFError:
        return "tar"  # a compressed tar cut short: extracting it reports the damage
    except OSError:
        return None
    return None


def extract(path: Path, dest: Path) -> None:
    kind = archive_kind(path)
    if kind == "zip":
        _extract_zip(path, dest)
    elif kind == "tar":
        _extract_tar(path, dest)
    else:
        raise ArchiveError(f"{path.name} is not a tar or zip archive")


@contextlib.contextmanager
def opened(path) -> Iterator[Path]:
    """Yield a folder or .jsonl file to read tasks from; archives are extracted to a temporary folder."""
    path = Path(path)
    if not path.exists():
        raise FormatError(f"{path} does not exist")
    if path.is_dir():
        yield path
        return
    if path.suffix.lower() == ".jsonl":
        yield path
        return
    tmp = Path(tempfile.mkdtemp(prefix="clawgym-import-"))
    try:
        extract(path, tmp)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
