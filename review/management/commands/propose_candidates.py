"""python manage.py propose_candidates --benchmark NAME (--all | --task ID ...) [--description TEXT]"""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug

from benchmarks.services import get_or_create_benchmark
from review.services import propose_candidates
from tasks.models import Task


class Command(BaseCommand):
    help = (
        "Propose tasks as candidates of a benchmark (made when missing); each awaits diagnosis. Tasks already "
        "proposed to it are left as they are. Prints how many were proposed."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True, help="the benchmark's name (a slug)")
        parser.add_argument("--description", default="", help="description of a benchmark made now")
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--all", dest="all_tasks", action="store_true", help="every ready task with a revision")
        which.add_argument("--task", dest="task_ids", nargs="+", metavar="ID", help="these tasks (external ids)")

    def handle(self, *args, benchmark, description, all_tasks, task_ids, **options):
        if task_ids is None:
            tasks = list(Task.objects.filter(status=Task.Status.READY, current_revision__isnull=False))
        else:
            tasks = list(Task.objects.filter(external_id__in=task_ids))
            missing = sorted(set(task_ids) - {t.external_id for t in tasks})
            if missing:
                raise CommandError(f"no such task: {', '.join(missing)}")
        if not tasks:
            raise CommandError("there are no tasks to propose")
        try:
            validate_slug(benchmark)
        except ValidationError:
            raise CommandError(f"benchmark name {benchmark!r} must be letters, digits, '-' or '_'") from None
        bench, made = get_or_create_benchmark(benchmark, user=None, description=description)
        result = propose_candidates(bench, tasks, user=None)
        if made:
            self.stdout.write(f"created benchmark {bench.name}")
        skipped = f", {len(result.skipped)} skipped (no revision: {', '.join(result.skipped)})" if result.skipped else ""
        self.stdout.write(f"{bench.name}: proposed {result.created}, already candidates {result.existing}{skipped}")
