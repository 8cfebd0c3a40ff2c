"""The in-browser solve over the API (review.solve_api): a script opens the reviewer's workspace, writes a file, runs
the checker (the job run here, in the sandbox) and saves the full-marks workspace as the reference solution; refusals
are {detail} with the right status."""

import pytest

from jobs.models import JobRun
from jobs.runner import execute
from jobs.scratch import remove_tree, scratch_root
from review import services, solving
from review.tests.test_solve import candidate as candidate  # noqa: F401 (the fixture: a task whose checker runs)


@pytest.fixture(autouse=True)
def no_workspaces():
    remove_tree(scratch_root() / solving.FOLDER)


def path(candidate, tail=""):
    return f"/api/candidates/{candidate.pk}/solve/{tail}"


def test_open_write_run_and_save_over_the_api(api_as, candidate, reviewer, bwrap):
    services.claim(candidate, user=reviewer)
    api = api_as(reviewer)
    state = api.get(path(candidate)).json()
    assert state["open"] is False and state["why_not"] == "open a scratch workspace first"

    opened = api.post(path(candidate), {"source": "initial"}, format="json")
    assert opened.status_code == 201 and [f["path"] for f in opened.json()["files"]] == ["sales.csv"]
    written = api.post(path(candidate, "files/"), {"path": "report.md", "content": "total 1"}, format="json")
    assert {"path": "report.md", "sha256": written.json()["files"][0]["sha256"], "change": "added"} in written.json()[
        "files"
    ]
    refused = api.post(path(candidate, "save/"), {"base_revision": 1}, format="json")
    assert refused.status_code == 400 and "run the checker on the workspace first" in refused.json()["detail"]

    run = api.post(path(candidate, "run/"), format="json")
    assert run.status_code == 202 and run.json()["kind"] == "review.solve"
    assert execute(run.json()["id"]) == JobRun.Status.SUCCEEDED
    state = api.get(path(candidate)).json()
    assert state["result"]["solved"] and state["result"]["subscores"] == {"report_exists": 1.0, "total_named": 1.0}
    assert state["can_save"] and state["why_not"] == ""

    saved = api.post(path(candidate, "save/"), {"base_revision": 1, "reason": "by script"}, format="json")
    assert saved.status_code == 201 and saved.json()["revision"] == 2
    assert saved.json()["sanity_job"]["kind"] == "tasks.sanity_check"
    candidate.task.refresh_from_db()
    assert candidate.task.current_revision.files.get(role="solution", path="report.md").blob.content == b"total 1"
    assert api.post(path(candidate, "discard/"), format="json").json()["open"] is False


def test_refusals_over_the_api(api_as, candidate, reviewer, viewer):
    api = api_as(reviewer)
    assert api_as(viewer).post(path(candidate), {}, format="json").status_code == 403
    assert api_as(viewer).get(path(candidate)).json()["open"] is False
    assert api.post(path(candidate, "files/"), {"path": "a.txt"}, format="json").status_code == 400
    assert api.post(path(candidate, "run/"), format="json").status_code == 400
    api.post(path(candidate), {}, format="json")
    bad = api.post(path(candidate, "files/"), {"path": "../x", "content": "x"}, format="json")
    assert bad.status_code == 400 and "bad file path" in bad.json()["detail"]
    assert api.get("/api/candidates/999999/solve/").status_code == 404
    assert api.post(path(candidate, "save/"), {"base_revision": 9}, format="json").status_code == 400
