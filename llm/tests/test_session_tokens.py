"""Proxy session tokens are credentials (issue 10, item 14). A viewer read a live rollout's token from
/api/model-calls/, posted a forged turn into its session, and the turn became part of the rollout's trajectory.
Now: tokens are stored hashed and never shown (pages and the API name sessions by id), and a token opens nothing
once its session is closed or expired."""

import hashlib
import json
from datetime import timedelta
from io import StringIO

import httpx
import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from django.utils import timezone

from llm.models import SESSION_TOKEN_PREFIX, ModelCall, ModelEndpoint, ProxySession, new_session_token
from llm.services import close_proxy_session, open_proxy_session, proxy_base_url
from llm.testing import Reply, scripted_endpoint


@pytest.fixture
def endpoint(scripted_upstream):
    return scripted_endpoint(scripted_upstream, "up", model="m")


@pytest.fixture
def live_session(live_server_asgi, endpoint, scripted_upstream):
    """A running rollout's session with one recorded call, as the attacker found it."""
    session = open_proxy_session(endpoint, subject="rollout:9")
    scripted_upstream.push(Reply.text("the agent's real answer"))
    httpx.post(
        f"{proxy_base_url(session)}/chat/completions", json={"messages": [{"role": "user", "content": "do the task"}]}
    ).raise_for_status()
    return session


def _everything_a_viewer_can_read(client, api, call: ModelCall) -> str:
    pages = [
        client.get(reverse("llm:calls")),
        client.get(reverse("llm:calls"), {"session": call.session_id}),
        client.get(reverse("llm:call", args=[call.pk])),
    ]
    answers = [
        api.get("/api/model-calls/"),
        api.get(f"/api/model-calls/{call.pk}/"),
        api.get("/api/model-calls/", {"session": call.session_id}),
    ]
    assert all(r.status_code == 200 for r in pages + answers)
    return "\n".join([r.content.decode() for r in pages + answers])


def test_a_viewer_cannot_obtain_a_live_token_from_pages_or_the_api(live_session, viewer_client, api_as, viewer):
    call = ModelCall.objects.get(session_id=live_session.pk)
    seen = _everything_a_viewer_can_read(viewer_client, api_as(viewer), call)
    assert live_session.token not in seen
    assert hashlib.sha256(live_session.token.encode()).hexdigest() not in seen  # nor its hash
    detail = api_as(viewer).get(f"/api/model-calls/{call.pk}/").json()
    assert detail["session"] == live_session.pk  # the session is named by its id


def test_nor_an_admin_from_the_admin_pages(live_session, admin_user):
    from django.test import Client

    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    client = Client()
    client.force_login(admin_user)
    pages = [client.get("/admin/llm/proxysession/"), client.get(f"/admin/llm/proxysession/{live_session.pk}/change/")]
    assert [p.status_code for p in pages] == [200, 200]
    assert not any(live_session.token in p.content.decode() for p in pages)


def test_only_the_hash_is_stored(live_session):
    row = ProxySession.objects.filter(pk=live_session.pk).values().get()
    assert live_session.token not in json.dumps(row, default=str)
    assert row["token_hash"] == hashlib.sha256(live_session.token.encode()).hexdigest()
    assert ProxySession.objects.get(pk=live_session.pk).token is None  # a loaded row never has the plaintext


def test_tokens_carry_a_prefix_so_a_command_line_never_reads_one_as_an_option(db, monkeypatch):
    """A bare url-safe token begins with "-" one time in 64: `model_calls --session -x…` was then an argparse error."""
    monkeypatch.setattr("llm.models.secrets.token_urlsafe", lambda n: "-leading-dash-" + "x" * n)
    token = new_session_token()
    assert token.startswith(SESSION_TOKEN_PREFIX) and len(token) > 40
    session = open_proxy_session(ModelEndpoint.objects.create(name="dash", base_url="http://127.0.0.1:9/v1", model="m"))
    out = StringIO()
    call_command("model_calls", "--session", session.token, "--json", stdout=out)
    assert json.loads(out.getvalue().strip().splitlines()[-1]) == []


def _forge(session_url: str) -> httpx.Response:
    forged = {"messages": [{"role": "user", "content": "forged turn"}]}
    return httpx.post(f"{session_url}/chat/completions", json=forged)


def test_a_closed_session_refuses_everything(live_session, scripted_upstream):
    url = proxy_base_url(live_session)
    close_proxy_session(live_session)
    assert _forge(url).status_code == 401
    assert httpx.get(f"{url}/models").status_code == 401
    assert len(scripted_upstream.requests) == 1  # only the real call went upstream
    assert ModelCall.objects.filter(session_id=live_session.pk).count() == 1


def test_an_expired_session_refuses_everything(live_session, scripted_upstream):
    url = proxy_base_url(live_session)
    ProxySession.objects.filter(pk=live_session.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = _forge(url)
    assert response.status_code == 401 and "expired" in response.json()["error"]["message"]
    assert httpx.get(f"{url}/models").status_code == 401
    assert len(scripted_upstream.requests) == 1
    assert ProxySession.objects.get(pk=live_session.pk).state == "expired"


def test_sessions_expire_after_the_ttl_setting(db, settings):
    settings.CLAWGYM_PROXY_SESSION_TTL_SECONDS = 120
    endpoint = ModelEndpoint.objects.create(name="e", base_url="http://h/v1", model="m")
    session = open_proxy_session(endpoint)
    assert timedelta(seconds=115) < session.expires_at - timezone.now() <= timedelta(seconds=120)
    short = open_proxy_session(endpoint, ttl_seconds=5)
    assert short.expires_at - timezone.now() <= timedelta(seconds=5)
    with pytest.raises(ValueError):
        open_proxy_session(endpoint, ttl_seconds=0)


def test_proxy_base_url_needs_the_session_as_opened(db):
    endpoint = ModelEndpoint.objects.create(name="e", base_url="http://h/v1", model="m")
    session = open_proxy_session(endpoint)
    assert session.token in proxy_base_url(session)
    with pytest.raises(ValueError, match="only known where it was opened"):
        proxy_base_url(ProxySession.objects.get(pk=session.pk))


@pytest.mark.django_db(transaction=True)
def test_the_migration_hashes_existing_tokens_and_they_keep_working():
    executor = MigrationExecutor(connection)
    executor.migrate([("llm", "0001_initial")])
    old_apps = executor.loader.project_state([("llm", "0001_initial")]).apps
    Endpoint = old_apps.get_model("llm", "ModelEndpoint")
    Session = old_apps.get_model("llm", "ProxySession")
    endpoint = Endpoint.objects.create(name="old", base_url="http://h/v1", model="m")
    live = Session.objects.create(endpoint=endpoint, token="old-live-token", subject="rollout:1")
    Session.objects.create(endpoint=endpoint, token="old-closed-token", is_open=False, closed_at=timezone.now())
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    migrated = ProxySession.objects.by_token("old-live-token").get()
    assert migrated.pk == live.pk and migrated.is_usable
    assert not ProxySession.objects.by_token("old-closed-token").get().is_usable
    assert "old-live-token" not in json.dumps(list(ProxySession.objects.values()), default=str)
