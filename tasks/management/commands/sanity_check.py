"""python manage.py sanity_check (--all | --task ID ... | --tasks-from SELECTION) [--json] [--here [--workers N]]
[--timeout S] [--start-timeout S]"""

import json
import os
import time

from django.core.management.base import BaseCommand, CommandError

import jobs
from jobs.cli import UsageError, engine_refused
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.services import cancel_job
from jobs.waiting import NotFinished, NoWorker, Work, add_wait_arguments, wait_for
from tasks.job_kinds import SANITY_BATCH_JOB
from tasks.models import SanityReport, Task
from tasks.sanity import check_here, solvability_of
from tasks.selection import add_task_arguments, tasks_of

PROGRESS_SECONDS = 5.0


class Command(BaseCommand):
    help = (
        "Sanity-check task checkers on the empty, initial and scaffold workspaces, the workspaces of the moves lazy "
        "agents make, and the reference solution: one background job per task, spread across the workers, and wait "
        "for them. With --json the last line is a JSON array, one object per task (also when checks could not run), "
        "with the lazy workspaces tried, the highest lazy score and the workspace that earned it, and the proof "
        "that the revision can score full marks. Crashed, over-lenient or "
        "unsolvable checkers are findings, not failures. Exit status (jobs.cli): 1 when a check could not run (a "
        "timeout, a sandbox that cannot start), 2 when refused, 3 when no worker took the job."
    )

    def add_arguments(self, parser):
        add_task_arguments(parser, every="every task that has a revision")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the reports as JSON last")
        add_wait_arguments(parser, timeout=3600.0, here="run the checks in this process instead of on the job workers")
        parser.add_argument(
            "--workers", type=int, default=os.cpu_count() or 1, help="with --here: checks at a time (default: CPUs)"
        )

    def handle(self, *args, as_json, here, workers, timeout, start_timeout, **flags):
        chosen = tasks_of(flags, required="give --all, --task ID ... or --tasks-from SELECTION", revision="to check")
        if chosen is None:
            chosen = Task.objects.filter(current_revision__isnull=False).select_related("current_revision")
        tasks = sorted(chosen, key=lambda t: t.external_id)
        if not tasks:
            raise UsageError("there are no tasks with a revision to check")
        if here and workers < 1:
            raise UsageError("--workers must be at least 1")
        try:
            outcomes = self._run_here(tasks, workers) if here else self._run_on_workers(tasks, timeout, start_timeout)
        except NoWorker:
            self._print(
                tasks, {t.current_revision_id: {"error": "no job worker took the check"} for t in tasks}, as_json
            )
            raise
        errors = self._print(tasks, outcomes, as_json)
        if errors:
            first = errors[0]
            raise CommandError(f"{len(errors)} check(s) could not run; first: {first['task']}: {first['error']}")

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

    def _run_on_workers(self, tasks: list[Task], timeout: float, start_timeout: float) -> dict[int, dict]:
        revision_ids = [t.current_revision_id for t in tasks]
        try:
            batch = jobs.enqueue(SANITY_BATCH_JOB, total=len(revision_ids), revision_ids=revision_ids)
        except JobEngineError as exc:
            raise engine_refused("the sanity checks", exc) from None
        children = JobRun.objects.filter(parent=batch)

        def finished() -> bool:
            batch.refresh_from_db()
            if batch.status in (JobRun.Status.FAILED, JobRun.Status.CANCELLED):
                return True
            return batch.status == JobRun.Status.SUCCEEDED and children.filter(
                status__in=JobRun.FINISHED
            ).count() >= len(revision_ids)

        try:
            wait_for(
                Work(
                    what=f"sanity check job #{batch.pk}",
                    queues=("default", "sandbox"),
                    finished=finished,
                    taken=lambda: batch.status != JobRun.Status.QUEUED,
                    cancel=lambda: cancel_job(batch, user=None),  # so that a worker starting later does not run it
                    progress=lambda: self._progress(children.filter(status__in=JobRun.FINISHED).count(), len(tasks)),
                    progress_every=PROGRESS_SECONDS,
                ),
                timeout=timeout,
                start_timeout=start_timeout,
            )
        except NotFinished:
            pass  # the checks still waiting are cancelled and reported as not run
        return self._collect(batch, revision_ids, timeout)

    def _collect(self, batch: JobRun, revision_ids: list[int], timeout: float) -> dict[int, dict]:
        """{revision id: report dict or {"error": ...}}; checks still waiting are cancelled."""
        batch.refresh_from_db()
        batch_ended = ""  # why checks it did not finish could not run, when it ended failed or cancelled
        if batch.status in (JobRun.Status.FAILED, JobRun.Status.CANCELLED):
            first_line = batch.error.splitlines()[0] if batch.error else "no error recorded"
            batch_ended = f"sanity check job #{batch.pk} {batch.status}: {first_line}"
        outcomes = {}
        reports = {
            r.job_run_id: r for r in SanityReport.objects.filter(job_run__parent=batch).select_related("revision__task")
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
                    "error": f"job #{child.pk} cancelled: {batch_ended}"
                    if batch_ended
                    else f"job #{child.pk} did not finish within {timeout:g} s (it was {child.status}; cancelled): is a "
                    "worker listening on the sandbox queue?"
                }
        for revision_id in revision_ids:
            outcomes.setdefault(
                revision_id, {"error": batch_ended or f"batch job #{batch.pk} queued no check for it in time"}
            )
        return outcomes

    # --- output ------------------------------------------------------------------------------------------------

    def _progress(self, done: int, total: int) -> None:
        self.stderr.write(f"sanity: {done}/{total} checked")

    def _print(self, tasks: list[Task], outcomes: dict[int, dict], as_json: bool) -> list[dict]:
        """Print the rows; returns those of checks that could not run."""
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
            outcome["solvability"] = solvability_of(task.current_revision)
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
        return errors


def _verdict(row: dict) -> str:
    if "error" in row:
        return f"could not run: {row['error']}"
    found = []
    for kind, run in row["runs"].items():
        if run["status"] != "ok":
            found.append(f"crashed on {kind} ({run['status']}: {run['reason']})")
    if row["over_lenient"]:
        best = row["lazy_best"] or {}
        scores = ", ".join(f"{kind} {score:g}" for kind, score in row["lazy_scores"].items())
        paying = ", ".join(f"{name}={value:g}" for name, value in row["paying_checks"].items())
        files = ", ".join(f["path"] for f in best.get("files", [])) or "no files"
        found.append(
            f"over-lenient (a lazy agent earns {row['lazy_score']:g} on the {best.get('workspace')} workspace "
            f"[{files}]; {scores}" + (f"; paying: {paying})" if paying else ")")
        )
    if row["solvable"] is False:
        found.append(f"solution scores {row['solution_run']['score']:g} ({row['solution_run']['status']})")
    verdict = "; ".join(found) or "passed"
    verdict += " (no reference solution)" if row["solvable"] is None else ""
    proof = row.get("solvability") or {}
    return verdict + ("" if proof.get("proven") else "; solvability not proven")
