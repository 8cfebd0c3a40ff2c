"""python manage.py diagnose (--benchmark NAME [--again] | --candidate ID ...) [--json] [--here] [--timeout S]
[--start-timeout S]"""

import json

from django.core.management.base import BaseCommand, CommandError

from benchmarks.models import Benchmark
from jobs.cli import UsageError, engine_refused
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.services import cancel_job
from jobs.waiting import NotFinished, NoWorker, Work, add_wait_arguments, wait_for
from review.diagnosis import DiagnosisFailed, diagnose_candidate
from review.models import BenchmarkCandidate
from review.services import start_diagnosis

PROGRESS_SECONDS = 5.0


class Command(BaseCommand):
    help = (
        "Diagnose every candidate of a benchmark that awaits diagnosis (--again: every open one, diagnosed or not; "
        "--candidate: the named ones, again when diagnosed already, as the candidate page's Re-diagnose does): one "
        "review.diagnose job each, on the job workers, and wait for them (--here: in this process, one after "
        "another). With --json the last line is a "
        "JSON array, one object per candidate (also when diagnoses failed). Exit status (jobs.cli): 1 when a "
        "diagnosis failed, 2 when refused, 3 when no worker took the jobs."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--benchmark", help="the benchmark whose candidates to diagnose (needed without --candidate)"
        )
        parser.add_argument(
            "--candidate",
            dest="candidate_ids",
            type=int,
            action="append",
            default=[],
            metavar="ID",
            help="diagnose this candidate, whatever its state (repeatable; with --benchmark it must be one of its)",
        )
        parser.add_argument(
            "--again",
            action="store_true",
            help="with --benchmark: diagnose every open candidate again, not only those awaiting their first diagnosis",
        )
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the outcomes as JSON last")
        add_wait_arguments(parser, timeout=3600.0, here="diagnose in this process instead of on the job workers")

    def handle(self, *args, benchmark, candidate_ids, again, as_json, here, timeout, start_timeout, **options):
        candidates, label = self._candidates(benchmark, candidate_ids, again)
        if not candidates:
            self.stdout.write(f"{label}: no candidate {'is open' if again else 'awaits diagnosis'}")
            if as_json:
                self.stdout.write("[]")
            return
        try:
            outcomes = self._run_here(candidates) if here else self._run_on_workers(candidates, timeout, start_timeout)
        except NoWorker:
            self._print(
                label,
                [{"task": c.task.external_id, "candidate": c.pk, "error": "no job worker took it"} for c in candidates],
                as_json,
            )
            raise
        rows = [{"task": c.task.external_id, "candidate": c.pk, **outcomes[c.pk]} for c in candidates]
        failed = self._print(label, rows, as_json)
        if failed:
            raise CommandError(f"{len(failed)} diagnosis(es) failed; first: {failed[0]['task']}: {failed[0]['error']}")

    def _candidates(self, benchmark: str | None, ids: list[int], again: bool) -> tuple[list, str]:
        """(the candidates to diagnose, what to call them in the summary line)."""
        if again and benchmark is None:
            raise UsageError("--again needs --benchmark")
        if again and ids:
            raise UsageError("--again diagnoses a whole benchmark again: leave it out with --candidate")
        if benchmark is None and not ids:
            raise UsageError("name a benchmark (--benchmark) or candidates (--candidate)")
        found = BenchmarkCandidate.objects.select_related("task__current_revision").order_by("task__external_id")
        label = "the named candidates"
        if benchmark is not None:
            bench = Benchmark.objects.filter(name=benchmark).first()
            if bench is None:
                raise UsageError(f"no benchmark is named {benchmark!r} (propose_candidates makes it)")
            found, label = found.filter(benchmark=bench), bench.name
        if ids:
            found = found.filter(pk__in=ids)
            missing = sorted(set(ids) - {c.pk for c in found})
            if missing:
                where = f" in {label}" if benchmark is not None else ""
                raise UsageError(f"no candidate {', '.join(map(str, missing))}{where}")
        elif again:
            found = found.filter(status__in=BenchmarkCandidate.OPEN)
        else:
            found = found.filter(status=BenchmarkCandidate.Status.AWAITING_DIAGNOSIS)
        return list(found), label

    def _print(self, label: str, rows: list[dict], as_json: bool) -> list[dict]:
        """Print the rows; returns those of failed diagnoses."""
        failed = [r for r in rows if "error" in r]
        if not as_json:
            for row in rows:
                what = f"failed: {row['error']}" if "error" in row else f"{row['issues']} issues"
                self.stdout.write(f"{row['task']}: {what}")
        self.stdout.write(f"{label}: diagnosed {len(rows) - len(failed)} of {len(rows)} candidates")
        if as_json:
            self.stdout.write(json.dumps(rows, ensure_ascii=False))
        return failed

    def _run_here(self, candidates) -> dict[int, dict]:
        outcomes = {}
        for candidate in candidates:
            try:
                diagnosis = diagnose_candidate(candidate)
            except DiagnosisFailed as exc:
                outcomes[candidate.pk] = {"error": str(exc)}
            else:
                outcomes[candidate.pk] = {"diagnosis": diagnosis.pk, "issues": diagnosis.issues.count()}
        return outcomes

    def _run_on_workers(self, candidates, timeout: float, start_timeout: float) -> dict[int, dict]:
        try:
            runs = start_diagnosis(candidates, user=None)
        except JobEngineError as exc:
            raise engine_refused("the diagnoses", exc) from None
        by_run = {run.pk: c for run, c in zip(runs, candidates)}
        mine = JobRun.objects.filter(pk__in=by_run)

        def cancel() -> None:
            for run in runs:
                cancel_job(run, user=None)  # so that a worker starting later does not run a stale request

        try:
            wait_for(
                Work(
                    what="the diagnosis jobs",
                    queues=("default",),
                    cancel=cancel,
                    finished=lambda: not mine.exclude(status__in=JobRun.FINISHED).exists(),
                    taken=lambda: mine.exclude(status=JobRun.Status.QUEUED).exists(),
                    progress=lambda: self.stderr.write(
                        f"diagnose: {mine.filter(status__in=JobRun.FINISHED).count()}/{len(runs)} done"
                    ),
                    progress_every=PROGRESS_SECONDS,
                ),
                timeout=timeout,
                start_timeout=start_timeout,
            )
        except NotFinished:
            pass  # the diagnoses still waiting are cancelled and reported as failed
        outcomes = {}
        for run in JobRun.objects.filter(pk__in=by_run):
            candidate = by_run[run.pk]
            if run.status == JobRun.Status.SUCCEEDED:
                outcomes[candidate.pk] = {
                    "diagnosis": run.result["diagnosis"],
                    "issues": sum(run.result["issues"].values()),
                }
            elif run.is_finished:
                candidate.refresh_from_db()
                error = candidate.diagnosis_error or (run.error.splitlines() or [run.status])[0]
                outcomes[candidate.pk] = {"error": f"job #{run.pk} {run.status}: {error}"}
            else:
                cancel_job(run, user=None)
                outcomes[candidate.pk] = {"error": f"job #{run.pk} did not finish within {timeout:g} s (cancelled)"}
        return outcomes
