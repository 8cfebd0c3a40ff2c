"""Assembling a streamed (SSE) answer into the one response object a non-streamed call would have returned.

The proxy feeds the raw bytes it gets and passes on what `feed` returns: the same bytes, whole events at a time (an
event still arriving is held until its end, which its reader could not have used before either), so a stream the
proxy must cut short ends between events, where its error event can follow. Chat completion
chunks are merged (content, reasoning, tool call fragments, finish reason, usage); a Responses stream's final
`response.completed` (or `.failed` / `.incomplete`) event already holds the whole response.

Linear in the stream's length: only new bytes are searched for an event's end, and text is kept as pieces joined
once, in result(). A stream of many small deltas (64K tokens are 64K events) or one event sent in many pieces
costs its own size, not its size squared, on the proxy's event loop.
"""

from lib import strict_json

RESPONSE_FINAL_EVENTS = {"response.completed", "response.failed", "response.incomplete"}
TEXT_FIELDS = ("content", "reasoning_content", "reasoning")
MAX_UNPARSED_KEPT = 20


class StreamAssembler:
    def __init__(self, api: str):
        self.api = api
        self._buffer = bytearray()  # the event being received, as it came
        self.events = 0
        self.complete = False  # the end marker ([DONE], or a Responses final event) has arrived
        self.unparsed: list[str] = []
        self.refused = ""  # why an event could not be stored (lib.strict_json): it and what follows are not passed on
        # chat
        self._meta: dict = {}
        self._choices: dict[int, dict] = {}
        self._usage = None
        # responses
        self._final = None
        self._text: list[str] = []
        self._last_type = ""

    def feed(self, chunk: bytes) -> bytes:
        """Take the stream's next bytes; return the whole events they completed, as they came (none once one was
        refused)."""
        if self.refused:
            return b""
        # Searched from 3 bytes back on: a blank line (at most 4 bytes) may straddle two chunks.
        start = max(len(self._buffer) - 3, 0)
        self._buffer += chunk
        taken = 0
        while (end := self._event_end(start)) is not None:
            text = self._buffer[taken : end[0]].decode("utf-8", errors="replace").replace("\r\n", "\n")
            self._event(text[:-1] if text.endswith("\r") else text)
            if self.refused:
                done = bytes(self._buffer[:taken])  # the whole events before it; it and the rest are dropped
                self._buffer.clear()
                return done
            taken = start = end[1]
        if not taken:
            return b""
        done = bytes(self._buffer[:taken])
        del self._buffer[:taken]
        return done

    def _event_end(self, start: int) -> tuple[int, int] | None:
        """(where an event's text ends, where the next event begins) at the first blank line from `start` on: an event
        ends at a blank line, which servers write as \n\n or \r\n\r\n."""
        buffer = self._buffer
        while (newline := buffer.find(b"\n", start)) >= 0:
            after = newline + 1
            if buffer[after : after + 1] == b"\r":
                after += 1
            if buffer[after : after + 1] == b"\n":
                return newline, after + 1
            if after >= len(buffer):
                return None  # the blank line may be in the next chunk
            start = newline + 1
        return None

    def rest(self) -> bytes:
        """What followed the last whole event (a stream that ended without its blank line), as it came."""
        rest = bytes(self._buffer)
        self._buffer.clear()
        return rest

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
                event = strict_json.loads(data)
            except strict_json.NotStorable as exc:
                self.refused = str(exc)
                return
            except ValueError:
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
            # Text and arguments as lists of pieces, joined in result().
            merged = self._choices.setdefault(
                index, {"role": "assistant", "texts": {}, "calls": {}, "finish_reason": None}
            )
            delta = choice.get("delta") or {}
            if delta.get("role"):
                merged["role"] = delta["role"]
            for name in TEXT_FIELDS:
                if delta.get(name) and isinstance(delta[name], str):
                    merged["texts"].setdefault(name, []).append(delta[name])
            for fragment in delta.get("tool_calls") or []:
                calls = merged["calls"]
                call = calls.setdefault(fragment.get("index", len(calls)), {"id": None, "name": "", "arguments": []})
                if fragment.get("id"):
                    call["id"] = fragment["id"]
                function = fragment.get("function") or {}
                if function.get("name") and not call["name"]:
                    call["name"] = function["name"]
                if function.get("arguments") and isinstance(function["arguments"], str):
                    call["arguments"].append(function["arguments"])
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
            return {
                "object": "response",
                "status": "incomplete_stream",
                "last_event": self._last_type,
                "output_text": "".join(self._text),
            }
        if not self.events:
            return None
        choices = []
        for index in sorted(self._choices):
            merged = self._choices[index]
            message = {"role": merged["role"], "content": None}
            message.update({name: "".join(pieces) for name, pieces in merged["texts"].items()})
            if merged["calls"]:
                message["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": "".join(call["arguments"])},
                    }
                    for call in (merged["calls"][i] for i in sorted(merged["calls"]))
                ]
            choices.append({"index": index, "message": message, "finish_reason": merged["finish_reason"]})
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
