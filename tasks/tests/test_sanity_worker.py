"""The sanity jobs: in this process (idempotence, failure), then on a real django-q2 worker (command and API)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

import jobs
from jobs.models import JobRun
from jobs.runner import execute
from jobs.testing import wait_for_job_run
from tasks.models import SanityReport
from tasks.sanity import start_sanity_check
from tasks.testing import make_sanity_task

pytestmark = pytest.mark.usefixtures("bwrap")  # every test here runs checkers in bubblewrap


# --- the jobs, executed in this process ------------------------------------------------------------------------


def test_the_job_stores_a_report_once_even_when_delivered_again(db, reviewer, django_capture_on_commit_callbacks):
    task = make_sanity_task("again", lenient=True)
    with django_capture_on_commit_callbacks(execute=False):  # no engine: executed below, in this process
        run = start_sanity_check(task, user=reviewer)
    assert execute(run.pk) == JobRun.Status.SUCCEEDED
    run.refresh_from_db()
    report = SanityReport.objects.get()
    assert report.job_run == run and run.result == report.as_dict() and run.result["over_lenient"] is True
    runs = len(report.runs) + 1  # every lazy workspace and the solution
    assert (run.progress_done, run.progress_total) == (runs, runs)
    assert "over-lenient: a lazy agent earns 0.5 on the scaffold" in run.log_tail

    # A worker lost after storing the report: the run is delivered again and returns the stored report.
    JobRun.objects.filter(pk=run.pk).update(status=JobRun.Status.QUEUED)
    assert execute(run.pk) == JobRun.Status.SUCCEEDED
    assert SanityReport.objects.count() == 1 and "already checked by this run" in JobRun.objects.get(pk=run.pk).log_tail


def test_the_job_fails_with_the_reason_when_the_sandbox_cannot_run(
    db, reviewer, settings, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.delenv("CLAWGYM_ALLOW_UNSANDBOXED", raising=False)
    settings.CLAWGYM_SANDBOX_BACKEND = "process"
    with django_capture_on_commit_callbacks(execute=False):
        run = start_sanity_check(make_sanity_task("blocked"), user=reviewer)
    assert execute(run.pk) == JobRun.Status.FAILED
    run.refresh_from_db()
    assert run.error.startswith("SanityUnavailable: the sandbox could not run the checker")
    assert "CLAWGYM_ALLOW_UNSANDBOXED=1" in run.error and not SanityReport.objects.exists()


def test_the_batch_queues_each_revision_once(db, django_capture_on_commit_callbacks):
    a, b = make_sanity_task("a"), make_sanity_task("b")
    ids = [a.current_revision_id, b.current_revision_id]
    with django_capture_on_commit_callbacks(execute=False):
        batch = jobs.enqueue("tasks.sanity_check_batch", revision_ids=ids)
        assert execute(batch.pk) == JobRun.Status.SUCCEEDED
        JobRun.objects.filter(pk=batch.pk).update(status=JobRun.Status.QUEUED)  # delivered again
        assert execute(batch.pk) == JobRun.Status.SUCCEEDED
    children = JobRun.objects.filter(parent=batch)
    assert sorted(c.params["revision_id"] for c in children) == sorted(ids)
    assert {c.queue for c in children} == {"sandbox"} and JobRun.objects.get(pk=batch.pk).result == {"queued": 2}


# --- on a real worker ------------------------------------------------------------------------------------------


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_the_command_spreads_the_checks_over_the_workers(django_q_worker):
    make_sanity_task("sound")
    make_sanity_task("lenient", lenient=True)
    make_sanity_task("fragile", crash=True, solution=None)
    out = StringIO()
    call_command("sanity_check", "--all", "--json", "--timeout", "120", stdout=out, stderr=StringIO())
    rows = {row["task"]: row for row in json.loads(out.getvalue().strip().splitlines()[-1])}
    assert list(rows) == ["fragile", "lenient", "sound"]
    assert (rows["sound"]["crashed"], rows["sound"]["over_lenient"], rows["sound"]["solvable"]) == (False, False, True)
    assert rows["lenient"]["over_lenient"] is True and rows["fragile"]["crashed"] is True
    assert rows["fragile"]["runs"]["empty"]["status"] == "error"

    batch = JobRun.objects.get(kind="tasks.sanity_check_batch")
    children = JobRun.objects.filter(parent=batch)
    assert batch.status == JobRun.Status.SUCCEEDED and children.count() == 3
    assert {c.status for c in children} == {JobRun.Status.SUCCEEDED} and {c.queue for c in children} == {"sandbox"}
    assert set(SanityReport.objects.values_list("job_run_id", flat=True)) == {c.pk for c in children}


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_a_check_started_through_the_api_runs_on_a_worker(django_q_worker, api_as, reviewer):
    make_sanity_task("api-task")
    response = api_as(reviewer).post("/api/tasks/api-task/sanity/")
    assert response.status_code == 202
    run = wait_for_job_run(JobRun.objects.get(pk=response.json()["id"]), timeout=60)
    assert run.status == JobRun.Status.SUCCEEDED, run.error
    sanity = api_as(reviewer).get("/api/tasks/api-task/revisions/1/").json()["sanity"]
    assert sanity["job_run"] == run.pk and sanity["verdict"] == "passed" and sanity["isolated"] is True
