"""python manage.py export_tasks OUT [--format clawgym|clawgym-jsonl] [--task ID ... | --tasks-from SELECTION]
[--json]"""

import json

from django.core.management.base import BaseCommand

from jobs.cli import UsageError
from tasks.exporting import ExportError, export_tasks
from tasks.formats import EXPORT_FORMATS, FormatError
from tasks.selection import add_task_arguments, tasks_of


class Command(BaseCommand):
    help = (
        "Export the current revision of tasks: to a new or empty folder of task folders (clawgym) or to a "
        "file (clawgym-jsonl). All tasks unless --task or --tasks-from names some. With --json the last line is "
        '{"exported", "out", "format"}. Exit status (jobs.cli): 2 when refused.'
    )

    def add_arguments(self, parser):
        parser.add_argument("out")
        parser.add_argument(
            "--format", dest="fmt", default="clawgym", help=f"one of {', '.join(EXPORT_FORMATS)} (default: clawgym)"
        )
        add_task_arguments(parser, what="task ids to export")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON last")

    def handle(self, *args, out, fmt="clawgym", as_json=False, **flags):
        chosen = tasks_of(flags, revision="to export")
        try:
            count = export_tasks(out, fmt=fmt, task_ids=None if chosen is None else [t.external_id for t in chosen])
        except (ExportError, FormatError) as exc:
            raise UsageError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps({"exported": count, "out": str(out), "format": fmt}))
        else:
            self.stdout.write(self.style.SUCCESS(f"exported {count} task{'' if count == 1 else 's'} to {out}"))
