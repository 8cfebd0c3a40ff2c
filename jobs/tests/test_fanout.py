"""A batch's children are recorded held and handed to the engine a few at a time (jobs.fanout): at most the limit
on it at once, the next as one ends (however it ends), the limit from the workers' slots, cancels in one update."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import fanout
from jobs.models import JobRun, Worker
from jobs.runner import JobContext, execute, worker_id
from jobs.services import cancel_children, cancel_job
from jobs.workers import beat

pytestmark = pytest.mark.django_db


def on_engine(parent):
    return JobRun.objects.filter(parent=parent, held=False, status__in=JobRun.ACTIVE).count()


def held(parent):
    return JobRun.objects.filter(parent=parent, held=True, status=JobRun.Status.QUEUED).count()


@pytest.fixture
def batch(settings, django_capture_on_commit_callbacks):
    """A batch job that fanned out 10 pings with room for 3 on the engine; `submitted` lists what reached it."""
    settings.CLAWGYM_IN_FLIGHT = 3
    parent = JobRun.objects.create(kind="jobs.ping", engine="django_q", status="running", worker=worker_id())
    ctx = JobContext(parent)
    with django_capture_on_commit_callbacks(execute=False) as submitted:
        assert ctx.fan_out("jobs.ping", "steps", list(range(1, 11)), "pings") == 10
    ctx.flush()
    parent.submitted = submitted
    return parent


def test_only_the_limit_reaches_the_engine_and_each_child_that_ends_hands_over_the_next(
    batch, django_capture_on_commit_callbacks
):
    assert len(batch.submitted) == 3 and on_engine(batch) == 3 and held(batch) == 7
    first = JobRun.objects.filter(parent=batch, held=False).order_by("pk")
    assert [r.params["steps"] for r in first] == [1, 2, 3]  # oldest first
    assert "10 pings; 3 handed to the workers now" in JobRun.objects.get(pk=batch.pk).log_tail

    with django_capture_on_commit_callbacks(execute=False) as submitted:
        assert execute(first[0].pk) == JobRun.Status.SUCCEEDED
    assert len(submitted) == 1 and on_engine(batch) == 3 and held(batch) == 6
    assert JobRun.objects.filter(parent=batch, held=False, status="queued").order_by("-pk")[0].params == {"steps": 4}

    # A failed child frees its room too, and so does one cancelled before it ran.
    child = JobRun.objects.filter(parent=batch, held=False, status="queued").order_by("pk")[0]
    JobRun.objects.filter(pk=child.pk).update(params={"steps": 1, "fail": True})
    with django_capture_on_commit_callbacks(execute=False):
        assert execute(child.pk) == JobRun.Status.FAILED
    assert on_engine(batch) == 3 and held(batch) == 5
    with django_capture_on_commit_callbacks(execute=False):
        cancel_job(JobRun.objects.filter(parent=batch, held=False, status="queued").first(), user=None)
    assert on_engine(batch) == 3 and held(batch) == 4
    assert batch.batch().total == 10  # held children count in the batch's progress from the start


def test_a_full_engine_releases_nothing_and_a_release_is_never_twice(batch, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as submitted:
        assert fanout.release(batch.pk) == 0
        assert fanout.release_waiting() == 0
    assert submitted == [] and on_engine(batch) == 3


def test_release_waiting_hands_over_what_a_killed_worker_left_and_orphans_go_at_once(
    batch, settings, django_capture_on_commit_callbacks
):
    JobRun.objects.filter(parent=batch, held=False).update(status="succeeded")  # they ended, nobody released
    orphan = JobRun.objects.create(kind="jobs.ping", engine="django_q", held=True)  # its batch was deleted
    with django_capture_on_commit_callbacks(execute=False) as submitted:
        assert fanout.release_waiting() == 4
    assert len(submitted) == 4 and on_engine(batch) == 3
    orphan.refresh_from_db()
    assert not orphan.held


def test_cancelling_the_children_cancels_the_held_ones_without_handing_any_over(
    batch, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as submitted:
        assert cancel_children(batch, user=None) == 10
    assert submitted == []
    assert set(JobRun.objects.filter(parent=batch).values_list("status", flat=True)) == {"cancelled"}
    assert "before it was handed to a worker" in JobRun.objects.filter(parent=batch, held=True).first().log_tail


def test_the_limit_is_twice_the_slots_of_the_workers_seen_on_the_queue(settings):
    settings.CLAWGYM_IN_FLIGHT, settings.CLAWGYM_IN_FLIGHT_MIN = 0, 4
    assert fanout.limit("sandbox") == 4  # no worker seen yet: still some on the engine
    beat("gpu1:1:1", "celery", ["sandbox"], timezone.now(), slots=6)
    beat("gpu2:1:1", "celery", ["default", "sandbox"], timezone.now(), slots=2)
    beat("old:1:1", "celery", ["sandbox"], timezone.now(), slots=50)
    beat("web:1:1", "celery", ["default"], timezone.now(), slots=9)
    Worker.objects.filter(name="old:1:1").update(seen_at=timezone.now() - timedelta(hours=1))
    assert fanout.capacity("sandbox") == 8 and fanout.limit("sandbox") == 16
    assert fanout.limit("gpu") == 4
    settings.CLAWGYM_IN_FLIGHT = 5
    assert fanout.limit("sandbox") == 5
