"""An unreachable proxy or a failing model server is not the model's 0 (issue 10, item 6): a web app that did not
serve the proxy, or served it on another port than CLAWGYM_PROXY_PUBLIC_URL, or lacked the endpoint's key variable,
ended rollouts "scored 0.000, exit reason error" after OpenClaw's retries. Now the preflight finds it before the
agent starts and the rollout fails (retryable) naming the fix; an agent stopped by the model server's failures
fails the same way."""

import pytest

from evaluation.harnesses.sandboxed import WALL_MARGIN_SECONDS
from evaluation.models import Rollout
from evaluation.services import create_rollouts, execute_rollout, retry_rollout, rollout_timeout
from llm.models import ModelEndpoint, ProxySession
from llm.testing import Reply, serve_in_thread, stop_server

from .conftest import RIGHT_SUMMARY, needs_bwrap


def run_one(revision, endpoint, **options) -> Rollout:
    [rollout] = create_rollouts(revision, endpoint, harness="builtin", options=options)
    return execute_rollout(rollout.pk)


def assert_infra_failure(rollout: Rollout, exit_reason: str, *words: str) -> None:
    assert rollout.status == Rollout.Status.FAILED and rollout.retryable, (rollout.status, rollout.error)
    assert rollout.exit_reason == exit_reason, rollout.error
    assert rollout.score is None
    for word in words:
        assert word in rollout.error, (word, rollout.error)
    assert not ProxySession.objects.filter(subject=rollout.subject, is_open=True).exists()


# --- the preflight: no sandbox needed, the agent never starts ---------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_no_web_app_at_the_proxy_url_fails_at_once_naming_the_setting(settings, scripted_upstream, fruit_task,
                                                                      agent_endpoint):
    settings.CLAWGYM_PROXY_PUBLIC_URL = "http://127.0.0.1:9"  # discard port: nothing listens
    rollout = run_one(fruit_task, agent_endpoint)
    assert_infra_failure(rollout, "proxy_unavailable", "http://127.0.0.1:9", "unreachable", "CLAWGYM_PROXY_PUBLIC_URL",
                         "PORT")
    assert scripted_upstream.requests == [] and rollout.model_calls == 0
    # The attempt's token would have lived only as long as the agent may run, and the session is closed already.
    session = ProxySession.objects.get(pk=rollout.proxy_session_id)
    lifetime = (session.expires_at - session.created_at).total_seconds()
    assert not session.is_open and lifetime <= rollout_timeout(rollout) + 3 * WALL_MARGIN_SECONDS + 1


async def _not_clawgym(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/html")]})
    await send({"type": "http.response.body", "body": b"<h1>Not Found</h1>"})


@pytest.mark.django_db(transaction=True)
def test_another_server_on_the_proxy_port_fails_naming_the_setting(settings, scripted_upstream, fruit_task,
                                                                   agent_endpoint):
    server, thread, port = serve_in_thread(_not_clawgym)
    try:
        settings.CLAWGYM_PROXY_PUBLIC_URL = f"http://127.0.0.1:{port}"
        rollout = run_one(fruit_task, agent_endpoint)
    finally:
        stop_server(server, thread)
    assert_infra_failure(rollout, "proxy_unavailable", "not a ClawGym proxy", "HTTP 404", "CLAWGYM_PROXY_PUBLIC_URL")
    assert scripted_upstream.requests == []


def test_a_key_missing_from_the_web_apps_environment_fails_naming_the_variable(live_server_asgi, scripted_upstream,
                                                                                fruit_task, monkeypatch):
    monkeypatch.delenv("CLAWGYM_KEY_TEST_ROLLOUT", raising=False)
    endpoint = ModelEndpoint.objects.create(name="keyed", base_url=scripted_upstream.base_url, model="scripted-model",
                                            api_key_env="CLAWGYM_KEY_TEST_ROLLOUT", roles=["agent"])
    rollout = run_one(fruit_task, endpoint)
    assert_infra_failure(rollout, "proxy_unavailable", "CLAWGYM_KEY_TEST_ROLLOUT", "web app's environment")
    assert scripted_upstream.requests == []


def test_a_failed_preflight_is_retried_on_the_same_row(settings, live_server_asgi, scripted_upstream, fruit_task,
                                                       agent_endpoint):
    working = settings.CLAWGYM_PROXY_PUBLIC_URL
    settings.CLAWGYM_PROXY_PUBLIC_URL = "http://127.0.0.1:9"
    rollout = run_one(fruit_task, agent_endpoint)
    assert rollout.exit_reason == "proxy_unavailable"
    settings.CLAWGYM_PROXY_PUBLIC_URL = working
    retry_rollout(rollout, enqueue=False)
    assert Rollout.objects.get(pk=rollout.pk).status == Rollout.Status.QUEUED
    assert rollout.previous_attempts[0]["exit_reason"] == "proxy_unavailable"


# --- during the run: the model server fails ----------------------------------------------------------------------


@needs_bwrap
def test_an_unreachable_model_server_fails_the_rollout(live_server_asgi, scripted_upstream, fruit_task, agent_endpoint):
    agent_endpoint.base_url = "http://127.0.0.1:9/v1"
    agent_endpoint.save()
    rollout = run_one(fruit_task, agent_endpoint)
    assert_infra_failure(rollout, "upstream_error", "the model's server failed", "unreachable")
    assert rollout.model_calls >= 1  # each of the agent's own retries recorded


@needs_bwrap
@pytest.mark.parametrize("status", [500, 401])
def test_server_errors_and_a_refused_key_fail_the_rollout(live_server_asgi, scripted_upstream, fruit_task,
                                                          agent_endpoint, status):
    scripted_upstream.push(Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}))
    scripted_upstream.default = Reply.error(status, "upstream is down")  # and the agent's retries meet the same
    rollout = run_one(fruit_task, agent_endpoint)
    assert_infra_failure(rollout, "upstream_error", f"HTTP {status}", "upstream is down")
    assert rollout.model_calls >= 2


@needs_bwrap
def test_an_error_the_model_caused_is_still_scored_and_the_runtime_recorded(live_server_asgi, scripted_upstream,
                                                                            fruit_task, agent_endpoint):
    from evaluation.harnesses.sandboxed import sandbox_backend
    from sandbox import Workspace

    scripted_upstream.push(Reply.error(400, "context length exceeded"))
    rollout = run_one(fruit_task, agent_endpoint)
    assert rollout.status == Rollout.Status.SCORED and rollout.exit_reason == "error"
    with Workspace.create({}) as workspace:
        expected = getattr(sandbox_backend().run(["/bin/true"], workspace), "runtime", "")
    assert rollout.runtime == expected and rollout.as_dict()["runtime"] == expected
