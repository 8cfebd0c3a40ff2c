"""Exact tokens for training sessions: what the recording proxy asks the upstream for, and how it collects the answer.

A session opened with `record_tokens` (an RL rollout's) must give the trainer exactly the tokens the policy sampled,
not a re-tokenization of the text. So for its chat-completion calls the proxy adds vLLM's `return_token_ids: true`
and `logprobs: true` (top_logprobs stays vLLM's default 0: only the sampled token's logprob), and collects what vLLM's
OpenAI server answers:
- whole: `prompt_token_ids` at the top level, `choices[i].token_ids`, `choices[i].logprobs.content[].logprob`;
- streamed: `prompt_token_ids` on the first chunk, then `token_ids` and `logprobs.content` on each choice's delta
  chunks (with return_token_ids vLLM also sends the chunks whose delta a tool parser held back, so none is lost),
  the end-of-turn token on the chunk with the finish reason.
Only the first choice is kept. A call whose answer holds no token ids, or whose logprobs do not line up one to one
with them, gets no token row (logged): the sample builder re-tokenizes its text and counts the sample as inexact.

What the agent gets: the answer it asked for. The token-id fields pass through (clients ignore fields they do not
know: the openai SDKs keep unknown fields as extras and OpenClaw only reads the fields it knows, so nothing
breaks), but logprobs the agent did not ask for are taken back out (`"logprobs": null`, as an answer that was
never asked for them has), so recording never changes what a harness sees of its model. A streamed event is then
re-serialized; the events without logprobs (the first chunk with the prompt ids, [DONE]) pass on as their
bytes came. The stored response (ModelCall.response) leaves the token fields out: they are in ModelCallTokens.

The Responses API is passed through unchanged and records no tokens: vLLM's /v1/responses returns no token ids.
Its calls are re-tokenized by the sample builder (inexact), like those of an upstream that is not vLLM.
"""

import json
import logging
from dataclasses import dataclass

from lib import strict_json

from .models import ModelEndpoint

log = logging.getLogger(__name__)

LOGPROB_TYPES = {float, int, type(None)}  # None: a logprob vLLM could not give (TRL reads it as NaN)


@dataclass(frozen=True)
class TokenAsk:
    """What the proxy asked for on the agent's behalf, so it can give back only what the agent asked for."""

    strip_logprobs: bool  # the agent did not ask for logprobs: remove them from its answer


def ask_for_tokens(api: str, body: dict) -> TokenAsk | None:
    """Add vLLM's token fields to a chat request body (in place). None for an API that has none (responses)."""
    if api != ModelEndpoint.ApiStyle.CHAT:
        return None
    agent_asked = body.get("logprobs") is True
    body["return_token_ids"] = True
    body["logprobs"] = True
    return TokenAsk(strip_logprobs=not agent_asked)


def _logprob_values(logprobs) -> list | None:
    """The sampled tokens' logprobs of one choice's `logprobs` object, None when it has none."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return None
    return [entry.get("logprob") if isinstance(entry, dict) else None for entry in content]


def _ints(value) -> bool:
    # By the set of the items' types (map and set run in C): a 64K-token prompt is checked in about a millisecond.
    return isinstance(value, list) and set(map(type, value)) <= {int}  # JSON's ints (bools are not)


class TokenCapture:
    """The token ids and logprobs of one call's first choice, from a whole answer or from its stream's chunks."""

    def __init__(self):
        self.prompt_ids: list | None = None
        self.completion_ids: list = []
        self.logprobs: list = []
        self.saw_completion_ids = False
        self.malformed = ""

    def take_chunk(self, chunk: dict) -> None:
        if self.prompt_ids is None and chunk.get("prompt_token_ids") is not None:
            self._prompt(chunk["prompt_token_ids"])
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._completion(choice.get("token_ids"), choice.get("logprobs"))

    def take_response(self, body: dict) -> None:
        if body.get("prompt_token_ids") is not None:
            self._prompt(body["prompt_token_ids"])
        first = next((c for c in body.get("choices") or [] if isinstance(c, dict) and c.get("index", 0) == 0), None)
        if first is not None:
            self._completion(first.get("token_ids"), first.get("logprobs"))

    def _prompt(self, ids) -> None:
        if _ints(ids):
            self.prompt_ids = list(ids)
        else:
            self.malformed = "prompt_token_ids is not a list of token ids"

    def _completion(self, ids, logprobs) -> None:
        if ids is None:
            return
        if not _ints(ids):
            self.malformed = "token_ids is not a list of token ids"
            return
        self.saw_completion_ids = True
        self.completion_ids.extend(ids)
        values = _logprob_values(logprobs)
        if values is not None:
            self.logprobs.extend(values)

    def row(self) -> dict | None:
        """What ModelCallTokens.objects.record takes, or None when the answer does not hold the whole of it (logged)."""
        if self.prompt_ids is None and not self.saw_completion_ids and not self.malformed:
            return None  # the upstream returns no token ids at all (not vLLM): nothing to say per call
        problem = self.malformed
        if not problem and (self.prompt_ids is None or not self.saw_completion_ids):
            problem = "the answer has prompt token ids or completion token ids, not both"
        if not problem and len(self.logprobs) != len(self.completion_ids):
            problem = f"{len(self.logprobs)} logprobs for {len(self.completion_ids)} completion tokens"
        if not problem and not set(map(type, self.logprobs)) <= LOGPROB_TYPES:
            problem = "a logprob is not a number"
        if problem:
            log.warning("proxied call's tokens not recorded (its sample will be re-tokenized): %s", problem)
            return None
        return {
            "prompt_token_ids": self.prompt_ids,
            "completion_token_ids": self.completion_ids,
            "completion_logprobs": self.logprobs,
            "exact": True,
        }


def strip_logprobs(body: dict) -> bool:
    """Set each choice's logprobs to null, as an answer never asked for them has. Whether anything changed."""
    changed = False
    for choice in body.get("choices") or []:
        if isinstance(choice, dict) and choice.get("logprobs") is not None:
            choice["logprobs"] = None
            changed = True
    return changed


def without_token_fields(body):
    """The response as stored: the token ids left out (they are the call's ModelCallTokens row)."""
    if not isinstance(body, dict):
        return body
    out = {k: v for k, v in body.items() if k != "prompt_token_ids"}
    if isinstance(out.get("choices"), list):
        out["choices"] = [
            {k: v for k, v in c.items() if k != "token_ids"} if isinstance(c, dict) else c for c in out["choices"]
        ]
    return out


def whole_answer(ask: TokenAsk, capture: TokenCapture, content: bytes, parsed) -> tuple[bytes, object]:
    """A non-streamed answer of a training call: (the bytes the agent gets, the response to store)."""
    if not isinstance(parsed, dict):
        return content, parsed
    capture.take_response(parsed)
    if ask.strip_logprobs and strip_logprobs(parsed):
        content = json.dumps(parsed, separators=(",", ":"), ensure_ascii=False).encode()
    return content, without_token_fields(parsed)


class TokenStream:
    """A training call's SSE stream: split into events, each event's tokens captured and its data handed to the
    stream's assembler (parsed once, here), logprobs the agent did not ask for taken out. `feed` returns the bytes to
    pass on now: every whole event so far (an event cut across chunks waits for its end, which the agent could not
    use before either)."""

    def __init__(self, ask: TokenAsk, capture: TokenCapture, assembler):
        self.ask, self.capture, self.assembler = ask, capture, assembler
        self._buffer = bytearray()
        self._cr = False  # the last chunk ended in \r

    def feed(self, chunk: bytes) -> bytes:
        # An event ends at a blank line; servers use \n\n or \r\n\r\n (as llm.sse reads them). As there, only the
        # new bytes are normalised and searched: an event sent in many pieces costs its size, not its size squared.
        if self._cr:
            chunk = b"\r" + chunk
        self._cr = chunk.endswith(b"\r")
        if self._cr:
            chunk = chunk[:-1]
        start = max(len(self._buffer) - 1, 0)
        self._buffer += chunk.replace(b"\r\n", b"\n")
        if self.assembler.refused:
            return b""
        out, taken = [], 0
        while (end := self._buffer.find(b"\n\n", start)) >= 0:
            out.append(self._event(bytes(self._buffer[taken:end])))
            if self.assembler.refused:  # not passed on, nor anything after it (llm.sse)
                self._buffer.clear()
                return b"".join(out)
            taken = start = end + 2
        if taken:
            del self._buffer[:taken]
        return b"".join(out)

    def finish(self) -> bytes:
        """Whatever followed the last whole event (a stream cut off mid-event): passed on as it came."""
        rest = bytes(self._buffer) + (b"\r" if self._cr else b"")
        self._buffer, self._cr = bytearray(), False
        return rest

    def _event(self, raw: bytes) -> bytes:
        lines = raw.decode("utf-8", errors="replace").split("\n")
        data = "\n".join(line[5:].lstrip() for line in lines if line.startswith("data:"))
        event = None
        if data and data != "[DONE]":
            try:
                event = strict_json.loads(data)
            except strict_json.NotStorable as exc:
                self.assembler.refused = str(exc)
                return b""
            except ValueError:
                event = None
        self.assembler.take(data, event)
        if not isinstance(event, dict):
            return raw + b"\n\n"
        self.capture.take_chunk(event)
        if not (self.ask.strip_logprobs and strip_logprobs(event)):
            return raw + b"\n\n"
        others = "".join(f"{line}\n" for line in lines if line and not line.startswith("data:"))
        return f"{others}data: {json.dumps(event, separators=(',', ':'), ensure_ascii=False)}\n\n".encode()
