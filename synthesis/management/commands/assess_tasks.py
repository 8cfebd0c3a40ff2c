"""python manage.py assess_tasks (--all | --task ID ... | --tasks-from SELECTION) [--stages novelty,plausibility,...]
[--judge E] [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from jobs.cli import UsageError
from synthesis.qa_checks import STAGES, QAError, judge_endpoint, parse_stages, verdict_json
from synthesis.services import assess_tasks
from tasks.models import Task
from tasks.selection import add_task_arguments, tasks_of


class Command(BaseCommand):
    help = (
        "Quality assessment of catalog tasks (their current revisions): novelty against the catalog, and the "
        "judge's plausibility, difficulty, answer-leak, checker-alignment and rubric verdicts, each stored with "
        f"its reason (shown on the task page). Stages: {', '.join(STAGES)} (default: all). The judge is --judge, "
        "else the first enabled endpoint with the judge role. With --json the last line is "
        '{task id: {stage: {"verdict": "pass"|"fail"|"error", "reason", ...}}} (novelty also "nearest" and '
        '"similarity"). Exit status (jobs.cli): 1 when a stage could not judge (an "error" verdict), 2 when refused.'
    )

    def add_arguments(self, parser):
        add_task_arguments(parser, every="every task that has a revision")
        parser.add_argument("--stages", help=f"comma-separated, of {','.join(STAGES)} (default: all)")
        parser.add_argument("--judge", help="the judge endpoint's name (default: the first with the judge role)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the verdicts as JSON last")

    def handle(self, *args, stages, judge, as_json, **flags):
        chosen = tasks_of(flags, required="give --all, --task ID ... or --tasks-from SELECTION", revision="to assess")
        try:
            stages = parse_stages(stages)
            endpoint = judge_endpoint(judge, stages)
        except QAError as exc:
            raise UsageError(str(exc)) from None
        tasks = Task.objects.filter(current_revision__isnull=False).select_related(
            "current_revision", "scenario_category", "scenario_subcategory"
        )
        if chosen is not None:
            tasks = tasks.filter(pk__in=[t.pk for t in chosen])
        tasks = list(tasks.order_by("external_id"))

        def heard(task, rows):
            if not as_json:
                self.stdout.write(
                    f"{task.external_id}: " + "; ".join(f"{s} {r.verdict} ({r.reason})" for s, r in rows.items())
                )

        done = assess_tasks(tasks, stages, judge=endpoint, user=None, on_assessed=heard)
        report = {eid: {stage: verdict_json(row) for stage, row in rows.items()} for eid, rows in done.items()}
        errors = [
            (eid, s, v["reason"]) for eid, rows in report.items() for s, v in rows.items() if v["verdict"] == "error"
        ]
        failed = sum(1 for rows in report.values() if any(v["verdict"] == "fail" for v in rows.values()))
        self.stdout.write(
            f"assessed {len(report)} task{'' if len(report) == 1 else 's'} ({', '.join(stages)}"
            + (f"; judge {endpoint.name}" if endpoint else "")
            + f"): {failed} with a failing stage"
            + (f", {len(errors)} verdict(s) in error" if errors else "")
        )
        if as_json:
            self.stdout.write(json.dumps(report, ensure_ascii=False))
        if errors:
            eid, stage, reason = errors[0]
            raise CommandError(f"{len(errors)} stage verdict(s) could not be had; first: {eid} {stage}: {reason}")
