"""An endpoint's key variable is fenced (issue 10, item 16): an admin set api_key_env to DATABASE_URL and the
endpoint's host received the database URL as its bearer token. Only CLAWGYM_KEY_… names, or names listed in
CLAWGYM_API_KEY_ENV_ALLOW, may be used; every way in refuses the others, and a row stored before the fence is
refused when it is used."""

import httpx
import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse

from llm.client import check_connection, complete
from llm.models import ApiKeyNotAllowed, MissingApiKey, ModelCall, ModelEndpoint
from llm.services import create_endpoint, open_proxy_session, proxy_base_url, update_endpoint
from llm.testing import Reply

SERVER_SECRET = "postgres://clawgym:db-password-42@db/clawgym"
FORBIDDEN = ["DATABASE_URL", "SECRET_KEY", "OPENAI_API_KEY", "CLAWGYM_KEY_"]


@pytest.fixture
def server_secret(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", SERVER_SECRET)


FORM = {
    "name": "evil",
    "base_url": "https://attacker.example/v1",
    "model": "m",
    "api_style": "chat",
    "timeout_seconds": "60",
    "max_retries": "2",
    "max_concurrent": "4",
    "sampling": "{}",
    "price_input_per_mtok": "0",
    "price_output_per_mtok": "0",
    "enabled": "on",
}


@pytest.mark.parametrize("name", FORBIDDEN)
def test_the_model_refuses_other_variables(db, name):
    endpoint = ModelEndpoint(name="evil", base_url="https://attacker.example/v1", model="m", api_key_env=name)
    with pytest.raises(ValidationError) as caught:
        endpoint.full_clean()
    assert "CLAWGYM_KEY_" in str(caught.value.message_dict["api_key_env"])
    with pytest.raises(ValidationError):
        create_endpoint("evil2", base_url="https://attacker.example/v1", model="m", api_key_env=name)


def test_the_form_refuses_a_server_secret(admin_client, server_secret):
    response = admin_client.post(reverse("llm:endpoint-add"), {**FORM, "api_key_env": "DATABASE_URL"})
    assert response.status_code == 400 and "api_key_env" in response.context["form"].errors
    assert not ModelEndpoint.objects.filter(name="evil").exists()


def test_the_api_refuses_a_server_secret_on_create_and_change(api_as, admin_user, server_secret):
    client = api_as(admin_user)
    body = {"name": "evil", "base_url": "https://attacker.example/v1", "model": "m", "api_key_env": "DATABASE_URL"}
    created = client.post("/api/model-endpoints/", body, format="json")
    assert created.status_code == 400 and "api_key_env" in created.json()
    ok = client.post("/api/model-endpoints/", {**body, "api_key_env": "CLAWGYM_KEY_ATTACKER"}, format="json")
    assert ok.status_code == 201
    changed = client.patch("/api/model-endpoints/evil/", {"api_key_env": "SECRET_KEY"}, format="json")
    assert changed.status_code == 400 and "api_key_env" in changed.json()
    assert ModelEndpoint.objects.get(name="evil").api_key_env == "CLAWGYM_KEY_ATTACKER"


def test_the_command_refuses_a_server_secret(db):
    with pytest.raises(CommandError, match="CLAWGYM_KEY_"):
        call_command(
            "endpoints",
            "add",
            "evil",
            "--base-url",
            "https://attacker.example/v1",
            "--model",
            "m",
            "--api-key-env",
            "DATABASE_URL",
        )
    assert not ModelEndpoint.objects.exists()


def test_the_allow_list_admits_a_named_variable(db, settings, monkeypatch):
    settings.CLAWGYM_API_KEY_ENV_ALLOW = ["OPENAI_API_KEY"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    endpoint = create_endpoint(
        "openai", base_url="https://api.openai.com/v1", model="gpt", api_key_env="OPENAI_API_KEY"
    )
    assert endpoint.api_key() == "sk-openai" and endpoint.key_state() == "set"
    with pytest.raises(ValidationError):
        update_endpoint(endpoint, api_key_env="DATABASE_URL")


@pytest.fixture
def stored_before_the_fence(db, scripted_upstream, server_secret):
    """A row written before the fence existed (objects.create skips validation, as an old row did)."""
    return ModelEndpoint.objects.create(
        name="old",
        base_url=scripted_upstream.base_url,
        model="m",
        api_key_env="DATABASE_URL",
        roles=["judge", "agent"],
        max_retries=0,
    )


def test_a_stored_bad_variable_is_refused_when_the_client_uses_it(stored_before_the_fence, scripted_upstream):
    scripted_upstream.push(Reply.text("pong"))
    with pytest.raises(ApiKeyNotAllowed, match="DATABASE_URL may not hold an API key|'DATABASE_URL' may not"):
        complete(stored_before_the_fence, [{"role": "user", "content": "hi"}], purpose="judge")
    check = check_connection(stored_before_the_fence)
    assert not check.ok and "CLAWGYM_KEY_" in check.message
    assert scripted_upstream.requests == []  # nothing went out, with or without the secret
    assert stored_before_the_fence.key_state() == "not allowed"
    assert issubclass(ApiKeyNotAllowed, MissingApiKey)


def test_a_stored_bad_variable_is_refused_when_the_proxy_uses_it(
    stored_before_the_fence, scripted_upstream, live_server_asgi
):
    session = open_proxy_session(stored_before_the_fence, subject="rollout:1")
    response = httpx.post(f"{proxy_base_url(session)}/chat/completions", json={"messages": []})
    assert response.status_code == 502 and "CLAWGYM_KEY_" in response.json()["error"]["message"]
    assert SERVER_SECRET not in response.text
    assert scripted_upstream.requests == []
    assert "DATABASE_URL" in ModelCall.objects.get().error


def test_pages_and_api_say_not_allowed_and_never_show_the_secret(stored_before_the_fence, admin_client, api_as, viewer):
    page = admin_client.get(reverse("llm:endpoints")).content.decode()
    assert "not allowed" in page and SERVER_SECRET not in page
    shown = api_as(viewer).get("/api/model-endpoints/old/").json()
    assert shown["key_is_set"] is False and SERVER_SECRET not in str(shown)
