"""Unbounded model answers (issue 20, item 6): a generator answering with 200 MB bodies had its item kept, five such
ModelCall rows made SQLite 1.05 GB, and a viewer opening one cost the web process 1.2 GB. Now the client and the
proxy read an answer as it arrives and stop past CLAWGYM_MAX_RESPONSE_BYTES (recorded as the upstream's failure,
the rest never read), and a large body is shown by its head, the rest on request, never loaded whole.

The upstream is the scripted server on loopback offering 200 MB it never builds (Reply padding): how many bytes it
got to send, and that its caller hung up, say where reading stopped; tracemalloc (every thread of this process: the
proxy and the scripted server run here) says what was held.
"""

import json
import tracemalloc
from urllib.parse import urlsplit

import httpx
import openai
import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from lib.testing import wait_until
from llm.client import ModelCallError, complete
from llm.failures import is_answer_failure, too_large
from llm.models import ModelCall, ModelEndpoint
from llm.services import open_proxy_session, proxy_base_url
from llm.testing import PAD, Reply

HUGE = 200_000_000  # what the upstream offers
LIMIT = 1024 * 1024  # the limit these tests set
# Far below HUGE: what one reader may have been sent before it hung up (its limit, then a few MB of socket buffers).
SENT_AT_MOST = 24 * 1024 * 1024
HELD_AT_MOST = 8 * LIMIT  # the most Python memory a capped call may take at its peak, everything included


@pytest.fixture
def capped(settings):
    settings.CLAWGYM_MAX_RESPONSE_BYTES = LIMIT


class Peak:
    """The most memory Python allocated (all threads) while inside the block, above what it held before."""

    def __enter__(self):
        tracemalloc.start()
        self.before = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc):
        self.bytes = tracemalloc.get_traced_memory()[1] - self.before
        tracemalloc.stop()


def assert_stopped_reading(requests) -> None:
    for received in requests:
        wait_until(lambda r=received: r.disconnected, "the reader to hang up on the 200 MB answer")
        assert not received.finished and received.bytes_sent < SENT_AT_MOST, received.bytes_sent


# --- the client (synthesis, judges, diagnoses) -----------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("api, declare_length", [("chat", False), ("responses", False), ("chat", True)])
def test_the_client_stops_reading_past_the_limit_and_records_why(
    capped, fast_llm_retries, scripted_upstream, api, declare_length
):
    endpoint = ModelEndpoint.objects.create(
        name="gen", base_url=scripted_upstream.base_url, model="m", api_style=api, max_retries=1, roles=["generator"]
    )
    # A task whose scenario runs to 200 MB: valid JSON the generator's stage would have taken whole.
    scripted_upstream.default = Reply.text(
        '{"question": "q", "scenario": "' + PAD + '"}', padding=HUGE, declare_length=declare_length
    )
    messages = [{"role": "user", "content": "a task, please"}]
    scripted_upstream.push(Reply.text("warm"))  # a first call loads the SDK's code: measured is the next one
    complete(endpoint, messages, purpose="judge")
    with Peak() as peak, pytest.raises(ModelCallError) as raised:
        complete(endpoint, messages, purpose="synthesis:generate")

    huge = scripted_upstream.requests[1:]
    assert_stopped_reading(huge)
    assert peak.bytes < HELD_AT_MOST, peak.bytes
    call = raised.value.call
    assert "over the limit of 1048576 bytes (CLAWGYM_MAX_RESPONSE_BYTES)" in str(raised.value)
    assert call.error.startswith("upstream answer over the limit of 1048576 bytes (CLAWGYM_MAX_RESPONSE_BYTES)")
    assert ("declared" in call.error) is declare_length
    # Retried like any unusable body (the server misbehaved), then failed; nothing of the answer is stored.
    assert call.attempts == 2 == len(huge) and call.response is None
    assert ModelCall.objects.get(pk=call.pk).response is None


@pytest.mark.django_db
def test_the_client_takes_an_answer_under_the_limit_whole(capped, scripted_upstream):
    endpoint = ModelEndpoint.objects.create(name="gen", base_url=scripted_upstream.base_url, model="m")
    scripted_upstream.push(Reply.text("begin:", padding=LIMIT - 4096))
    done = complete(endpoint, [{"role": "user", "content": "hi"}], purpose="judge")
    assert done.text == "begin:" + "x" * (LIMIT - 4096) and done.call.error == ""


# --- the proxy (agents) ------------------------------------------------------------------------------------------


@pytest.fixture
def session(live_server_asgi, scripted_upstream):
    endpoint = ModelEndpoint.objects.create(
        name="agent-model", base_url=scripted_upstream.base_url, model="m", roles=["agent"], timeout_seconds=10
    )
    return open_proxy_session(endpoint, subject="rollout:9")


@pytest.fixture
def agent(session):
    client = openai.OpenAI(base_url=proxy_base_url(session), api_key="agent-key", max_retries=0, timeout=30)
    yield client
    client.close()


def ask(agent, api: str, stream: bool):
    if api == "chat":
        answer = agent.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}], stream=stream)
    else:
        answer = agent.responses.create(model="m", input=[{"role": "user", "content": "go"}], stream=stream)
    if stream:
        for _event in answer:
            pass


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
def test_the_proxy_stops_reading_past_the_limit_and_records_an_upstream_error(
    capped, agent, session, scripted_upstream, api, stream
):
    scripted_upstream.push(Reply.text("warm"), Reply.text("begin ", padding=HUGE))
    ask(agent, api, stream)  # a first call loads the SDK's and the proxy's code: measured is the next one
    with Peak() as peak, pytest.raises(openai.APIError) as raised:
        ask(agent, api, stream)

    # The agent is told why: a 502 upstream_error, or (headers gone already) the stream's last event.
    message = str(raised.value)
    assert "over the limit of 1048576 bytes (CLAWGYM_MAX_RESPONSE_BYTES)" in message, message
    assert raised.value.type == "upstream_error"
    if not stream:
        assert raised.value.status_code == 502
    assert_stopped_reading(scripted_upstream.requests[1:])
    assert peak.bytes < HELD_AT_MOST, peak.bytes

    call = ModelCall.objects.filter(session=session).order_by("-id").first()
    assert call.error == too_large(LIMIT) and call.stream is stream
    assert call.status_code == (200 if stream else 502)  # a stream had its 200 before it went past the limit
    # A failure of the answer, never the model's answer itself (evaluation.infra counts it as the infrastructure's:
    # evaluation/tests/test_infra_calls.py); and what is stored stays small.
    assert is_answer_failure(call.error)
    assert len(json.dumps(call.response)) <= LIMIT + 4096


def test_the_proxy_refuses_an_answer_that_declares_more_than_the_limit(capped, agent, session, scripted_upstream):
    scripted_upstream.push(Reply.text("begin ", padding=HUGE, declare_length=True))
    with pytest.raises(openai.InternalServerError) as raised:
        ask(agent, "chat", stream=False)
    assert "(it declared 200000" in str(raised.value)
    assert_stopped_reading(scripted_upstream.requests)
    [call] = ModelCall.objects.filter(session=session)
    assert call.status_code == 502 and call.response is None and "declared" in call.error


@pytest.mark.parametrize("stream", [False, True])
def test_the_proxy_passes_an_answer_under_the_limit_whole(capped, agent, session, scripted_upstream, stream):
    scripted_upstream.push(Reply.text("begin:", padding=LIMIT // 2))
    content = "x" * (LIMIT // 2) + "begin:" if stream else "begin:" + "x" * (LIMIT // 2)  # a stream's filler first
    if stream:
        events = agent.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}], stream=True)
        text = "".join(e.choices[0].delta.content or "" for e in events if e.choices)
    else:
        text = agent.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}]).choices[0]
        text = text.message.content
    assert text == content
    [call] = ModelCall.objects.filter(session=session)
    assert call.error == "" and call.response["choices"][0]["message"]["content"] == content


def test_a_long_context_training_stream_fits_the_default_limit(live_server_asgi, vllm_upstream, settings):
    """The default's reason: 64K tokens streamed by vLLM with token ids and logprobs (an RL rollout's call, the
    largest answers an agent gets) pass whole under the default CLAWGYM_MAX_RESPONSE_BYTES."""
    endpoint = ModelEndpoint.objects.create(
        name="policy", base_url=vllm_upstream.base_url, model="m", roles=["agent"], timeout_seconds=60
    )
    session = open_proxy_session(endpoint, subject="rollout:10", record_tokens=True)
    tokens = 64 * 1024
    vllm_upstream.push(Reply.text("w" * tokens, chunk_size=1))  # one token an event, as vLLM streams
    with httpx.stream(
        "POST",
        f"{proxy_base_url(session)}/chat/completions",
        timeout=120,
        json={"messages": [{"role": "user", "content": "go"}], "stream": True},
    ) as response:
        received = sum(len(chunk) for chunk in response.iter_raw())
    [call] = ModelCall.objects.filter(session=session)
    assert call.error == "" and len(call.response["choices"][0]["message"]["content"]) == tokens
    sent = vllm_upstream.requests[0].bytes_sent
    assert received > 0 and sent < settings.CLAWGYM_MAX_RESPONSE_BYTES, sent
    assert len(call.tokens.completion_token_ids) >= tokens


# --- large bodies on the API and the call's page ------------------------------------------------------------------

BIG = 8 * 1024 * 1024  # under the default limit: a real answer that is large


@pytest.fixture
def big_call(agent, session, scripted_upstream) -> ModelCall:
    """A real call through the proxy whose answer is 8 MB (under the default limit)."""
    scripted_upstream.push(Reply.text("begin:", padding=BIG))
    agent.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}])
    [call] = ModelCall.objects.filter(session=session)
    assert call.error == ""
    return call


def download(live, path: str, **headers) -> bytes:
    """The body at `path` from the ASGI app on loopback, as it streams it."""
    with httpx.stream("GET", live.url + urlsplit(path).path, headers=headers, timeout=60) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-disposition"].startswith("attachment")
        return b"".join(response.iter_bytes())


def test_the_api_shows_a_large_body_by_its_head_and_the_rest_on_request(
    big_call, live_server_asgi, api_as, viewer, outsider, settings
):
    client = api_as(viewer)
    detail_url = f"/api/model-calls/{big_call.pk}/"
    client.get(detail_url)  # the first request loads code and caches every later one uses: measured is the second
    with Peak() as peak:
        detail = client.get(detail_url)
    assert detail.status_code == 200
    assert peak.bytes < BIG // 8, peak.bytes  # the body was never loaded (it alone is 8 MB, twice over as JSON)
    found = detail.json()
    inline = settings.CLAWGYM_MODEL_CALL_INLINE_BYTES
    assert found["response"] is None and len(found["response_head"]) == inline
    assert found["response_length"] > BIG
    # The small request is whole, as before.
    assert found["request"]["messages"] == [{"role": "user", "content": "go"}] and found["request_head"] is None

    # The rest on request: one range at a time, or the whole, streamed.
    url = found["response_url"]
    page = client.get(url, {"offset": inline, "length": 1000}).json()
    assert page["offset"] == inline and len(page["text"]) == 1000 and page["next_offset"] == inline + 1000
    assert page["total"] == found["response_length"]
    last = client.get(url, {"offset": page["total"] - 10}).json()
    assert len(last["text"]) == 10 and last["next_offset"] is None
    token = Token.objects.get(user=viewer).key
    text = download(live_server_asgi, url, authorization=f"Token {token}").decode()
    assert len(text) == found["response_length"] and text.startswith(found["response_head"])
    assert text[inline : inline + 1000] == page["text"]
    assert json.loads(text)["choices"][0]["message"]["content"] == "begin:" + "x" * BIG
    assert client.get(url, {"length": 10**9}).status_code == 400

    # Role checks as for every read: a viewer, never an outsider or anonymous.
    assert api_as(outsider).get(url).status_code == 403 and APIClient().get(url).status_code in (401, 403)
    client.get("/api/model-calls/")
    with Peak() as peak:
        listed = client.get("/api/model-calls/")
    assert listed.status_code == 200 and peak.bytes < BIG // 8, peak.bytes


def test_the_call_page_shows_a_large_body_by_its_head_with_a_link_to_the_whole(
    big_call, live_server_asgi, viewer_client, settings
):
    viewer_client.get(reverse("llm:call", args=[big_call.pk]))  # measured is the second (code and caches loaded)
    with Peak() as peak:
        page = viewer_client.get(reverse("llm:call", args=[big_call.pk]))
    assert page.status_code == 200 and peak.bytes < BIG // 8, peak.bytes
    html = page.content.decode()
    assert "Showing the first 64.0\xa0KB of 8.0\xa0MB" in html
    link = reverse("modelcall-body", kwargs={"pk": big_call.pk, "part": "response"})
    assert f'href="{link}"' in html and len(html) < 4 * settings.CLAWGYM_MODEL_CALL_INLINE_BYTES
    # The page's user follows it with the page's session (the API takes it).
    whole = download(live_server_asgi, link, cookie=f"sessionid={viewer_client.cookies['sessionid'].value}")
    assert json.loads(whole)["choices"][0]["message"]["content"] == "begin:" + "x" * BIG
    viewer_client.get(reverse("llm:calls"))
    with Peak() as peak:
        listed = viewer_client.get(reverse("llm:calls"))
    assert listed.status_code == 200 and peak.bytes < BIG // 8, peak.bytes
