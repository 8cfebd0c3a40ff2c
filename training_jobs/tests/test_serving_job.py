"""Serving a checkpoint from the API: the request queues the `training.serve_checkpoint` job and answers 202 at once
with a "starting" server; a real django-q worker (listening on CLAWGYM_SERVE_HOST=0.0.0.0, so the endpoint names the
machine as the policy server does) starts `transformers serve` detached, and the server, followed at its url, turns
ready with an endpoint that answers after the job has ended. A second request gets the same server; one that cannot
come up ends failed with the error, and the next request starts afresh.

Served as anyone on the network would reach it: only with its own key (the endpoint's, derived from SECRET_KEY), only
the OpenAI routes (transformers serve's /load_model and /reset are not reachable through its front), bodies bounded;
the front and the model server hold none of the worker's secrets; stopped by the idle sweep from another process,
it is reaped by the worker that started it (no zombie)."""

import json
import os
import socket
import time
import urllib.error
import urllib.request
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from jobs.models import JobRun
from jobs.testing import use_engine, wait_for_job_run
from training_jobs.models import ModelServer
from training_jobs.testing.runs import MAX_BODY, PROBE, served_run

READY_TIMEOUT = 180.0  # s: transformers serve imports torch and loads the model on a busy CPU


def follow(client, url: str, timeout: float = READY_TIMEOUT) -> dict:
    import time

    deadline = time.monotonic() + timeout
    while True:
        body = client.get(url).json()
        if body["status"] != "starting":
            return body
        assert time.monotonic() < deadline, f"server still starting after {timeout} s: {body}"
        time.sleep(0.5)


def environ(pid: int) -> dict:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def call(url: str, *, key: str | None, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def process_state(pid: int) -> str:
    """R, S, … for a live process; Z for one exited and not reaped; "" when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


@pytest.mark.workers
@pytest.mark.once
@pytest.mark.django_db(transaction=True)
def test_the_api_queues_the_serve_job_and_the_server_comes_up_on_the_worker(
    gpu_worker, admin_user, viewer, api_as, tiny_model_path, tmp_path
):
    checkpoint = served_run(tiny_model_path, tmp_path)
    admin = api_as(admin_user)
    assert api_as(viewer).post(f"/api/training/checkpoints/{checkpoint.pk}/serve/").status_code == 403
    with use_engine("django_q"):
        started = admin.post(f"/api/training/checkpoints/{checkpoint.pk}/serve/")
        assert started.status_code == 202, started.content
        body = started.json()
        assert body["status"] == "starting" and body["endpoint"] is None and body["checkpoint"] == checkpoint.pk
        assert started["Location"] == body["url"] and body["url"].endswith(f"/api/training/servers/{body['id']}/")
        again = admin.post(f"/api/training/checkpoints/{checkpoint.pk}/serve/")  # while it starts: the same one
        assert again.status_code == 202 and again.json()["id"] == body["id"]
        server = ModelServer.objects.get()
        assert server.job_run.kind == "training.serve_checkpoint" and server.job_run.queue == "gpu"

        done = follow(api_as(viewer), body["url"])
    server.refresh_from_db()
    assert done["status"] == "ready", (done, server.job_run.log_tail, gpu_worker.log_tail())
    name = f"ckpt-{checkpoint.run_id}-2"
    assert done["endpoint"] == name and server.command[server.command.index("--host") + 1] == "0.0.0.0"
    assert done["base_url"] == f"http://{socket.getfqdn()}:{server.port}/v1" == server.endpoint.base_url
    # The server row is ready a moment before the job that started it records its end: wait for that end.
    job_run = wait_for_job_run(JobRun.objects.get(pk=server.job_run_id), timeout=60)
    assert job_run.status == "succeeded" and job_run.result["status"] == "ready", job_run.error
    # Started by the worker, in a session of its own, and still serving after the job has ended.
    assert process_state(server.pid) not in ("", "Z") and os.getsid(server.pid) == server.pid
    endpoint = server.endpoint
    key = endpoint.api_key()  # derived here as in the worker: the same SECRET_KEY, the server's own name
    assert endpoint.api_key_env == f"CLAWGYM_KEY_SERVED_S{server.pk}" and key.startswith("cgk_")
    assert key not in json.dumps(done) and key not in json.dumps(server.command)
    base = done["base_url"].removesuffix("/v1")  # as anyone on the network reaches it, by the machine's name
    status, models = call(f"{base}/v1/models", key=key)
    assert status == 200 and name in [model["id"] for model in json.loads(models)["data"]]
    # Without its key nothing answers; with it, still none of transformers serve's own management routes.
    for method, path, body in [
        ("GET", "/v1/models", None),
        ("POST", "/load_model", {"model": str(tmp_path)}),
        ("POST", "/reset", {}),
        ("POST", "/v1/chat/completions", {"messages": []}),
    ]:
        data = None if body is None else json.dumps(body).encode()
        assert call(f"{base}{path}", key=None, method=method, body=data)[0] == 401, path
        assert call(f"{base}{path}", key="cgk_" + "0" * 64, method=method, body=data)[0] == 401, path
    for path in ("/load_model", "/reset", "/v1/responses", "/v1/audio/transcriptions", "/docs"):
        assert call(f"{base}{path}", key=key, method="POST", body=b"{}")[0] == 404, path
    # The model server itself listens on a Unix socket of its own behind its front, and on no port.
    backend = server.command[server.command.index("--") + 1 :]
    assert "--host" not in backend and "--port" not in backend
    assert backend[backend.index("--uds") + 1] == server.command[server.command.index("--upstream-socket") + 1]
    # Bodies are bounded (CLAWGYM_SERVE_MAX_REQUEST_BYTES); one within the bound is answered.
    big = json.dumps({"model": name, "messages": [{"role": "user", "content": "x" * MAX_BODY}]}).encode()
    assert call(f"{base}/v1/chat/completions", key=key, method="POST", body=big)[0] == 413
    chat = {"model": name, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    assert call(f"{base}/v1/chat/completions", key=key, method="POST", body=json.dumps(chat).encode())[0] == 200
    # Neither the front nor the model server under it inherited the worker's secrets.
    [backend_pid] = children(server.pid)
    for pid, env in ((server.pid, environ(server.pid)), (backend_pid, environ(backend_pid))):
        leaked = {"SECRET_KEY", "DATABASE_URL", "CLAWGYM_KEY_PROBE"} & set(env)
        assert not leaked and PROBE not in env.values() and env["HF_HUB_OFFLINE"] == "1", (pid, leaked)
    assert "CLAWGYM_FRONT_KEY" not in environ(backend_pid) and key not in environ(backend_pid).values()
    try:
        with use_engine("django_q"):
            ready = admin.post(f"/api/training/checkpoints/{checkpoint.pk}/serve/")
        assert ready.status_code == 202 and ready.json()["id"] == server.pk and ready.json()["status"] == "ready"
        assert ModelServer.objects.count() == 1 and JobRun.objects.filter(kind="training.serve_checkpoint").count() == 1
        listed = api_as(viewer).get(f"/api/training/servers/?checkpoint={checkpoint.pk}").json()
        assert [row["id"] for row in listed["results"]] == [server.pk]
        # The idle sweep, from another process than the worker that started it (here the test's; on a deployment
        # another worker process, or the next run's job): the worker's waiting thread reaps it, no zombie is left.
        from training_jobs.serving import stop_idle_servers

        assert stop_idle_servers(idle_seconds=0) == [server.pk]
    finally:
        call_command("serve_checkpoint", "--stop", name, stdout=StringIO())
    server.refresh_from_db()
    assert server.status == "stopped" and not server.endpoint.enabled and server.error.startswith("idle since")
    deadline = time.monotonic() + 15
    while process_state(server.pid) != "" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert process_state(server.pid) == "", f"the stopped server is still there ({process_state(server.pid)})"
    assert process_state(backend_pid) == ""


@pytest.mark.workers
@pytest.mark.once
@pytest.mark.django_db(transaction=True)
def test_a_server_that_cannot_come_up_ends_failed_and_the_next_request_starts_afresh(
    gpu_worker, admin_user, api_as, tiny_model_path, tmp_path
):
    checkpoint = served_run(tiny_model_path, tmp_path, lora_without_hash=True)
    admin = api_as(admin_user)
    with use_engine("django_q"):
        first = admin.post(f"/api/training/checkpoints/{checkpoint.pk}/serve/").json()
        failed = follow(admin, first["url"], timeout=60)
        assert failed["status"] == "failed" and failed["endpoint"] is None
        assert f"checkpoint #{checkpoint.pk} has no sha256" in failed["error"]
        assert JobRun.objects.get(pk=failed["job_run"]).status == "failed"
        second = admin.post(f"/api/training/checkpoints/{checkpoint.pk}/serve/")
        assert second.status_code == 202 and second.json()["id"] != first["id"]
        assert second.json()["status"] == "starting"
        assert follow(admin, second.json()["url"], timeout=60)["status"] == "failed"


@pytest.mark.django_db
def test_the_page_queues_the_server_and_its_row_polls_until_it_is_up_or_failed(admin_client, viewer_client, tmp_path):
    # No worker: the job is only recorded (this test's transaction never commits), its outcomes are written by hand.
    from llm.models import ModelEndpoint

    checkpoint = served_run(str(tmp_path), tmp_path)
    serve_url = f"/training/runs/{checkpoint.run_id}/serve/"
    row_url = f"/training/runs/{checkpoint.run_id}/checkpoints/{checkpoint.pk}/server/"
    assert viewer_client.post(serve_url, {"checkpoint": checkpoint.pk}).status_code == 403
    assert admin_client.post(serve_url, {"checkpoint": "x"}).status_code == 404
    assert 'name="checkpoint"' not in viewer_client.get(f"/training/runs/{checkpoint.run_id}/").content.decode()

    row = admin_client.post(serve_url, {"checkpoint": checkpoint.pk}, HTTP_HX_REQUEST="true").content.decode()
    server = ModelServer.objects.get()
    assert server.status == "starting" and server.job_run.kind == "training.serve_checkpoint"
    assert 'data-server-status="starting"' in row and f'hx-get="{row_url}"' in row and "every 2s" in row
    assert admin_client.get(row_url).status_code == 302  # a plain request: the run page
    assert 'data-server-status="starting"' in viewer_client.get(row_url, HTTP_HX_REQUEST="true").content.decode()

    # The worker died with it: the next poll marks it failed, and the row stops polling and offers Serve again.
    JobRun.objects.filter(pk=server.job_run_id).update(status="failed", error="the worker was killed")
    row = admin_client.get(row_url, HTTP_HX_REQUEST="true").content.decode()
    server.refresh_from_db()
    assert server.status == "failed" and "the worker was killed" in server.error
    assert 'data-server-status="failed"' in row and "hx-get" not in row and "Serve again" in row

    # Without JavaScript: the form posts, the run page follows with a message; a new server is starting.
    page = admin_client.post(serve_url, {"checkpoint": checkpoint.pk}, follow=True).content.decode()
    fresh = ModelServer.objects.exclude(pk=server.pk).get()
    assert fresh.status == "starting" and f"server #{fresh.pk} starting on a gpu worker" in page

    endpoint = ModelEndpoint.objects.create(
        name=f"ckpt-{checkpoint.run_id}-2",
        base_url="http://127.0.0.1:9/v1",
        model=f"ckpt-{checkpoint.run_id}-2",
        roles=["agent"],
    )
    ModelServer.objects.filter(pk=fresh.pk).update(status="ready", endpoint=endpoint)
    row = admin_client.get(row_url, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-server-status="ready"' in row and "hx-get" not in row and endpoint.name in row
    assert f'href="/evaluations/start/?endpoint={endpoint.name}"' in row
