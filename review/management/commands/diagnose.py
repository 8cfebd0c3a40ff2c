"""python manage.py diagnose --benchmark NAME [--json] [--here] [--timeout S]"""

import json
import time

from django.core.management.base import BaseCommand, CommandError

from benchmarks.models import Benchmark
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.services import cancel_job
from review.diagnosis import DiagnosisFailed, diagnose_candidate
from review.models import BenchmarkCandidate
from review.services import start_diagnosis

POLL_SECONDS = 0.5
PROGRESS_SECONDS = 5.0


class Command(BaseCommand):
    help = (
        "Diagnose every candidate of a benchmark that awaits diagnosis: one review.diagnose job each, on the job "
        "workers, and wait for them (--here: in this process, one after another). With --json the last line is a "
        "JSON array, one object per candidate. Exits non-zero when a diagnosis failed."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True)
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the outcomes as JSON last")
        parser.add_argument("--here", action="store_true", help="diagnose in this process instead of on the workers")
        parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for all jobs (3600)")
        parser.add_argument(
            "--start-timeout", type=float, default=20.0,
            help="seconds to wait for a worker to take the first job before giving up (20)",
        )  # fmt: skip

    def handle(self, *args, benchmark, as_json, here, timeout, start_timeout, **options):
        bench = Benchmark.objects.filter(name=benchmark).first()
        if bench is None:
            raise CommandError(f"no benchmark is named {benchmark!r} (propose_candidates makes it)")
        candidates = list(
            bench.candidates.filter(status=BenchmarkCandidate.Status.AWAITING_DIAGNOSIS)
            .select_related("task__current_revision")
            .order_by("task__external_id")
        )
        if not candidates:
            self.stdout.write(f"{bench.name}: no candidate awaits diagnosis")
            if as_json:
                self.stdout.write("[]")
            return
        outcomes = self._run_here(candidates) if here else self._run_on_workers(candidates, timeout, start_timeout)
        rows = [{"task": c.task.external_id, "candidate": c.pk, **outcomes[c.pk]} for c in candidates]
        failed = [r for r in rows if "error" in r]
        if not as_json:
            for row in rows:
                what = f"failed: {row['error']}" if "error" in row else f"{row['issues']} issues"
                self.stdout.write(f"{row['task']}: {what}")
        self.stdout.write(f"{bench.name}: diagnosed {len(rows) - len(failed)} of {len(rows)} candidates")
        if as_json:
            self.stdout.write(json.dumps(rows, ensure_ascii=False))
        if failed:
            raise CommandError(f"{len(failed)} diagnosis(es) failed; first: {failed[0]['task']}: {failed[0]['error']}")

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
        started = time.monotonic()
        try:
            runs = start_diagnosis(candidates, user=None)
        except JobEngineError as exc:
            raise CommandError(f"the job engine did not take the diagnoses: {exc}") from None
        pending = {run.pk: run for run in runs}
        by_run = {run.pk: c for run, c in zip(runs, candidates)}
        last_note = time.monotonic()
        while pending and time.monotonic() - started < timeout:
            finished = JobRun.objects.filter(pk__in=pending, status__in=JobRun.FINISHED).values_list("pk", flat=True)
            for pk in finished:
                del pending[pk]
            waiting = JobRun.objects.filter(pk__in=[r.pk for r in runs], status=JobRun.Status.QUEUED)
            if len(waiting) == len(runs) and time.monotonic() - started > min(start_timeout, timeout):
                for run in runs:
                    cancel_job(run, user=None)  # so that a worker starting later does not run a stale request
                raise CommandError(
                    f"no job worker took the diagnosis jobs within {min(start_timeout, timeout):g} s: are workers "
                    "running? (`manage.py check_workers` tells). Or pass --here to diagnose in this process."
                )
            if time.monotonic() - last_note > PROGRESS_SECONDS:
                self.stderr.write(f"diagnose: {len(runs) - len(pending)}/{len(runs)} done")
                last_note = time.monotonic()
            if pending:
                time.sleep(POLL_SECONDS)
        outcomes = {}
        for run in JobRun.objects.filter(pk__in=by_run):
            candidate = by_run[run.pk]
            if run.status == JobRun.Status.SUCCEEDED:
                outcomes[candidate.pk] = {"diagnosis": run.result["diagnosis"], "issues": sum(run.result["issues"].values())}
            elif run.is_finished:
                candidate.refresh_from_db()
                error = candidate.diagnosis_error or (run.error.splitlines() or [run.status])[0]
                outcomes[candidate.pk] = {"error": f"job #{run.pk} {run.status}: {error}"}
            else:
                cancel_job(run, user=None)
                outcomes[candidate.pk] = {"error": f"job #{run.pk} did not finish within {timeout:g} s (cancelled)"}
        return outcomes
