"""A request the record could not store, sent as an agent in the sandbox sends it: through the relay's Unix socket to
the real recording proxy, which refuses it with a recorded 400 and never forwards it (llm/tests/test_proxy_unrecordable.py
covers the proxy itself)."""

import httpx
import pytest
from django.conf import settings

from evaluation.relay import ProxyRelay
from llm.models import ModelCall
from llm.services import open_proxy_session, proxy_base_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_same_request_through_the_sandbox_relay_is_refused_and_recorded(
    live_server_asgi, scripted_upstream, agent_endpoint, tmp_path
):
    session = open_proxy_session(agent_endpoint, subject="rollout:6")
    body = '{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}'
    relay = ProxyRelay(
        tmp_path / "proxy.sock",
        proxy_base_url(session),
        session.token,
        max_body_bytes=settings.CLAWGYM_PROXY_MAX_REQUEST_BYTES,
    )
    transport = httpx.HTTPTransport(uds=str(tmp_path / "proxy.sock"))
    with relay, httpx.Client(transport=transport, base_url="http://127.0.0.1:18789", timeout=20) as agent:
        headers = {"authorization": f"Bearer {session.token}", "content-type": "application/json"}
        refused = agent.post("/v1/chat/completions", content=body.encode(), headers=headers)
    assert refused.status_code == 400 and "1e999, which is out of range" in refused.json()["error"]["message"]
    assert relay.requests == 1 and scripted_upstream.requests == []
    assert ModelCall.objects.get(session=session).request == {"raw": body}
