"""Jobs on a real django-q2 cluster (ORM broker) running beside the test, on the test database."""

import pytest
from django.db import transaction
from django_q.models import Task

import jobs
from jobs.models import JobRun
from jobs.services import cancel_job
from jobs.testing import wait_for_job_run
from lib.testing import wait_until

pytestmark = [pytest.mark.workers, pytest.mark.django_db(transaction=True)]


def test_ping_runs_to_succeeded_with_progress_and_log(django_q_worker, admin_user):
    run = jobs.enqueue("jobs.ping", created_by=admin_user, steps=3)
    assert run.status == JobRun.Status.QUEUED and run.engine == "django_q"

    wait_for_job_run(run)

    assert run.status == JobRun.Status.SUCCEEDED, run.error
    assert (run.progress_done, run.progress_total) == (3, 3)
    assert run.result == {"steps": 3}
    assert "step 3 of 3" in run.log_tail
    assert run.attempts == 1
    assert run.worker and run.started_at and run.finished_at >= run.started_at
    assert run.created_by == admin_user


def test_failing_job_is_failed_with_its_traceback(django_q_worker):
    run = wait_for_job_run(jobs.enqueue("jobs.ping", steps=2, fail=True))

    assert run.status == JobRun.Status.FAILED
    assert run.error.startswith("RuntimeError: asked to fail")
    assert "Traceback (most recent call last)" in run.error and "jobs/jobs.py" in run.error
    assert run.progress_done == 2  # what it did before failing stays visible


def test_cancelled_queued_job_never_runs(django_q_worker, admin_user):
    # Cancelled before the transaction commits, i.e. before any worker can see it; the worker still
    # receives the message (it is sent on commit) and must leave the run alone.
    with transaction.atomic():
        run = jobs.enqueue("jobs.ping", steps=1)
        cancel_job(run, user=admin_user)

    delivered = Task.objects.filter(name=f"jobs.ping#{run.pk}")
    wait_until(delivered.exists, "the worker to take the message", timeout=10)
    assert delivered.get().success  # the worker took the message and returned without running it
    run.refresh_from_db()
    assert run.status == JobRun.Status.CANCELLED
    assert run.attempts == 0 and run.started_at is None and run.progress_done == 0
    assert "cancel requested by ada_admin" in run.log_tail


def test_cancelled_running_job_stops_at_its_next_progress(django_q_worker, admin_user):
    run = jobs.enqueue("jobs.ping", steps=100, sleep=0.1)
    wait_for_job_run(run, statuses=[JobRun.Status.RUNNING])
    while run.progress_done < 1:
        wait_for_job_run(run, statuses=[JobRun.Status.RUNNING])

    cancel_job(run, user=admin_user)
    wait_for_job_run(run)

    assert run.status == JobRun.Status.CANCELLED
    assert 1 <= run.progress_done < 100
    assert "cancel requested by ada_admin" in run.log_tail
    assert "stopped: cancel requested" in run.log_tail
