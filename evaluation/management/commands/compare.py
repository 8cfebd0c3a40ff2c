"""python manage.py compare RUN_A RUN_B [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from ...models import EvalRun
from ...reports import RunsNotComparable, compare_runs


class Command(BaseCommand):
    help = (
        "Compare two evaluation runs over the same benchmark version (or the same task revisions), task by task: "
        "the mean difference A - B with a paired bootstrap 95% interval and a sign-flip permutation p-value, the "
        "difference per category, and the tasks one run solves (mean at least A's pass threshold) and the other "
        "does not. With --json the last line is one JSON object."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_a", type=int, metavar="RUN_A")
        parser.add_argument("run_b", type=int, metavar="RUN_B")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the comparison as JSON last")

    def handle(self, *args, run_a, run_b, as_json, **_options):
        a, b = eval_run(run_a), eval_run(run_b)
        try:
            figures = compare_runs(a, b)
        except RunsNotComparable as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(figures, ensure_ascii=False))
            return
        out = self.stdout
        out.write(f"A: run #{a.pk} {a.name} ({a.status})")
        out.write(f"B: run #{b.pk} {b.name} ({b.status})")
        lo, hi = figures["ci"]
        ci = "-" if lo is None else f"[{lo:+.3f}, {hi:+.3f}]"
        difference = "-" if figures["mean_difference"] is None else f"{figures['mean_difference']:+.3f}"
        p_value = "-" if figures["p_value"] is None else f"{figures['p_value']:.4f}"
        out.write(
            f"mean difference A - B {difference} (95% CI {ci}), p = {p_value}, over "
            f"{figures['tasks_compared']} task(s) both scored"
        )
        if figures["tasks_not_compared"]:
            out.write(f"not compared (not scored by both): {', '.join(figures['tasks_not_compared'])}")
        width = max([len("category"), *map(len, figures["categories"])])
        out.write(f"{'category':<{width}}  A - B")
        for name, value in figures["categories"].items():
            out.write(f"{name:<{width}}  {value:+.3f}")
        out.write(f"solved by A only: {', '.join(figures['flipped']['a_only']) or 'none'}")
        out.write(f"solved by B only: {', '.join(figures['flipped']['b_only']) or 'none'}")


def eval_run(pk: int) -> EvalRun:
    run = EvalRun.objects.select_related("endpoint", "benchmark_version").filter(pk=pk).first()
    if run is None:
        raise CommandError(f"no evaluation run #{pk}")
    return run
