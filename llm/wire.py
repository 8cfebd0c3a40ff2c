"""The OpenAI wire format of one answer: a chat completion (whole, or as stream chunks), a Responses object (whole, or
as stream events), and their server-sent-event framing.

    reply = Reply.tool_call("write", {"path": "a.md", "content": "hi"})
    chat_completion(reply, request)          # the JSON body of a whole answer
    sse_frames(chat_chunks(reply, request))  # the bytes of a streamed one, [DONE] last

Product code with no Django in it: the demo models' server (demo.server) answers with it, and so does the tests'
scripted upstream (llm.testing, whose Reply adds what only tests need: errors, delays, gates, padding).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

# The header naming what a call of ClawGym's own is for (its ModelCall's purpose: "synthesis:files", "qa:leak",
# "judge", ...; llm.client sends it). A request says what it is by it, not by text planted in its prompt: the demo
# models and the scripted test servers answer by it. Agents' calls never carry it: the proxy sends only its own headers.
PURPOSE_HEADER = "X-ClawGym-Purpose"


@dataclass
class Reply:
    """One answer: text, tool calls, or both. Build it with the class methods."""

    content: str | None = None
    tool_calls: list[dict] = field(default_factory=list)  # [{"name", "arguments" (a JSON string)}]
    usage: tuple[int, int] | None = None  # (input, output) tokens; default: estimated from the lengths
    chunk_size: int = 4  # characters of content per streamed delta

    @classmethod
    def text(cls, content: str, **options) -> Reply:
        return cls(content=content, **options)

    @classmethod
    def tool_call(cls, name: str, arguments: dict | str, *, content: str | None = None, **options) -> Reply:
        args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return cls(content=content, tool_calls=[{"name": name, "arguments": args}], **options)

    def text_length(self) -> int:
        """Characters of text the answer sends (what its output tokens are estimated from)."""
        return len(self.content or "")


def usage_of(reply: Reply, request: dict) -> tuple[int, int]:
    """(input, output) tokens: the reply's own, else about four characters a token of the prompt and the answer."""
    if reply.usage:
        return reply.usage
    prompt = json.dumps(request.get("messages") or request.get("input") or "")
    return max(1, len(prompt) // 4), max(1, reply.text_length() // 4 + 4 * len(reply.tool_calls))


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def chat_completion(reply: Reply, request: dict) -> dict:
    message = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for i, c in enumerate(reply.tool_calls)
        ]
    prompt, completion = usage_of(reply, request)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def chat_chunks(reply: Reply, request: dict) -> list[dict]:
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
    }

    def chunk(delta, finish=None):
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if reply.content:
        chunks += [chunk({"content": piece}) for piece in _pieces(reply.content, reply.chunk_size)]
    for i, call in enumerate(reply.tool_calls):
        head = {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": call["name"], "arguments": ""}}
        chunks.append(chunk({"tool_calls": [head]}))
        chunks += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            for piece in _pieces(call["arguments"], reply.chunk_size * 4)
        ]
    chunks.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    if (request.get("stream_options") or {}).get("include_usage"):
        prompt, completion = usage_of(reply, request)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        chunks.append({**base, "choices": [], "usage": usage})
    return chunks


def responses_object(reply: Reply, request: dict, status: str = "completed") -> dict:
    output = []
    if reply.content is not None:
        output.append(
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:8]}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.content, "annotations": []}],
            }
        )
    for i, call in enumerate(reply.tool_calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{i}",
                "call_id": f"call_{i}",
                "name": call["name"],
                "arguments": call["arguments"],
                "status": "completed",
            }
        )
    prompt, completion = usage_of(reply, request)
    return {
        "id": f"resp_{uuid.uuid4().hex[:12]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": request.get("model", "scripted"),
        "output": output,
        "usage": {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion},
    }


def responses_events(reply: Reply, request: dict) -> list[dict]:
    final = responses_object(reply, request)
    started = {**final, "status": "in_progress", "output": [], "usage": None}
    events = [{"type": "response.created", "response": started}]
    item_id = final["output"][0]["id"] if reply.content is not None else None
    for piece in _pieces(reply.content or "", reply.chunk_size) if item_id else []:
        events.append(
            {
                "type": "response.output_text.delta",
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
                "delta": piece,
            }
        )
    events.append({"type": "response.completed", "response": final})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def sse_frames(events: list[dict], responses_api: bool = False) -> list[bytes]:
    """The stream's bytes, one frame an event: Responses events named (`event:` lines), chat chunks ending in
    `data: [DONE]`."""
    frames = []
    for event in events:
        prefix = f"event: {event['type']}\n" if responses_api else ""
        frames.append(f"{prefix}data: {json.dumps(event)}\n\n".encode())
    if not responses_api:
        frames.append(b"data: [DONE]\n\n")
    return frames
