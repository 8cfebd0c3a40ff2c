"""Every proxied call is recorded or refused: a call whose row cannot be written before it goes upstream is never
forwarded; a request or an answer its record could not store (NaN, Infinity, a number past the float range, a lone
surrogate) never goes on; and an answer whose record the database refused, or could not take, is withheld, its row
kept without it and still counted against the session's token limit. The agent's side (httpx or the openai SDK,
directly or through the sandbox's relay) → uvicorn running the ASGI app → the scripted upstream, as in test_proxy."""

import json
import socket

import httpx
import openai
import pytest

from lib.testing import wait_until
from llm.models import ModelCall
from llm.proxy import NOT_FORWARDED, UNRECORDED
from llm.recording import ANSWER_PENDING, ANSWER_UNRECORDED
from llm.services import open_proxy_session, proxy_base_url
from llm.testing import Reply, call_writes_refused

pytestmark = pytest.mark.django_db(transaction=True)
HI = [{"role": "user", "content": "hi"}]


def post(session, body: str, path: str = "/chat/completions") -> httpx.Response:
    """A request whose JSON text is exactly `body` (the SDKs would refuse to write NaN)."""
    headers = {"content-type": "application/json", "authorization": "Bearer agent-side-key"}
    return httpx.post(proxy_base_url(session) + path, content=body.encode(), headers=headers, timeout=20)


def stream_lines(session, body: dict) -> list[str]:
    """The data lines of a streamed answer, as the agent reads them."""
    with httpx.stream("POST", proxy_base_url(session) + "/chat/completions", json=body, timeout=20) as response:
        assert response.status_code == 200
        return [line for line in response.iter_lines() if line.startswith("data: ")]


UNSTORABLE = {
    "NaN": ('{"messages": %s, "temperature": NaN}', "NaN, which is not a JSON number"),
    "Infinity": ('{"messages": %s, "top_p": Infinity}', "Infinity, which is not a JSON number"),
    "-Infinity": ('{"messages": %s, "x": [1, {"y": -Infinity}]}', "-Infinity, which is not a JSON number"),
    "1e999": ('{"messages": %s, "temperature": 1e999}', "the number 1e999, which is out of range"),
    "-1e999": ('{"messages": %s, "seed": -1E999}', "the number -1E999, which is out of range"),
    "lone surrogate": ('{"messages": %s, "user": "a\\ud800b"}', "a lone UTF-16 surrogate"),
    "lone low surrogate": ('{"messages": %s, "user": "\\uDC00"}', "a lone UTF-16 surrogate"),
}


@pytest.mark.parametrize("case", UNSTORABLE, ids=list(UNSTORABLE))
def test_a_request_its_record_could_not_store_is_a_recorded_400_and_never_forwarded(
    live_server_asgi, scripted_upstream, agent_endpoint, case
):
    template, reason = UNSTORABLE[case]
    body = template % json.dumps(HI)
    session = open_proxy_session(agent_endpoint, subject="rollout:5", token_limit=1000)
    scripted_upstream.default = Reply.text("answered", usage=(10, 5))

    refused = post(session, body)

    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"].startswith(f"the request body holds {reason}")
    assert scripted_upstream.requests == []  # never forwarded: nothing answered that nobody recorded
    call = ModelCall.objects.get(session=session)
    assert (call.status_code, call.error, call.subject) == (400, error["message"], "rollout:5")
    assert call.request == {"raw": body}  # what the agent sent, as its text
    assert call.response == {"error": error}


def test_escapes_that_are_storable_pass_and_are_counted(live_server_asgi, scripted_upstream, agent_endpoint):
    # A surrogate pair (an emoji written as escapes), a character just below the surrogates, and an escaped
    # backslash before "ud800" (text, not an escape): valid and storable, so forwarded, recorded and counted.
    session = open_proxy_session(agent_endpoint, token_limit=1000)
    scripted_upstream.push(Reply.text("ok", usage=(40, 2)))
    body = '{"messages": [{"role": "user", "content": "\\ud83d\\ude00 \\ud7ff \\\\ud800"}], "temperature": 0.5}'

    answered = post(session, body)

    assert answered.status_code == 200 and answered.json()["choices"][0]["message"]["content"] == "ok"
    assert scripted_upstream.requests[0].json["messages"][0]["content"] == "\U0001f600 \ud7ff \\ud800"
    call = ModelCall.objects.get(session=session)
    assert call.request["messages"][0]["content"] == "\U0001f600 \ud7ff \\ud800" and call.request["temperature"] == 0.5
    assert session.tokens_used() == 42


def test_an_answer_holding_nan_is_a_recorded_502_not_passed_on(live_server_asgi, scripted_upstream, agent_endpoint):
    session = open_proxy_session(agent_endpoint)
    answer = '{"choices": [{"index": 0, "message": {"role": "assistant", "content": "secret"}}], "score": NaN}'
    scripted_upstream.push(Reply.raw(answer))

    refused = post(session, json.dumps({"messages": HI}))

    assert refused.status_code == 502 and "secret" not in refused.text
    message = refused.json()["error"]["message"]
    assert message == (
        "the upstream's answer holds NaN, which is not a JSON number (a JSON column cannot store it): not passed on"
    )
    call = ModelCall.objects.get(session=session)
    assert (call.status_code, call.error) == (502, message)
    assert call.response == {"raw": answer}


def test_a_stream_event_holding_infinity_ends_the_stream_with_an_error(
    live_server_asgi, scripted_upstream, agent_endpoint
):
    session = open_proxy_session(agent_endpoint)
    # Its usage chunk (the last before [DONE]) says prompt_tokens: Infinity (json.dumps writes float("inf") so).
    scripted_upstream.push(Reply.text("streamed text", usage=(float("inf"), 3)))

    lines = stream_lines(session, {"messages": HI, "stream": True, "stream_options": {"include_usage": True}})

    assert "data: [DONE]" not in lines and not any("prompt_tokens" in line for line in lines)  # usage withheld
    last = json.loads(lines[-1][6:])
    assert last["error"]["type"] == "upstream_error"
    assert last["error"]["message"].startswith("the upstream's answer holds Infinity, which is not a JSON number")
    text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or "" for line in lines[:-1])
    assert text == "streamed text"  # the events before it passed on as they came
    call = ModelCall.objects.get(session=session)
    assert call.error == last["error"]["message"] and call.response["choices"][0]["message"]["content"] == text
    assert call.response["usage"] is None


def test_a_training_stream_event_holding_nan_ends_the_stream_with_an_error(
    live_server_asgi, scripted_upstream, agent_endpoint
):
    # A training session's stream is split into events by llm.tokens, not llm.sse: the same refusal holds there.
    session = open_proxy_session(agent_endpoint, record_tokens=True)
    scripted_upstream.push(Reply.text("tokens", usage=(5, float("nan"))))

    lines = stream_lines(session, {"messages": HI, "stream": True, "stream_options": {"include_usage": True}})

    assert "data: [DONE]" not in lines and not any("prompt_tokens" in line for line in lines)
    assert json.loads(lines[-1][6:])["error"]["message"].startswith("the upstream's answer holds NaN")
    call = ModelCall.objects.get(session=session)
    assert call.error.startswith("the upstream's answer holds NaN") and not hasattr(call, "tokens")


# An answer the database refuses to record: usage the token columns' CHECK (>= 0) refuses, on SQLite and PostgreSQL.
REFUSED_USAGE = (-1, 5)
LIMIT = 10_000


def assert_counted_without_its_answer(session, state: str, error: str) -> ModelCall:
    """The call's row holds its request but no answer, says why, and its output cap (all the session had left: the
    proxy capped it so) still counts against the session's limit, so the next call is refused."""
    call = ModelCall.objects.get(session=session)
    assert (call.answer_state, call.response, call.status_code) == (state, None, None)
    assert call.error.startswith(error) and not call.ok
    assert call.request["max_completion_tokens"] == LIMIT == call.held_tokens == session.tokens_used()
    with openai.OpenAI(base_url=proxy_base_url(session), api_key="k", max_retries=0, timeout=20) as agent:
        with pytest.raises(openai.BadRequestError, match=f"token limit of {LIMIT} reached for this rollout"):
            agent.chat.completions.create(model="m", messages=HI)
    return call


def test_a_whole_answer_whose_record_the_database_refused_is_withheld(
    live_server_asgi, scripted_upstream, agent_endpoint
):
    session = open_proxy_session(agent_endpoint, token_limit=LIMIT)
    scripted_upstream.push(Reply.text("the secret answer", usage=REFUSED_USAGE))
    with openai.OpenAI(base_url=proxy_base_url(session), api_key="k", max_retries=0, timeout=20) as agent:
        with pytest.raises(openai.InternalServerError) as withheld:
            agent.chat.completions.create(model="m", messages=HI)
    assert withheld.value.status_code == 503
    assert withheld.value.response.json()["error"]["message"] == UNRECORDED
    assert "the secret answer" not in withheld.value.response.text
    assert len(scripted_upstream.requests) == 1
    call = assert_counted_without_its_answer(session, "unrecorded", ANSWER_UNRECORDED)
    assert call.request["messages"] == HI
    assert len(scripted_upstream.requests) == 1  # the next call was refused for the budget it holds


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_stream_whose_record_the_database_refused_never_ends_cleanly(
    live_server_asgi, scripted_upstream, agent_endpoint, api
):
    session = open_proxy_session(agent_endpoint)
    scripted_upstream.push(Reply.text("streamed secret", usage=REFUSED_USAGE))
    with openai.OpenAI(base_url=proxy_base_url(session), api_key="k", max_retries=0, timeout=20) as agent:
        with pytest.raises(openai.APIError, match=UNRECORDED):
            if api == "chat":
                stream = agent.chat.completions.create(
                    model="m", messages=HI, stream=True, stream_options={"include_usage": True}
                )
            else:
                stream = agent.responses.create(model="m", input="hi", stream=True)
            for _event in stream:
                pass
    call = ModelCall.objects.get(session=session)
    assert (call.answer_state, call.response, call.stream) == ("unrecorded", None, True)
    assert call.error.startswith(ANSWER_UNRECORDED)


def test_the_stream_withheld_is_cut_before_its_end_marker(live_server_asgi, scripted_upstream, agent_endpoint):
    session = open_proxy_session(agent_endpoint, token_limit=LIMIT)
    scripted_upstream.push(Reply.text("streamed secret", usage=REFUSED_USAGE))

    lines = stream_lines(session, {"messages": HI, "stream": True, "stream_options": {"include_usage": True}})

    assert "data: [DONE]" not in lines
    assert json.loads(lines[-1][6:]) == {"error": {"message": UNRECORDED, "type": "proxy_error", "code": 503}}
    # The record holds no answer: counted, and marked so.
    assert_counted_without_its_answer(session, "unrecorded", ANSWER_UNRECORDED)


# --- the database failing: nothing goes upstream unrecorded, and an answer it could not take stays counted --------


def test_a_call_whose_row_cannot_be_written_is_never_forwarded(live_server_asgi, scripted_upstream, agent_endpoint):
    session = open_proxy_session(agent_endpoint, token_limit=LIMIT)
    scripted_upstream.default = Reply.text("answered")
    with call_writes_refused("INSERT"):
        refused = post(session, json.dumps({"messages": HI}))
        streamed = post(session, json.dumps({"messages": HI, "stream": True}))
    for response in (refused, streamed):
        assert response.status_code == 503
        assert response.json()["error"] == {"message": NOT_FORWARDED, "type": "proxy_error", "code": 503}
    assert scripted_upstream.requests == [] and not ModelCall.objects.exists()
    assert post(session, json.dumps({"messages": HI})).status_code == 200  # the database is back: forwarded again


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_an_answer_that_came_while_the_database_was_down_is_withheld_and_still_counted(
    live_server_asgi, scripted_upstream, agent_endpoint, stream
):
    # The upstream answers, and neither its answer nor even the mark "not recorded" can be written: the row written
    # before the call went upstream is all there is. It stays pending, says so, and holds the session's budget.
    session = open_proxy_session(agent_endpoint, token_limit=LIMIT)
    scripted_upstream.push(Reply.text("answered while the database was down", usage=(40, 7)))
    with call_writes_refused("UPDATE"):
        if stream:
            lines = stream_lines(session, {"messages": HI, "stream": True})
            assert "data: [DONE]" not in lines and json.loads(lines[-1][6:])["error"]["message"] == UNRECORDED
        else:
            withheld = post(session, json.dumps({"messages": HI}))
            assert withheld.status_code == 503 and withheld.json()["error"]["message"] == UNRECORDED
            assert "database was down" not in withheld.text
    assert len(scripted_upstream.requests) == 1
    assert_counted_without_its_answer(session, "pending", ANSWER_PENDING)


def test_a_caller_gone_before_the_answer_leaves_no_call_pending(live_server_asgi, scripted_upstream, agent_endpoint):
    # The caller hangs up while the upstream is still answering (a whole answer, stalled halfway): the request is
    # cancelled, and the row written before forwarding gets what the call has and says why it holds no answer. Its
    # usage never came, so it keeps counting its cap: the upstream may have sampled up to it.
    session = open_proxy_session(agent_endpoint, token_limit=LIMIT)
    scripted_upstream.push(Reply.text("never finished", gate=True))
    url = httpx.URL(proxy_base_url(session) + "/chat/completions")
    body = json.dumps({"messages": HI}).encode()
    head = f"POST {url.path} HTTP/1.1\r\nhost: {url.host}\r\ncontent-type: application/json\r\n"
    with socket.create_connection((url.host, url.port)) as caller:
        caller.sendall(f"{head}content-length: {len(body)}\r\n\r\n".encode() + body)
        wait_until(lambda: scripted_upstream.in_flight == 1, "the call to reach the upstream")
    call = wait_until(
        lambda: ModelCall.objects.filter(session=session, answer_state="recorded").first(), "the call's record"
    )
    scripted_upstream.release()
    assert (call.error, call.response) == ("the caller went away before the answer came", None)
    assert call.held_tokens == LIMIT == session.tokens_used()
