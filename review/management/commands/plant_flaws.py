"""python manage.py plant_flaws --benchmark NAME --kinds KIND[,KIND...] --count N [--seed S] [--by USERNAME]
[--no-diagnose] [--json]"""

import json

from django.core.management.base import BaseCommand

from accounts.roles import admin_named
from benchmarks.models import Benchmark
from jobs.cli import UsageError
from jobs.engine import JobEngineError
from review.models import PlantedFlaw
from review.planting import MAX_PLANTS, PlantError, plant_flaws


class Command(BaseCommand):
    help = (
        "Plant known flaws into copies of a benchmark's accepted candidates, to learn whether its review works "
        "(as the benchmark's planted-flaws page and POST /api/planted-flaws/ do; an admin's act: --by names the "
        f"admin, default admin). Kinds: {', '.join(PlantedFlaw.Kind.values)}, planted in turn; at most "
        f"{MAX_PLANTS} at a time. Each copy is proposed to the benchmark unmarked, its sanity check and (unless "
        "--no-diagnose) its diagnosis queued. With --json the last line is "
        '{"benchmark", "plants": [{"id", "candidate", "task", "kind", "component", "path", "change", '
        '"source_task", "source_revision"}]}. Exit status (jobs.cli): 2 when refused (no such benchmark or admin, '
        "an unknown kind, nothing accepted to copy, no candidate able to carry a kind: then nothing is planted)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True, help="the benchmark's name")
        parser.add_argument("--kinds", required=True, help="flaw kinds, separated by commas")
        parser.add_argument("--count", type=int, default=1, help=f"how many flaws to plant (1 to {MAX_PLANTS})")
        parser.add_argument("--seed", type=int, default=None, help="the same seed plants the same flaws")
        parser.add_argument("--by", default="admin", metavar="USERNAME", help="the admin who plants (default admin)")
        parser.add_argument("--no-diagnose", dest="diagnose", action="store_false", help="do not queue diagnoses")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the plants as JSON last")

    def handle(self, *args, benchmark, kinds, count, seed, by, diagnose, as_json, **options):
        bench = Benchmark.objects.filter(name=benchmark).first()
        if bench is None:
            raise UsageError(f"no benchmark {benchmark!r}")
        if seed is not None and not 0 <= seed < 2**63:
            raise UsageError(f"--seed must be between 0 and 2**63 - 1, not {seed}")
        user = admin_named(by, error=UsageError)
        try:
            plants = plant_flaws(bench, kinds, count, user=user, seed=seed, diagnose=diagnose)
        except PlantError as exc:
            raise UsageError(str(exc)) from None
        except JobEngineError as exc:
            self.stderr.write(f"the flaws were planted but their checks did not start: {exc}")
            plants = list(PlantedFlaw.objects.filter(benchmark=bench).order_by("-id")[:count])[::-1]
        rows = []
        for plant in plants:
            source = plant.source_candidate.task.external_id if plant.source_candidate else None
            rows.append(
                {
                    "id": plant.pk,
                    "candidate": plant.candidate_id,
                    "task": plant.candidate.task.external_id,
                    "kind": plant.kind,
                    "component": plant.component,
                    "path": plant.path,
                    "change": plant.change,
                    "source_task": source,
                    "source_revision": plant.source_revision.number if plant.source_revision else None,
                }
            )
            self.stdout.write(f"{plant.kind}: {rows[-1]['task']} (copy of {source}): {plant.change}")
        if as_json:
            self.stdout.write(json.dumps({"benchmark": bench.name, "plants": rows}))
