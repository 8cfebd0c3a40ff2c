"""The keys of servers ClawGym starts (issue 20, item 7): an endpoint names one as CLAWGYM_KEY_SERVED_<server>, and
every process that calls it derives the key from SECRET_KEY (llm.models.served_key), so that it reaches the proxy and
the workers without being stored anywhere, nor set in any environment. The served checkpoint's and the RL policy
server's own tests show the servers refusing everything else."""

import httpx
import pytest
from django.urls import reverse

from llm.models import ModelEndpoint, served_key
from llm.services import open_proxy_session, proxy_base_url
from llm.testing import Reply

NAME = "CLAWGYM_KEY_SERVED_S41"


@pytest.fixture
def served(db, scripted_upstream):
    return ModelEndpoint.objects.create(
        name="ckpt-4-1",
        base_url=scripted_upstream.base_url,
        model="ckpt-4-1",
        api_key_env=NAME,
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
