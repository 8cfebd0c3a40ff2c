"""Check that job workers are up: enqueue a ping job and wait for a worker to finish it."""

import json
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

import jobs
from jobs.cli import NOT_STARTED
from jobs.engine import JobEngineError
from jobs.job_kinds import PING_JOB
from jobs.models import JobRun
from jobs.registry import QUEUES
from jobs.services import cancel_job

START_HINTS = {
    "django_q": "start the cluster with `manage.py qcluster` (`make run` starts one beside the web server)",
    "celery": "start a worker with `celery -A clawgym_site worker -Q default,sandbox,gpu`",
}


class Command(BaseCommand):
    help = (
        "Enqueue a jobs.ping and wait for a worker to finish it. Exit status (jobs.cli): 3 when no worker took it "
        "(or the engine refused it), 1 when the ping failed."
    )

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (default 30)")
        parser.add_argument("--queue", choices=QUEUES, default="default", help="the queue to ping (default: default)")
        parser.add_argument("--json", action="store_true", help="print the outcome as one JSON object")

    def handle(self, *args, timeout, queue, **options):
        engine = settings.CLAWGYM_JOB_ENGINE
        report = {"ok": False, "engine": engine, "queue": queue, "job_run": None, "status": None, "seconds": None}
        started = time.monotonic()
        try:
            run = jobs.enqueue(PING_JOB, queue=queue, steps=1)
        except JobEngineError as exc:
            return self._end(
                report, f"the {engine} engine did not take the ping job: {exc}", options["json"], returncode=NOT_STARTED
            )
        report["job_run"] = run.pk
        while run.status not in JobRun.FINISHED and time.monotonic() - started < timeout:
            time.sleep(0.2)
            run.refresh_from_db()
        report.update(status=run.status, seconds=round(time.monotonic() - started, 2), worker=run.worker)
        if run.status == JobRun.Status.SUCCEEDED:
            report["ok"] = True
            return self._end(report, f"workers are up: ping #{run.pk} ran on {run.worker}", options["json"])
        if run.status in JobRun.FINISHED:
            first_line = run.error.splitlines()[0] if run.error else run.status
            return self._end(report, f"ping #{run.pk} ended {run.status}: {first_line}", options["json"])
        # Nobody took it: cancel it, so that a worker starting later does not run a stale check.
        run = cancel_job(run, user=None)
        report["status"] = run.status
        error = (
            f"no {engine} worker finished ping #{run.pk} on queue {queue!r} within {timeout:g} s "
            f"(it is {run.status}); {START_HINTS[engine]}"
        )
        return self._end(report, error, options["json"], returncode=NOT_STARTED)

    def _end(self, report: dict, text: str, as_json: bool, returncode: int = 1) -> None:
        if not report["ok"]:
            report["error"] = text
        if as_json:
            self.stdout.write(json.dumps(report))
        if not report["ok"]:
            raise CommandError(text, returncode=returncode)
        if not as_json:
            self.stdout.write(self.style.SUCCESS(f"{text} in {report['seconds']} s"))
