"""/healthz: the database, the broker, workers seen recently per queue, the var folder's disk; 200 or 503, no sign-in."""

import socket
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import Worker
from jobs.workers import beat
from lib.testing import wait_until
from ops import health

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_worker_cache():
    health.forget_cache()
    yield
    health.forget_cache()


def worker_seen(queues=("default", "sandbox", "gpu"), *, ago: float = 0.0, name="host-a:10:1"):
    beat(name, "celery", list(queues), timezone.now())
    Worker.objects.filter(name=name).update(seen_at=timezone.now() - timedelta(seconds=ago))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket is closed


def test_healthy_is_200_for_anyone_with_every_check(client):
    worker_seen()

    response = client.get("/healthz")

    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"]
    body = response.json()
    assert body["status"] == "ok"
    checks = body["checks"]
    assert set(checks) == {"database", "broker", "workers", "disk"}
    assert checks["database"]["ok"] and checks["database"]["vendor"] == connection.vendor
    assert checks["broker"] == {"ok": True, "engine": "django_q", "ms": checks["broker"]["ms"]}
    assert checks["workers"] == {
        "ok": True,
        "seen": {"default": 1, "sandbox": 1, "gpu": 1},
        "required": ["default"],
        "within_seconds": 60,
    }
    assert checks["disk"]["ok"] and checks["disk"]["free_mb"] >= checks["disk"]["min_free_mb"] == 1024


def test_unhealthy_when_the_celery_broker_is_down(client, settings):
    worker_seen()
    settings.CLAWGYM_JOB_ENGINE = "celery"
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{closed_port()}/0"

    started = time.monotonic()
    response = client.get("/healthz")

    assert time.monotonic() - started < 5  # refused at once: a load balancer's probe must not hang
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unhealthy"
    assert body["checks"]["broker"]["ok"] is False and body["checks"]["broker"]["engine"] == "celery"
    assert "ConnectionError" in body["checks"]["broker"]["error"]
    assert body["checks"]["database"]["ok"] and body["checks"]["workers"]["ok"] and body["checks"]["disk"]["ok"]


def test_healthy_on_a_real_redis_broker(client, settings, celery_broker_url):
    worker_seen()
    settings.CLAWGYM_JOB_ENGINE = "celery"
    settings.CELERY_BROKER_URL = celery_broker_url

    response = client.get("/healthz")

    assert response.status_code == 200, response.json()
    assert response.json()["checks"]["broker"]["engine"] == "celery"


def test_unhealthy_without_a_worker_seen_recently_on_a_required_queue(client, settings):
    worker_seen(("sandbox",), name="sandbox-host:1:1")
    worker_seen(ago=61, name="dead-host:1:1")  # its last beat is older than CLAWGYM_WORKER_SEEN_SECONDS

    response = client.get("/healthz")

    assert response.status_code == 503
    workers = response.json()["checks"]["workers"]
    assert workers["seen"] == {"default": 0, "sandbox": 1, "gpu": 0}
    assert workers["error"] == "no worker seen on queue default"

    settings.CLAWGYM_HEALTH_QUEUES = ["default", "gpu"]
    health.forget_cache()
    assert client.get("/healthz").json()["checks"]["workers"]["error"] == "no worker seen on queues default, gpu"

    settings.CLAWGYM_HEALTH_QUEUES = []  # a web host whose health does not depend on workers
    assert client.get("/healthz").status_code == 200


def test_unhealthy_when_the_var_disk_is_nearly_full(client, settings):
    worker_seen()
    settings.CLAWGYM_HEALTH_MIN_FREE_MB = 1024 * 1024 * 1024  # a petabyte

    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json()["checks"]["disk"]["error"] == "the var folder's disk is nearly full"


def test_the_worker_lookup_is_cached_for_a_few_seconds(client, settings):
    worker_seen()
    with CaptureQueriesContext(connection) as first:
        assert client.get("/healthz").status_code == 200
    Worker.objects.all().delete()  # the next lookup would find no worker
    with CaptureQueriesContext(connection) as second:
        assert client.get("/healthz").status_code == 200  # still the cached answer
    assert len(second) == len(first) - 1

    settings.CLAWGYM_HEALTH_CACHE_SECONDS = 0
    assert client.get("/healthz").status_code == 503


def test_only_get(client):
    assert client.post("/healthz").status_code == 405


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_a_real_django_q_cluster_is_seen_on_every_queue(django_q_worker, client):
    # The test database is emptied between tests: the next beat writes it again.
    wait_until(Worker.objects.filter(engine="django_q").exists, "the cluster's beat", timeout=30)

    response = client.get("/healthz")

    assert response.status_code == 200, response.json()
    assert response.json()["checks"]["workers"]["seen"] == {"default": 1, "sandbox": 1, "gpu": 1}  # one process
    worker = Worker.objects.get(engine="django_q")
    assert worker.host == socket.gethostname() and worker.queue_list == ["default", "sandbox", "gpu"]


OUTSIDE = "203.0.113.7"  # a prober's address: not in CLAWGYM_METRICS_ALLOW_NETWORKS (loopback)


def test_anyone_else_learns_only_whether_it_is_up(client, viewer_client, admin_client, admin_user, api_as):
    worker_seen()

    anonymous = client.get("/healthz", REMOTE_ADDR=OUTSIDE)
    assert anonymous.status_code == 200 and anonymous.json() == {"status": "ok"}  # no vendor, queues, disk
    assert viewer_client.get("/healthz", REMOTE_ADDR=OUTSIDE).json() == {"status": "ok"}  # a role, but not admin
    assert client.get("/healthz", REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION="Token wrong").json() == {"status": "ok"}

    # Admins, signed in or with their API token, and loopback (a compose healthcheck, an operator's curl) see it all.
    for response in (
        admin_client.get("/healthz", REMOTE_ADDR=OUTSIDE),
        api_as(admin_user).get("/healthz", REMOTE_ADDR=OUTSIDE),
        client.get("/healthz", REMOTE_ADDR="127.0.0.1"),
    ):
        assert set(response.json()["checks"]) == {"database", "broker", "workers", "disk"}
        assert response.json()["checks"]["database"]["vendor"] == connection.vendor


def test_unhealthy_is_still_a_503_for_anyone(client, settings):
    worker_seen()
    settings.CLAWGYM_HEALTH_MIN_FREE_MB = 1024 * 1024 * 1024

    response = client.get("/healthz", REMOTE_ADDR=OUTSIDE)

    assert response.status_code == 503 and response.json() == {"status": "unhealthy"}
