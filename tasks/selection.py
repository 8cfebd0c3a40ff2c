"""Which tasks a command means, said one way everywhere: task ids (`--task A B C`, or `--task A --task B`) and/or a
selection of filters (`--tasks-from status=ready,source=skill,limit=200`), the two together meaning both.

`select_tasks` reads a selection (the training form and API use it too, through training_jobs.kinds.rl.tasks_from,
which leaves benchmark tasks out); `add_task_arguments` and `tasks_of` are the commands' side of it.
"""

from jobs.cli import UsageError
from lib.bounds import parse_whole_number

from .models import Task

FILTERS = ("status", "source", "category", "prefix", "limit")
SELECTION_HELP = (
    "the tasks a selection names: comma-separated filters status=…, source=…, category=<benchmark category slug>, "
    "prefix=<start of the task id>, limit=N, newest first (e.g. status=ready,source=skill,limit=200)"
)


class SelectionError(ValueError):
    """The tasks asked for are not there (an unknown id, a selection that names none, a task without a revision)."""


def select_tasks(selection: str, tasks=None) -> list[Task]:
    """The tasks with a revision among `tasks` (default: all) that a selection names, newest first."""
    found = (Task.objects.all() if tasks is None else tasks).filter(current_revision__isnull=False)
    limit = None
    for part in filter(None, (p.strip() for p in (selection or "").split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise SelectionError(f"a task selection is KEY=VALUE filters ({', '.join(FILTERS)}), got {part!r}")
        if key == "status":
            found = found.filter(status=value)
        elif key == "source":
            found = found.filter(source=value)
        elif key == "category":
            found = found.filter(benchmark_category__slug=value)
        elif key == "prefix" and value:
            found = found.filter(external_id__startswith=value)
        elif key == "limit" and parse_whole_number(value) is not None:
            limit = parse_whole_number(value)
        else:
            raise SelectionError(
                f"unknown task selection filter {part!r}; known: status, source, category, prefix, limit=N"
            )
    found = found.order_by("-updated_at", "-id").select_related("current_revision")
    return list(found[:limit] if limit else found)


def tasks_named(task_ids) -> list[Task]:
    """The tasks with these external ids, in the order given (once each); every unknown id named at once."""
    wanted = list(dict.fromkeys(task_ids))
    by_id = {t.external_id: t for t in Task.objects.filter(external_id__in=wanted).select_related("current_revision")}
    unknown = [i for i in wanted if i not in by_id]
    if unknown:
        raise SelectionError(f"no such task: {', '.join(unknown)}")
    return [by_id[i] for i in wanted]


# --- the commands' side ------------------------------------------------------------------------------------------


def add_task_arguments(parser, *, every: str = "", what: str = "these tasks (external ids)", selection: str = ""):
    """--task ID [ID ...] (repeatable: the ids add up) and --tasks-from SELECTION; with `every`, --all too (its
    help), which goes alone."""
    if every:
        parser.add_argument("--all", dest="all_tasks", action="store_true", help=every)
    parser.add_argument("--task", dest="task_ids", action="extend", nargs="+", metavar="ID", help=what)
    parser.add_argument("--tasks-from", metavar="SELECTION", help=selection or SELECTION_HELP)


def tasks_given(options) -> bool:
    return bool(options.get("task_ids") or options.get("tasks_from"))


def tasks_of(options, *, required: str = "", revision: str = "") -> list[Task] | None:
    """The tasks --task and --tasks-from name, ids first in the order given, then the selection's (each once).

    None when neither is given (the command's default, or --all), unless `required` says what to give then.
    `revision` (e.g. "to check") refuses tasks without a revision. A UsageError (exit status 2) otherwise.
    """
    if options.get("all_tasks") and tasks_given(options):
        raise UsageError("--all goes alone: not with --task or --tasks-from")
    if not tasks_given(options):
        if required and not options.get("all_tasks"):
            raise UsageError(required)
        return None
    try:
        tasks = tasks_named(options.get("task_ids") or [])
        if options.get("tasks_from"):
            selected = select_tasks(options["tasks_from"])
            if not selected:
                raise SelectionError(f"the selection {options['tasks_from']!r} names no task")
            named = {t.pk for t in tasks}
            tasks += [t for t in selected if t.pk not in named]
    except SelectionError as exc:
        raise UsageError(str(exc)) from None
    without = [t.external_id for t in tasks if t.current_revision_id is None]
    if revision and without:
        raise UsageError(f"these tasks have no revision {revision}: {', '.join(without)}")
    return tasks
