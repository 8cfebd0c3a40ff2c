"""A worker keeps its runs' volumes mounted for its next runs (sandbox.backends.volume's pool). django-q's and Celery's
pool processes end with os._exit, where atexit does not run: stopping the worker must release them all the same
(sandbox.backends.process_exit), not leave them mounted until another run on the host sweeps them.

A module of its own: each test starts the only worker on the test database and stops it (a module-scoped worker of
another module would take the job too)."""

import pytest
from django.test import override_settings

from jobs.models import JobRun
from jobs.testing import start_celery_worker, start_django_q_worker, use_engine, wait_for_job_run
from sandbox.testing import volumes_of
from tasks.sanity import start_sanity_check
from tasks.testing import make_sanity_task

pytestmark = [
    pytest.mark.usefixtures("bwrap"),
    pytest.mark.workers,
    pytest.mark.django_db(transaction=True),
]


def check_then_stop(worker, reviewer, engine) -> tuple[list[str], list[str]]:
    """Run a sanity check on `worker`, then stop it: (the volumes of the process that ran it before the stop, after)."""
    try:
        with engine:
            run = wait_for_job_run(start_sanity_check(make_sanity_task("pooled"), user=reviewer), timeout=90)
        assert run.status == JobRun.Status.SUCCEEDED, run.error
        pid = int(run.worker.split(":")[1])
        assert pid != worker.pid  # a pool process of the worker, not its main process
        kept = volumes_of(pid)
    finally:
        worker.stop()
        worker.cleanup()
    return kept, volumes_of(pid)


def test_a_django_q_worker_that_stops_releases_the_volumes_it_kept(reviewer):
    kept, left = check_then_stop(start_django_q_worker(), reviewer, use_engine("django_q"))
    assert kept and left == []


def test_a_celery_worker_that_stops_releases_the_volumes_it_kept(reviewer, celery_broker_url):
    engine = override_settings(CLAWGYM_JOB_ENGINE="celery", CELERY_BROKER_URL=celery_broker_url)
    kept, left = check_then_stop(start_celery_worker(celery_broker_url), reviewer, engine)
    assert kept and left == []
