"""A worker killed mid-job: its run is run again by the next worker (bounded), never left running."""

import json
import os
import signal
import time
import uuid
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

import jobs
from jobs.models import JobRun
from jobs.runner import recover_lost
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


def _taken_by_a_worker_that_vanished(broker_url: str, queue: str, seconds_ago: float) -> str:
    """What kombu's Redis transport does when it delivers the oldest message of `queue` (moves it to the unacked set,
    stamped with the time), for a worker that then never acknowledges it nor puts it back: one killed before its pool
    process claimed the run, or one whose broker connection was cut (Celery drops the deliveries it had not started)."""
    client = redis.Redis.from_url(broker_url)
    message = json.loads(client.rpop(queue))
    delivery = message["properties"]["delivery_info"]
    tag = uuid.uuid4().hex
    client.zadd("unacked_index", {tag: time.time() - seconds_ago})
    client.hset("unacked", tag, json.dumps([message, delivery["exchange"], delivery["routing_key"]]))
    return tag


def test_a_delivery_no_worker_claimed_goes_back_to_its_queue_and_runs(celery_engine, workers, settings):
    settings.CLAWGYM_JOB_STALE_SECONDS = 30
    client = redis.Redis.from_url(celery_engine)
    client.delete("sandbox", "unacked", "unacked_index")  # what earlier tests of this session left on the broker
    lost, fresh, finished = (jobs.enqueue("jobs.ping", queue="sandbox", steps=1) for _ in range(3))
    JobRun.objects.update(created_at=timezone.now() - timedelta(minutes=5))
    lost_tag = _taken_by_a_worker_that_vanished(celery_engine, "sandbox", seconds_ago=60)
    fresh_tag = _taken_by_a_worker_that_vanished(celery_engine, "sandbox", seconds_ago=5)  # its worker may claim it yet
    finished_tag = _taken_by_a_worker_that_vanished(celery_engine, "sandbox", seconds_ago=60)
    JobRun.objects.filter(pk=finished.pk).update(status=JobRun.Status.SUCCEEDED)  # its worker acknowledges it later
    client.zadd("unacked_index", {"unreadable": time.time() - 60})
    client.hset("unacked", "unreadable", b"not a kombu message")

    assert recover_lost()["redelivered"] == [lost.pk]
    assert client.llen("sandbox") == 1
    held = {tag.decode() for tag in client.hkeys("unacked")}
    assert lost_tag not in held and {fresh_tag, finished_tag, "unreadable"} <= held
    assert recover_lost()["redelivered"] == []  # once back on its queue, it is no longer held by anyone

    workers.append(start_celery_worker(celery_engine, queues="sandbox"))
    lost = wait_for_job_run(lost, timeout=30)
    assert lost.status == JobRun.Status.SUCCEEDED, lost.error or lost.log_tail
    assert lost.attempts == 1
    fresh.refresh_from_db()
    assert fresh.status == JobRun.Status.QUEUED
