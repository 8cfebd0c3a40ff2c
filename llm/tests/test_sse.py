"""Assembling streamed answers: byte boundaries anywhere, both line endings, several choices, cut-off streams."""

import json

from llm.sse import StreamAssembler


def frames(events, crlf=False) -> bytes:
    sep = "\r\n" if crlf else "\n"
    return "".join(f"data: {json.dumps(e)}{sep}{sep}" for e in events).encode() + f"data: [DONE]{sep}{sep}".encode()


def chunk(index=0, finish=None, **delta):
    return {
        "id": "c1",
        "model": "m",
        "created": 1,
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


EVENTS = [
    chunk(role="assistant", content=""),
    chunk(reasoning_content="think"),
    chunk(content="Hel"),
    chunk(index=1, content="other"),
    chunk(content="lo"),
    chunk(
        tool_calls=[{"index": 0, "id": "t1", "type": "function", "function": {"name": "write", "arguments": '{"a"'}}]
    ),
    chunk(tool_calls=[{"index": 0, "function": {"arguments": ": 1}"}}]),
    chunk(finish="tool_calls"),
    {"id": "c1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}},
]


def test_fed_one_byte_at_a_time_with_crlf():
    assembler = StreamAssembler("chat")
    data = frames(EVENTS, crlf=True)
    for i in range(len(data)):
        assembler.feed(data[i : i + 1])
    result = assembler.result()
    assert assembler.complete and result["id"] == "c1" and result["model"] == "m"
    first, second = result["choices"]
    assert first["message"]["content"] == "Hello" and first["message"]["reasoning_content"] == "think"
    assert first["message"]["tool_calls"] == [
        {"id": "t1", "type": "function", "function": {"name": "write", "arguments": '{"a": 1}'}}
    ]
    assert first["finish_reason"] == "tool_calls" and second["message"]["content"] == "other"
    assert assembler.usage() == (9, 4)


def test_unparsable_events_are_kept_not_fatal():
    assembler = StreamAssembler("chat")
    assembler.feed(b"data: {broken\n\n: a comment\n\n" + frames([chunk(content="ok")]))
    assert assembler.unparsed == ["{broken"] and assembler.result()["choices"][0]["message"]["content"] == "ok"


def test_a_responses_stream_cut_before_its_final_event():
    assembler = StreamAssembler("responses")
    events = [
        {"type": "response.created", "response": {}},
        {"type": "response.output_text.delta", "delta": "par"},
        {"type": "response.output_text.delta", "delta": "tial"},
    ]
    assembler.feed(b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events))
    assert not assembler.complete
    assert assembler.result() == {
        "object": "response",
        "status": "incomplete_stream",
        "last_event": "response.output_text.delta",
        "output_text": "partial",
    }
    assert assembler.usage() == (None, None)


def test_an_empty_stream_has_no_result():
    assert StreamAssembler("chat").result() is None


def test_feed_passes_on_whole_events_as_they_came():
    data = frames(EVENTS, crlf=True) + b"data: trailing, with no blank line"
    assembler = StreamAssembler("chat")
    passed = [assembler.feed(data[i : i + 7]) for i in range(0, len(data), 7)]
    assert b"".join(passed) + assembler.rest() == data  # nothing changed, nothing lost
    assert all(piece.endswith(b"\r\n\r\n") for piece in passed if piece)  # cut between events only
    assert assembler.complete and assembler.result()["choices"][0]["message"]["content"] == "Hello"
