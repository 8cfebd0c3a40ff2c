"""Assembling a streamed (SSE) answer into the one response object a non-streamed call would have returned.

The proxy feeds the raw bytes it passes on; the assembler never changes or delays them. Chat completion
chunks are merged (content, reasoning, tool call fragments, finish reason, usage); a Responses stream's final
`response.completed` (or `.failed` / `.incomplete`) event already holds the whole response.
"""

import json

RESPONSE_FINAL_EVENTS = {"response.completed", "response.failed", "response.incomplete"}
TEXT_FIELDS = ("content", "reasoning_content", "reasoning")
MAX_UNPARSED_KEPT = 20


class StreamAssembler:
    def __init__(self, api: str):
        self.api = api
        self._buffer = b""
        self.events = 0
        self.complete = False  # the end marker ([DONE], or a Responses final event) has arrived
        self.unparsed: list[str] = []
        # chat
        self._meta: dict = {}
        self._choices: dict[int, dict] = {}
        self._usage = None
        # responses
        self._final = None
        self._text: list[str] = []
        self._last_type = ""

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        # An event ends at a blank line; servers use \n\n or \r\n\r\n.
        self._buffer = self._buffer.replace(b"\r\n", b"\n")
        while b"\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
            self._event(raw.decode("utf-8", errors="replace"))

    def _event(self, raw: str) -> None:
        self.take("\n".join(line[5:].lstrip() for line in raw.split("\n") if line.startswith("data:")))

    def take(self, data: str, event=None) -> None:
        """One event's data; `event` is its JSON when the caller parsed it already (llm.tokens frames the stream of
        a training call itself, and each event is parsed once)."""
        if data == "[DONE]":
            self.complete = True
            return
        if not data:
            return
        if event is None:
            try:
                event = json.loads(data)
            except json.JSONDecodeError:
                if len(self.unparsed) < MAX_UNPARSED_KEPT:
                    self.unparsed.append(data[:2000])
                return
        if not isinstance(event, dict):
            return
        self.events += 1
        if self.api == "responses":
            self._responses_event(event)
        else:
            self._chat_chunk(event)

    def _chat_chunk(self, chunk: dict) -> None:
        for key in ("id", "model", "created", "system_fingerprint"):
            if key in chunk and key not in self._meta:
                self._meta[key] = chunk[key]
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            merged = self._choices.setdefault(
                index, {"index": index, "message": {"role": "assistant", "content": None}, "finish_reason": None}
            )
            message, delta = merged["message"], choice.get("delta") or {}
            if delta.get("role"):
                message["role"] = delta["role"]
            for name in TEXT_FIELDS:
                if delta.get(name):
                    message[name] = (message.get(name) or "") + delta[name]
            for fragment in delta.get("tool_calls") or []:
                calls = message.setdefault("tool_calls", {})
                call = calls.setdefault(
                    fragment.get("index", len(calls)),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if fragment.get("id"):
                    call["id"] = fragment["id"]
                function = fragment.get("function") or {}
                if function.get("name") and not call["function"]["name"]:
                    call["function"]["name"] = function["name"]
                if function.get("arguments"):
                    call["function"]["arguments"] += function["arguments"]
            if choice.get("finish_reason"):
                merged["finish_reason"] = choice["finish_reason"]

    def _responses_event(self, event: dict) -> None:
        kind = event.get("type", "")
        self._last_type = kind
        if kind in RESPONSE_FINAL_EVENTS and isinstance(event.get("response"), dict):
            self._final = event["response"]
            self.complete = True
        elif kind == "response.output_text.delta":
            self._text.append(event.get("delta") or "")

    def result(self) -> dict | None:
        """The assembled response, or None when the stream held no event at all."""
        if self.api == "responses":
            if self._final is not None:
                return self._final
            if not self.events:
                return None
            # Cut off before its final event: keep what text arrived, and say so.
            return {"object": "response", "status": "incomplete_stream", "last_event": self._last_type,
                    "output_text": "".join(self._text)}
        if not self.events:
            return None
        choices = []
        for index in sorted(self._choices):
            choice = self._choices[index]
            calls = choice["message"].get("tool_calls")
            if isinstance(calls, dict):
                choice["message"]["tool_calls"] = [calls[i] for i in sorted(calls)]
            choices.append(choice)
        return {"object": "chat.completion", **self._meta, "choices": choices, "usage": self._usage}

    def usage(self) -> tuple[int | None, int | None]:
        return usage_of(self.api, self.result())


def usage_of(api: str, body) -> tuple[int | None, int | None]:
    """(input tokens, output tokens) from a response object of either API, None where it says nothing."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None, None
    if api == "responses":
        return usage.get("input_tokens"), usage.get("output_tokens")
    return usage.get("prompt_tokens"), usage.get("completion_tokens")
