"""Exact tokens through the recording proxy: the openai SDK → uvicorn running the ASGI app → a scripted upstream
that answers vLLM's token fields. A training session's calls get the tokens the upstream sampled, stored with the
call; the agent gets the answer it asked for; other sessions and APIs are untouched."""

import json

import httpx
import openai
import pytest

from llm.models import ModelCall, ModelCallTokens, ModelEndpoint
from llm.services import open_proxy_session, proxy_base_url
from llm.sse import StreamAssembler
from llm.testing import Reply, scripted_endpoint
from llm.testing_tokens import TOY_EOS, toy_assistant, toy_logprob, toy_prompt_ids, toy_tokenize
from llm.tokens import TokenAsk, TokenCapture, TokenStream

MESSAGES = [{"role": "system", "content": "You edit files."}, {"role": "user", "content": "write notes.md"}]
TOOLS = [
    {"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}},
]


@pytest.fixture
def endpoint(vllm_upstream, db):
    return scripted_endpoint(vllm_upstream, "policy", model="policy-0", roles=(), timeout_seconds=10)


def agent_for(session):
    return openai.OpenAI(base_url=proxy_base_url(session), api_key="agent-key", max_retries=0, timeout=20)


@pytest.fixture
def training(live_server_asgi, endpoint):
    return open_proxy_session(endpoint, subject="rollout:1", record_tokens=True)


def expected_completion(reply: Reply) -> list[int]:
    return toy_tokenize(toy_assistant(reply.content, reply.tool_calls)) + [TOY_EOS]


def the_call(session) -> ModelCall:
    [call] = ModelCall.objects.filter(session=session)
    return call


def assert_exact_tokens(call: ModelCall, request: dict, reply: Reply) -> ModelCallTokens:
    tokens = ModelCallTokens.objects.get(call=call)
    completion = expected_completion(reply)
    assert tokens.exact
    assert tokens.prompt_ids() == toy_prompt_ids(request)
    assert tokens.completion_token_ids == completion
    assert tokens.completion_logprobs == [toy_logprob(t, n) for n, t in enumerate(completion)]
    return tokens


def test_a_whole_answer_of_a_training_call_is_stored_with_its_exact_tokens(training, vllm_upstream):
    reply = Reply.tool_call("write", {"path": "notes.md", "content": "hi"}, content="Writing.")
    vllm_upstream.push(reply)
    with agent_for(training) as agent:
        answer = agent.chat.completions.create(model="x", messages=MESSAGES, tools=TOOLS)

    sent = vllm_upstream.requests[0].json
    assert sent["return_token_ids"] is True and sent["logprobs"] is True
    assert {k: v for k, v in sent.items() if k not in ("return_token_ids", "logprobs")} == {
        "model": "policy-0",
        "messages": MESSAGES,
        "tools": TOOLS,
    }
    # The agent gets what it asked for: its message, no logprobs it never asked for.
    choice = answer.choices[0]
    assert choice.message.content == "Writing." and choice.message.tool_calls[0].function.name == "write"
    assert choice.logprobs is None
    call = the_call(training)
    assert_exact_tokens(call, sent, reply)
    # The stored response is the agent's, without the token ids (they are the tokens row).
    assert "prompt_token_ids" not in call.response and "token_ids" not in call.response["choices"][0]
    assert call.response["choices"][0]["logprobs"] is None
    assert call.input_tokens == len(toy_prompt_ids(sent))


def test_a_streamed_answer_with_parallel_tool_calls_is_assembled_into_its_tokens(training, vllm_upstream):
    reply = Reply(
        content="Two files.",
        tool_calls=[
            {"name": "write", "arguments": '{"path": "a.md", "content": "1"}'},
            {"name": "read", "arguments": '{"path": "b.md"}'},
        ],
        chunk_size=3,
    )
    vllm_upstream.push(reply)
    with agent_for(training) as agent:
        chunks = list(agent.chat.completions.create(model="x", messages=MESSAGES, tools=TOOLS, stream=True))

    assert len(chunks) > 8
    assert all(c.choices[0].logprobs is None for c in chunks if c.choices)  # taken back out, chunk by chunk
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Two files."
    names = [t.function.name for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or [] if t.id]
    assert names == ["write", "read"]
    # The token ids pass on (no client breaks on a field it does not know).
    assert chunks[0].model_extra.get("prompt_token_ids") == toy_prompt_ids(vllm_upstream.requests[0].json)
    call = the_call(training)
    assert call.stream and call.error == ""
    assert [t["function"]["name"] for t in call.response["choices"][0]["message"]["tool_calls"]] == ["write", "read"]
    tokens = assert_exact_tokens(call, vllm_upstream.requests[0].json, reply)
    assert tokens.completion_token_ids.count(toy_tokenize("<tool_call>")[0]) == 2  # both calls, not the first only


def test_logprobs_the_agent_asked_for_reach_it(training, vllm_upstream):
    reply = Reply.text("ok")
    vllm_upstream.push(reply, reply)
    with agent_for(training) as agent:
        whole = agent.chat.completions.create(model="x", messages=MESSAGES, logprobs=True, top_logprobs=2)
        streamed = list(agent.chat.completions.create(model="x", messages=MESSAGES, logprobs=True, stream=True))

    assert vllm_upstream.requests[0].json["top_logprobs"] == 2  # the agent's own setting is kept
    assert [e.logprob for e in whole.choices[0].logprobs.content] == [
        toy_logprob(t, n) for n, t in enumerate(expected_completion(reply))
    ]
    assert any(c.choices and c.choices[0].logprobs is not None for c in streamed)
    assert ModelCallTokens.objects.filter(call__session=training).count() == 2


def test_the_agent_gets_a_training_stream_unchanged_but_for_the_logprobs(training, vllm_upstream):
    """Byte for byte: each event the agent gets is the upstream's, re-serialized only where logprobs came out."""
    reply = Reply.text("hello there", chunk_size=4)
    vllm_upstream.push(reply)
    body = {"model": "x", "messages": MESSAGES, "stream": True}
    with httpx.stream("POST", proxy_base_url(training) + "/chat/completions", json=body, timeout=20) as response:
        got = response.read().decode()
    events = [e for e in got.split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    parsed = [json.loads(e[len("data: ") :]) for e in events[:-1]]
    assert parsed[0]["prompt_token_ids"] == toy_prompt_ids(vllm_upstream.requests[0].json)
    assert [c["choices"][0]["logprobs"] for c in parsed] == [None] * len(parsed)
    ids = [t for c in parsed for t in c["choices"][0]["token_ids"]]
    assert ids == expected_completion(reply)


def test_a_session_that_does_not_record_tokens_asks_for_none(live_server_asgi, endpoint, vllm_upstream):
    session = open_proxy_session(endpoint, subject="rollout:2")
    vllm_upstream.push(Reply.text("plain"), Reply.text("plain"))
    with agent_for(session) as agent:
        agent.chat.completions.create(model="x", messages=MESSAGES)
        list(agent.chat.completions.create(model="x", messages=MESSAGES, stream=True))

    assert all("return_token_ids" not in r.json and "logprobs" not in r.json for r in vllm_upstream.requests)
    assert ModelCall.objects.filter(session=session).count() == 2
    assert not ModelCallTokens.objects.exists()


def test_no_token_row_when_the_upstream_gives_no_token_ids(live_server_asgi, scripted_upstream, db):
    """Not vLLM: the answer has no token fields; the call is recorded as ever and the sample builder re-tokenizes."""
    endpoint = ModelEndpoint.objects.create(name="plain", base_url=scripted_upstream.base_url, model="m")
    session = open_proxy_session(endpoint, record_tokens=True)
    scripted_upstream.push(Reply.text("no ids here"), Reply.text("nor here"))
    with agent_for(session) as agent:
        assert agent.chat.completions.create(model="x", messages=MESSAGES).choices[0].message.content == "no ids here"
        list(agent.chat.completions.create(model="x", messages=MESSAGES, stream=True))

    assert scripted_upstream.requests[0].json["return_token_ids"] is True
    assert ModelCall.objects.filter(session=session, error="").count() == 2
    assert not ModelCallTokens.objects.exists()


def test_failed_and_responses_api_calls_record_no_tokens(training, endpoint, vllm_upstream):
    vllm_upstream.push(Reply.error(429, "slow down"), Reply.text("a response"))
    with agent_for(training) as agent:
        with pytest.raises(openai.RateLimitError):
            agent.chat.completions.create(model="x", messages=MESSAGES)
        agent.responses.create(model="x", input="hi")

    # The Responses API has no token fields at vLLM: its request passes as it came.
    assert "return_token_ids" not in vllm_upstream.requests[1].json
    assert ModelCall.objects.filter(session=training).count() == 2
    assert not ModelCallTokens.objects.exists()


# --- the parts, without servers --------------------------------------------------------------------------------


def sse(events: list[dict], crlf: bool = False) -> bytes:
    end = "\r\n\r\n" if crlf else "\n\n"
    return "".join(f"data: {json.dumps(e)}{end}" for e in events).encode() + f"data: [DONE]{end}".encode()


def chunk(ids, logprobs=None, first=False, **delta):
    out = {
        "id": "c",
        "choices": [
            {
                "index": 0,
                "delta": delta,
                "token_ids": ids,
                "logprobs": {"content": [{"logprob": v} for v in logprobs]} if logprobs else None,
            }
        ],
    }
    return {**out, "prompt_token_ids": [1, 2, 3]} if first else out


EVENTS = [
    chunk([], first=True, role="assistant", content=""),
    chunk([5, 6], [-0.5, -0.25], content="ab"),
    chunk([7], [-1.0], content="c"),
    {"id": "c", "choices": [{"index": 1, "delta": {}, "token_ids": [99]}]},
    chunk([8], [-2.0]),
]


@pytest.mark.parametrize("crlf", [False, True])
def test_a_stream_fed_one_byte_at_a_time_gives_the_same_tokens_and_events(crlf):
    capture, assembler = TokenCapture(), StreamAssembler("chat")
    stream = TokenStream(TokenAsk(strip_logprobs=True), capture, assembler)
    out = b"".join(stream.feed(bytes([b])) for b in sse(EVENTS, crlf)) + stream.finish()

    assert capture.row() == {
        "prompt_token_ids": [1, 2, 3],
        "completion_token_ids": [5, 6, 7, 8],
        "completion_logprobs": [-0.5, -0.25, -1.0, -2.0],
        "exact": True,
    }
    assert assembler.complete and assembler.result()["choices"][0]["message"]["content"] == "abc"
    passed = [json.loads(e[6:]) for e in out.decode().split("\n\n") if e and e != "data: [DONE]"]
    assert len(passed) == len(EVENTS)
    assert all(c.get("logprobs") is None for e in passed for c in e["choices"])
    assert [c["token_ids"] for e in passed for c in e["choices"]] == [[], [5, 6], [7], [99], [8]]


def test_events_are_passed_on_as_their_bytes_came_when_nothing_is_taken_out():
    raw = sse(EVENTS)
    stream = TokenStream(TokenAsk(strip_logprobs=False), TokenCapture(), StreamAssembler("chat"))
    assert stream.feed(raw[:50]) + stream.feed(raw[50:]) + stream.finish() == raw


@pytest.mark.parametrize(
    "answer, problem",
    [
        (
            {
                "prompt_token_ids": [1],
                "choices": [{"index": 0, "token_ids": [2, 3], "logprobs": {"content": [{"logprob": -1}]}}],
            },
            "1 logprobs for 2",
        ),
        ({"choices": [{"index": 0, "token_ids": [2], "logprobs": {"content": [{"logprob": -1}]}}]}, "not both"),
        ({"prompt_token_ids": ["a"], "choices": [{"index": 0, "token_ids": [2]}]}, "not a list of token ids"),
        ({"prompt_token_ids": [1], "choices": [{"index": 0, "token_ids": [2], "logprobs": None}]}, "0 logprobs for 1"),
    ],
)
def test_incomplete_token_answers_store_nothing_and_say_why(answer, problem, caplog):
    capture = TokenCapture()
    capture.take_response(answer)
    assert capture.row() is None
    assert problem in caplog.text


def test_an_answer_without_token_fields_is_silently_not_recorded(caplog):
    capture = TokenCapture()
    capture.take_response({"choices": [{"index": 0, "message": {"content": "x"}}]})
    assert capture.row() is None and caplog.text == ""


def test_record_tokens_must_be_a_bool(endpoint):
    with pytest.raises(ValueError, match="record_tokens must be true or false"):
        open_proxy_session(endpoint, record_tokens="yes")
