"""The recording proxy, end to end: the openai SDK → uvicorn running the ASGI app → the scripted upstream."""

import asyncio
import json
import threading
import time

import httpx
import openai
import pytest

from lib.testing import wait_until
from llm.client import complete
from llm.models import ModelCall
from llm.services import close_proxy_session, open_proxy_session, proxy_base_url
from llm.testing import Reply, scripted_endpoint
from llm.wire import PURPOSE_HEADER

UPSTREAM_KEY = "sk-upstream-secret-123"
KEY_ENV = "CLAWGYM_KEY_TEST_UPSTREAM"


@pytest.fixture
def endpoint(scripted_upstream, monkeypatch):
    monkeypatch.setenv(KEY_ENV, UPSTREAM_KEY)
    return scripted_endpoint(
        scripted_upstream,
        "upstream",
        model="real-model-7b",
        api_key_env=KEY_ENV,
        roles=["agent"],
        timeout_seconds=10,
        price_input_per_mtok=1,
        price_output_per_mtok=2,
    )


@pytest.fixture
def session(live_server_asgi, endpoint):
    return open_proxy_session(endpoint, subject="rollout:7")


@pytest.fixture
def agent(session):
    """The agent's view: an openai SDK client with the session's base URL and a key of its own."""
    client = openai.OpenAI(base_url=proxy_base_url(session), api_key="agent-side-key", max_retries=0, timeout=20)
    yield client
    client.close()


def only_call(session) -> ModelCall:
    calls = list(ModelCall.objects.filter(session=session))
    assert len(calls) == 1, calls
    return calls[0]


def test_non_streaming_chat_is_forwarded_with_the_upstream_key_and_recorded(agent, session, scripted_upstream):
    scripted_upstream.push(Reply.text("The file is written.", usage=(30, 6)))
    messages = [{"role": "user", "content": "write notes.md"}]

    answer = agent.chat.completions.create(model="whatever-the-agent-says", messages=messages, temperature=0.3)

    assert answer.choices[0].message.content == "The file is written."
    received = scripted_upstream.requests[0]
    assert received.path == "/v1/chat/completions"
    assert received.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the agent's key never goes upstream
    assert received.json == {"model": "real-model-7b", "messages": messages, "temperature": 0.3}
    call = only_call(session)
    assert call.purpose == "proxy" and call.subject == "rollout:7" and not call.stream
    assert call.request["messages"] == messages
    assert call.response["choices"][0]["message"]["content"] == "The file is written."
    assert (call.status_code, call.error) == (200, "")
    assert (call.input_tokens, call.output_tokens) == (30, 6)
    assert float(call.cost) == pytest.approx((30 * 1 + 6 * 2) / 1e6)
    assert call.latency_ms > 0 and call.ttft_ms is not None


def test_an_agent_cannot_name_a_purpose_upstream(agent, session, scripted_upstream, endpoint):
    # The purpose header says which of ClawGym's own requests a call is (the demo models answer a synthesis stage by
    # it): the proxy sends only headers of its own, so an agent cannot pass for the generator.
    scripted_upstream.push(Reply.text("ok"), Reply.text("ok"))
    agent.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], extra_headers={PURPOSE_HEADER: "synthesis:verify"}
    )
    assert PURPOSE_HEADER.lower() not in scripted_upstream.requests[0].headers
    # ClawGym's own client names it.
    complete(endpoint, [{"role": "user", "content": "hi"}], purpose="synthesis:verify")
    assert scripted_upstream.requests[1].headers[PURPOSE_HEADER.lower()] == "synthesis:verify"


def test_stream_passes_through_chunk_by_chunk_before_the_upstream_finishes(agent, session, scripted_upstream):
    scripted_upstream.push(Reply.text("Hello from a slow stream", chunk_size=5, gate=True))
    stream = agent.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces = []
    chunks = iter(stream)
    # Read until some text has arrived: the upstream is still holding its last chunk (the gate is closed).
    while not "".join(pieces):
        chunk = next(chunks)
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    upstream_side = scripted_upstream.requests[0]
    assert not upstream_side.finished, "the proxy waited for the whole upstream stream before passing it on"
    # Its row was written before it went upstream; its answer is added when the stream ends, not before.
    [pending] = ModelCall.objects.filter(session=session)
    assert (pending.answer_state, pending.response, pending.stream) == ("pending", None, True)
    scripted_upstream.release()
    usage = None
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        if chunk.usage:
            usage = chunk.usage
    assert "".join(pieces) == "Hello from a slow stream" and usage is not None
    # The upstream marks itself finished just after its last chunk went out, which may be after the agent read it.
    wait_until(lambda: upstream_side.finished, "the upstream to finish its stream")
    call = only_call(session)  # its answer written before the response ended
    assert call.stream and call.error == "" and call.answer_state == "recorded"
    message = call.response["choices"][0]["message"]
    assert message["content"] == "Hello from a slow stream"
    assert call.response["choices"][0]["finish_reason"] == "stop"
    assert (call.input_tokens, call.output_tokens) == (usage.prompt_tokens, usage.completion_tokens)
    assert call.ttft_ms is not None and call.ttft_ms <= call.latency_ms


def test_streamed_tool_calls_are_assembled(agent, session, scripted_upstream):
    arguments = {"path": "out/report.md", "content": "# Report\n" + "line\n" * 20}
    scripted_upstream.push(Reply.tool_call("write", arguments))
    stream = agent.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "go"}],
        stream=True,
        tools=[{"type": "function", "function": {"name": "write"}}],
    )
    fragments = [c.choices[0].delta.tool_calls for c in stream if c.choices and c.choices[0].delta.tool_calls]
    assert len(fragments) > 2  # the arguments really came in pieces
    call = only_call(session)
    choice = call.response["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    [tool_call] = choice["message"]["tool_calls"]
    assert tool_call["function"]["name"] == "write"
    assert json.loads(tool_call["function"]["arguments"]) == arguments
    assert call.request["tools"][0]["function"]["name"] == "write"


def test_responses_api_streaming_and_not(agent, session, scripted_upstream):
    scripted_upstream.push(Reply.text("plain answer", usage=(11, 3)), Reply.text("streamed answer", usage=(12, 4)))
    plain = agent.responses.create(model="m", input="say it")
    assert plain.output_text == "plain answer"
    events = list(agent.responses.create(model="m", input="stream it", stream=True))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "streamed answer" and events[-1].type == "response.completed"
    first, second = ModelCall.objects.filter(session=session).order_by("id")
    assert [r.path for r in scripted_upstream.requests] == ["/v1/responses", "/v1/responses"]
    assert (first.api, first.stream, first.input_tokens) == ("responses", False, 11)
    assert (second.api, second.stream, second.output_tokens) == ("responses", True, 4)
    assert second.response["output"][0]["content"][0]["text"] == "streamed answer"


@pytest.mark.parametrize("status", [429, 500])
def test_upstream_errors_pass_through_with_status_and_are_recorded(agent, session, scripted_upstream, status):
    scripted_upstream.push(Reply.error(status, "slow down", retry_after=7))
    with pytest.raises(openai.APIStatusError) as caught:
        agent.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)
    assert caught.value.status_code == status
    assert caught.value.response.headers["retry-after"] == "7"
    call = only_call(session)
    assert call.status_code == status and "slow down" in call.error
    assert call.response["error"]["message"] == "slow down"


def test_malformed_upstream_json_passes_through_as_is(session, scripted_upstream):
    scripted_upstream.push(Reply.raw('{"choices": [oops'))
    response = httpx.post(f"{proxy_base_url(session)}/chat/completions", json={"messages": []})
    assert response.status_code == 200 and response.text == '{"choices": [oops'
    assert only_call(session).response == {"raw": '{"choices": [oops'}


def test_unknown_and_closed_tokens_get_401(live_server_asgi, session, scripted_upstream):
    base = f"{live_server_asgi.url}/proxy"
    unknown = httpx.post(f"{base}/not-a-token/v1/chat/completions", json={"messages": []})
    assert unknown.status_code == 401 and "unknown, closed or expired" in unknown.json()["error"]["message"]
    close_proxy_session(session)
    for route in ("chat/completions", "responses"):
        assert httpx.post(f"{base}/{session.token}/v1/{route}", json={}).status_code == 401
    assert httpx.get(f"{base}/{session.token}/v1/models").status_code == 401
    assert scripted_upstream.requests == [] and ModelCall.objects.count() == 0


def test_models_lists_the_session_model(agent):
    assert [m.id for m in agent.models.list()] == ["real-model-7b"]


def test_request_size_is_bounded(session, scripted_upstream, settings):
    settings.CLAWGYM_PROXY_MAX_REQUEST_BYTES = 1000
    big = {"messages": [{"role": "user", "content": "x" * 2000}]}
    response = httpx.post(f"{proxy_base_url(session)}/chat/completions", json=big)
    assert response.status_code == 413 and "1000 bytes" in response.json()["error"]["message"]
    assert scripted_upstream.requests == []


def test_bad_requests_are_refused_before_the_upstream(session, scripted_upstream):
    url = f"{proxy_base_url(session)}/chat/completions"
    assert httpx.post(url, content=b"not json", headers={"content-type": "application/json"}).status_code == 400
    assert httpx.post(url, json=[1, 2]).status_code == 400
    assert httpx.get(url).status_code == 405
    assert scripted_upstream.requests == []


def test_unreachable_upstream_is_a_recorded_502(live_server_asgi, endpoint):
    endpoint.base_url = "http://127.0.0.1:9/v1"  # discard port: nothing listens
    endpoint.save()
    session = open_proxy_session(endpoint)
    response = httpx.post(f"{proxy_base_url(session)}/chat/completions", json={"messages": []})
    assert response.status_code == 502
    call = only_call(session)
    assert call.status_code == 502 and "unreachable" in call.error


def test_missing_upstream_key_is_a_recorded_502_that_names_the_variable(session, scripted_upstream, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    response = httpx.post(f"{proxy_base_url(session)}/chat/completions", json={"messages": []})
    assert response.status_code == 502 and KEY_ENV in response.json()["error"]["message"]
    assert scripted_upstream.requests == [] and KEY_ENV in only_call(session).error


def test_a_caller_that_goes_away_mid_stream_is_recorded(session, scripted_upstream):
    scripted_upstream.push(Reply.text("never finished " * 5, chunk_size=3, gate=True))
    with httpx.stream(
        "POST", f"{proxy_base_url(session)}/chat/completions", json={"messages": [], "stream": True}
    ) as response:
        next(response.iter_raw())  # one chunk, then hang up
    scripted_upstream.release()
    # The answer's record is written after the caller has gone: on a busy machine, later (the row itself was written
    # before the call went upstream, its answer pending).
    answered = ModelCall.objects.filter(session=session, answer_state=ModelCall.AnswerState.RECORDED)
    call = wait_until(answered.first, "the call's record")
    assert "went away" in call.error and call.stream


def test_many_concurrent_streams_through_one_process(live_server_asgi, endpoint, scripted_upstream):
    """32 agents on 8 sessions stream at once: the upstream sees all 32 in flight together (each holds its last chunk
    until all have started), each agent gets its own answer whole, and each call is recorded once, in its own
    session, with its own answer."""
    sessions = [open_proxy_session(endpoint, subject=f"rollout:{n}") for n in range(8)]
    streams = [(session, f"agent {s}.{k}") for s, session in enumerate(sessions) for k in range(4)]

    def answer_for(prompt: str) -> str:
        return f"the answer for {prompt}, streamed in small pieces"

    scripted_upstream.responder = lambda body: Reply.text(
        answer_for(body["messages"][0]["content"]), chunk_size=3, gate=True
    )

    async def one(client, prompt):
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": prompt}], stream=True
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    async def run_all():
        clients = {
            s.pk: openai.AsyncOpenAI(base_url=proxy_base_url(s), api_key="k", max_retries=0, timeout=60)
            for s in sessions
        }
        try:
            return await asyncio.gather(*(one(clients[s.pk], prompt) for s, prompt in streams))
        finally:
            for client in clients.values():
                await client.close()

    answers: list = []
    runner = threading.Thread(target=lambda: answers.extend(asyncio.run(run_all())))
    runner.start()
    # Every stream is held at its last chunk until all 32 are in flight at the upstream at once.
    deadline = time.monotonic() + 60
    while scripted_upstream.in_flight < len(streams) and time.monotonic() < deadline and runner.is_alive():
        time.sleep(0.01)
    in_flight_together = scripted_upstream.in_flight
    scripted_upstream.release()
    runner.join(timeout=60)
    assert in_flight_together == len(streams) and scripted_upstream.max_in_flight == len(streams)
    assert answers == [answer_for(prompt) for _session, prompt in streams]
    calls = ModelCall.objects.filter(session__in=sessions)
    assert calls.count() == len(streams) and not calls.exclude(error="").exists()
    for session, prompt in streams:
        [call] = [c for c in calls if c.request["messages"][0]["content"] == prompt]
        assert call.session_id == session.pk and call.subject == session.subject
        assert call.response["choices"][0]["message"]["content"] == answer_for(prompt)


def test_the_rest_of_the_site_still_gets_its_middleware(live_server_asgi):
    """Only /proxy/ takes the lean lane: the site's pages keep sessions, CSRF and security headers."""
    page = httpx.get(f"{live_server_asgi.url}/login/")
    assert page.status_code == 200 and "csrftoken" in page.cookies
    assert page.headers["x-frame-options"] == "DENY"
    assert httpx.get(f"{live_server_asgi.url}/llm/calls/").status_code == 302  # login required
    proxied = httpx.get(f"{live_server_asgi.url}/proxy/nope/v1/models")
    assert proxied.status_code == 401 and "x-frame-options" not in proxied.headers


@pytest.mark.parametrize("depth", [100_000, 500])
def test_deeply_nested_json_is_a_400_not_a_500(session, scripted_upstream, depth):
    """Past Python's recursion limit json.loads raised RecursionError (a 500); below it, past the proxy's own bound."""
    body = '{"messages": [], "x": ' + "[" * depth + "]" * depth + "}"
    response = httpx.post(
        f"{proxy_base_url(session)}/chat/completions",
        content=body.encode(),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400 and "nests deeper than" in response.json()["error"]["message"]
    assert scripted_upstream.requests == [] and not ModelCall.objects.exists()


def test_ordinarily_nested_json_passes(agent, session, scripted_upstream):
    scripted_upstream.push(Reply.text("ok"))
    schema = {"type": "object"}
    for _ in range(20):  # a tool schema nested twenty levels
        schema = {"type": "object", "properties": {"inner": schema}}
    agent.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "x"}],
        tools=[{"type": "function", "function": {"name": "t", "parameters": schema}}],
    )
    assert only_call(session).request["tools"][0]["function"]["parameters"]["type"] == "object"
