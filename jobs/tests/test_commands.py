"""The operator commands: check_workers (are workers up?) and reap_jobs (lost runs)."""

import io
import json
import socket

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from jobs.models import JobRun


@pytest.mark.django_db(transaction=True)
def test_check_workers_fails_clearly_when_no_worker_takes_the_ping():
    out = io.StringIO()

    with pytest.raises(CommandError, match=r"no django_q worker finished ping #\d+ .* within 1 s .*manage.py qcluster"):
        call_command("check_workers", "--timeout", "1", "--json", stdout=out)

    report = json.loads(out.getvalue())
    assert report["ok"] is False and report["engine"] == "django_q"
    # The ping is cancelled, so a worker starting later does not run a stale check.
    assert JobRun.objects.get(pk=report["job_run"]).status == JobRun.Status.CANCELLED


@pytest.mark.django_db(transaction=True)
def test_check_workers_fails_when_the_broker_is_down(settings):
    settings.CLAWGYM_JOB_ENGINE = "celery"
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"

    with pytest.raises(CommandError, match="the celery engine did not take the ping job"):
        call_command("check_workers", "--timeout", "5", stdout=io.StringIO())


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_check_workers_succeeds_with_a_worker(django_q_worker):
    out = io.StringIO()

    call_command("check_workers", "--timeout", "20", "--json", stdout=out)

    report = json.loads(out.getvalue())
    assert report["ok"] is True and report["status"] == "succeeded" and report["worker"]


@pytest.mark.django_db
def test_reap_jobs_marks_lost_runs_failed():
    lost = JobRun.objects.create(
        kind="jobs.ping", engine="django_q", status=JobRun.Status.RUNNING, worker=f"{socket.gethostname()}:999999999:"
    )
    out = io.StringIO()

    call_command("reap_jobs", stdout=out)

    assert out.getvalue().startswith("Marked 1 lost job run(s) failed")
    lost.refresh_from_db()
    assert lost.status == JobRun.Status.FAILED and lost.error.startswith("Worker lost")


@pytest.mark.django_db
def test_reap_jobs_requeue():
    lost = JobRun.objects.create(
        kind="jobs.ping", engine="django_q", status=JobRun.Status.RUNNING, worker=f"{socket.gethostname()}:999999999:"
    )
    out = io.StringIO()

    call_command("reap_jobs", "--requeue", stdout=out)

    assert out.getvalue().startswith(f"Queued 1 lost job run(s) again [{lost.pk}]")
    assert JobRun.objects.get(pk=lost.pk).status == JobRun.Status.QUEUED
