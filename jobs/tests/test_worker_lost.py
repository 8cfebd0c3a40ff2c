"""A worker killed mid-job: its run is run again by the next worker (bounded), never left running."""

import os
import signal
import time

import pytest

import jobs
from jobs.models import JobRun
from jobs.services import cancel_job
from jobs.testing import start_celery_worker, wait_for_job_run

pytestmark = [pytest.mark.workers, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def celery_engine(settings, celery_broker_url):
    settings.CLAWGYM_JOB_ENGINE = "celery"
    settings.CELERY_BROKER_URL = celery_broker_url
    return celery_broker_url


@pytest.fixture
def workers():
    """Workers a test starts; all stopped at its end, whatever happened."""
    started = []
    yield started
    for worker in started:
        worker.stop()
        worker.cleanup()


def test_job_of_a_killed_celery_worker_is_rerun_by_the_next_worker(celery_engine, workers):
    first = start_celery_worker(celery_engine)
    workers.append(first)
    run = jobs.enqueue("jobs.ping", steps=20, sleep=0.15)
    wait_for_job_run(run, statuses=[JobRun.Status.RUNNING])

    first.kill()  # kill -9 of the worker and its pool process: nobody acknowledges or records anything
    time.sleep(0.5)
    run.refresh_from_db()
    assert run.status == JobRun.Status.RUNNING

    workers.append(start_celery_worker(celery_engine, wait=False))
    wait_for_job_run(run, timeout=30)

    assert run.status == JobRun.Status.SUCCEEDED, run.error or run.log_tail
    assert run.attempts == 2
    assert "worker lost" in run.log_tail and "queued again" in run.log_tail
    assert "attempt 2 of 3: a previous worker was lost" in run.log_tail
    assert run.progress_done == 20


def test_killed_django_q_worker_process_is_replaced_and_its_job_rerun(django_q_worker):
    run = jobs.enqueue("jobs.ping", steps=20, sleep=0.1)
    wait_for_job_run(run, statuses=[JobRun.Status.RUNNING])
    pid = int(run.worker.split(":")[1])
    assert pid != django_q_worker.pid  # a pool process of the cluster

    os.kill(pid, signal.SIGKILL)  # the cluster's sentinel starts a new worker process, which recovers the run
    wait_for_job_run(run, timeout=30)

    assert run.status == JobRun.Status.SUCCEEDED, run.error or run.log_tail
    assert run.attempts == 2
    assert "attempt 2 of 3: a previous worker was lost" in run.log_tail


def test_a_worker_takes_only_its_own_queues(celery_engine, workers, admin_user):
    workers.append(start_celery_worker(celery_engine, queues="sandbox"))
    elsewhere = jobs.enqueue("jobs.ping", queue="gpu", steps=1)
    here = wait_for_job_run(jobs.enqueue("jobs.ping", queue="sandbox", steps=1))

    assert here.status == JobRun.Status.SUCCEEDED
    elsewhere.refresh_from_db()
    assert elsewhere.status == JobRun.Status.QUEUED
    cancel_job(elsewhere, user=admin_user)  # its message stays in Redis; whoever gets it must skip it
