"""Importing tasks into the catalog, from a path or from an uploaded file (through a background job).

`import_path` reads a folder, a .jsonl file or an archive of either, and saves each task through
tasks.services.save_package: atomic per task, identical content is left unchanged, changed content
becomes a new revision. A task that cannot be read or saved is reported and skipped; the others go on.
"""

import itertools
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction

import jobs

from .formats import FormatError, ReadFailure, get_format, locate_tasks
from .formats.archive import opened
from .job_kinds import IMPORT_JOB
from .models import Task
from .package import PackageError
from .paths import TaskFileError
from .services import SaveOutcome, save_package

IMPORT_STAGE = "import"
BATCH_SIZE = 50
FAILURES_LISTED = 100  # a report names this many failures and counts the rest


@dataclass
class ImportReport:
    """What an import did. `failed` lists the first FAILURES_LISTED failures ({source, error}) and `failed_count`
    counts them all: a file of a million bad lines is a short report, not a million-entry answer held in memory."""

    imported: int = 0
    updated: int = 0
    unchanged: int = 0
    failed: list[dict] = field(default_factory=list)
    failed_count: int = 0
    on_failure: Callable[[str, str], None] | None = field(default=None, repr=False, compare=False)

    def fail(self, source: str, error: str) -> None:
        self.failed_count += 1
        if len(self.failed) < FAILURES_LISTED:
            self.failed.append({"source": source, "error": error})
        if self.on_failure:
            self.on_failure(source, error)

    def as_dict(self) -> dict:
        return {
            "imported": self.imported,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "failed": list(self.failed),
            "failed_count": self.failed_count,
        }


def import_path(
    path,
    *,
    fmt: str | None = None,
    user=None,
    progress: Callable[[int, int], None] | None = None,
    on_failure: Callable[[str, str], None] | None = None,
) -> ImportReport:
    """Import every task found at `path`.

    `progress(done, total)` is called after each task, `on_failure(source, error)` for each failed one.
    Raises FormatError (incl. ArchiveError) when the input as a whole cannot be read: missing path,
    unknown format name, unrecognisable or unsafe archive.
    """
    task_format = get_format(fmt) if fmt else None
    report = ImportReport(on_failure=on_failure)
    message = f"Imported from {Path(path).name}"[:500]
    with opened(path) as found:
        root, task_format = locate_tasks(found, task_format)
        total = task_format.count(root)
        if total == 0:
            raise FormatError(f"found no tasks in {Path(path).name} (read as {task_format.label})")
        if progress:
            progress(0, total)
        first_seen: dict[str, str] = {}
        done = 0
        for batch in _batches(task_format.read(root), BATCH_SIZE):
            # One commit per task dominates the time of a large import (PostgreSQL syncs each commit to
            # disk), so tasks are committed in batches. Each task still saves in its own savepoint
            # (save_package is atomic), so a failing task leaves nothing behind and the batch goes on.
            with transaction.atomic():
                for item in batch:
                    done += 1
                    if isinstance(item, ReadFailure):
                        report.fail(item.source, item.error)
                    else:
                        _save(item, report, first_seen, user=user, message=message)
                    if progress:
                        progress(done, max(total, done))
    return report


def _batches(items: Iterable, size: int) -> Iterator[Iterator]:
    """Consecutive runs of `size` items, read lazily (one task in memory at a time)."""
    items = iter(items)
    for first in items:
        yield itertools.chain([first], itertools.islice(items, size - 1))


def _save(package, report: ImportReport, first_seen: dict[str, str], *, user, message: str) -> None:
    source = package.origin or package.external_id
    earlier = first_seen.get(package.external_id)
    if earlier is not None:
        # Two sources for one task in one import is a mistake; saving both would keep whichever came last.
        report.fail(source, f"task id {package.external_id!r} was already imported from {earlier} in this import")
        return
    first_seen[package.external_id] = source
    try:
        result = save_package(package, user=user, stage=IMPORT_STAGE, message=message, source=Task.Source.IMPORTED)
    except (PackageError, TaskFileError) as exc:
        report.fail(source, str(exc))
        return
    if result.outcome == SaveOutcome.CREATED:
        report.imported += 1
    elif result.outcome == SaveOutcome.UPDATED:
        report.updated += 1
    else:
        report.unchanged += 1


def _safe_name(name: str) -> str:
    """The upload's own file name reduced to a harmless one; the extension is kept (it helps detection)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name or "").name)
    if not base or base.startswith("."):
        base = "upload" + base  # never a hidden file, never an empty name
    return base[-120:]


def start_upload_import(uploaded_file, *, fmt: str | None = None, user):
    """Store an uploaded file (folder archive or .jsonl) and start the import job. Returns its JobRun.

    The file is streamed to settings.CLAWGYM_UPLOAD_DIR/<uuid>/<safe name>, never held in memory; the
    job deletes it when done. Raises FormatError for an unknown format name (before storing anything)
    and jobs.engine.JobEngineError when the job engine refuses the job (the upload is then removed).
    """
    if fmt:
        get_format(fmt)
    folder = Path(settings.CLAWGYM_UPLOAD_DIR) / uuid.uuid4().hex
    folder.mkdir(parents=True)
    target = folder / _safe_name(getattr(uploaded_file, "name", ""))
    try:
        with open(target, "wb") as out:
            for chunk in uploaded_file.chunks():
                out.write(chunk)
        return jobs.enqueue(IMPORT_JOB, created_by=user, upload_path=str(target), fmt=fmt or None)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def remove_upload(upload_path: str) -> None:
    """Delete an upload and its folder; only ever below CLAWGYM_UPLOAD_DIR, whatever the path says."""
    root = Path(settings.CLAWGYM_UPLOAD_DIR).resolve()
    folder = Path(upload_path).resolve().parent
    if folder.parent == root:
        shutil.rmtree(folder, ignore_errors=True)
