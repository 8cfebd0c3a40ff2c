"""The scripts' way in: `endpoints add|list`, `proxy_session`, `model_calls`."""

import hashlib
import json
from io import StringIO

import httpx
import pytest
from django.core.management import CommandError, call_command

from llm.models import ModelCall, ModelEndpoint, ProxySession
from llm.testing import Reply

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_endpoints_add_and_list_json():
    added = json.loads(
        run(
            "endpoints",
            "add",
            "judge-big",
            "--base-url",
            "https://api.openai.com/v1",
            "--model",
            "gpt-big",
            "--api",
            "responses",
            "--api-key-env",
            "CLAWGYM_KEY_OPENAI",
            "--role",
            "judge",
            "--role",
            "diagnosis",
            "--max-concurrent",
            "6",
            "--sampling",
            '{"temperature": 0}',
            "--price-in",
            "2.5",
            "--price-out",
            "10",
            "--json",
        )
    )
    assert added["name"] == "judge-big" and added["roles"] == ["diagnosis", "judge"]
    run("endpoints", "add", "local", "--base-url", "http://gpu1:8000/v1", "--model", "qwen")
    listed = json.loads(run("endpoints", "list", "--json"))
    assert [e["name"] for e in listed] == ["judge-big", "local"]
    big = listed[0]
    assert (big["api_style"], big["api_key_env"], big["max_concurrent"]) == ("responses", "CLAWGYM_KEY_OPENAI", 6)
    assert big["sampling"] == {"temperature": 0} and big["price_output_per_mtok"] == "10.0000"
    assert listed[1]["api_style"] == "chat" and listed[1]["api_key_env"] == ""
    assert "local: qwen at http://gpu1:8000/v1 [chat]" in run("endpoints", "list")


def test_endpoints_add_refuses_duplicates_unless_updating():
    run("endpoints", "add", "e", "--base-url", "http://h/v1", "--model", "a")
    with pytest.raises(CommandError, match="exists; add --update"):
        run("endpoints", "add", "e", "--base-url", "http://h/v1", "--model", "b")
    run("endpoints", "add", "e", "--base-url", "http://h/v1", "--model", "b", "--update")
    assert ModelEndpoint.objects.get(name="e").model == "b"


def test_endpoints_add_update_changes_only_the_flags_given(caplog):
    run(
        "endpoints",
        "add",
        "j",
        "--base-url",
        "http://h/v1",
        "--model",
        "a",
        "--role",
        "judge",
        "diagnosis",
        "--timeout",
        "5",
        "--max-concurrent",
        "2",
        "--disabled",
    )
    caplog.set_level("INFO", logger="llm.services")
    updated = json.loads(run("endpoints", "add", "j", "--base-url", "http://h2/v1", "--update", "--json"))
    assert (updated["base_url"], updated["model"], updated["roles"]) == ("http://h2/v1", "a", ["diagnosis", "judge"])
    assert (updated["timeout_seconds"], updated["max_concurrent"], updated["enabled"]) == (5.0, 2, False)
    assert caplog.records[-1].getMessage().endswith(": base_url")  # the log names what changed, only that
    updated = json.loads(run("endpoints", "add", "j", "--role", "agent", "--enabled", "--update", "--json"))
    assert (updated["roles"], updated["enabled"], updated["timeout_seconds"]) == (["agent"], True, 5.0)
    assert json.loads(run("endpoints", "add", "j", "--no-roles", "--update", "--json"))["roles"] == []
    with pytest.raises(CommandError, match="a new endpoint needs --base-url and --model"):
        run("endpoints", "add", "new-one", "--role", "judge")
    assert not ModelEndpoint.objects.filter(name="new-one").exists()


@pytest.mark.parametrize(
    "extra, problem",
    [
        (["--base-url", "not-a-url"], "base_url"),
        (["--api-key-env", "sk-live-abc-123"], "api_key_env"),
        (["--sampling", "[1]"], "JSON object"),
        (["--price-in", "cheap"], "a price must be a number"),
    ],
)
def test_endpoints_add_explains_bad_values(extra, problem):
    args = ["endpoints", "add", "bad", "--base-url", "http://h/v1", "--model", "m", *extra]
    with pytest.raises(CommandError, match=problem):
        run(*args)
    assert not ModelEndpoint.objects.filter(name="bad").exists()


def test_proxy_session_prints_token_and_base_url_once_and_stores_only_its_hash(settings):
    settings.CLAWGYM_PROXY_PUBLIC_URL = "http://gateway.internal:8000/"
    ModelEndpoint.objects.create(name="agent-model", base_url="http://h/v1", model="m")
    info = json.loads(
        run("proxy_session", "--endpoint", "agent-model", "--subject", "rollout:3", "--ttl", "60", "--json")
    )
    session = ProxySession.objects.by_token(info["token"]).get()
    assert info["id"] == session.pk
    assert info["base_url"] == f"http://gateway.internal:8000/proxy/{info['token']}/v1"
    assert session.token_hash == hashlib.sha256(info["token"].encode()).hexdigest()
    assert info["token"] not in json.dumps(list(ProxySession.objects.values()), default=str)
    assert session.is_usable and session.subject == "rollout:3"
    assert 55 <= (session.expires_at - session.created_at).total_seconds() <= 65
    closed = json.loads(run("proxy_session", "--close", info["token"], "--json"))
    session.refresh_from_db()
    assert closed == {"id": session.pk, "closed": True} and not session.is_open and session.closed_at


def test_proxy_session_sessions_expire_by_default(settings):
    settings.CLAWGYM_PROXY_SESSION_TTL_SECONDS = 600
    ModelEndpoint.objects.create(name="agent-model", base_url="http://h/v1", model="m")
    info = json.loads(run("proxy_session", "--endpoint", "agent-model", "--json"))
    session = ProxySession.objects.get(pk=info["id"])
    assert 590 <= (session.expires_at - session.created_at).total_seconds() <= 610


def test_proxy_session_names_the_known_endpoints():
    ModelEndpoint.objects.create(name="only-one", base_url="http://h/v1", model="m")
    with pytest.raises(CommandError, match="endpoints: only-one"):
        run("proxy_session", "--endpoint", "nope", "--json")


def test_model_calls_prints_the_recorded_session_as_one_array(live_server_asgi, scripted_upstream):
    run("endpoints", "add", "up", "--base-url", scripted_upstream.base_url, "--model", "m")
    info = json.loads(run("proxy_session", "--endpoint", "up", "--json"))
    scripted_upstream.push(Reply.text("first"), Reply.text("second", chunk_size=2))
    url = f"{info['base_url']}/chat/completions"
    httpx.post(url, json={"messages": [{"role": "user", "content": "1"}]}).raise_for_status()
    with httpx.stream("POST", url, json={"messages": [{"role": "user", "content": "2"}], "stream": True}) as r:
        r.read()
    calls = json.loads(run("model_calls", "--session", info["token"], "--json"))
    assert [c["request"]["messages"][0]["content"] for c in calls] == ["1", "2"]
    assert [c["stream"] for c in calls] == [False, True]
    assert calls[1]["response"]["choices"][0]["message"]["content"] == "second"
    assert all(c["session"] == info["id"] and c["error"] == "" for c in calls)
    assert [c["cost"] for c in calls] == ["0.00000000", "0.00000000"]  # the endpoint has no prices; never "0E-8"
    assert info["token"] not in json.dumps(calls)
    assert ModelCall.objects.count() == 2


def test_model_calls_of_an_unknown_session():
    with pytest.raises(CommandError, match="no proxy session"):
        run("model_calls", "--session", "nope", "--json")
