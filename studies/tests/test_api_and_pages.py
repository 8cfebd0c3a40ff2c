"""Studies over the API and the pages: viewers read, admins start and cancel; bad asks are a 400 naming the problem."""

import json

import pytest
from django.urls import reverse

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.testing import make_tasks
from jobs.models import JobRun
from lib.testing import token_client
from llm.models import ModelEndpoint
from studies.job_kinds import ADVANCE_JOB
from studies.models import Study
from studies.services import create_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def ask():
    revisions = make_tasks()
    version = BenchmarkVersion.objects.create(benchmark=Benchmark.objects.create(name="api-bench"), number=1)
    PinnedRevision.objects.bulk_create(PinnedRevision(version=version, revision=r) for r in revisions.values())
    endpoint = ModelEndpoint.objects.create(name="m", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"])
    return {"benchmark_version": version.pk, "endpoint": endpoint.pk, "runs": 3, "subset": 2, "harness": "builtin"}


def test_admins_start_and_cancel_viewers_read_outsiders_do_not(ask, admin_user, viewer, outsider):
    admin, reader = token_client(admin_user), token_client(viewer)
    response = reader.post("/api/studies/", {"kind": "stability", "params": ask}, format="json")
    assert response.status_code == 403 and not Study.objects.exists()

    response = admin.post("/api/studies/", {"kind": "stability", "params": ask, "name": "spread"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "running" and body["name"] == "spread"
    assert [c["label"] for c in body["cells"]] == ["run 1", "run 2", "run 3"] and body["best"] is None
    assert body["missing"] == ["run 1", "run 2", "run 3"]
    assert JobRun.objects.filter(kind=ADVANCE_JOB, params__study_id=body["study"]).count() == 1

    assert reader.get("/api/studies/").json()["results"][0]["id"] == body["study"]
    assert reader.get("/api/studies/?kind=stability&status=running").json()["count"] == 1
    assert reader.get("/api/studies/?colour=red").status_code == 400
    assert reader.get(f"/api/studies/{body['study']}/").json() == body
    assert token_client(outsider).get("/api/studies/").status_code == 403

    assert reader.post(f"/api/studies/{body['study']}/cancel/").status_code == 403
    cancelled = admin.post(f"/api/studies/{body['study']}/cancel/").json()
    assert cancelled["status"] == "cancelled"
    assert {c["error"] for c in cancelled["cells"]} == {"the study was cancelled"}
    assert JobRun.objects.get(kind=ADVANCE_JOB).status == JobRun.Status.CANCELLED


@pytest.mark.parametrize(
    "payload, message",
    [
        ({"kind": "nope", "params": {}}, "kind"),
        ({"kind": "stability", "params": {"runs": 3}}, "a benchmark version is needed"),
        ({"kind": "stability", "params": "x"}, "params"),
        ({"kind": "reward_threshold", "params": {"values": "0.5,2"}}, "a threshold must be a number in [0, 1], got 2"),
    ],
)
def test_a_bad_ask_is_a_400_that_says_why(admin_user, payload, message):
    response = token_client(admin_user).post("/api/studies/", payload, format="json")
    assert response.status_code == 400 and message in response.content.decode()
    assert not Study.objects.exists()


def test_the_pages_read_for_viewers_and_start_for_admins(ask, admin_client, viewer_client):
    assert viewer_client.get(reverse("studies:start")).status_code == 403
    form = {"kind": "stability", "benchmark_version": ask["benchmark_version"], "harness": "builtin", "runs": 2}
    response = admin_client.post(reverse("studies:start"), form)
    assert response.status_code == 400 and "an endpoint is needed" in response.content.decode()
    response = admin_client.post(reverse("studies:start"), {**form, "endpoint": ask["endpoint"], "name": "two runs"})
    study = Study.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("studies:detail", args=[study.pk])

    listing = viewer_client.get(reverse("studies:list")).content.decode()
    assert "two runs" in listing and 'hx-trigger="every 2s"' in listing  # a running study: the list polls
    page = viewer_client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert "Pending (2)" in page and 'data-cell="run 1"' in page and 'hx-trigger="every 2s"' in page
    partial = viewer_client.get(reverse("studies:detail", args=[study.pk]), headers={"HX-Request": "true"})
    assert partial.content.decode().lstrip().startswith('<div id="study-live"')
    assert viewer_client.get(reverse("studies:detail", args=[999])).status_code == 404


def test_an_admin_cancels_a_study_from_its_page(ask, admin_client, viewer_client):
    admin_client.post(reverse("studies:start"), {"kind": "stability", **ask, "name": "to stop"})
    study = Study.objects.get()
    page = admin_client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert 'id="cancel-study"' in page
    assert 'id="cancel-study"' not in viewer_client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert viewer_client.post(reverse("studies:cancel", args=[study.pk])).status_code == 403
    response = admin_client.post(reverse("studies:cancel", args=[study.pk]), follow=True)
    assert f"Study #{study.pk} cancelled." in response.content.decode()
    study.refresh_from_db()
    assert study.status == Study.Status.CANCELLED and 'id="cancel-study"' not in response.content.decode()
    again = admin_client.post(reverse("studies:cancel", args=[study.pk]), follow=True).content.decode()
    assert "there is nothing to cancel" in again


def test_the_periodic_step_moves_every_running_study(ask):
    from jobs.testing import run_now

    study = create_study(kind="stability", params=ask, user=None)
    result = run_now("studies.advance_running").result
    assert result == {"advanced": [study.pk]}
    cells = list(study.cells.order_by("index"))
    assert all(c.status == "running" and c.eval_run is not None for c in cells)  # their runs started
    assert all(c.eval_run.on_finish == ADVANCE_JOB for c in cells)


def test_no_worker_taking_the_first_step_cancels_the_study_and_says_how_to_start_one(ask):
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    out = StringIO()
    with pytest.raises(CommandError) as raised:
        call_command(
            "study", "start", "--kind", "stability", "--benchmark", "api-bench", "--endpoint", "m", "--runs", "2",
            "--harness", "builtin", "--start-timeout", "0.2", "--timeout", "5", "--json", stdout=out, stderr=StringIO(),
        )  # fmt: skip
    assert (
        raised.value.returncode == 3
        and "--here" in str(raised.value)
        and "The study was cancelled." in str(raised.value)
    )
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["status"] == "cancelled" and Study.objects.get().status == Study.Status.CANCELLED
    assert JobRun.objects.get(kind=ADVANCE_JOB).status == JobRun.Status.CANCELLED
