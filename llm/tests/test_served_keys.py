"""The keys of servers ClawGym starts (issue 20, item 7): an endpoint names one as CLAWGYM_KEY_SERVED_<server>, and
every process that calls it derives the key from SECRET_KEY (llm.models.served_key), so that it reaches the proxy and
the workers without being stored anywhere, nor set in any environment. The served checkpoint's and the RL policy
server's own tests show the servers refusing everything else.

Such a key goes to the address ClawGym registered its server at, and nowhere else (issue 34, item 2): an endpoint
added or changed by hand (the form, the API, the admin, `endpoints add`) may not name one, and a registered one whose
base URL was changed is never sent it (Test connection, the client, the proxy)."""

import httpx
import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse

from llm.client import check_connection
from llm.models import ApiKeyNotAllowed, ModelCall, ModelEndpoint, served_key
from llm.services import create_endpoint, open_proxy_session, proxy_base_url
from llm.testing import Reply, ScriptedUpstream

NAME = "CLAWGYM_KEY_SERVED_S41"


@pytest.fixture
def served(db, scripted_upstream):
    return ModelEndpoint.objects.create(
        name="ckpt-4-1",
        base_url=scripted_upstream.base_url,
        model="ckpt-4-1",
        api_key_env=NAME,
        served_at=scripted_upstream.base_url,  # as ClawGym's own registration writes it
        served_key_env=NAME,
        roles=["agent"],
        max_retries=0,
    )


def test_the_proxy_sends_the_servers_derived_key(served, scripted_upstream, live_server_asgi, monkeypatch):
    # A variable of that name in the environment changes nothing: the key is derived, never read from there.
    monkeypatch.setenv(NAME, "planted-by-someone")
    scripted_upstream.push(Reply.text("pong"))
    session = open_proxy_session(served, subject="rollout:1")
    response = httpx.post(
        f"{proxy_base_url(session)}/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert response.status_code == 200, response.text
    [received] = scripted_upstream.requests
    assert received.headers["authorization"] == f"Bearer {served_key(NAME)}"
    assert served_key(NAME) not in response.text


def test_each_server_has_its_own_key_from_this_secret_key(settings):
    first = served_key(NAME)
    assert first.startswith("cgk_") and len(first) == 68 and served_key(NAME) == first  # every process agrees
    assert served_key("CLAWGYM_KEY_SERVED_S42") != first
    settings.SECRET_KEY = "another deployment's secret key, long enough to be one"
    assert served_key(NAME) != first
    for name in ("CLAWGYM_KEY_SERVED_", "CLAWGYM_KEY_OPENAI", "SECRET_KEY", "CLAWGYM_KEY_SERVED_a-b"):
        with pytest.raises(ValueError):
            served_key(name)


def test_pages_and_api_say_set_and_never_show_the_key(served, admin_client, api_as, viewer):
    assert served.key_state() == "set"
    page = admin_client.get(reverse("llm:endpoints")).content.decode()
    assert NAME in page and served_key(NAME) not in page
    shown = api_as(viewer).get("/api/model-endpoints/ckpt-4-1/")
    assert shown.json()["key_is_set"] is True and served_key(NAME) not in shown.content.decode()


@pytest.fixture
def elsewhere():
    """Another server on loopback, recording what reaches it (the Authorization header included)."""
    upstream = ScriptedUpstream(default=Reply.text("pong")).start()
    yield upstream
    upstream.stop()


FORM = {
    "name": "grab",
    "model": "m",
    "api_style": "chat",
    "api_key_env": NAME,
    "timeout_seconds": "60",
    "max_retries": "0",
    "max_concurrent": "4",
    "sampling": "{}",
    "price_input_per_mtok": "0",
    "price_output_per_mtok": "0",
    "enabled": "on",
}


def test_the_form_refuses_a_served_key_on_an_endpoint_added_by_hand(admin_client, elsewhere):
    response = admin_client.post(reverse("llm:endpoint-add"), {**FORM, "base_url": elsewhere.base_url})
    assert response.status_code == 400
    assert "only ClawGym registers" in str(response.context["form"].errors["api_key_env"])
    assert not ModelEndpoint.objects.filter(name="grab").exists() and elsewhere.requests == []


def test_the_api_refuses_a_served_key_on_create_and_change(api_as, admin_user, elsewhere):
    client = api_as(admin_user)
    body = {"name": "grab", "base_url": elsewhere.base_url, "model": "m", "api_key_env": NAME}
    created = client.post("/api/model-endpoints/", body, format="json")
    assert created.status_code == 400 and "only ClawGym registers" in str(created.json()["api_key_env"])
    ok = client.post("/api/model-endpoints/", {**body, "api_key_env": "CLAWGYM_KEY_GRAB"}, format="json")
    assert ok.status_code == 201
    changed = client.patch("/api/model-endpoints/grab/", {"api_key_env": NAME}, format="json")
    assert changed.status_code == 400 and "api_key_env" in changed.json()
    # served_at is ClawGym's to write: the API shows no such field and ignores one sent.
    sneaked = client.patch(
        "/api/model-endpoints/grab/", {"api_key_env": NAME, "served_at": elsewhere.base_url}, format="json"
    )
    assert sneaked.status_code == 400
    assert ModelEndpoint.objects.get(name="grab").api_key_env == "CLAWGYM_KEY_GRAB"


def test_the_admin_refuses_a_served_key_on_an_endpoint_added_there(admin_client, elsewhere):
    form = {**FORM, "base_url": elsewhere.base_url, "roles": "[]", "served_at": elsewhere.base_url}
    response = admin_client.post(reverse("admin:llm_modelendpoint_add"), form)
    assert response.status_code == 200  # the form again, with its errors
    assert "only ClawGym registers" in str(response.context["adminform"].form.errors["api_key_env"])
    assert not ModelEndpoint.objects.filter(name="grab").exists()


def test_the_command_refuses_a_served_key(db, elsewhere):
    with pytest.raises(CommandError, match="only ClawGym registers"):
        call_command(
            "endpoints", "add", "grab", "--base-url", elsewhere.base_url, "--model", "m", "--api-key-env", NAME
        )
    assert not ModelEndpoint.objects.exists()


def test_a_registered_endpoint_keeps_its_key_at_its_address_and_sends_it_nowhere_else(
    served, scripted_upstream, elsewhere, admin_client, api_as, admin_user
):
    scripted_upstream.push(Reply.text("pong"))
    assert check_connection(served).ok
    [received] = scripted_upstream.requests
    assert received.headers["authorization"] == f"Bearer {served_key(NAME)}"

    # Its other settings may change; its base URL only with another key variable.
    client = api_as(admin_user)
    assert client.patch("/api/model-endpoints/ckpt-4-1/", {"max_concurrent": 2}, format="json").status_code == 200
    moved = client.patch("/api/model-endpoints/ckpt-4-1/", {"base_url": elsewhere.base_url}, format="json")
    assert moved.status_code == 400 and f"started at {scripted_upstream.base_url}" in str(moved.json())
    page = admin_client.post(
        reverse("llm:endpoint-edit", args=["ckpt-4-1"]),
        {**FORM, "name": "ckpt-4-1", "model": "ckpt-4-1", "base_url": elsewhere.base_url},
    )
    assert page.status_code == 400 and "api_key_env" in page.context["form"].errors
    shown = admin_client.get(reverse("admin:llm_modelendpoint_change", args=[served.pk]))  # served_at, read-only
    assert (
        shown.status_code == 200
        and f'<div class="readonly">{scripted_upstream.base_url}</div>' in shown.content.decode()
    )
    assert 'name="served_at"' not in shown.content.decode()

    # A row moved around every form (written straight to the database): Test connection, the client and the proxy
    # send the server elsewhere nothing.
    ModelEndpoint.objects.filter(pk=served.pk).update(base_url=elsewhere.base_url)
    served.refresh_from_db()
    tested = admin_client.post(reverse("llm:endpoint-test", args=["ckpt-4-1"]), HTTP_HX_REQUEST="true")
    assert tested.status_code == 200 and "goes to that address only" in tested.content.decode()
    with pytest.raises(ApiKeyNotAllowed, match="goes to that address only"):
        served.api_key()
    assert served.key_state() == "not allowed"
    assert elsewhere.requests == [] and len(scripted_upstream.requests) == 1


def test_the_proxy_sends_a_moved_endpoint_nothing(served, elsewhere, live_server_asgi):
    session = open_proxy_session(served, subject="rollout:1")
    ModelEndpoint.objects.filter(pk=served.pk).update(base_url=elsewhere.base_url)
    response = httpx.post(f"{proxy_base_url(session)}/chat/completions", json={"messages": []})
    assert response.status_code == 502 and "goes to that address only" in response.json()["error"]["message"]
    assert served_key(NAME) not in response.text and elsewhere.requests == []
    assert "goes to that address only" in ModelCall.objects.get().error


def test_clawgyms_own_registration_sets_the_address(db, elsewhere):
    endpoint = create_endpoint(
        "demo-like",
        base_url=elsewhere.base_url,
        model="m",
        api_key_env=NAME,
        served_at=elsewhere.base_url,
        served_key_env=NAME,
    )
    assert endpoint.api_key() == served_key(NAME) and endpoint.key_state() == "set"


def test_an_endpoint_may_not_name_another_servers_key(served, scripted_upstream, live_server_asgi):
    # Another server's key, set on this server's endpoint at its own registered address: refused everywhere, so one
    # server's key never reaches another server (nor anything an admin points it at afterwards).
    other = "CLAWGYM_KEY_SERVED_S42"
    session = open_proxy_session(served, subject="rollout:1")
    ModelEndpoint.objects.filter(pk=served.pk).update(api_key_env=other)
    served.refresh_from_db()
    assert served.key_state() == "not allowed"
    with pytest.raises(ApiKeyNotAllowed, match="not the key ClawGym registered"):
        served.api_key()
    response = httpx.post(f"{proxy_base_url(session)}/chat/completions", json={"messages": []})
    assert response.status_code == 502 and "not the key ClawGym registered" in response.json()["error"]["message"]
    assert served_key(other) not in response.text and scripted_upstream.requests == []
    with pytest.raises(ValidationError, match="not the key ClawGym registered"):
        served.full_clean()


def test_every_way_of_changing_a_registered_endpoint_refuses_another_servers_key(
    served, scripted_upstream, admin_client, api_as, admin_user
):
    # The registered endpoint keeps its own address: only the key variable changes, to another server's. Refused by
    # the page, the API, the admin and the command alike, and the row keeps its own key.
    other = "CLAWGYM_KEY_SERVED_S42"
    page = admin_client.post(
        reverse("llm:endpoint-edit", args=["ckpt-4-1"]),
        {**FORM, "name": "ckpt-4-1", "model": "ckpt-4-1", "base_url": served.base_url, "api_key_env": other},
    )
    assert page.status_code == 400
    assert "not the key ClawGym registered" in str(page.context["form"].errors["api_key_env"])
    api = api_as(admin_user).patch("/api/model-endpoints/ckpt-4-1/", {"api_key_env": other}, format="json")
    assert api.status_code == 400 and "not the key ClawGym registered" in str(api.json()["api_key_env"])
    admin = admin_client.post(
        reverse("admin:llm_modelendpoint_change", args=[served.pk]),
        {
            **FORM,
            "name": "ckpt-4-1",
            "model": "ckpt-4-1",
            "base_url": served.base_url,
            "api_key_env": other,
            "roles": "[]",
        },
    )
    assert admin.status_code == 200  # the form again, with its errors
    assert "not the key ClawGym registered" in str(admin.context["adminform"].form.errors["api_key_env"])
    with pytest.raises(CommandError, match="not the key ClawGym registered"):
        call_command("endpoints", "add", "ckpt-4-1", "--update", "--api-key-env", other)
    served.refresh_from_db()
    assert (served.api_key_env, served.served_key_env) == (NAME, NAME) and served.api_key() == served_key(NAME)
    assert scripted_upstream.requests == []
