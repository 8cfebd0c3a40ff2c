"""Jobs on a real Celery worker (prefork, one process) against Redis, on the test database."""

import pytest

import jobs
from jobs.models import JobRun
from jobs.services import cancel_job
from jobs.testing import wait_for_job_run

pytestmark = [pytest.mark.workers, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("queue", ["default", "sandbox", "gpu"])
def test_ping_runs_on_each_queue(celery_worker, admin_user, queue):
    run = jobs.enqueue("jobs.ping", created_by=admin_user, queue=queue, steps=4)
    assert (run.engine, run.queue) == ("celery", queue)

    wait_for_job_run(run)

    assert run.status == JobRun.Status.SUCCEEDED, run.error
    assert (run.progress_done, run.progress_total) == (4, 4)
    assert run.result == {"steps": 4}
    assert "step 4 of 4" in run.log_tail
    assert run.attempts == 1
    # The job ran in the worker's pool process, not in the test process.
    assert run.worker and int(run.worker.split(":")[1]) != celery_worker.pid


def test_failing_job_is_failed_with_its_traceback(celery_worker):
    run = wait_for_job_run(jobs.enqueue("jobs.ping", steps=1, fail=True))

    assert run.status == JobRun.Status.FAILED
    assert run.error.startswith("RuntimeError: asked to fail")
    assert "Traceback (most recent call last)" in run.error


def test_cancelled_running_job_stops_at_its_next_progress(celery_worker, admin_user):
    run = jobs.enqueue("jobs.ping", steps=100, sleep=0.1)
    wait_for_job_run(run, statuses=[JobRun.Status.RUNNING])

    cancel_job(run, user=admin_user)
    wait_for_job_run(run)

    assert run.status == JobRun.Status.CANCELLED
    assert run.progress_done < 100
    assert "stopped: cancel requested" in run.log_tail
