"""The model client against the scripted upstream: answers, retries, JSON repair, and the ModelCall it records."""

import pytest
from django.contrib.contenttypes.models import ContentType

from llm import client
from llm.client import (
    EndpointUnavailable,
    InvalidJsonAnswer,
    MissingApiKey,
    ModelCallError,
    check_connection,
    complete,
    complete_json,
    get_endpoint,
)
from llm.models import ModelCall, ModelEndpoint
from llm.testing import Reply, scripted_endpoint

KEY_ENV = "CLAWGYM_KEY_TEST_JUDGE"
HELLO = [{"role": "user", "content": "hello"}]
VERDICT = {
    "type": "object",
    "properties": {"score": {"enum": [0, 0.25, 0.5, 0.75, 1]}, "reason": {"type": "string"}},
    "required": ["score", "reason"],
}


@pytest.fixture(autouse=True)
def fast_backoff(fast_llm_retries):
    """Every test here talks to a scripted upstream (llm.testing.fast_llm_retries)."""


@pytest.fixture
def endpoint(db, scripted_upstream, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-judge")
    return scripted_endpoint(
        scripted_upstream,
        "judge",
        model="judge-model",
        api_key_env=KEY_ENV,
        roles=["judge"],
        timeout_seconds=5,
        max_retries=2,
        sampling={"temperature": 0.0, "max_tokens": 300},
        price_input_per_mtok=3,
        price_output_per_mtok=15,
    )


def test_complete_records_the_call_with_usage_cost_and_what_it_served(endpoint, scripted_upstream, admin_user):
    scripted_upstream.push(Reply.text("hi there", usage=(1000, 200)))
    done = complete(
        endpoint, HELLO, purpose="judge", subject="revision:9", served=admin_user, sampling={"temperature": 0.7}
    )
    assert done.text == "hi there"
    sent = scripted_upstream.requests[0]
    assert sent.headers["authorization"] == "Bearer sk-judge"
    # Endpoint defaults, overridden per call.
    assert sent.json == {"model": "judge-model", "temperature": 0.7, "max_tokens": 300, "messages": HELLO}
    call = ModelCall.objects.get()
    assert call == done.call
    assert (call.purpose, call.subject, call.endpoint_name, call.attempts) == ("judge", "revision:9", "judge", 1)
    assert call.served == admin_user and call.served_type == ContentType.objects.get_for_model(admin_user)
    assert (call.input_tokens, call.output_tokens, call.status_code, call.error) == (1000, 200, 200, "")
    assert float(call.cost) == pytest.approx(1000 * 3 / 1e6 + 200 * 15 / 1e6)
    assert call.request["messages"] == HELLO and call.response["choices"][0]["message"]["content"] == "hi there"
    assert call.latency_ms > 0


def test_tool_calls_come_back(endpoint, scripted_upstream):
    scripted_upstream.push(Reply.tool_call("read", {"path": "a.md"}))
    done = complete(endpoint, HELLO, purpose="agent")
    assert done.text == "" and done.tool_calls[0]["function"]["name"] == "read"


def test_429_then_success_is_retried_into_one_recorded_call(endpoint, scripted_upstream):
    scripted_upstream.push(Reply.error(429, retry_after=0), Reply.error(503), Reply.text("finally"))
    done = complete(endpoint, HELLO, purpose="judge")
    assert done.text == "finally" and len(scripted_upstream.requests) == 3
    call = ModelCall.objects.get()
    assert (call.attempts, call.error, call.status_code) == (3, "", 200)


def test_retries_are_bounded_and_the_failure_is_recorded(endpoint, scripted_upstream):
    scripted_upstream.push(*[Reply.error(500, "model crashed")] * 3)
    with pytest.raises(ModelCallError, match="after 3 attempts.*HTTP 500") as caught:
        complete(endpoint, HELLO, purpose="judge")
    assert len(scripted_upstream.requests) == 3  # 1 + max_retries
    call = caught.value.call
    assert call.pk and call.status_code == 500 and "model crashed" in call.error and call.response is None


def test_client_errors_are_not_retried(endpoint, scripted_upstream):
    scripted_upstream.push(Reply.error(400, "bad request"), Reply.text("never reached"))
    with pytest.raises(ModelCallError, match="HTTP 400"):
        complete(endpoint, HELLO, purpose="judge")
    assert len(scripted_upstream.requests) == 1


def test_timeouts_are_retried(endpoint, scripted_upstream):
    endpoint.timeout_seconds = 0.3
    scripted_upstream.push(Reply.text("too late", delay=1.5), Reply.text("in time"))
    assert complete(endpoint, HELLO, purpose="judge").text == "in time"
    assert ModelCall.objects.get().attempts == 2


def test_responses_api_style(endpoint, scripted_upstream):
    endpoint.api_style = ModelEndpoint.ApiStyle.RESPONSES
    endpoint.sampling = {}
    scripted_upstream.push(Reply.text("from responses", usage=(5, 2)))
    done = complete(endpoint, HELLO, purpose="diagnosis")
    assert done.text == "from responses"
    assert scripted_upstream.requests[0].path == "/v1/responses"
    assert scripted_upstream.requests[0].json["input"] == HELLO
    assert (done.call.api, done.call.input_tokens, done.call.output_tokens) == ("responses", 5, 2)


def test_complete_json_strips_reasoning_and_fences(endpoint, scripted_upstream):
    scripted_upstream.push(
        Reply.text('<think>maybe {"score": 0}</think>Here:\n```json\n{"score": 0.75, "reason": "ok"}\n```')
    )
    verdict, call = complete_json(endpoint, HELLO, VERDICT, purpose="judge")
    assert verdict == {"score": 0.75, "reason": "ok"} and call.error == ""


def test_an_invalid_answer_is_repaired_once_with_the_problem_fed_back(endpoint, scripted_upstream):
    scripted_upstream.push(
        Reply.text('{"score": 0.6, "reason": "close"}'), Reply.text('{"score": 0.5, "reason": "fixed"}')
    )
    verdict, call = complete_json(endpoint, HELLO, VERDICT, purpose="judge")
    assert verdict["score"] == 0.5
    first, second = ModelCall.objects.order_by("id")
    assert call == second and second.error == ""
    assert first.error.startswith("invalid JSON answer: at score:")
    repair = scripted_upstream.requests[1].json["messages"]
    assert repair[:1] == HELLO and repair[1] == {"role": "assistant", "content": '{"score": 0.6, "reason": "close"}'}
    assert "at score" in repair[2]["content"] and "0.6" in repair[2]["content"]


def test_an_answer_still_invalid_after_the_repair_raises_with_every_call(endpoint, scripted_upstream):
    scripted_upstream.push(Reply.text("I cannot answer that."), Reply.text('{"score": 1}'))
    with pytest.raises(InvalidJsonAnswer) as caught:
        complete_json(endpoint, HELLO, VERDICT, purpose="judge")
    assert len(caught.value.calls) == 2 and "'reason' is a required property" in caught.value.reason
    assert all(c.error.startswith("invalid JSON answer") for c in ModelCall.objects.all())


def test_missing_key_fails_before_any_call_and_names_the_variable(endpoint, scripted_upstream, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(MissingApiKey, match=KEY_ENV):
        complete(endpoint, HELLO, purpose="judge")
    assert scripted_upstream.requests == []


def test_an_endpoint_without_a_key_never_sends_the_environments_openai_key(endpoint, scripted_upstream, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    endpoint.api_key_env = ""
    scripted_upstream.push(Reply.text("ok"))
    complete(endpoint, HELLO, purpose="judge")
    assert "sk-must-not-leak" not in scripted_upstream.requests[0].headers["authorization"]


def test_disabled_endpoints_and_roles(endpoint):
    assert get_endpoint(role="judge") == endpoint
    assert get_endpoint("judge") == endpoint
    with pytest.raises(EndpointUnavailable, match="serves the role 'agent'"):
        get_endpoint(role="agent")
    endpoint.enabled = False
    endpoint.save()
    with pytest.raises(EndpointUnavailable):
        get_endpoint("judge")
    with pytest.raises(EndpointUnavailable, match="disabled"):
        complete(endpoint, HELLO, purpose="judge")


def test_check_connection_reports_latency_or_the_error(endpoint, scripted_upstream):
    scripted_upstream.push(Reply.text("pong"))
    ok = check_connection(endpoint)
    assert ok.ok and ok.latency_ms > 0 and "pong" in ok.message
    assert scripted_upstream.requests[0].json["max_tokens"] == 16
    scripted_upstream.push(*[Reply.error(401, "invalid api key")] * 3)
    failed = check_connection(endpoint)
    assert not failed.ok and "invalid api key" in failed.message and failed.call.purpose == "test_connection"


def test_sdk_clients_are_reused_per_endpoint_setting(endpoint):
    assert client._sdk(endpoint) is client._sdk(endpoint)


def test_a_malformed_answer_body_is_a_recorded_failure(endpoint, scripted_upstream):
    scripted_upstream.push(*[Reply.raw('{"choices": [oops')] * 3)
    with pytest.raises(ModelCallError) as caught:
        complete(endpoint, HELLO, purpose="judge")
    assert len(scripted_upstream.requests) == 3
    assert caught.value.call.attempts == 3 and "body is not JSON" in caught.value.call.error
