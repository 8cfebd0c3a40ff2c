"""python manage.py evaluate_checkpoints RUN --benchmark NAME [--version N] [--harness H] [--no-base] [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from evaluation.harnesses import HARNESSES
from evaluation.management.commands.evaluate import benchmark_version

from ...evaluations import EvaluationError, evaluate_checkpoints
from ...models import TrainingRun


class Command(BaseCommand):
    help = (
        "Serve every checkpoint of a training run (and its base model) on this machine, waiting for each server, and "
        "start one evaluation run per endpoint on a benchmark version (the newest without --version); checkpoints "
        "already evaluated on it are not started again. The run page and the API queue the same work as the "
        "training.evaluate_checkpoints job on a gpu worker instead. The evaluation runs go on on the sandbox "
        "workers; the run page charts score per checkpoint against the base model."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version is the benchmark version's number here, not Django's version.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("run", type=int)
        parser.add_argument("--benchmark", required=True)
        parser.add_argument("--version", type=int)
        parser.add_argument("--harness", choices=sorted(HARNESSES))
        parser.add_argument("--no-base", action="store_true", help="do not evaluate the base model")
        parser.add_argument("--json", dest="as_json", action="store_true")

    def handle(self, *args, run, benchmark, version, harness, no_base, as_json, **_options):
        training_run = TrainingRun.objects.filter(pk=run).first()
        if training_run is None:
            raise CommandError(f"no training run #{run}")
        found = benchmark_version(benchmark, version)
        try:
            started = evaluate_checkpoints(training_run, found, user=None, harness=harness, include_base=not no_base)
        except EvaluationError as exc:
            raise CommandError(str(exc)) from None
        rows = [{"eval_run": e.pk, "endpoint": e.endpoint.name} for e in started]
        for row in rows:
            self.stderr.write(f"evaluation run #{row['eval_run']}: {row['endpoint']}")
        if as_json:
            self.stdout.write(json.dumps({"run": training_run.pk, "evaluations": rows}))
