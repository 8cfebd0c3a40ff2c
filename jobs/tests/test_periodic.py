"""Periodic jobs (jobs.periodic): the one table, ticks, both engines' schedules built from it, the jobs page, and
what each periodic job does when it runs (run by jobs.runner.execute in this process, as a worker runs it)."""

import os
import socket
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from django_q.models import OrmQ, Schedule

from jobs import periodic, registry
from jobs.models import JobRun, Worker
from jobs.testing import run_now
from jobs.workers import beat

pytestmark = pytest.mark.django_db

KINDS = [entry.kind for entry in periodic.PERIODIC]


def test_the_table_names_registered_jobs_on_their_queues():
    assert KINDS == [
        "review.expire_claims",
        "jobs.recover_lost",
        "evaluation.top_up_runs",
        "training.stop_idle_servers",
        "llm.close_stale_sessions",
        "studies.advance_running",
    ]
    assert set(KINDS) <= set(registry.kinds())
    queues = {kind: registry.get(kind).queue for kind in KINDS}
    # Idle model servers are processes on the gpu host that started them: only a gpu worker can stop them.
    assert queues == {
        "review.expire_claims": "default",
        "jobs.recover_lost": "default",
        "evaluation.top_up_runs": "default",
        "training.stop_idle_servers": "gpu",
        "llm.close_stale_sessions": "default",
        "studies.advance_running": "default",
    }
    assert [seconds for _, seconds in periodic.enabled()] == [300, 300, 120, 600, 900, 60]


def test_intervals_are_overridden_turned_off_and_checked(settings):
    settings.CLAWGYM_PERIODIC_SECONDS = {"review.expire_claims": 60, "training.stop_idle_servers": 0}
    assert [(e.kind, s) for e, s in periodic.enabled()] == [
        ("review.expire_claims", 60),
        ("jobs.recover_lost", 300),
        ("evaluation.top_up_runs", 120),
        ("llm.close_stale_sessions", 900),
        ("studies.advance_running", 60),
    ]
    settings.CLAWGYM_PERIODIC_SECONDS = {"review.expire_claim": 60}
    with pytest.raises(ValueError, match="names no periodic job: review.expire_claim"):
        periodic.enabled()
    settings.CLAWGYM_PERIODIC_SECONDS = {"review.expire_claims": "5m"}
    with pytest.raises(ValueError, match="whole number of seconds"):
        periodic.enabled()
    with pytest.raises(periodic.UnknownPeriodicJob):
        periodic.tick("jobs.ping")  # only the table's jobs are ticked


def test_the_system_check_reports_a_bad_table_or_override(settings, monkeypatch):
    from django.core.checks import run_checks

    assert [e.id for e in run_checks() if e.id.startswith("jobs.")] == []
    settings.CLAWGYM_PERIODIC_SECONDS = {"review.expire_claim": 60}
    monkeypatch.setattr(periodic, "PERIODIC", (*periodic.PERIODIC, periodic.Periodic("tasks.nothing", 60, "")))
    errors = {e.id: e.msg for e in run_checks() if e.id.startswith("jobs.")}
    assert errors == {
        "jobs.E001": "periodic job 'tasks.nothing' is not a registered job kind",
        "jobs.E002": "CLAWGYM_PERIODIC_SECONDS names no periodic job: review.expire_claim",
    }


# --- ticks ---------------------------------------------------------------------------------------------------


def test_a_tick_queues_one_run_and_none_while_it_is_queued_or_running():
    first = periodic.tick("llm.close_stale_sessions")
    run = JobRun.objects.get(pk=first)
    assert (run.kind, run.queue, run.status, run.created_by) == ("llm.close_stale_sessions", "default", "queued", None)
    assert OrmQ.objects.count() == 0  # handed to the engine on commit, like every enqueue

    assert periodic.tick("llm.close_stale_sessions") is None
    JobRun.objects.filter(pk=first).update(status=JobRun.Status.RUNNING)
    assert periodic.tick("llm.close_stale_sessions") is None
    JobRun.objects.filter(pk=first).update(status=JobRun.Status.SUCCEEDED)

    second = periodic.tick("llm.close_stale_sessions")
    assert second > first
    assert periodic.tick("review.expire_claims") is not None  # another kind is not held up by this one


def test_a_run_left_queued_for_many_intervals_is_cancelled_and_replaced():
    stuck = periodic.tick("training.stop_idle_servers")
    assert JobRun.objects.get(pk=stuck).queue == "gpu"
    # Five intervals: maybe only a busy gpu worker. Six: its message is taken for lost (a broker lost it).
    JobRun.objects.filter(pk=stuck).update(created_at=timezone.now() - timedelta(seconds=5 * 600))
    assert periodic.tick("training.stop_idle_servers") is None
    JobRun.objects.filter(pk=stuck).update(created_at=timezone.now() - timedelta(seconds=6 * 600 + 1))

    fresh = periodic.tick("training.stop_idle_servers")

    old = JobRun.objects.get(pk=stuck)
    assert old.status == JobRun.Status.CANCELLED and "cancel requested by system" in old.log_tail
    assert JobRun.objects.get(pk=fresh).status == JobRun.Status.QUEUED
    assert JobRun.objects.filter(kind="training.stop_idle_servers", status__in=JobRun.ACTIVE).count() == 1


def test_only_the_newest_finished_runs_of_a_periodic_kind_are_kept(monkeypatch):
    monkeypatch.setattr(periodic, "KEEP_FINISHED", 3)
    old = [
        JobRun.objects.create(kind="review.expire_claims", engine="django_q", status=s).pk
        for s in ("succeeded", "failed", "succeeded", "cancelled", "succeeded")
    ]
    other = JobRun.objects.create(kind="jobs.ping", engine="django_q", status="succeeded")

    new = periodic.tick("review.expire_claims")

    kept = set(JobRun.objects.filter(kind="review.expire_claims").values_list("pk", flat=True))
    assert kept == {*old[-3:], new}  # the 3 newest finished, and the queued one
    assert JobRun.objects.filter(pk=other.pk).exists()  # other kinds are never pruned


# --- the two engines' schedules ----------------------------------------------------------------------------------


def test_celery_beat_schedule_is_built_from_the_table():
    from django.conf import settings
    from django.utils.module_loading import import_string

    app = import_string(settings.CLAWGYM_CELERY_APP)

    schedule = app.conf.beat_schedule
    assert schedule == periodic.beat_schedule()
    assert sorted(schedule) == sorted(f"clawgym:{kind}" for kind in KINDS)
    entry = schedule["clawgym:jobs.recover_lost"]
    assert entry["task"] == "clawgym.periodic_tick" and entry["args"] == ("jobs.recover_lost",)
    assert entry["schedule"] == timedelta(seconds=300)
    assert entry["options"] == {"queue": "default", "expires": 300}
    assert app.tasks["clawgym.periodic_tick"].name == "clawgym.periodic_tick"  # the task beat sends exists


def test_celery_beat_schedule_follows_overrides(settings):
    settings.CLAWGYM_PERIODIC_SECONDS = {name: 0 for name in KINDS} | {"llm.close_stale_sessions": 2}
    assert periodic.beat_schedule() == {
        "clawgym:llm.close_stale_sessions": {
            "task": "clawgym.periodic_tick",
            "schedule": timedelta(seconds=2),
            "args": ("llm.close_stale_sessions",),
            "options": {"queue": "default", "expires": 2},
        }
    }


def test_schedule_periodic_writes_the_django_q_schedules_once(settings):
    Schedule.objects.create(name="someone-else", func="jobs.jobs.ping", schedule_type=Schedule.DAILY)
    call_command("schedule_periodic", stdout=open(os.devnull, "w"))

    ours = {s.name: s for s in Schedule.objects.filter(name__startswith="clawgym:")}
    assert sorted(ours) == sorted(f"clawgym:{kind}" for kind in KINDS)
    claims = ours["clawgym:review.expire_claims"]
    assert (claims.func, claims.args, claims.schedule_type, claims.minutes, claims.repeats) == (
        "jobs.periodic.tick",
        "'review.expire_claims'",
        Schedule.MINUTES,
        5,
        -1,
    )
    assert ours["clawgym:llm.close_stale_sessions"].minutes == 15
    later = timezone.now() + timedelta(minutes=3)
    Schedule.objects.filter(name="clawgym:review.expire_claims").update(next_run=later)

    call_command("schedule_periodic", stdout=open(os.devnull, "w"))  # again, as each `make run` does
    assert Schedule.objects.filter(name__startswith="clawgym:").count() == len(KINDS)
    assert Schedule.objects.get(name="clawgym:review.expire_claims").next_run == later  # not postponed

    settings.CLAWGYM_PERIODIC_SECONDS = {"review.expire_claims": 120, "training.stop_idle_servers": 0}
    call_command("schedule_periodic", stdout=open(os.devnull, "w"))
    assert Schedule.objects.get(name="clawgym:review.expire_claims").minutes == 2
    assert not Schedule.objects.filter(name="clawgym:training.stop_idle_servers").exists()
    assert Schedule.objects.filter(name="someone-else").exists()

    settings.CLAWGYM_PERIODIC_SECONDS = {"nope": 1}
    with pytest.raises(CommandError, match="names no periodic job: nope"):
        call_command("schedule_periodic", stdout=open(os.devnull, "w"))


# --- the jobs page -------------------------------------------------------------------------------------------


def test_the_jobs_page_shows_each_periodic_job_with_last_run_result_and_next_run(viewer_client):
    call_command("schedule_periodic", stdout=open(os.devnull, "w"))
    done = JobRun.objects.create(
        kind="jobs.recover_lost",
        engine="django_q",
        status="succeeded",
        result={"requeued": 2, "failed": 0, "cancelled": 0, "workers_forgotten": 1},
    )
    broken = JobRun.objects.create(
        kind="llm.close_stale_sessions",
        engine="django_q",
        status="failed",
        error="OperationalError: database is locked\n\nTraceback …",
    )
    Schedule.objects.filter(name="clawgym:jobs.recover_lost").update(next_run=timezone.now() + timedelta(minutes=4))

    html = viewer_client.get("/jobs/").content.decode()

    assert "Periodic jobs" in html and "manage.py schedule_periodic" in html
    for kind in KINDS:
        assert f'data-testid="periodic-{kind}"' in html
    row = html.split('data-testid="periodic-jobs.recover_lost"')[1].split("</tr>")[0]
    assert f'href="/jobs/{done.pk}/"' in row and "Succeeded" in row
    assert "cancelled 0, failed 0, requeued 2, workers forgotten 1" in row
    assert "5 min" in row and ("3\xa0minutes from now" in row or "4\xa0minutes from now" in row)
    row = html.split('data-testid="periodic-llm.close_stale_sessions"')[1].split("</tr>")[0]
    assert "Failed" in row and "OperationalError: database is locked" in row and "15 min" in row
    row = html.split('data-testid="periodic-review.expire_claims"')[1].split("</tr>")[0]
    assert "never" in row
    assert broken.pk  # listed below too, as any run
    assert "Periodic jobs" not in viewer_client.get("/jobs/?status=failed", HTTP_HX_REQUEST="true").content.decode()


def test_the_jobs_page_says_when_a_periodic_job_is_not_scheduled(viewer_client, settings):
    settings.CLAWGYM_PERIODIC_SECONDS = {"llm.close_stale_sessions": 0}
    html = viewer_client.get("/jobs/").content.decode()
    row = html.split('data-testid="periodic-review.expire_claims"')[1].split("</tr>")[0]
    assert "not scheduled" in row  # schedule_periodic was never run
    row = html.split('data-testid="periodic-llm.close_stale_sessions"')[1].split("</tr>")[0]
    assert "turned off" in row and "off" in row


def test_with_celery_the_next_run_is_the_last_tick_plus_the_interval(viewer_client, settings):
    settings.CLAWGYM_JOB_ENGINE = "celery"
    JobRun.objects.create(kind="review.expire_claims", engine="celery", status="succeeded", result={"handed_back": 0})
    html = viewer_client.get("/jobs/").content.decode()
    assert "Celery beat" in html
    row = html.split('data-testid="periodic-review.expire_claims"')[1].split("</tr>")[0]
    assert "about 4\xa0minutes from now" in row or "about 5\xa0minutes from now" in row
    assert "handed back 0" in row


# --- what each periodic job does ---------------------------------------------------------------------------------


def test_lost_runs_are_queued_again_and_workers_gone_a_day_forgotten(settings):
    host = socket.gethostname()
    lost = JobRun.objects.create(
        kind="jobs.ping",
        engine="django_q",
        status="running",
        attempts=1,
        worker=f"{host}:999999999:1",
        started_at=timezone.now(),
    )
    stale = JobRun.objects.create(
        kind="jobs.ping",
        engine="django_q",
        status="running",
        attempts=3,
        worker="other-host:12:34",
        heartbeat_at=timezone.now() - timedelta(hours=1),
        started_at=timezone.now() - timedelta(hours=1),
    )
    beat("other-host:1:1", "celery", ["sandbox"], timezone.now())
    beat("gone-host:1:1", "celery", ["sandbox"], timezone.now())
    Worker.objects.filter(name="gone-host:1:1").update(seen_at=timezone.now() - timedelta(days=1, seconds=1))

    # A batch whose worker was killed after its child ended, before it handed over the next one.
    batch = JobRun.objects.create(kind="jobs.ping", engine="django_q", status="succeeded")
    waiting = JobRun.objects.create(kind="jobs.ping", engine="django_q", parent=batch, held=True)

    run = run_now("jobs.recover_lost")

    assert run.result == {
        "requeued": 1,
        "failed": 1,
        "cancelled": 0,
        "redelivered": 0,
        "released": 1,
        "workers_forgotten": 1,
    }
    waiting.refresh_from_db()
    assert not waiting.held and "handed 1 held run(s) to the workers" in run.log_tail
    assert f"requeued: #{lost.pk}" in run.log_tail and f"failed: #{stale.pk}" in run.log_tail
    lost.refresh_from_db()
    stale.refresh_from_db()
    assert lost.status == JobRun.Status.QUEUED and OrmQ.objects.count() == 1  # handed to django-q again
    assert stale.status == JobRun.Status.FAILED and "gave up after 3 attempts" in stale.error
    assert list(Worker.objects.values_list("name", flat=True)) == ["other-host:1:1"]
