"""Exporting a frozen benchmark version in the ClawGym folder format: to a folder, a .tar.gz or a .zip.

An export holds `benchmark.json` (the manifest: the version and every pinned revision with its content hash)
and one task folder per pinned revision, written by the ClawGym folder format exactly as `export_tasks`
writes a task. It is made from the pinned revisions, never from the tasks' current ones: a version exports
the same tasks however they were edited after freezing. `import_tasks` reads an export back (the manifest is a
plain file beside the task folders, which the importer passes over).

Archives are reproducible byte for byte: members in a fixed order under one top folder `<benchmark>-v<N>/`,
every timestamp the version's freezing time, no owners, a gzip header without a name or a time. They are
made as a stream of chunks (`archive_chunks`), one task at a time, so a download starts at once and memory
holds one task. Writing to a path goes to a temporary name beside it, renamed into place only when complete.
"""

import contextlib
import gzip
import io
import json
import os
import shutil
import stat
import tarfile
import tempfile
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

from tasks.formats import get_format
from tasks.formats.base import write_file
from tasks.models import BenchmarkCategory, RevisionFile, TaskRevision
from tasks.services import package_from_revision

from .models import Benchmark, BenchmarkVersion

MANIFEST = "benchmark.json"
MANIFEST_FORMAT = "clawgym-benchmark/1"
FOLDER = "dir"
ARCHIVE_FORMATS = ("tar.gz", "zip")
FORMATS = (FOLDER, *ARCHIVE_FORMATS)
CONTENT_TYPES = {"tar.gz": "application/gzip", "zip": "application/zip"}
# Fixed so that the same version gives the same bytes on any machine and Python build.
COMPRESS_LEVEL = 6


class BenchmarkExportError(ValueError):
    """The export cannot be made as asked (unknown benchmark or version, unusable target); the message says why."""


@dataclass(frozen=True)
class ExportResult:
    path: Path
    format: str
    tasks: int
    files: int  # every file written, the manifest included
    bytes: int

    def as_dict(self, version: BenchmarkVersion) -> dict:
        return {
            "benchmark": version.benchmark.name,
            "version": version.number,
            "format": self.format,
            "path": str(self.path),
            "tasks": self.tasks,
            "files": self.files,
            "bytes": self.bytes,
        }


# --- choosing what to export -----------------------------------------------------------------------------------


def find_version(benchmark_name: str, number: int | None = None) -> BenchmarkVersion:
    """Version `number` of the benchmark (its latest when None), or BenchmarkExportError saying what exists."""
    benchmark = Benchmark.objects.filter(name=benchmark_name).first()
    if benchmark is None:
        known = ", ".join(Benchmark.objects.values_list("name", flat=True)) or "none yet"
        raise BenchmarkExportError(f"no benchmark named {benchmark_name!r} (benchmarks: {known})")
    versions = benchmark.versions.select_related("benchmark", "created_by")
    numbers = list(versions.values_list("number", flat=True))
    if not numbers:
        raise BenchmarkExportError(
            f"{benchmark.name} has no frozen version yet: freeze one first (on its page, through "
            f"POST /api/benchmarks/ID/freeze/, or `manage.py freeze_benchmark --benchmark {benchmark.name}`)"
        )
    if number is None:
        return versions.get(number=max(numbers))
    if number not in numbers:
        listed = ", ".join(f"v{n}" for n in sorted(numbers))
        raise BenchmarkExportError(f"{benchmark.name} has no version {number} (it has {listed})")
    return versions.get(number=number)


def format_for(path, fmt: str | None = None) -> str:
    """The export format: `fmt` when given, else from the path's suffix (.tar.gz/.tgz, .zip; a folder otherwise)."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise BenchmarkExportError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
        return fmt
    name = Path(path).name.lower()
    if name.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    if name.endswith(".zip"):
        return "zip"
    return FOLDER


def top_folder(version: BenchmarkVersion) -> str:
    return f"{version.benchmark.name}-v{version.number}"


def download_name(version: BenchmarkVersion, fmt: str) -> str:
    return f"{top_folder(version)}.{fmt}"


def pinned_revisions(version: BenchmarkVersion, *, batch: int = 100, defer: tuple[str, ...] = ()):
    """The version's pinned revisions (with their tasks) in task id order, fetched `batch` at a time.

    The order is Python's (by code point), not the database's collation, so that every database gives the same
    manifest and the same archive.
    """
    pinned = version.pins.values_list("revision__task__external_id", "revision_id")
    ids = [revision_id for _, revision_id in sorted(pinned)]
    revisions = TaskRevision.objects.select_related("task").defer(*defer)
    for start in range(0, len(ids), batch):
        chunk = revisions.in_bulk(ids[start : start + batch])
        yield from (chunk[pk] for pk in ids[start : start + batch])


def manifest(version: BenchmarkVersion) -> dict:
    """benchmark.json: what was frozen, when and by whom, and each pinned revision with its content hash."""
    categories = _category_slugs()
    tasks = []
    for revision in pinned_revisions(version, batch=1000, defer=("instruction", "rubric", "entry_extra")):
        category = revision.metadata.get("category")
        tasks.append(
            {
                "task_id": revision.task.external_id,
                "revision": revision.number,
                "content_hash": revision.content_hash,
                # The pinned revision's category (a later edit of the task does not move it), as the catalog's slug.
                "category": categories.get(category.lower(), category) if isinstance(category, str) else None,
            }
        )
    return {
        "format": MANIFEST_FORMAT,
        "benchmark": version.benchmark.name,
        "description": version.benchmark.description,
        "version": version.number,
        "frozen_at": version.frozen_at.astimezone(UTC).isoformat(),
        "frozen_by": version.created_by.get_username() if version.created_by else None,
        "note": version.note,
        "task_count": len(tasks),
        "tasks": tasks,
    }


def _category_slugs() -> dict[str, str]:
    """Lower-cased slug or name -> slug: task metadata may name a category either way (as import resolves it)."""
    slugs = {}
    for slug, name in BenchmarkCategory.objects.values_list("slug", "name"):
        slugs[name.lower()] = slug
        slugs[slug.lower()] = slug
    return slugs


def _manifest_bytes(version: BenchmarkVersion) -> bytes:
    return (json.dumps(manifest(version), indent=2, ensure_ascii=False) + "\n").encode("utf-8")


# --- writing -----------------------------------------------------------------------------------------------------


def _task_files(revision: TaskRevision) -> list[tuple[str, bytes, int]]:
    """The revision's task folder as the ClawGym writer lays it out: (path below the export, content, mode)."""
    with tempfile.TemporaryDirectory(prefix="clawgym-benchmark-") as tmp:
        root = Path(tmp)
        get_format("clawgym").write([package_from_revision(revision)], root)
        return [
            (path.relative_to(root).as_posix(), path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
            for path in sorted(p for p in root.rglob("*") if p.is_file())
        ]


class _Sink:
    """A write-only file the archive writers write into; `take()` hands over what was written since.

    It has no tell() or seek(): zipfile then writes sizes after each member (data descriptors), so the same
    bytes come out whether they go to a file or to an HTTP response.
    """

    def __init__(self):
        self._parts: list[bytes] = []

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


class _TarWriter:
    def __init__(self, sink: _Sink, mtime: int):
        self.mtime = mtime
        self.gz = gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=mtime, compresslevel=COMPRESS_LEVEL)
        self.tar = tarfile.open(fileobj=self.gz, mode="w", format=tarfile.PAX_FORMAT)

    def add(self, name: str, data: bytes, mode: int) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(data), self.mtime, mode
        self.tar.addfile(info, io.BytesIO(data))

    def close(self) -> None:
        self.tar.close()
        self.gz.close()


class _ZipWriter:
    def __init__(self, sink: _Sink, mtime: int):
        self.date_time = _zip_time(mtime)
        self.zip = zipfile.ZipFile(sink, mode="w")

    def add(self, name: str, data: bytes, mode: int) -> None:
        info = zipfile.ZipInfo(name, date_time=self.date_time)
        info.create_system = 3  # Unix, whatever machine exports: the mode below is a Unix mode
        info.external_attr = (stat.S_IFREG | mode) << 16
        self.zip.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=COMPRESS_LEVEL)

    def close(self) -> None:
        self.zip.close()


def _zip_time(mtime: int) -> tuple:
    stamp = datetime.fromtimestamp(mtime, UTC)
    # Zip timestamps cannot say anything before 1980.
    return max(stamp.timetuple()[:6], (1980, 1, 1, 0, 0, 0))


def archive_chunks(version: BenchmarkVersion, fmt: str) -> Iterator[bytes]:
    """The version as a .tar.gz or .zip, chunk by chunk: what is compressed so far is handed on after each task."""
    if fmt not in ARCHIVE_FORMATS:
        raise BenchmarkExportError(f"unknown archive format {fmt!r}; choose one of {', '.join(ARCHIVE_FORMATS)}")
    sink = _Sink()
    mtime = int(version.frozen_at.timestamp())
    writer = _TarWriter(sink, mtime) if fmt == "tar.gz" else _ZipWriter(sink, mtime)
    top = top_folder(version)
    writer.add(f"{top}/{MANIFEST}", _manifest_bytes(version), 0o644)
    for revision in pinned_revisions(version):
        for path, data, mode in _task_files(revision):
            writer.add(f"{top}/{path}", data, mode)
        chunk = sink.take()
        if chunk:
            yield chunk
    writer.close()
    yield sink.take()


def download_response(version: BenchmarkVersion, fmt: str) -> StreamingHttpResponse:
    """The version as an archive download, streamed as it is made (the page and the API both answer with it)."""
    response = StreamingHttpResponse(archive_chunks(version, fmt), content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = content_disposition_header(True, download_name(version, fmt))
    return response


def _write_folder(version: BenchmarkVersion, folder: Path) -> None:
    """Write the manifest and the task folders into the existing empty `folder`."""
    write_file(folder / MANIFEST, _manifest_bytes(version))
    packages = (package_from_revision(r) for r in pinned_revisions(version))
    get_format("clawgym").write(packages, folder)


def file_count(version: BenchmarkVersion) -> int:
    """How many files an export of the version holds: the manifest, and each task's data_entry.json and files."""
    pinned = version.pins.values("revision_id")
    return 1 + version.pins.count() + RevisionFile.objects.filter(revision__in=pinned).count()


def _is_empty(path: Path) -> bool:
    if path.is_dir():
        return not any(path.iterdir())
    return path.stat().st_size == 0


def _check_target(out: Path, fmt: str, force: bool) -> None:
    if not os.path.lexists(out):
        return
    if out.is_symlink():
        raise BenchmarkExportError(f"{out} is a symbolic link; name a new path")
    if fmt != FOLDER and out.is_dir():
        raise BenchmarkExportError(f"{out} is a folder; name the archive file to write (e.g. {out}/export.{fmt})")
    if not force and not _is_empty(out):
        raise BenchmarkExportError(f"{out} already exists and is not empty; use --force to replace it")


def export_version(version: BenchmarkVersion, out, *, fmt: str | None = None, force: bool = False) -> ExportResult:
    """Write the version to `out`: a folder, a .tar.gz or a .zip (`fmt`, else from the suffix).

    An existing non-empty `out` is replaced only with `force`. Nothing half-written is ever left at `out`:
    the export is made under a temporary name beside it and renamed into place once complete.
    """
    out = Path(out)
    fmt = format_for(out, fmt)
    _check_target(out, fmt, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == FOLDER:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    else:
        handle, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
        os.close(handle)
        tmp = Path(name)
    try:
        if fmt == FOLDER:
            _write_folder(version, tmp)
        else:
            with open(tmp, "wb") as fh:
                for chunk in archive_chunks(version, fmt):
                    fh.write(chunk)
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o755 if fmt == FOLDER else 0o644)  # mkdtemp and mkstemp make them private
        _move_into_place(tmp, out)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        raise
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) if fmt == FOLDER else out.stat().st_size
    return ExportResult(path=out, format=fmt, tasks=version.pins.count(), files=file_count(version), bytes=size)


def _move_into_place(tmp: Path, out: Path) -> None:
    """Rename the finished export to `out`, replacing what is there (the caller checked that it may)."""
    if tmp.is_file() or not os.path.lexists(out) or (out.is_dir() and _is_empty(out)):
        os.replace(tmp, out)  # atomic, also over an existing file
        return
    # A folder cannot be renamed over a non-empty folder or a file: move that aside first, back should it fail.
    aside = out.with_name(f".{out.name}.replaced-{uuid.uuid4().hex[:12]}")
    os.replace(out, aside)
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(aside, out)
        raise
    if aside.is_dir():
        shutil.rmtree(aside)
    else:
        aside.unlink()
