"""python manage.py scan_run RUN [--scanner NAME ...] [--judge ENDPOINT] [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from jobs.cli import UsageError

from ...models import EvalRun
from ...scanners import SCANNERS
from ...services.scans import ScanRefused, chosen_scanners, judge_by_name, scan_json, scan_run


class Command(BaseCommand):
    help = (
        "Scan, in this process, an evaluation run's finished rollouts for what the agents did wrong, from what the "
        "proxy and the sandbox recorded, and store the findings (replacing the run's earlier findings of the same "
        "scanners). Prints the counts per scanner and each finding (rollout, transcript step, model call, evidence). "
        "With --json the last line is one JSON object. Exit status (jobs.cli): 1 when a scanner could not scan a "
        "rollout (its judge failed), 2 when refused."
    )

    def add_arguments(self, parser):
        parser.add_argument("run", type=int, metavar="RUN", help="the evaluation run's id")
        parser.add_argument(
            "--scanner",
            action="append",
            dest="scanners",
            metavar="NAME",
            help=f"a scanner to run (repeatable; 'all' for every one): {', '.join(SCANNERS)}. Default: every "
            "scanner but the LLM-judged one",
        )
        parser.add_argument(
            "--judge",
            metavar="ENDPOINT",
            help="the model endpoint the judge scanner asks (default: the first enabled one with the judge role)",
        )
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON last")

    def handle(self, *args, run, scanners, judge, as_json, **options):
        evaluation_run = EvalRun.objects.select_related("endpoint").filter(pk=run).first()
        if evaluation_run is None:
            raise UsageError(f"no evaluation run #{run}")
        try:
            names = chosen_scanners(scanners)
            endpoint = judge_by_name(judge)
        except ScanRefused as exc:
            raise UsageError(str(exc)) from None
        self.stderr.write(f"scanning run #{run} with {', '.join(names)}")
        scan = scan_run(
            evaluation_run,
            user=None,
            scanners=names,
            judge=endpoint,
            on_progress=lambda done, total: self.stderr.write(f"scanned {done} of {total} rollout(s)"),
        )
        result = scan_json(evaluation_run)
        if as_json:
            self.stdout.write(json.dumps(result, ensure_ascii=False))
        else:
            self.stdout.write(f"{scan.rollouts} rollout(s) scanned, {scan.findings} finding(s)")
            for name in result["scanned"]:
                flagged = result["rollouts_flagged"][name]
                self.stdout.write(f"{name}: {result['counts'][name]} finding(s) in {flagged} rollout(s)")
            for finding in result["findings"]:
                where = f"step {finding['step']}" if finding["step"] is not None else "the workspace"
                self.stdout.write(
                    f"  rollout #{finding['rollout']} ({finding['task']}) {finding['scanner']} at {where}: "
                    f"{finding['summary']}"
                )
        if scan.errors:
            lines = "; ".join(
                f"{e['scanner']} on {'rollout #' + str(e['rollout']) if e['rollout'] else 'every rollout'}: "
                f"{e['error']}"
                for e in scan.errors
            )
            raise CommandError(f"{len(scan.errors)} scan(s) could not be done: {lines}")
