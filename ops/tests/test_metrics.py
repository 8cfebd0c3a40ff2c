"""/metrics: django-prometheus's request metrics and ours, after real work (a page served, a stream relayed by the
proxy on a live uvicorn, jobs queued on the django-q2 ORM broker and on Redis), and who may read it."""

import threading

import httpx
import openai
import pytest

import jobs
from jobs.models import JobRun
from jobs.workers import beat
from lib.testing import wait_until
from llm.models import ModelEndpoint
from llm.services import open_proxy_session, proxy_base_url
from llm.testing import Reply
from ops.tests.helpers import samples

pytestmark = pytest.mark.django_db


def scrape(client, **extra) -> dict:
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return samples(response.content.decode())


# --- who may read it -------------------------------------------------------------------------------------------


def test_metrics_are_served_to_loopback_and_refused_elsewhere(client):
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    refused = client.get("/metrics", REMOTE_ADDR="203.0.113.7")
    assert refused.status_code == 403 and b"CLAWGYM_METRICS_TOKEN" in refused.content
    assert b"clawgym_" not in refused.content


def test_a_token_opens_metrics_from_anywhere_and_networks_can_be_allowed(client, settings):
    settings.CLAWGYM_METRICS_TOKEN = "s3cret-scrape-token"
    outside = {"REMOTE_ADDR": "203.0.113.7"}
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token", **outside).status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-toke", **outside).status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="s3cret-scrape-token", **outside).status_code == 403
    assert client.get("/metrics", **outside).status_code == 403

    settings.CLAWGYM_METRICS_ALLOW_NETWORKS = ["not-a-network", "203.0.113.0/24"]  # a bad entry opens nothing
    assert client.get("/metrics", **outside).status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="198.51.100.1").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403  # loopback was not listed again


# --- what it says ----------------------------------------------------------------------------------------------


def test_request_latency_by_view_from_django_prometheus(viewer_client):
    key = ("django_http_requests_latency_seconds_by_view_method_count", (("method", "GET"), ("view", "jobs:list")))
    before = scrape(viewer_client).get(key, 0)
    assert viewer_client.get("/jobs/").status_code == 200
    assert viewer_client.get("/jobs/").status_code == 200
    assert scrape(viewer_client)[key] == before + 2


@pytest.mark.django_db(transaction=True)
def test_job_runs_and_the_orm_broker_queue_per_queue(client, settings):
    settings.CLAWGYM_JOB_ENGINE = "django_q"
    jobs.enqueue("jobs.ping", queue="sandbox")  # no worker: it waits in django-q's queue table
    jobs.enqueue("jobs.ping", queue="sandbox")
    running = jobs.enqueue("jobs.ping")
    JobRun.objects.filter(pk=running.pk).update(status=JobRun.Status.RUNNING)
    beat("host-a:1:1", "celery", ["sandbox"], running.created_at)

    found = scrape(client)

    assert found[("clawgym_job_runs", (("queue", "sandbox"), ("status", "queued")))] == 2
    assert found[("clawgym_job_runs", (("queue", "default"), ("status", "running")))] == 1
    assert found[("clawgym_job_runs", (("queue", "gpu"), ("status", "queued")))] == 0
    assert found[("clawgym_broker_queue_depth", (("engine", "django_q"), ("queue", "clawgym")))] == 3
    assert found[("clawgym_workers_seen", (("queue", "sandbox"),))] == 1
    assert found[("clawgym_workers_seen", (("queue", "default"),))] == 0


@pytest.mark.django_db(transaction=True)
def test_the_celery_queues_depth_is_read_from_redis(client, settings, celery_broker_url):
    settings.CLAWGYM_JOB_ENGINE = "celery"
    settings.CELERY_BROKER_URL = celery_broker_url  # a Redis database of this session with no worker on it

    def depth():
        return {
            dict(labels)["queue"]: value
            for (name, labels), value in scrape(client).items()
            if name == "clawgym_broker_queue_depth"
        }

    # The session's broker database may hold messages earlier tests left for a queue nobody consumed: the change counts.
    before = depth()
    for queue in ("sandbox", "sandbox", "gpu"):
        jobs.enqueue("jobs.ping", queue=queue)
    after = depth()

    assert set(after) == {"default", "sandbox", "gpu"}
    assert {queue: after[queue] - before.get(queue, 0) for queue in after} == {"default": 0, "sandbox": 2, "gpu": 1}


def test_a_part_that_cannot_be_read_is_left_out_and_counted(client, settings):
    settings.CLAWGYM_JOB_ENGINE = "celery"
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    key = ("clawgym_metrics_errors_total", (("part", "broker"),))
    before = scrape(client).get(key, 0)

    found = scrape(client)

    assert found[key] == before + 1
    assert not any(name == "clawgym_broker_queue_depth" for name, _ in found)
    assert ("clawgym_rollouts_running", ()) in found  # the rest is still there


def test_running_rollouts(client, admin_user):
    from evaluation.models import Rollout
    from tasks.testing import make_task

    endpoint = ModelEndpoint.objects.create(name="agent", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"])
    revision = make_task("t-review").current_revision
    for status in ("running", "running", "scored", "queued"):
        Rollout.objects.create(revision=revision, endpoint=endpoint, harness="builtin", status=status)

    assert scrape(client)[("clawgym_rollouts_running", ())] == 2


@pytest.mark.django_db(transaction=True)
def test_proxy_streams_in_flight_and_tokens_after_a_real_stream(live_server_asgi, scripted_upstream):
    endpoint = ModelEndpoint.objects.create(
        name="upstream", base_url=scripted_upstream.base_url, model="real-7b", roles=["agent"], timeout_seconds=20
    )
    session = open_proxy_session(endpoint, subject="rollout:9")
    scripted_upstream.push(Reply.text("Hello from a held stream", chunk_size=4, gate=True, usage=(31, 17)))

    def read_metrics() -> dict:
        response = httpx.get(f"{live_server_asgi.url}/metrics", timeout=10)  # from loopback, as Prometheus here
        assert response.status_code == 200
        return samples(response.text)

    streams = ("clawgym_proxy_streams_in_flight", ())
    tokens_in = ("clawgym_proxy_tokens_total", (("direction", "input"),))
    tokens_out = ("clawgym_proxy_tokens_total", (("direction", "output"),))
    calls_ok = ("clawgym_proxy_calls_total", (("outcome", "ok"),))
    before = read_metrics()
    assert before[streams] == 0

    text, errors = [], []

    def agent():
        try:
            with openai.OpenAI(base_url=proxy_base_url(session), api_key="k", max_retries=0, timeout=30) as client:
                stream = client.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": "hi"}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        text.append(chunk.choices[0].delta.content)
        except Exception as exc:  # shown by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=agent)
    thread.start()
    try:
        # The upstream holds its last chunk: the stream is in flight.
        wait_until(lambda: read_metrics()[streams] == 1, "the stream to show as in flight", timeout=20)
        assert text  # its first chunks were passed on already
    finally:
        scripted_upstream.release()
        thread.join(timeout=30)
    assert not errors and "".join(text) == "Hello from a held stream"

    after = read_metrics()
    assert after[streams] == 0
    assert after[tokens_in] - before.get(tokens_in, 0) == 31
    assert after[tokens_out] - before.get(tokens_out, 0) == 17
    assert after[calls_ok] - before.get(calls_ok, 0) == 1
    assert session.calls.get().input_tokens == 31  # the counters follow the recorded call
