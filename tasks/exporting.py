"""Exporting tasks (their current revisions) in one of the exchange formats."""

from collections.abc import Iterable, Iterator
from pathlib import Path

from .formats import FormatError, get_format
from .models import Task
from .package import TaskPackage
from .services import package_from_revision


class ExportError(ValueError):
    """The export cannot be made as asked (unknown task ids, unusable output path, import-only format)."""


def chosen_tasks(task_ids: list[str] | None = None) -> Iterable[Task]:
    """All tasks in catalog order, or the given ids in the order given.

    Raises ExportError naming every id that is not in the catalog, before anything is written.
    """
    tasks = Task.objects.filter(current_revision__isnull=False).select_related("current_revision")
    if task_ids is None:
        return tasks.order_by("pk").iterator(chunk_size=200)
    wanted = list(dict.fromkeys(task_ids))
    by_id = {t.external_id: t for t in tasks.filter(external_id__in=wanted)}
    unknown = [i for i in wanted if i not in by_id]
    if unknown:
        raise ExportError(f"no task with id {', '.join(unknown)}")
    return [by_id[i] for i in wanted]


def current_packages(tasks: Iterable[Task]) -> Iterator[TaskPackage]:
    """The current revision of each task as a package, one at a time (files are loaded per task)."""
    for task in tasks:
        revision = task.current_revision
        revision.task = task  # saves a query per task
        yield package_from_revision(revision)


def export_tasks(out, *, fmt: str = "clawgym", task_ids: list[str] | None = None) -> int:
    """Write tasks to `out` (a folder for clawgym, a file for clawgym-jsonl). Returns how many."""
    task_format = get_format(fmt)
    if not task_format.can_export:
        raise ExportError(f"the {fmt} format is import only")
    out = Path(out)
    if fmt == "clawgym" and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out} must be a new or empty folder")
    tasks = chosen_tasks(task_ids)
    try:
        return task_format.write(current_packages(tasks), out)
    except FormatError as exc:
        raise ExportError(str(exc)) from None
