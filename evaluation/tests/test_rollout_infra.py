"""An unreachable proxy or a failing model server is not the model's 0 (issue 10, item 6): a web app that did not
serve the proxy, or served it on another port than CLAWGYM_PROXY_PUBLIC_URL, or lacked the endpoint's key variable,
ended rollouts "scored 0.000, exit reason error" after OpenClaw's retries. Now the preflight finds it before the
agent starts and the rollout fails (retryable) naming the fix; an agent stopped by the model server's failures
fails the same way."""

import pytest

from evaluation.harnesses.sandboxed import WALL_MARGIN_SECONDS, sandbox_backend
from evaluation.models import Rollout
from evaluation.services.rollouts import (
    create_rollouts,
    execute_rollout,
    retry_rollout,
    rollout_timeout,
    start_rollouts,
)
from evaluation.testing import RIGHT_SUMMARY, needs_bwrap
from jobs.models import JobRun
from jobs.runner import execute
from llm.models import ModelCall, ModelEndpoint, ProxySession
from llm.testing import Reply, serve_in_thread, stop_server
from sandbox import Workspace


def run_one(revision, endpoint, **options) -> Rollout:
    [rollout] = create_rollouts(revision, endpoint, harness="builtin", options=options, user=None)
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
def test_no_web_app_at_the_proxy_url_fails_at_once_naming_the_setting(
    settings, scripted_upstream, fruit_task, agent_endpoint
):
    settings.CLAWGYM_PROXY_PUBLIC_URL = "http://127.0.0.1:9"  # discard port: nothing listens
    rollout = run_one(fruit_task, agent_endpoint)
    assert_infra_failure(
        rollout, "proxy_unavailable", "http://127.0.0.1:9", "unreachable", "CLAWGYM_PROXY_PUBLIC_URL", "PORT"
    )
    assert scripted_upstream.requests == [] and rollout.model_calls == 0
    # The attempt's token would have lived only as long as the agent may run, and the session is closed already.
    session = ProxySession.objects.get(pk=rollout.proxy_session_id)
    lifetime = (session.expires_at - session.created_at).total_seconds()
    assert not session.is_open and lifetime <= rollout_timeout(rollout) + 3 * WALL_MARGIN_SECONDS + 1


@pytest.mark.django_db(transaction=True)
def test_the_job_of_a_rollout_the_infrastructure_failed_has_failed_too(
    settings, scripted_upstream, fruit_task, agent_endpoint
):
    # The jobs page and /api/jobs/ must not call the attempt a success: its job failed, saying why.
    settings.CLAWGYM_PROXY_PUBLIC_URL = "http://127.0.0.1:9"
    [rollout] = start_rollouts(fruit_task, agent_endpoint, harness="builtin", user=None)

    assert execute(rollout.job_run_id) == JobRun.Status.FAILED

    job_run = JobRun.objects.get(pk=rollout.job_run_id)
    assert job_run.error.startswith(f"Rollout #{rollout.pk} failed (proxy_unavailable): ")
    assert job_run.outcome_display == "Failed: its item failed" and job_run.result["status"] == "failed"


async def _not_clawgym(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/html")]})
    await send({"type": "http.response.body", "body": b"<h1>Not Found</h1>"})


@pytest.mark.django_db(transaction=True)
def test_another_server_on_the_proxy_port_fails_naming_the_setting(
    settings, scripted_upstream, fruit_task, agent_endpoint
):
    server, thread, port = serve_in_thread(_not_clawgym)
    try:
        settings.CLAWGYM_PROXY_PUBLIC_URL = f"http://127.0.0.1:{port}"
        rollout = run_one(fruit_task, agent_endpoint)
    finally:
        stop_server(server, thread)
    assert_infra_failure(rollout, "proxy_unavailable", "not a ClawGym proxy", "HTTP 404", "CLAWGYM_PROXY_PUBLIC_URL")
    assert scripted_upstream.requests == []


def test_a_key_missing_from_the_web_apps_environment_fails_naming_the_variable(
    live_server_asgi, scripted_upstream, fruit_task, monkeypatch
):
    monkeypatch.delenv("CLAWGYM_KEY_TEST_ROLLOUT", raising=False)
    endpoint = ModelEndpoint.objects.create(
        name="keyed",
        base_url=scripted_upstream.base_url,
        model="scripted-model",
        api_key_env="CLAWGYM_KEY_TEST_ROLLOUT",
        roles=["agent"],
    )
    rollout = run_one(fruit_task, endpoint)
    assert_infra_failure(rollout, "proxy_unavailable", "CLAWGYM_KEY_TEST_ROLLOUT", "web app's environment")
    assert scripted_upstream.requests == []


def test_a_failed_preflight_is_retried_on_the_same_row(
    settings, live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    working = settings.CLAWGYM_PROXY_PUBLIC_URL
    settings.CLAWGYM_PROXY_PUBLIC_URL = "http://127.0.0.1:9"
    rollout = run_one(fruit_task, agent_endpoint)
    assert rollout.exit_reason == "proxy_unavailable"
    settings.CLAWGYM_PROXY_PUBLIC_URL = working
    retry_rollout(rollout, enqueue=False, user=None)
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
def test_server_errors_and_a_refused_key_fail_the_rollout(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint, status
):
    scripted_upstream.push(Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}))
    scripted_upstream.default = Reply.error(status, "upstream is down")  # and the agent's retries meet the same
    rollout = run_one(fruit_task, agent_endpoint)
    assert_infra_failure(rollout, "upstream_error", f"HTTP {status}", "upstream is down")
    assert rollout.model_calls >= 2


@needs_bwrap
def test_an_error_the_model_caused_is_still_scored_and_the_runtime_recorded(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    scripted_upstream.push(Reply.error(400, "context length exceeded"))
    rollout = run_one(fruit_task, agent_endpoint)
    assert rollout.status == Rollout.Status.SCORED and rollout.exit_reason == "error"
    with Workspace.create({}) as workspace:
        expected = getattr(sandbox_backend().run(["/bin/true"], workspace), "runtime", "")
    assert rollout.runtime == expected and rollout.as_dict()["runtime"] == expected


# --- an answer the model's server did not deliver (issue 20 item 6, issue 24 item 5) -----------------------------


@needs_bwrap
def test_an_answer_over_the_limit_fails_the_rollout_never_scores_it(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint, settings
):
    """The proxy stops reading a 200 MB answer at CLAWGYM_MAX_RESPONSE_BYTES and the agent gets a 502 (and its
    retries the same): the model's server misbehaved, so the rollout is infra, retryable, never a score."""
    settings.CLAWGYM_MAX_RESPONSE_BYTES = 1024 * 1024
    scripted_upstream.default = Reply.text("Done: summary.txt is written.", padding=200_000_000)
    rollout = run_one(fruit_task, agent_endpoint)
    assert_infra_failure(
        rollout,
        "upstream_error",
        "the model's server failed",
        "over the limit of 1048576 bytes",
        "CLAWGYM_MAX_RESPONSE_BYTES",
    )
    assert rollout.model_calls >= 2 and all(r.bytes_sent < 32 * 1024 * 1024 for r in scripted_upstream.requests)


@needs_bwrap
def test_a_server_stalling_mid_answer_is_infra_even_when_the_agent_ran_out_of_time(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    """Every answer stops halfway (a served model that hangs): the proxy's read times out after the endpoint's 2 s,
    the agent retries until its own deadline of 7 s and the harness reports a timeout. That time went waiting on
    the server: infra, retried, not the agent's limit scored as the checker finds the workspace."""
    agent_endpoint.timeout_seconds = 2
    agent_endpoint.save()
    scripted_upstream.default = Reply.text("Done: summary.txt is written.", gate=True)  # never released
    rollout = run_one(fruit_task, agent_endpoint, timeout=7)
    assert_infra_failure(
        rollout, "upstream_error", "the model's server failed", "upstream broke off the answer: ReadTimeout"
    )
    # The agent ran to its deadline (its own retries would have given up in error after ~12 s), its calls recorded.
    assert rollout.agent_seconds >= 7 and rollout.model_calls >= 1


@needs_bwrap
@pytest.mark.harness
def test_openclaw_whose_stream_stalls_mid_answer_is_infra_not_a_score(
    harness_installed, live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    """The served-checkpoint case: OpenClaw streams, every stream stops before its end, the proxy records
    `upstream stream broke off: ReadTimeout` and ends the stream with an error event. OpenClaw retries until its
    deadline of 60 s (twice what its start-up and first call took on a loaded machine; its own retry window of 90 s
    would end it in error later, classed by the same record) and the rollout is infra, retried, never the model's 0."""
    agent_endpoint.timeout_seconds = 3
    agent_endpoint.save()
    scripted_upstream.default = Reply.text("Writing summary.txt now.", gate=True)  # the last chunk never comes
    [rollout] = create_rollouts(fruit_task, agent_endpoint, harness="openclaw", options={"timeout": 60}, user=None)
    rollout = execute_rollout(rollout.pk)
    assert_infra_failure(
        rollout, "upstream_error", "the model's server failed", "upstream stream broke off: ReadTimeout"
    )
    calls = ModelCall.objects.filter(session_id=rollout.proxy_session_id)
    assert calls.count() >= 1 and all(call.stream for call in calls)
    assert rollout.agent_seconds >= 60  # stopped by its deadline, not by its retries giving up
