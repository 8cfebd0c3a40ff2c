"""The jobs pages: list, detail, the progress partial any page includes, and cancelling (admins only)."""

import json
import re

import pytest
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone

from jobs.models import JobRun
from jobs.views import PAGE_SIZE

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def make_run(**fields):
    fields.setdefault("kind", "jobs.ping")
    fields.setdefault("engine", "django_q")
    return JobRun.objects.create(**fields)


def polling_attributes(html: str) -> list[str]:
    return re.findall(r'hx-(?:get|trigger|swap)="[^"]*"', html)


# --- the progress partial -----------------------------------------------------------------------------------


def render_include(run) -> str:
    return Template('{% include "jobs/_progress.html" with run=run %}').render(Context({"run": run}))


def test_progress_partial_polls_its_own_url_while_running():
    run = make_run(status=JobRun.Status.RUNNING, progress_done=2, progress_total=8, message="Importing tasks")

    html = render_include(run)

    url = reverse("jobs:progress", args=[run.pk])
    assert polling_attributes(html) == [f'hx-get="{url}"', 'hx-trigger="every 1s"', 'hx-swap="outerHTML"']
    assert "Ping the workers" in html and 'class="badge s-running"' in html
    assert "2/8" in html and "Importing tasks" in html
    assert 'style="width: 25%"' in html


def test_progress_partial_of_a_queued_run_polls_too():
    assert 'hx-trigger="every 1s"' in render_include(make_run())


@pytest.mark.parametrize("status", [JobRun.Status.SUCCEEDED, JobRun.Status.FAILED, JobRun.Status.CANCELLED])
def test_progress_partial_of_a_finished_run_stops_polling(status):
    html = render_include(make_run(status=status, progress_done=3, progress_total=3, finished_at=timezone.now()))

    assert polling_attributes(html) == []
    assert f'class="badge s-{status}"' in html


def test_progress_partial_of_a_failed_run_shows_the_first_error_line_and_a_link():
    error = "ValueError: bad archive\n\nTraceback (most recent call last):\n  x"
    run = make_run(status=JobRun.Status.FAILED, error=error)

    html = render_include(run)

    assert "ValueError: bad archive" in html and "Traceback" not in html
    assert f'href="{reverse("jobs:detail", args=[run.pk])}"' in html


def test_progress_url_returns_the_partial_and_stops_polling_when_finished(viewer_client):
    run = make_run(status=JobRun.Status.RUNNING)
    url = reverse("jobs:progress", args=[run.pk])

    first = viewer_client.get(url, **HTMX)
    assert first.status_code == 200 and "<html" not in first.content.decode()
    assert 'hx-trigger="every 1s"' in first.content.decode()

    JobRun.objects.filter(pk=run.pk).update(status=JobRun.Status.SUCCEEDED, finished_at=timezone.now())
    last = viewer_client.get(url, **HTMX).content.decode()
    assert polling_attributes(last) == [] and "s-succeeded" in last


def test_progress_url_needs_a_role(outsider_client, client):
    url = reverse("jobs:progress", args=[make_run().pk])
    assert outsider_client.get(url).status_code == 403
    assert client.get(url).status_code == 302  # anonymous: to the login page


# --- the batch progress partial ------------------------------------------------------------------------------


def test_batch_progress_counts_the_children_and_polls_until_all_have_finished(viewer_client):
    parent = make_run(status=JobRun.Status.SUCCEEDED, finished_at=timezone.now())
    done = make_run(parent=parent, status=JobRun.Status.SUCCEEDED)
    make_run(parent=parent, status=JobRun.Status.FAILED)
    running = make_run(parent=parent, status=JobRun.Status.RUNNING)
    make_run(status=JobRun.Status.RUNNING)  # not a child: not counted
    url = reverse("jobs:batch_progress", args=[parent.pk])

    first = viewer_client.get(url, **HTMX)
    html = first.content.decode()
    assert first.status_code == 200 and "<html" not in html
    assert "2/3 done" in html and "1 running" in html and "1 succeeded" in html and "1 failed" in html
    assert 'aria-valuenow="66"' in html
    assert 'hx-trigger="every 1s"' in html and "HX-Trigger" not in first.headers

    waiting = make_run(parent=parent, held=True)  # a child its batch has not handed to the engine yet
    html = viewer_client.get(url, **HTMX).content.decode()
    assert "2/4 done" in html and '<span data-testid="batch-held">1 waiting their turn</span>' in html
    detail = viewer_client.get(reverse("jobs:detail", args=[waiting.pk])).content.decode()
    assert "waiting its turn: its batch hands it to the workers" in detail
    JobRun.objects.filter(pk=waiting.pk).delete()

    JobRun.objects.filter(pk=running.pk).update(status=JobRun.Status.SUCCEEDED)
    last = viewer_client.get(url, **HTMX)
    assert polling_attributes(last.content.decode()) == [] and "3/3 done" in last.content.decode()
    assert json.loads(last.headers["HX-Trigger"]) == {
        "batch-finished": {"id": parent.pk, "kind": "jobs.ping", "failed": 1}
    }
    assert (
        '<span class="badge s-partial" data-testid="batch-outcome">Finished · 1 of 3 failed</span>'
        in last.content.decode()
    )
    assert 'class="progress partial"' in last.content.decode()
    assert done.batch().total == 0  # a run without children


def test_a_batch_whose_every_child_failed_is_shown_failed_not_finished(viewer_client):
    parent = make_run(status=JobRun.Status.SUCCEEDED, finished_at=timezone.now())
    for _ in range(2):
        make_run(parent=parent, status=JobRun.Status.FAILED)

    html = viewer_client.get(reverse("jobs:batch_progress", args=[parent.pk]), **HTMX).content.decode()

    assert '<span class="badge s-failed" data-testid="batch-outcome">Failed: all 2 failed</span>' in html
    assert 'class="progress failed"' in html and "s-succeeded" not in html


def test_batch_progress_keeps_polling_while_the_parent_still_queues(viewer_client):
    parent = make_run(status=JobRun.Status.RUNNING)
    make_run(parent=parent, status=JobRun.Status.SUCCEEDED)

    html = viewer_client.get(reverse("jobs:batch_progress", args=[parent.pk]), **HTMX).content.decode()

    assert "1/1 done" in html and "queueing" in html and 'hx-trigger="every 1s"' in html


def test_batch_progress_needs_a_role(outsider_client):
    assert outsider_client.get(reverse("jobs:batch_progress", args=[make_run().pk])).status_code == 403


# --- list ---------------------------------------------------------------------------------------------------


def test_list_shows_recent_runs_to_viewers(viewer_client, admin_user):
    run = make_run(created_by=admin_user, status=JobRun.Status.SUCCEEDED)

    response = viewer_client.get(reverse("jobs:list"))

    assert response.status_code == 200
    html = response.content.decode()
    assert f'href="{reverse("jobs:detail", args=[run.pk])}"' in html and "ada_admin" in html
    assert "<html" in html and 'aria-current="page"' in html


def test_list_filters_by_status_and_kind(viewer_client):
    failed = make_run(status=JobRun.Status.FAILED)
    succeeded = make_run(status=JobRun.Status.SUCCEEDED)
    other_kind = make_run(kind="tasks.import_upload", status=JobRun.Status.FAILED)

    page = viewer_client.get(reverse("jobs:list"), {"status": "failed", "kind": "jobs.ping"}).context["page"]

    assert list(page.object_list) == [failed]
    assert set(viewer_client.get(reverse("jobs:list")).context["page"].object_list) == {failed, succeeded, other_kind}
    refused = viewer_client.get(reverse("jobs:list"), {"status": "bogus"})  # lib.listing: not a silent "any"
    assert refused.status_code == 400 and "unknown status 'bogus'" in refused.content.decode()


def test_list_paginates_and_htmx_gets_only_the_results(viewer_client):
    JobRun.objects.bulk_create([JobRun(kind="jobs.ping", engine="django_q") for _ in range(PAGE_SIZE + 1)])

    response = viewer_client.get(reverse("jobs:list"), {"page": 2}, **HTMX)

    html = response.content.decode()
    assert "<html" not in html and "<table" in html
    assert len(response.context_data["page"].object_list) == 1
    assert "Page 2 of 2" in html and "?page=1" in html


def test_list_needs_a_role(outsider_client):
    assert outsider_client.get(reverse("jobs:list")).status_code == 403


# --- detail -------------------------------------------------------------------------------------------------


def test_detail_shows_params_log_result_and_children(viewer_client):
    run = make_run(
        status=JobRun.Status.SUCCEEDED,
        params={"steps": 2},
        result={"imported": 7},
        log_tail="12:00:00 step 1 of 2\n",
        finished_at=timezone.now(),
    )
    child = make_run(parent=run, status=JobRun.Status.RUNNING)

    html = viewer_client.get(reverse("jobs:detail", args=[run.pk])).content.decode()

    assert "&quot;steps&quot;: 2" in html and "&quot;imported&quot;: 7" in html
    assert "step 1 of 2" in html
    assert f'href="{reverse("jobs:detail", args=[child.pk])}"' in html
    assert 'hx-trigger="every' not in html  # finished: nothing polls, not even the child's static progress
    assert "Cancel job" not in html


SERVER_ERROR = (
    "FileNotFoundError: [Errno 2] No such file: '/srv/clawgym/var/uploads/4f2a/tasks.zip'\n\n"
    "Traceback (most recent call last):\n"
    '  File "/srv/clawgym/tasks/importing.py", line 80, in import_path\n'
    "FileNotFoundError: [Errno 2] No such file: '/srv/clawgym/var/uploads/4f2a/tasks.zip'"
)


def test_viewers_see_a_failed_runs_reason_without_traceback_or_server_paths(viewer_client, admin_client):
    run = make_run(
        status=JobRun.Status.FAILED,
        error=SERVER_ERROR,
        params={"upload_path": "/srv/clawgym/var/up/x.zip"},
        log_tail="12:00:00 reading /srv/clawgym/var/up/x.zip\n",
    )
    url = reverse("jobs:detail", args=[run.pk])

    html = viewer_client.get(url).content.decode()
    assert "No such file: &#x27;…/tasks.zip&#x27;" in html  # the reason, on the page and in the progress line
    assert "Traceback" not in html and "/srv/clawgym" not in html
    assert "…/x.zip" in html  # params and log keep the file's name only

    admin = admin_client.get(url).content.decode()
    assert "Traceback (most recent call last):" in admin and "/srv/clawgym/tasks/importing.py" in admin
    assert "<details><summary>Traceback" in admin  # folded under the reason


def test_the_jobs_api_gives_the_traceback_and_paths_to_admins_only(api_as, viewer, admin_user):
    run = make_run(
        status=JobRun.Status.FAILED,
        error=SERVER_ERROR,
        params={"upload_path": "/srv/clawgym/var/up/x.zip"},
        result={"failed": [{"source": "a", "error": "cannot read /srv/clawgym/var/up/x.zip/a/b.json"}]},
    )
    as_viewer = api_as(viewer).get(f"/api/jobs/{run.pk}/").json()
    assert as_viewer["error"] == "FileNotFoundError: [Errno 2] No such file: '…/tasks.zip'"
    assert as_viewer["params"] == {"upload_path": "…/x.zip"}
    assert as_viewer["result"]["failed"][0]["error"] == "cannot read …/b.json"
    assert "/srv/" not in json.dumps(as_viewer)
    as_admin = api_as(admin_user).get(f"/api/jobs/{run.pk}/").json()
    assert as_admin["error"] == SERVER_ERROR and as_admin["params"]["upload_path"] == "/srv/clawgym/var/up/x.zip"


def test_hiding_paths_keeps_urls_and_relative_paths():
    from jobs.redaction import hide_paths

    text = "GET http://127.0.0.1:8000/v1/models failed for data/sales.csv in /tmp/ws-1/data/sales.csv; 404 GET /admin/"
    assert hide_paths(text) == (
        "GET http://127.0.0.1:8000/v1/models failed for data/sales.csv in …/sales.csv; 404 GET /admin/"
    )


def test_an_import_with_failed_tasks_shows_amber_with_its_counts_and_reasons(viewer_client):
    result = {
        "imported": 0,
        "updated": 0,
        "unchanged": 1,
        "failed": [
            {"source": "broken-task", "error": "data_entry.json: user_query is missing"},
            {"source": "other-task", "error": "reward/reward.sh is missing"},
        ],
    }
    run = make_run(
        kind="tasks.import_upload",
        status=JobRun.Status.SUCCEEDED,
        result=result,
        failed_items=2,
        items_total=3,
        params={"upload_path": "/srv/up/tasks.zip"},
        subject="tasks.zip",
    )
    assert run.outcome == JobRun.PARTIAL

    html = viewer_client.get(reverse("jobs:detail", args=[run.pk])).content.decode()
    assert '<span class="badge s-partial" data-testid="job-outcome">Completed with 2 of 3 failed</span>' in html
    assert "0 imported" in html and "1 unchanged" in html and "2 failed" in html
    assert "user_query is missing" in html and "reward/reward.sh is missing" in html
    listed = viewer_client.get(reverse("jobs:list")).content.decode()
    assert "Completed with 2 of 3 failed" in listed and "s-partial" in listed and "tasks.zip" in listed
    # The progress partial (the import page shows it) ends with the same outcome and the report.
    progress = viewer_client.get(reverse("jobs:progress", args=[run.pk])).content.decode()
    assert "s-partial" in progress and "user_query is missing" in progress
    assert (
        json.loads(viewer_client.get(reverse("jobs:progress", args=[run.pk])).headers["HX-Trigger"])["job-finished"][
            "outcome"
        ]
        == "partial"
    )


def test_detail_of_a_running_run_refreshes_its_live_part(viewer_client):
    run = make_run(status=JobRun.Status.RUNNING)
    url = reverse("jobs:detail", args=[run.pk])

    page = viewer_client.get(url).content.decode()
    live = viewer_client.get(url, **HTMX).content.decode()

    assert f'hx-get="{url}" hx-trigger="every 2s"' in page
    assert live.lstrip().startswith('<div id="job-live"') and "<html" not in live
    assert 'hx-trigger="every 1s"' not in live  # the progress inside does not poll on its own


def test_detail_shows_the_cancel_button_to_admins_only(viewer_client, admin_client):
    url = reverse("jobs:detail", args=[make_run(status=JobRun.Status.RUNNING).pk])

    assert "Cancel job" not in viewer_client.get(url).content.decode()
    assert "Cancel job" in admin_client.get(url).content.decode()


# --- cancel -------------------------------------------------------------------------------------------------


def test_viewer_cannot_cancel(viewer_client):
    run = make_run()

    response = viewer_client.post(reverse("jobs:cancel", args=[run.pk]))

    assert response.status_code == 403
    run.refresh_from_db()
    assert run.status == JobRun.Status.QUEUED and not run.cancel_requested


def test_admin_cancels_a_queued_run(admin_client):
    run = make_run()

    response = admin_client.post(reverse("jobs:cancel", args=[run.pk]))

    assert response.status_code == 302 and response["Location"] == reverse("jobs:detail", args=[run.pk])
    run.refresh_from_db()
    assert run.status == JobRun.Status.CANCELLED and run.finished_at
    assert "cancel requested by ada_admin" in run.log_tail


def test_admin_cancels_a_running_run_with_htmx(admin_client):
    run = make_run(status=JobRun.Status.RUNNING, worker="w")

    response = admin_client.post(reverse("jobs:cancel", args=[run.pk]), **HTMX)

    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<div id="job-live"')
    assert "Cancel requested: the job stops at its next progress report." in html
    run.refresh_from_db()
    assert run.status == JobRun.Status.RUNNING and run.cancel_requested


def test_cancelling_a_finished_run_changes_nothing(admin_client):
    run = make_run(status=JobRun.Status.SUCCEEDED)

    admin_client.post(reverse("jobs:cancel", args=[run.pk]))

    run.refresh_from_db()
    assert run.status == JobRun.Status.SUCCEEDED and not run.cancel_requested and run.log_tail == ""


def test_cancel_needs_post(admin_client):
    assert admin_client.get(reverse("jobs:cancel", args=[make_run().pk])).status_code == 405


@pytest.mark.django_db
def test_a_finished_run_tells_the_page_so_it_can_refresh(viewer_client):
    running = JobRun.objects.create(kind="jobs.ping", engine="django_q", status=JobRun.Status.RUNNING)
    done = JobRun.objects.create(kind="jobs.ping", engine="django_q", status=JobRun.Status.SUCCEEDED)
    assert "HX-Trigger" not in viewer_client.get(f"/jobs/{running.pk}/progress/", HTTP_HX_REQUEST="true")
    trigger = viewer_client.get(f"/jobs/{done.pk}/progress/", HTTP_HX_REQUEST="true")["HX-Trigger"]
    assert json.loads(trigger) == {
        "job-finished": {"id": done.pk, "kind": "jobs.ping", "status": "succeeded", "outcome": "succeeded"}
    }


def test_a_batch_whose_children_failed_is_shown_as_completed_with_failures(viewer_client):
    batch = make_run(kind="jobs.ping", status=JobRun.Status.SUCCEEDED, subject="3 candidates")
    for status in (JobRun.Status.SUCCEEDED, JobRun.Status.FAILED, JobRun.Status.FAILED):
        make_run(kind="jobs.ping", status=status, parent=batch)
    clean = make_run(kind="jobs.ping", status=JobRun.Status.SUCCEEDED)
    make_run(kind="jobs.ping", status=JobRun.Status.SUCCEEDED, parent=clean)

    listed = viewer_client.get(reverse("jobs:list")).content.decode()
    row = listed[listed.index(f'href="{reverse("jobs:detail", args=[batch.pk])}"') :]
    assert '<span class="badge s-partial">Completed with 2 failed</span>' in row[: row.index("</tr>")]
    row = listed[listed.index(f'href="{reverse("jobs:detail", args=[clean.pk])}"') :]
    assert '<span class="badge s-succeeded">Succeeded</span>' in row[: row.index("</tr>")]
    detail = viewer_client.get(reverse("jobs:detail", args=[batch.pk])).content.decode()
    assert "Completed with 2 failed" in detail
