"""Periodic jobs fired by the real schedulers: django-q2's cluster (its Schedule rows, from `schedule_periodic`) and
Celery beat (its schedule built from the same table) with a Celery worker; and the beats workers write for /healthz."""

import json
import os
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_q.models import Schedule

from jobs import periodic
from jobs.models import JobRun, Worker
from jobs.testing import WorkerProcess, _worker_env, start_celery_worker
from lib.testing import wait_until

pytestmark = [pytest.mark.workers, pytest.mark.django_db(transaction=True)]

ONLY_SESSIONS = {entry.kind: 0 for entry in periodic.PERIODIC} | {"llm.close_stale_sessions": 1}


def expired_session():
    from llm.models import ModelEndpoint, ProxySession
    from llm.services import open_proxy_session

    endpoint = ModelEndpoint.objects.create(name="up", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"])
    session = open_proxy_session(endpoint, subject="rollout:7")
    ProxySession.objects.filter(pk=session.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    return session


def wait_for_kind(kind: str, timeout: float, workers=()) -> JobRun:
    def what() -> str:
        logs = "".join(f"\n--- {w.name} log:\n{w.log_tail(3000)}" for w in workers)
        return (
            f"a {kind} run to succeed; runs: {list(JobRun.objects.values_list('id', 'kind', 'status', 'error'))}{logs}"
        )

    succeeded = JobRun.objects.filter(kind=kind, status=JobRun.Status.SUCCEEDED).order_by("id")
    return wait_until(succeeded.first, what, timeout=timeout)


def test_the_django_q_cluster_fires_the_periodic_schedule(django_q_worker, settings):
    session = expired_session()
    settings.CLAWGYM_PERIODIC_SECONDS = ONLY_SESSIONS
    call_command("schedule_periodic", stdout=open(os.devnull, "w"))
    assert list(Schedule.objects.values_list("name", flat=True)) == ["clawgym:llm.close_stale_sessions"]
    due = Schedule.objects.get().next_run

    # The cluster's scheduler looks every 30 s; the schedule is due at once.
    run = wait_for_kind("llm.close_stale_sessions", timeout=60, workers=[django_q_worker])

    assert run.engine == "django_q" and run.result == {"closed": 1} and run.created_by is None
    session.refresh_from_db()
    assert not session.is_open
    assert Schedule.objects.get().next_run == due + timedelta(minutes=1)  # the next tick, a minute on
    assert JobRun.objects.filter(kind="llm.close_stale_sessions").count() == 1


def test_celery_beat_sends_the_ticks_and_a_worker_runs_them(celery_worker, celery_broker_url):
    session = expired_session()
    schedule_file = Path(tempfile.mkdtemp(prefix="clawgym-beat-")) / "schedule"
    beat = WorkerProcess(
        "celery-beat",
        [sys.executable, "-m", "celery", "-A", "clawgym_site", "beat", "-s", str(schedule_file), "--loglevel", "INFO"],
        _worker_env("celery", CELERY_BROKER_URL=celery_broker_url, CLAWGYM_PERIODIC_SECONDS=json.dumps(ONLY_SESSIONS)),
    ).start()
    try:
        run = wait_for_kind("llm.close_stale_sessions", timeout=45, workers=[beat, celery_worker])
        session.refresh_from_db()
        assert not session.is_open and run.result == {"closed": 1} and run.engine == "celery"
        # Beat ticks every second: more runs follow, one at a time (a tick queues none while one is active).
        runs = JobRun.objects.filter(kind="llm.close_stale_sessions")
        wait_until(lambda: runs.count() >= 3, beat.log_tail, timeout=20)
        assert "Sending due task clawgym:llm.close_stale_sessions (clawgym.periodic_tick)" in beat.log_tail()
    finally:
        beat.stop()
        beat.cleanup()
    assert JobRun.objects.filter(kind="llm.close_stale_sessions", status__in=JobRun.ACTIVE).count() <= 1
    assert not JobRun.objects.exclude(kind="llm.close_stale_sessions").exists()  # the others were turned off


def test_a_celery_worker_beats_with_its_queues_and_is_forgotten_when_it_stops(celery_broker_url, transactional_db):
    # Not waiting for its ping: the module's worker (every queue) may be the one that answers it.
    worker = start_celery_worker(celery_broker_url, queues="sandbox", wait=False)
    mine = Worker.objects.filter(engine="celery", name__contains=f":{worker.pid}:")
    try:
        wait_until(lambda: mine.exists() or not worker.alive(), worker.log_tail)
        assert worker.alive(), worker.log_tail()
        seen = mine.get()
        assert seen.queue_list == ["sandbox"] and timezone.now() - seen.seen_at < timedelta(seconds=30)
    finally:
        worker.stop()
        worker.cleanup()
    assert not mine.exists()  # a clean shutdown removes its row
