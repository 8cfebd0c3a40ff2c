"""python manage.py propose_candidates --benchmark NAME (--all | --task ID ... | --tasks-from SELECTION)
[--description TEXT] [--json]"""

import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand
from django.core.validators import validate_slug

from benchmarks.services import get_or_create_benchmark
from jobs.cli import UsageError
from review.services import propose_candidates
from tasks.models import Task
from tasks.selection import add_task_arguments, tasks_of


class Command(BaseCommand):
    help = (
        "Propose tasks as candidates of a benchmark (made when missing); each awaits diagnosis. Tasks already "
        "proposed to it are left as they are. Prints how many were proposed; with --json the last line is "
        '{"benchmark", "benchmark_created", "proposed", "existing", "skipped": [task ids without a revision]}. '
        "Exit status (jobs.cli): 2 when refused."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True, help="the benchmark's name (a slug)")
        parser.add_argument("--description", default="", help="description of a benchmark made now")
        add_task_arguments(parser, every="every ready task with a revision")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON last")

    def handle(self, *args, benchmark, description, as_json, **flags):
        tasks = tasks_of(flags, required="give --all, --task ID ... or --tasks-from SELECTION")
        if tasks is None:
            tasks = list(Task.objects.filter(status=Task.Status.READY, current_revision__isnull=False))
        if not tasks:
            raise UsageError("there are no tasks to propose")
        try:
            validate_slug(benchmark)
        except ValidationError:
            raise UsageError(f"benchmark name {benchmark!r} must be letters, digits, '-' or '_'") from None
        bench, made = get_or_create_benchmark(benchmark, user=None, description=description)
        result = propose_candidates(bench, tasks, user=None)
        if made:
            self.stdout.write(f"created benchmark {bench.name}")
        skipped = (
            f", {len(result.skipped)} skipped (no revision: {', '.join(result.skipped)})" if result.skipped else ""
        )
        self.stdout.write(f"{bench.name}: proposed {result.created}, already candidates {result.existing}{skipped}")
        if as_json:
            report = {
                "benchmark": bench.name,
                "benchmark_created": made,
                "proposed": result.created,
                "existing": result.existing,
                "skipped": result.skipped,
            }
            self.stdout.write(json.dumps(report))
