"""python manage.py export_tasks OUT [--format clawgym|clawgym-jsonl] [--task ID ...]"""

from django.core.management.base import BaseCommand, CommandError

from tasks.exporting import ExportError, export_tasks
from tasks.formats import EXPORT_FORMATS, FormatError


class Command(BaseCommand):
    help = (
        "Export the current revision of tasks: to a new or empty folder of task folders (clawgym) or to a "
        "file (clawgym-jsonl). All tasks unless --task names some."
    )

    def add_arguments(self, parser):
        parser.add_argument("out")
        parser.add_argument(
            "--format", dest="fmt", default="clawgym", help=f"one of {', '.join(EXPORT_FORMATS)} (default: clawgym)"
        )
        parser.add_argument(
            "--task", dest="task_ids", action="extend", nargs="+", metavar="ID", help="task ids to export"
        )

    def handle(self, *args, out, fmt="clawgym", task_ids=None, **options):
        try:
            count = export_tasks(out, fmt=fmt, task_ids=task_ids)
        except (ExportError, FormatError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(f"exported {count} task{'' if count == 1 else 's'} to {out}"))
