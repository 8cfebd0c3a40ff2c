"""The proxy's event loop makes no synchronous database call, and its tests can see one.

Django refuses an ORM call from a thread running an event loop (SynchronousOnlyOperation) unless
DJANGO_ALLOW_ASYNC_UNSAFE is set; the browser fixtures set it while Playwright's loop runs, and nothing else does
(lib.browser_testing). So every proxy test that passes shows its path through the proxy is free of such calls, and
this one shows that one added would be caught: a 500, not a call that quietly blocks every stream of the process.
"""

import os

import httpx
import pytest
from django.core.exceptions import SynchronousOnlyOperation

from llm import proxy
from llm.models import ModelEndpoint, ProxySession
from llm.services import open_proxy_session, proxy_base_url
from llm.testing import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_orm_check_is_on_outside_browser_tests():
    assert "DJANGO_ALLOW_ASYNC_UNSAFE" not in os.environ


def test_a_synchronous_database_call_on_the_proxy_loop_fails_the_call(live_server_asgi, scripted_upstream, monkeypatch):
    endpoint = ModelEndpoint.objects.create(
        name="upstream", base_url=scripted_upstream.base_url, model="m", roles=["agent"], timeout_seconds=10
    )
    session = open_proxy_session(endpoint)
    scripted_upstream.push(Reply.text("answered"))
    raised = []
    client_of_the_loop = proxy.upstream_client

    def upstream_client_after_a_query():
        # What a careless change would add on the async path: an ORM call made on the event loop's own thread.
        try:
            ProxySession.objects.filter(pk=session.pk).exists()
        except SynchronousOnlyOperation as exc:
            raised.append(exc)
            raise
        return client_of_the_loop()

    monkeypatch.setattr(proxy, "upstream_client", upstream_client_after_a_query)

    response = httpx.post(proxy_base_url(session) + "/chat/completions", json={"messages": []}, timeout=20)

    assert response.status_code == 500 and len(raised) == 1
    assert scripted_upstream.requests == []
