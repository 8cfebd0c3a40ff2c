from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import JobRun


def make_run(kind="jobs.ping", status=JobRun.Status.QUEUED, **fields):
    return JobRun.objects.create(kind=kind, engine="django_q", status=status, **fields)


@pytest.fixture
def runs(db, admin_user):
    started = timezone.now() - timedelta(minutes=5)
    parent = make_run("synthesis.batch", JobRun.Status.RUNNING, started_at=started)
    return {
        "queued": make_run(created_by=admin_user, parent=parent),
        "running": make_run(
            "tasks.import_upload",
            JobRun.Status.RUNNING,
            started_at=started,
            progress_done=3,
            progress_total=4,
            message="reading tasks",
            log_tail="11:00:00 opened upload\n11:00:01 read 3 tasks",
        ),
        "failed": make_run(
            "tasks.import_upload",
            JobRun.Status.FAILED,
            started_at=started,
            finished_at=timezone.now(),
            error="Traceback ...\nValueError: broken archive",
        ),
        "succeeded": make_run(
            status=JobRun.Status.SUCCEEDED, started_at=started, finished_at=timezone.now(), result={"steps": 3}
        ),
        "parent": parent,
    }


def test_list_is_newest_first_and_filters_by_status_and_kind(api_as, viewer, runs):
    api = api_as(viewer)

    def ids(query=""):
        response = api.get(f"/api/jobs/{query}")
        assert response.status_code == 200, response.content
        return [row["id"] for row in response.json()["results"]]

    assert ids() == sorted((r.pk for r in runs.values()), reverse=True)
    assert ids("?status=running") == [runs["running"].pk, runs["parent"].pk]
    assert ids("?kind=tasks.import_upload") == [runs["failed"].pk, runs["running"].pk]
    assert ids("?kind=tasks.import_upload&status=failed") == [runs["failed"].pk]
    row = next(r for r in api.get("/api/jobs/").json()["results"] if r["id"] == runs["running"].pk)
    assert row["percent"] == 75 and row["message"] == "reading tasks" and "log_tail" not in row
    bad = api.get("/api/jobs/?status=done")
    assert bad.status_code == 400 and "status" in bad.json()


def test_detail_shows_progress_log_result_error_and_parent(api_as, viewer, runs):
    api = api_as(viewer)
    queued = api.get(f"/api/jobs/{runs['queued'].pk}/").json()
    assert queued["status"] == "queued" and queued["parent"] == runs["parent"].pk
    assert queued["created_by"] == "ada_admin" and queued["started_at"] is None

    running = api.get(f"/api/jobs/{runs['running'].pk}/").json()
    assert running["progress_done"] == 3 and running["progress_total"] == 4
    assert running["log_tail"].endswith("read 3 tasks") and running["created_by"] is None

    assert api.get(f"/api/jobs/{runs['succeeded'].pk}/").json()["result"] == {"steps": 3}
    failed = api.get(f"/api/jobs/{runs['failed'].pk}/").json()
    assert "broken archive" in failed["error"] and failed["finished_at"]
    assert api.get("/api/jobs/999999/").status_code == 404


def test_admin_cancels_queued_at_once_and_asks_running_to_stop(api_as, admin_user, runs):
    api = api_as(admin_user)
    queued = api.post(f"/api/jobs/{runs['queued'].pk}/cancel/")
    assert queued.status_code == 200
    assert queued.json()["status"] == "cancelled" and queued.json()["finished_at"]

    running = api.post(f"/api/jobs/{runs['running'].pk}/cancel/")
    assert running.status_code == 200
    assert running.json()["status"] == "running" and running.json()["cancel_requested"] is True
    runs["running"].refresh_from_db()
    assert runs["running"].cancel_requested


def test_cancelling_a_finished_run_is_409_and_changes_nothing(api_as, admin_user, runs):
    response = api_as(admin_user).post(f"/api/jobs/{runs['succeeded'].pk}/cancel/")
    assert response.status_code == 409
    assert "already finished (succeeded)" in response.json()["detail"]
    runs["succeeded"].refresh_from_db()
    assert runs["succeeded"].status == JobRun.Status.SUCCEEDED and not runs["succeeded"].cancel_requested


def test_reviewers_cannot_cancel(api_as, reviewer, runs):
    assert api_as(reviewer).post(f"/api/jobs/{runs['queued'].pk}/cancel/").status_code == 403
    runs["queued"].refresh_from_db()
    assert runs["queued"].status == JobRun.Status.QUEUED


def test_outcome_and_failed_items_count_a_batchs_failed_children(api_as, viewer):
    batch = JobRun.objects.create(kind="jobs.ping", engine="django_q", status="succeeded", subject="2 revisions")
    for status in ("succeeded", "failed"):
        JobRun.objects.create(kind="jobs.ping", engine="django_q", status=status, parent=batch)
    api = api_as(viewer)
    one = api.get(f"/api/jobs/{batch.pk}/").json()
    assert (one["outcome"], one["failed_items"], one["subject"]) == ("partial", 1, "2 revisions")
    row = next(r for r in api.get("/api/jobs/").json()["results"] if r["id"] == batch.pk)
    assert (row["outcome"], row["failed_items"]) == ("partial", 1)
