"""The proxy relay (the host end of the sandbox's only route out) and the per-machine rollout slots."""

import json
import subprocess
import sys
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from evaluation import slots
from evaluation.harnesses import HarnessUnavailable, get_harness
from evaluation.models import SandboxSlot
from evaluation.relay import ProxyRelay
from jobs.runner import worker_id
from llm.testing import Reply

TOKEN = "rollout-token-123"


@pytest.fixture
def relay(scripted_upstream, tmp_path):
    with ProxyRelay(tmp_path / "proxy.sock", scripted_upstream.base_url, TOKEN, max_body_bytes=1000) as running:
        yield running


@pytest.fixture
def agent(relay):
    """What the sandbox's bridge does: HTTP over the relay's Unix socket."""
    with httpx.Client(
        transport=httpx.HTTPTransport(uds=relay.socket_path),
        base_url="http://127.0.0.1:18789",
        headers={"authorization": f"Bearer {TOKEN}"},
        timeout=10,
    ) as client:
        yield client


def test_api_calls_pass_and_streams_arrive_chunk_by_chunk(agent, relay, scripted_upstream):
    scripted_upstream.push(Reply.text("hello"), Reply.text("streamed answer", chunk_size=3))
    plain = agent.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert plain.status_code == 200 and plain.json()["choices"][0]["message"]["content"] == "hello"
    # Same connection (keep-alive), a streamed answer: passed on as the upstream sent it.
    with agent.stream("POST", "/v1/chat/completions", json={"messages": [], "stream": True}) as streamed:
        chunks = [line for line in streamed.iter_lines() if line.startswith("data: {")]
    text = "".join(
        json.loads(c[6:])["choices"][0]["delta"].get("content") or "" for c in chunks if json.loads(c[6:])["choices"]
    )
    assert text == "streamed answer" and len(chunks) > 5
    assert agent.get("/v1/models").json()["data"][0]["id"] == "scripted-model"
    assert relay.requests == 3 and relay.refused == []
    # The agent's key is the rollout's token; it is not passed on (the proxy's URL carries the session).
    assert all("authorization" not in r.headers for r in scripted_upstream.requests)


def test_everything_else_is_answered_by_the_relay_and_never_forwarded(agent, relay, scripted_upstream):
    assert agent.get("/admin/").status_code == 404
    assert agent.get("/api/tasks/").status_code == 404
    assert agent.get("/proxy/other-token/v1/models").status_code == 404
    assert agent.delete("/v1/models").status_code == 405
    assert agent.post("/v1/chat/completions", json={}, headers={"authorization": "Bearer wrong"}).status_code == 401
    assert agent.post("/v1/chat/completions", content=b"x" * 2000).status_code == 413
    assert scripted_upstream.requests == []
    assert len(relay.refused) == 6 and relay.refused[0].startswith("404 GET /admin/")


def test_an_unreachable_proxy_is_a_502(tmp_path):
    with ProxyRelay(tmp_path / "p.sock", "http://127.0.0.1:9/v1", TOKEN, max_body_bytes=1000) as relay:
        with httpx.Client(transport=httpx.HTTPTransport(uds=relay.socket_path)) as client:
            response = client.get("http://x/v1/models", headers={"authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 502 and "unreachable" in response.json()["error"]["message"]


def test_unknown_harnesses_and_missing_installs_are_refused_loudly(settings, tmp_path):
    with pytest.raises(ValueError, match="unknown harness 'codex'; known: openclaw, builtin"):
        get_harness("codex")
    settings.CLAWGYM_HARNESS_DIR = tmp_path
    with pytest.raises(HarnessUnavailable, match="run `make harness`"):
        get_harness("openclaw").check_available()


# --- slots ------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_slot_count_comes_from_settings_or_memory_and_cores(settings, monkeypatch):
    settings.CLAWGYM_ROLLOUT_SLOTS = 3
    assert slots.slot_count() == 3
    settings.CLAWGYM_ROLLOUT_SLOTS = 0
    settings.CLAWGYM_ROLLOUT_SLOT_MEMORY_MB = 1024
    monkeypatch.setattr(slots, "memory_bytes", lambda: 8 * 1024**3)
    monkeypatch.setattr(slots.os, "cpu_count", lambda: 16)
    assert slots.slot_count() == 6  # (8 GiB - 2 GiB reserved) / 1 GiB
    monkeypatch.setattr(slots.os, "cpu_count", lambda: 2)
    assert slots.slot_count() == 4  # at most twice the cores
    monkeypatch.setattr(slots, "memory_bytes", lambda: 2 * 1024**3)
    assert slots.slot_count() == 1  # never none


@pytest.mark.django_db
def test_slots_bound_concurrent_rollouts_and_free_up_after_a_dead_holder(settings):
    settings.CLAWGYM_ROLLOUT_SLOTS = 2
    first = slots.try_claim("host:1:1:a", 600)
    second = slots.try_claim("host:1:1:b", 600)
    assert first and second and first != second
    assert slots.try_claim("host:1:1:c", 600) is None and slots.in_use() == 2
    with pytest.raises(slots.NoSlotFree, match="all 2 rollout slots"):
        with slots.rollout_slot(hold_seconds=600, wait_seconds=0.3):
            pass
    slots.release(first, "host:1:1:a")
    with slots.rollout_slot(hold_seconds=600, wait_seconds=1) as held:
        assert held.pk == first and slots.in_use() == 2
        held.release()  # freed early (the agent stopped): the block's end does not free it twice
        assert slots.in_use() == 1 and slots.try_claim("host:1:1:g", 600) == first
    assert slots.in_use() == 2
    slots.release(first, "host:1:1:g")
    assert slots.in_use() == 1

    # A holder process that died frees its slot at once (same host); an expired lease frees it anywhere.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()

    dead_holder = worker_id().split(":")[0] + f":{dead.pid}:1:x"
    SandboxSlot.objects.filter(pk=second).update(holder=dead_holder)
    assert slots.try_claim("host:1:1:d", 600) is not None  # the free one
    assert slots.try_claim("host:1:1:e", 600) == second  # the dead holder's
    SandboxSlot.objects.filter(pk=second).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert slots.try_claim("host:1:1:f", 600) == second
