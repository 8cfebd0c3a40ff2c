"""python manage.py assess_tasks (--all | --task ID ...) [--stages novelty,plausibility,...] [--judge E] [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from synthesis.qa import STAGES, QAError, assess_tasks, judge_endpoint, parse_stages, verdict_json
from tasks.models import Task


class Command(BaseCommand):
    help = (
        "Quality assessment of catalog tasks (their current revisions): novelty against the catalog, and the "
        "judge's plausibility, difficulty, answer-leak, checker-alignment and rubric verdicts, each stored with "
        f"its reason (shown on the task page). Stages: {', '.join(STAGES)} (default: all). The judge is --judge, "
        "else the first enabled endpoint with the judge role. With --json the last line is "
        '{task id: {stage: {"verdict": "pass"|"fail"|"error", "reason", ...}}} (novelty also "nearest" and '
        '"similarity"). Exits non-zero when a stage could not judge (an "error" verdict).'
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--all", dest="all_tasks", action="store_true", help="every task that has a revision")
        which.add_argument("--task", dest="task_ids", nargs="+", metavar="ID", help="these tasks (external ids)")
        parser.add_argument("--stages", help=f"comma-separated, of {','.join(STAGES)} (default: all)")
        parser.add_argument("--judge", help="the judge endpoint's name (default: the first with the judge role)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the verdicts as JSON last")

    def handle(self, *args, all_tasks, task_ids, stages, judge, as_json, **options):
        try:
            stages = parse_stages(stages)
            endpoint = judge_endpoint(judge, stages)
        except QAError as exc:
            raise CommandError(str(exc)) from None
        tasks = self._tasks(all_tasks, task_ids)

        def heard(task, rows):
            if not as_json:
                self.stdout.write(
                    f"{task.external_id}: " + "; ".join(f"{s} {r.verdict} ({r.reason})" for s, r in rows.items())
                )

        done = assess_tasks(tasks, stages, judge=endpoint, on_assessed=heard)
        report = {eid: {stage: verdict_json(row) for stage, row in rows.items()} for eid, rows in done.items()}
        errors = [
            (eid, s, v["reason"]) for eid, rows in report.items() for s, v in rows.items() if v["verdict"] == "error"
        ]
        failed = sum(1 for rows in report.values() if any(v["verdict"] == "fail" for v in rows.values()))
        self.stdout.write(
            f"assessed {len(report)} task{'' if len(report) == 1 else 's'} ({', '.join(stages)}"
            + (f"; judge {endpoint.name}" if endpoint else "") + f"): {failed} with a failing stage"
            + (f", {len(errors)} verdict(s) in error" if errors else "")
        )  # fmt: skip
        if as_json:
            self.stdout.write(json.dumps(report, ensure_ascii=False))
        if errors:
            eid, stage, reason = errors[0]
            raise CommandError(f"{len(errors)} stage verdict(s) could not be had; first: {eid} {stage}: {reason}")

    def _tasks(self, all_tasks: bool, task_ids) -> list[Task]:
        found = Task.objects.filter(current_revision__isnull=False).select_related(
            "current_revision", "scenario_category", "scenario_subcategory"
        )
        if all_tasks:
            return list(found.order_by("external_id"))
        tasks = list(Task.objects.filter(external_id__in=task_ids).order_by("external_id"))
        known = {t.external_id for t in tasks}
        missing = [i for i in dict.fromkeys(task_ids) if i not in known]
        if missing:
            raise CommandError(f"no such task: {', '.join(missing)}")
        empty = [t.external_id for t in tasks if t.current_revision_id is None]
        if empty:
            raise CommandError(f"these tasks have no revision to assess: {', '.join(empty)}")
        return list(found.filter(external_id__in=task_ids).order_by("external_id"))
