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

from ..paths import MAX_PATH_CHARS, MAX_PATH_DEPTH, printable
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
            raise ArchiveError(f"the archive has more than {self.max_members} members (stopped at {printable(name)!r})")

    def add(self, n: int, name: str) -> None:
        self.bytes += n
        if self.bytes > self.max_bytes:
            raise ArchiveError(
                f"the archive expands to more than {self.max_bytes} bytes "
                f"(stopped while extracting {printable(name)!r})"
            )


# A member nested deeper (or named longer) than any task file may be is kept only as folders this deep or long:
# enough for the task's reader to refuse that task (tasks.paths bounds), never so deep that creating, walking or
# removing it could exhaust the recursion limit or the OS's path length, or fail the whole archive.
KEEP_DEPTH = MAX_PATH_DEPTH + 8
KEEP_CHARS = 4 * MAX_PATH_CHARS
NAME_MAX = 255  # bytes in one file name on Linux file systems


def _target(root: Path, name: str) -> tuple[Path | None, bool]:
    """Where member `name` goes below `root` (None: the root itself), and whether it was cut to folders only.

    Refuses names that would escape the root. Names that are not UTF-8 are kept as their bytes (tarfile decodes
    them with "surrogateescape"): the task's reader refuses them with a clear message, so that task alone fails.
    """
    shown = printable(name)
    if "\x00" in name:
        raise ArchiveError(f"member {shown!r}: the name contains a NUL byte")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(f"member {shown!r}: absolute paths are not allowed")
    if "\\" in name:
        raise ArchiveError(f"member {shown!r}: backslashes are not allowed in member names")
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"member {shown!r}: '..' would place it outside the extraction folder")
    if not parts:
        return None, False
    if any(len(part.encode("utf-8", "surrogateescape")) > NAME_MAX for part in parts):
        raise ArchiveError(
            f"member {shown[:200]!r}: one of its names is longer than {NAME_MAX} bytes (no file system holds it)"
        )
    kept, length = [], 0
    for part in parts:
        if len(kept) == KEEP_DEPTH or length + len(part) > KEEP_CHARS:
            break
        kept.append(part)
        length += len(part) + 1
    return root.joinpath(*kept), len(kept) < len(parts)


def _make_folders(root: Path, folder: Path, name: str) -> None:
    """Create `folder` below `root` one level at a time (pathlib's mkdir(parents=True) recurses once a level);
    nothing met on the way may be a link or a file."""
    here = root
    for part in folder.relative_to(root).parts:
        here = here / part
        try:
            os.mkdir(here)
        except FileExistsError:
            if here.is_symlink() or not here.is_dir():
                raise ArchiveError(
                    f"member {printable(name)!r}: a file of the same name as one of its folders "
                    "is already in the archive"
                ) from None


def _copy(src, root: Path, target: Path, name: str, budget: _Budget) -> None:
    if os.path.lexists(target) and not target.is_file():
        raise ArchiveError(f"member {printable(name)!r}: a folder of the same name is already in the archive")
    _make_folders(root, target.parent, name)
    with open(target, "wb") as out:
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                break
            budget.add(len(chunk), name)
            out.write(chunk)


def _place(src, root: Path, name: str, is_dir: bool, budget: _Budget) -> None:
    """Write one member: a folder, or a file whose content `src()` opens."""
    target, cut = _target(root, name)
    if target is None:
        if not is_dir:
            raise ArchiveError(f"member {printable(name)!r} has no usable name")
        return
    # Belt and braces: nothing written so far is a link, so the real path must stay inside the root.
    real_root = os.path.realpath(root)
    if os.path.commonpath([real_root, os.path.realpath(target)]) != real_root:
        raise ArchiveError(f"member {printable(name)!r} would be extracted outside the extraction folder")
    if is_dir or cut:
        # A cut member is kept as its folders only; its task is refused by its reader for the depth or length.
        _make_folders(root, target, name)
        return
    with contextlib.closing(src()) as data:
        _copy(data, root, target, name, budget)


def _extract_tar(path: Path, root: Path) -> None:
    budget = _Budget()
    try:
        with tarfile.open(path, "r:*") as tar:
            # Iterating reads one header at a time, so the member bound applies before a huge index is built.
            for member in tar:
                budget.member(member.name)
                shown = printable(member.name)
                if member.issym() or member.islnk():
                    kind = "symbolic link" if member.issym() else "hard link"
                    raise ArchiveError(f"member {shown!r} is a {kind}; links are not allowed")
                if member.ischr() or member.isblk() or member.isfifo():
                    raise ArchiveError(f"member {shown!r} is a device or fifo; {ONLY_FILES}")
                if not (member.isdir() or member.isreg()):
                    raise ArchiveError(f"member {shown!r} is not a regular file or folder")
                _place(lambda m=member: tar.extractfile(m), root, member.name, member.isdir(), budget)
    except tarfile.TarError as exc:
        raise ArchiveError(f"{path.name} is not a readable tar archive: {exc}") from None
    except (EOFError, OSError) as exc:
        raise ArchiveError(f"{path.name} could not be read (damaged or truncated?): {printable(str(exc))}") from None


def _extract_zip(path: Path, root: Path) -> None:
    budget = _Budget()
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                budget.member(info.filename)
                # Zips made on Unix keep the file type in the high bits of external_attr (often only
                # permissions are set: no type means a plain file or folder).
                kind = stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0
                if kind == stat.S_IFLNK:
                    raise ArchiveError(f"member {info.filename!r} is a symbolic link; links are not allowed")
                if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                    raise ArchiveError(f"member {info.filename!r} is a device or fifo; {ONLY_FILES}")
                if info.flag_bits & 0x1:
                    raise ArchiveError(f"member {info.filename!r} is encrypted")
                _place(lambda i=info: zf.open(i), root, info.filename, info.is_dir(), budget)
    except zipfile.BadZipFile as exc:
        raise ArchiveError(f"{path.name} is not a readable zip archive: {exc}") from None
    except UnicodeDecodeError as exc:
        # A name flagged as UTF-8 that is not: zipfile cannot even list the archive, so no task can be told apart.
        raise ArchiveError(
            f"{path.name}: a member name is marked as UTF-8 but is not ({exc.object[:80]!r}); "
            "the archive cannot be read"
        ) from None
    except (EOFError, OSError, NotImplementedError, RuntimeError) as exc:
        raise ArchiveError(f"{path.name} could not be read: {printable(str(exc))}") from None


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
