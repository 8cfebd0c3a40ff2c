"""python manage.py sanity_check [--all | --task ID ...] [--json] [--here [--workers N]] [--timeout S]"""

import json
import os
import time

from django.core.management.base import BaseCommand, CommandError

import jobs
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.services import cancel_job
from tasks.models import SanityReport, Task
from tasks.sanity import SANITY_BATCH_JOB, check_here

POLL_SECONDS = 0.5
PROGRESS_SECONDS = 5.0


class Command(BaseCommand):
    help = (
        "Sanity-check task checkers on the empty, initial and scaffold workspaces (and the reference solution): "
        "one background job per task, spread across the workers, and wait for them. With --json the last line "
        "is a JSON array, one object per task. Exits non-zero when a check could not run (no workers, a timeout, "
        "a sandbox that cannot start); crashed, over-lenient or unsolvable checkers are findings, not failures."
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--all", dest="all_tasks", action="store_true", help="every task that has a revision")
        which.add_argument("--task", dest="task_ids", nargs="+", metavar="ID", help="these tasks (external ids)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the reports as JSON last")
        parser.add_argument(
            "--here", action="store_true", help="run the checks in this process instead of on the job workers"
        )
        parser.add_argument(
            "--workers", type=int, default=os.cpu_count() or 1, help="with --here: checks at a time (default: CPUs)"
        )
        parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for all checks (3600)")
        parser.add_argument(
            "--start-timeout",
            type=float,
            default=20.0,
            help="seconds to wait for a worker to take the job before giving up (20)",
        )

    def handle(self, *args, task_ids, as_json, here, workers, timeout, start_timeout, **options):
        tasks = self._tasks(task_ids)
        if not tasks:
            raise CommandError("there are no tasks with a revision to check")
        if here:
            if workers < 1:
                raise CommandError("--workers must be at least 1")
            outcomes = self._run_here(tasks, workers)
        else:
            outcomes = self._run_on_workers(tasks, timeout=timeout, start_timeout=start_timeout)
        self._print(tasks, outcomes, as_json)

    def _tasks(self, task_ids) -> list[Task]:
        found = Task.objects.select_related("current_revision").order_by("external_id")
        if task_ids is None:
            return list(found.filter(current_revision__isnull=False))
        found = list(found.filter(external_id__in=task_ids))
        known = {t.external_id for t in found}
        missing = [i for i in dict.fromkeys(task_ids) if i not in known]
        if missing:
            raise CommandError(f"no such task: {', '.join(missing)}")
        empty = [t.external_id for t in found if t.current_revision_id is None]
        if empty:
            raise CommandError(f"these tasks have no revision to check: {', '.join(empty)}")
        return found

    # --- where the checks run ----------------------------------------------------------------------------------

    def _run_here(self, tasks: list[Task], workers: int) -> dict[int, dict]:
        """{revision id: report dict or {"error": ...}} from checks run in this process."""
        outcomes = {}
        last_note = time.monotonic()
        revisions = [t.current_revision for t in tasks]
        for revision, report, error in check_here(revisions, workers=workers):
            outcomes[revision.pk] = report.as_dict() if report else {"error": error}
            if time.monotonic() - last_note > PROGRESS_SECONDS:
                self._progress(len(outcomes), len(tasks))
                last_note = time.monotonic()
        return outcomes

    def _run_on_workers(self, tasks: list[Task], *, timeout: float, start_timeout: float) -> dict[int, dict]:
        started = time.monotonic()
        revision_ids = [t.current_revision_id for t in tasks]
        try:
            batch = jobs.enqueue(SANITY_BATCH_JOB, total=len(revision_ids), revision_ids=revision_ids)
        except JobEngineError as exc:
            raise CommandError(f"the job engine did not take the sanity checks: {exc}") from None
        while batch.status == JobRun.Status.QUEUED and time.monotonic() - started < min(start_timeout, timeout):
            time.sleep(POLL_SECONDS)
            batch.refresh_from_db()
        if batch.status == JobRun.Status.QUEUED:
            cancel_job(batch, user=None)  # so that a worker starting later does not run a stale request
            raise CommandError(
                f"no job worker took sanity check job #{batch.pk} within {min(start_timeout, timeout):g} s: are "
                "workers running? (`manage.py check_workers` tells; `manage.py qcluster` or a Celery worker on "
                "queues default,sandbox starts them). Or pass --here to run the checks in this process."
            )
        children = JobRun.objects.filter(parent=batch)
        last_note = 0.0
        while True:
            batch.refresh_from_db()
            finished = children.filter(status__in=JobRun.FINISHED).count()
            if batch.status == JobRun.Status.SUCCEEDED and finished >= len(revision_ids):
                break
            if batch.status in (JobRun.Status.FAILED, JobRun.Status.CANCELLED):
                first_line = batch.error.splitlines()[0] if batch.error else "no error recorded"
                raise CommandError(f"sanity check job #{batch.pk} {batch.status}: {first_line}")
            if time.monotonic() - started > timeout:
                break
            if time.monotonic() - last_note > PROGRESS_SECONDS:
                self._progress(finished, len(revision_ids))
                last_note = time.monotonic()
            time.sleep(POLL_SECONDS)
        return self._collect(batch, revision_ids, timeout)

    def _collect(self, batch: JobRun, revision_ids: list[int], timeout: float) -> dict[int, dict]:
        outcomes = {}
        reports = {
            r.job_run_id: r
            for r in SanityReport.objects.filter(job_run__parent=batch).select_related("revision__task")
        }
        for child in JobRun.objects.filter(parent=batch):
            revision_id = child.params.get("revision_id")
            if child.status == JobRun.Status.SUCCEEDED and child.pk in reports:
                outcomes[revision_id] = reports[child.pk].as_dict()
            elif child.is_finished:
                first_line = child.error.splitlines()[0] if child.error else child.status
                outcomes[revision_id] = {"error": f"job #{child.pk} {child.status}: {first_line}"}
            else:
                cancel_job(child, user=None)
                outcomes[revision_id] = {
                    "error": f"job #{child.pk} did not finish within {timeout:g} s (it was {child.status}; "
                    "cancelled): is a worker listening on the sandbox queue?"
                }
        for revision_id in revision_ids:
            outcomes.setdefault(revision_id, {"error": f"batch job #{batch.pk} queued no check for it in time"})
        return outcomes

    # --- output ------------------------------------------------------------------------------------------------

    def _progress(self, done: int, total: int) -> None:
        self.stderr.write(f"sanity: {done}/{total} checked")

    def _print(self, tasks: list[Task], outcomes: dict[int, dict], as_json: bool) -> None:
        rows = []
        for task in tasks:
            outcome = outcomes[task.current_revision_id]
            if "error" in outcome:
                outcome = {
                    "task": task.external_id,
                    "revision": task.current_revision.number,
                    "runs": {},
                    "crashed": None,
                    "over_lenient": None,
                    "solvable": None,
                    **outcome,
                }
            rows.append(outcome)
        errors = [row for row in rows if "error" in row]
        counts = {
            "crashed": sum(bool(r["crashed"]) for r in rows),
            "over-lenient": sum(bool(r["over_lenient"]) for r in rows),
            "unsolvable": sum(r["solvable"] is False for r in rows),
            "could not run": len(errors),
        }
        summary = f"checked {len(rows) - len(errors)} of {len(rows)} tasks: " + ", ".join(
            f"{n} {what}" for what, n in counts.items()
        )
        if not as_json:
            for row in rows:
                self.stdout.write(f"{row['task']} r{row['revision']}: {_verdict(row)}")
        self.stdout.write(summary)
        if as_json:
            self.stdout.write(json.dumps(rows, ensure_ascii=False))
        if errors:
            first = errors[0]
            raise CommandError(f"{len(errors)} check(s) could not run; first: {first['task']}: {first['error']}")


def _verdict(row: dict) -> str:
    if "error" in row:
        return f"could not run: {row['error']}"
    found = []
    for kind, run in row["runs"].items():
        if run["status"] != "ok":
            found.append(f"crashed on {kind} ({run['status']}: {run['reason']})")
    if row["over_lenient"]:
        scores = ", ".join(f"{kind} {score:g}" for kind, score in row["lazy_scores"].items())
        paying = ", ".join(f"{name}={value:g}" for name, value in row["paying_checks"].items())
        found.append(f"over-lenient (a lazy agent earns {scores}" + (f"; paying: {paying})" if paying else ")"))
    if row["solvable"] is False:
        found.append(f"solution scores {row['solution_run']['score']:g} ({row['solution_run']['status']})")
    verdict = "; ".join(found) or "passed"
    return verdict + (" (no reference solution)" if row["solvable"] is None else "")
