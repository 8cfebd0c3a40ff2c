"""jobs.enqueue: what it records, when it hands the job over, and how it fails (no worker needed).

How fast it fails with the broker down is measured by bench/jobs_bench.py, not asserted here.
"""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from django_q.models import OrmQ

import jobs
from jobs.engine import JobEngineError, get_engine
from jobs.models import JobRun
from jobs.registry import UnknownJobKind


@pytest.mark.django_db
def test_enqueue_records_the_run_and_hands_it_to_django_q_on_commit(admin_user, django_capture_on_commit_callbacks):
    parent = JobRun.objects.create(kind="jobs.ping", engine="django_q")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = jobs.enqueue("jobs.ping", created_by=admin_user, parent=parent, total=5, steps=5)
    assert OrmQ.objects.count() == 0  # nothing leaves before the caller's transaction commits

    for callback in callbacks:
        callback()

    run.refresh_from_db()
    assert (run.kind, run.queue, run.engine, run.status) == ("jobs.ping", "default", "django_q", "queued")
    assert run.params == {"steps": 5} and run.progress_total == 5
    assert run.created_by == admin_user and run.parent == parent
    assert [task.task["name"] for task in OrmQ.objects.all()] == [f"jobs.ping#{run.pk}"]
    assert OrmQ.objects.get().task["args"] == (run.pk,)


@pytest.mark.django_db
def test_an_anonymous_user_is_not_recorded_as_creator():
    assert jobs.enqueue("jobs.ping", created_by=AnonymousUser()).created_by is None


@pytest.mark.django_db
def test_unknown_kind_raises_and_records_nothing():
    with pytest.raises(UnknownJobKind, match="no job kind 'jobs.nope' is registered"):
        jobs.enqueue("jobs.nope")
    assert not JobRun.objects.exists()


@pytest.mark.django_db
def test_unknown_queue_raises():
    with pytest.raises(JobEngineError, match="unknown queue 'fast'"):
        jobs.enqueue("jobs.ping", queue="fast")


def test_unknown_engine_raises():
    with pytest.raises(JobEngineError, match="unknown job engine 'inline'"):
        get_engine("inline")


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_enqueue_never_reaches_the_engine():
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            jobs.enqueue("jobs.ping")
            raise RuntimeError("the caller failed after enqueueing")
    assert not JobRun.objects.exists() and not OrmQ.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_celery_broker_down_raises_and_fails_the_run(settings):
    settings.CLAWGYM_JOB_ENGINE = "celery"
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there

    with pytest.raises(JobEngineError, match="could not start jobs.ping job #\\d+ on celery"):
        jobs.enqueue("jobs.ping")

    run = JobRun.objects.get()
    assert run.status == JobRun.Status.FAILED and run.finished_at
    assert run.error.startswith("The celery engine did not accept the job: ")
    assert "Connection refused" in run.error or "Error 111" in run.error
