"""A registered base model served as an agent from the Base models page and the API: the request queues the
`training.serve_checkpoint` job once (a second request gets the same server), the model's row polls while it starts,
then names the endpoint base-NAME with a link to the evaluation form (that endpoint chosen) and offers Stop; a start
that fails shows its error. Viewers see the state and start nothing. No worker runs here: the job is only recorded
(or run in this process where its outcome is the point); test_browser_base_model_serving serves a real one.

Stop from the web app stops the row at once; a process it cannot signal (the gpu worker's, another container) is
killed by the sweep it queues, on the machine where it runs."""

import os
import subprocess
import sys
from html import unescape

import pytest
from django.urls import reverse

from jobs import runner
from jobs.models import JobRun
from llm.models import ModelEndpoint
from training_jobs.models import BaseModel, ModelServer
from training_jobs.serving import stop_serving

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def base_model(tmp_path):
    # Nothing is started here, so any folder will do (the browser test serves the tiny model).
    return BaseModel.objects.create(name="tiny", path=str(tmp_path), architecture="Qwen3ForCausalLM")


def agent_endpoint(port: int) -> ModelEndpoint:
    return ModelEndpoint.objects.create(
        name="base-tiny", base_url=f"http://127.0.0.1:{port}/v1", model="base-tiny", roles=["agent"]
    )


def made_ready(server: ModelServer) -> ModelEndpoint:
    """What the job does once the server answers (on a port nothing listens on: the pages only read the row)."""
    endpoint = agent_endpoint(9)
    ModelServer.objects.filter(pk=server.pk).update(status="ready", endpoint=endpoint, host="127.0.0.1", port=9)
    return endpoint


def test_the_page_queues_one_server_and_the_row_follows_it_to_ready_and_stopped(
    admin_client, viewer_client, base_model
):
    serve_url = reverse("training:base-model-serve", args=["tiny"])
    row_url = reverse("training:base-model-server", args=["tiny"])
    page = viewer_client.get(reverse("training:base-models")).content.decode()
    assert 'id="base-model-tiny"' in page and serve_url not in page  # viewers see the row, no button
    assert viewer_client.post(serve_url).status_code == 403
    assert admin_client.post(reverse("training:base-model-serve", args=["nope"])).status_code == 404
    assert "Serve as an agent" in admin_client.get(reverse("training:base-models")).content.decode()

    row = admin_client.post(serve_url, headers=HTMX).content.decode()
    server = ModelServer.objects.get()
    assert (server.base_model, server.checkpoint, server.model_path, server.status) == (
        base_model,
        None,
        base_model.path,
        "starting",
    )
    assert (server.job_run.kind, server.job_run.queue) == ("training.serve_checkpoint", "gpu")
    assert server.job_run.params == {"server_id": server.pk, "base_model": "tiny"}
    assert row.lstrip().startswith('<tr id="base-model-tiny"') and 'data-server-status="starting"' in row
    assert f'hx-get="{row_url}" hx-trigger="every 2s"' in row and f"job #{server.job_run_id}" in row
    assert admin_client.post(serve_url, headers=HTMX).status_code == 200  # while it starts: the same server
    assert ModelServer.objects.count() == 1 and JobRun.objects.filter(kind="training.serve_checkpoint").count() == 1
    assert admin_client.get(row_url).status_code == 302  # a plain request: the page
    assert 'data-server-status="starting"' in viewer_client.get(row_url, headers=HTMX).content.decode()

    endpoint = made_ready(server)
    row = admin_client.get(row_url, headers=HTMX).content.decode()
    assert 'data-server-status="ready"' in row and "hx-get" not in row  # the polling stops
    assert '<code class="endpoint-name">base-tiny</code>' in row and ">Stop</button>" in row
    assert 'href="/evaluations/start/?endpoint=base-tiny"' in row
    # The evaluation form offers it like any agent endpoint, chosen.
    form = admin_client.get("/evaluations/start/?endpoint=base-tiny").content.decode()
    assert '<option value="base-tiny" selected>base-tiny</option>' in form

    assert viewer_client.post(reverse("training:base-model-stop", args=["tiny"])).status_code == 403
    row = admin_client.post(reverse("training:base-model-stop", args=["tiny"]), headers=HTMX).content.decode()
    server.refresh_from_db()
    endpoint.refresh_from_db()
    assert server.status == "stopped" and not endpoint.enabled
    assert 'data-server-status="stopped"' in row and "Serve again" in row
    form = admin_client.get("/evaluations/start/").content.decode()
    assert 'value="base-tiny"' not in form  # a disabled endpoint is offered nowhere

    # Without JavaScript: the form posts, the page follows with a message; a new server is starting.
    page = admin_client.post(serve_url, follow=True).content.decode()
    fresh = ModelServer.objects.exclude(pk=server.pk).get()
    assert fresh.status == "starting" and f"tiny: server #{fresh.pk} starting on a gpu worker" in page


def test_a_start_that_fails_shows_why_and_offers_serve_again(admin_client, viewer_client, base_model, tmp_path):
    BaseModel.objects.filter(pk=base_model.pk).update(path=str(tmp_path / "gone"))
    admin_client.post(reverse("training:base-model-serve", args=["tiny"]), headers=HTMX)
    server = ModelServer.objects.get()
    assert runner.execute(server.job_run_id) == JobRun.Status.FAILED  # the job, run here: no folder to serve
    row_url = reverse("training:base-model-server", args=["tiny"])
    row = unescape(admin_client.get(row_url, headers=HTMX).content.decode())
    server.refresh_from_db()
    assert server.status == "failed" and "is not on this machine" in server.error
    assert 'data-server-status="failed"' in row and "hx-get" not in row and "Serve again" in row
    assert f"folder {tmp_path / 'gone'} is not on this machine" in row
    seen = unescape(viewer_client.get(row_url, headers=HTMX).content.decode())
    assert "…/gone is not on this machine" in seen  # a viewer: the error, its path cut

    # The worker died with a second start: the next poll marks it failed with the job's error.
    admin_client.post(reverse("training:base-model-serve", args=["tiny"]), headers=HTMX)
    second = ModelServer.objects.exclude(pk=server.pk).get()
    JobRun.objects.filter(pk=second.job_run_id).update(status="failed", error="the worker was killed")
    row = admin_client.get(row_url, headers=HTMX).content.decode()
    second.refresh_from_db()
    assert second.status == "failed" and "the worker was killed" in row


def test_the_api_serves_once_and_stops(api_as, admin_user, viewer, base_model):
    url = "/api/training/base-models/tiny/"
    assert api_as(viewer).post(f"{url}serve/").status_code == 403
    assert api_as(viewer).post(f"{url}stop/").status_code == 403
    admin = api_as(admin_user)
    assert admin.post("/api/training/base-models/nope/serve/").status_code == 404
    started = admin.post(f"{url}serve/")
    assert started.status_code == 202, started.content
    body = started.json()
    assert (body["status"], body["base_model"], body["checkpoint"], body["endpoint"]) == (
        "starting",
        "tiny",
        None,
        None,
    )
    assert started["Location"] == body["url"] and body["url"].endswith(f"/api/training/servers/{body['id']}/")
    again = admin.post(f"{url}serve/")
    assert again.status_code == 202 and again.json()["id"] == body["id"]
    assert JobRun.objects.filter(kind="training.serve_checkpoint").count() == 1
    listed = api_as(viewer).get("/api/training/servers/?base_model=tiny").json()
    assert [s["id"] for s in listed["results"]] == [body["id"]]
    assert api_as(viewer).get("/api/training/servers/?base_model=other").json()["results"] == []

    made_ready(ModelServer.objects.get(pk=body["id"]))
    ready = api_as(viewer).get(body["url"]).json()
    assert (ready["status"], ready["endpoint"], ready["base_url"]) == ("ready", "base-tiny", "http://127.0.0.1:9/v1")
    stopped = admin.post(f"{url}stop/")
    assert stopped.status_code == 200
    assert [(s["id"], s["status"]) for s in stopped.json()["stopped"]] == [(body["id"], "stopped")]
    assert admin.post(f"{url}stop/").json() == {"stopped": []}
    assert not ModelEndpoint.objects.get(name="base-tiny").enabled


def test_a_server_the_web_app_cannot_signal_is_killed_by_the_sweep_on_its_machine(base_model, admin_user):
    # Ready on "another machine": its pid here is this test's process, whose command line is no server's.
    server = ModelServer.objects.create(
        base_model=base_model,
        model_path=base_model.path,
        backend="transformers",
        status="ready",
        endpoint=agent_endpoint(59999),
        host="127.0.0.1",
        port=59999,
        pid=os.getpid(),
        command=[sys.executable, "-m", "training.serving_front"],
    )
    [stopped] = stop_serving(base_model, user=admin_user)
    assert stopped.status == "stopped" and not stopped.endpoint.enabled
    [sweep] = JobRun.objects.filter(kind="training.stop_idle_servers")
    assert sweep.queue == "gpu" and sweep.created_by == admin_user  # queued in the name of who stopped it

    # On the gpu worker's machine the row's pid is its front (a stand-in with the front's arguments here).
    front = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "training.serving_front", "59999"],
        start_new_session=True,
    )
    try:
        ModelServer.objects.filter(pk=server.pk).update(pid=front.pid)
        assert runner.execute(sweep.pk) == JobRun.Status.SUCCEEDED
        sweep.refresh_from_db()
        assert sweep.result == {"stopped": [], "killed": [server.pk]}
        front.wait(timeout=10)  # killed (and reaped) by the sweep: it returns at once
    finally:
        front.kill()
