"""Test support: a scripted OpenAI-compatible HTTP server on loopback, and the ASGI app on a live uvicorn.

Test code, not product code (later issues use it to script agents). The server is real HTTP (uvicorn on
127.0.0.1), so the openai SDK, the client and the proxy are tested exactly as they run; nothing is patched.

    def test_x(scripted_upstream):
        scripted_upstream.push(Reply.text("hello"), Reply.error(429), Reply.tool_call("write", {"path": "a"}))
        ... point an endpoint at scripted_upstream.base_url ...
        scripted_upstream.requests[0].json        # what it received (body, headers, path)

Replies are played in order, one per request to /v1/chat/completions or /v1/responses; `default` answers when
the script is used up (None: HTTP 500 saying so). `responder` (a function of the request's JSON body returning a
Reply) answers each request by what it asks instead, for concurrent requests whose order of arrival is not known.
`in_flight` / `max_in_flight` count the requests being answered at once. A request with "stream": true gets the reply as SSE chunks
(chat chunks or Responses events), `chunk_delay` seconds apart; `gate=True` holds the last chunk until
`release()`, so a test can prove the proxy passed the first chunks on before the upstream finished (a gated whole
answer sends its first half and holds the rest: an upstream that stalls mid-answer).

Huge answers cost nothing to offer: `Reply.text(..., padding=200_000_000)` adds that many bytes of filler ("x") to
the answer's text, made as it is sent and never held: at PAD in the content (so it can sit inside a JSON answer), else
at its end. A whole answer then goes out without a Content-Length (unless `declare_length`); a stream sends the
filler first, as 64 KiB content deltas after its first event, then the rest of the reply. `Received.bytes_sent` counts the body bytes sent, and `disconnected` says the
caller went away first (watched for padded answers), so a test sees how far a reader read before it stopped.

vLLM's token fields (`ScriptedUpstream(vllm_tokens=True)`, fixture `vllm_upstream`): a chat request that asks for
`return_token_ids` is answered as vLLM's OpenAI server answers it: `prompt_token_ids` (the top level of a whole
answer, the first chunk of a stream), `choices[0].token_ids` (per delta chunk when streamed, the end-of-turn token
on the finish chunk), and with `logprobs: true` also `choices[0].logprobs.content[].logprob`, from the toy chat
template and tokenizer of llm.testing_tokens.

Fixtures: `scripted_upstream` (a fresh server per test), `agent_endpoint` and `judge` (endpoints on it;
`scripted_endpoint` makes others) and `live_server_asgi` (clawgym_site.asgi:application
under uvicorn in this process, on the test database; ask for `transactional_db` too, it sees committed rows only).
`call_writes_refused("INSERT", "UPDATE")` makes the database refuse a model call's record (a trigger), as a
database that failed would.
"""

import asyncio
import contextlib
import json
import threading
from dataclasses import dataclass, field, replace

import pytest

from lib.loopback import serve_in_thread, stop_server  # noqa: F401  (the llm tests' servers)

from .testing_tokens import vllm_tokens_chunks, vllm_tokens_whole
from .wire import PURPOSE_HEADER, chat_chunks, chat_completion, responses_events, responses_object, sse_frames
from .wire import Reply as WireReply

PAD = "[[padding]]"  # where a padded reply's filler goes in its content
PAD_PIECE = 64 * 1024  # bytes of filler sent at a time


@dataclass
class Reply(WireReply):
    """One scripted answer (llm.wire.Reply, and what only tests need). Build it with the class methods."""

    status: int = 200
    raw_body: str | None = None  # sent as is (an error body, or malformed JSON)
    headers: dict = field(default_factory=dict)
    chunk_delay: float = 0.0  # seconds between streamed chunks
    gate: bool = False  # hold the last chunk until release()
    delay: float = 0.0  # seconds before the answer starts (a slow model, or one that times out)
    # With until_in_flight=N the answer starts as soon as N requests are in flight at once, `delay` at the latest: a
    # test of a concurrency bound then sees the bound reached whatever the machine's load, not by the luck of timing.
    until_in_flight: int = 0
    padding: int = 0  # bytes of filler added to the text as it is sent (at PAD in content, else at its end)
    declare_length: bool = False  # a padded whole answer declares its Content-Length (else it is sent chunked)

    @classmethod
    def error(cls, status: int, message: str = "scripted error", *, retry_after: float | None = None) -> "Reply":
        body = json.dumps({"error": {"message": message, "type": "scripted_error", "code": status}})
        headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
        return cls(status=status, raw_body=body, headers=headers)

    @classmethod
    def raw(cls, body: str, status: int = 200) -> "Reply":
        return cls(status=status, raw_body=body)

    def text_length(self) -> int:
        return len(self.content or "") + self.padding


@dataclass
class Received:
    """One request the server got, and how far its streamed answer has gone."""

    method: str
    path: str
    headers: dict
    body: bytes
    chunks_sent: int = 0
    finished: bool = False
    bytes_sent: int = 0  # body bytes of the answer handed to the server
    disconnected: bool = False  # the caller went away before the answer ended (watched for padded answers)

    @property
    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class ScriptedUpstream:
    """An OpenAI-compatible server on 127.0.0.1 that plays scripted replies and records every request."""

    def __init__(self, default: Reply | None = None, model: str = "scripted-model", vllm_tokens: bool = False):
        self.vllm_tokens = vllm_tokens  # answer return_token_ids / logprobs as vLLM does (chat completions)
        self.default = default
        # request JSON -> Reply; when set, it answers instead of the script. One with `by_purpose = True` is called
        # as responder(request JSON, purpose): the X-ClawGym-Purpose header ClawGym's own calls carry (llm.client).
        self.responder = None
        self.model = model
        self.script: list[Reply] = []
        self.requests: list[Received] = []
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests it was answering at once
        self._lock = threading.Lock()
        self._gate = threading.Event()
        self._server = None
        self._thread = None
        self.host = "127.0.0.1"
        self.port = None

    # --- the script ---
    def push(self, *replies: Reply) -> "ScriptedUpstream":
        with self._lock:
            self.script.extend(replies)
        return self

    def release(self) -> None:
        """Let gated streams send their last chunk."""
        self._gate.set()

    def _next_reply(self, received: "Received") -> Reply | None:
        if self.responder is not None:
            if getattr(self.responder, "by_purpose", False):
                return self.responder(received.json, received.headers.get(PURPOSE_HEADER.lower(), ""))
            return self.responder(received.json)
        with self._lock:
            return self.script.pop(0) if self.script else self.default

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # --- the ASGI app ---
    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        received = Received(scope["method"], scope["path"], headers, body)
        with self._lock:
            self.requests.append(received)
        path = scope["path"].rstrip("/")
        if path.endswith("/models"):
            await self._json(send, 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
            return
        if not (path.endswith("/chat/completions") or path.endswith("/responses")):
            await self._json(send, 404, {"error": {"message": f"no route {path}"}})
            return
        reply = self._next_reply(received)
        if reply is None:
            await self._json(send, 500, {"error": {"message": "the scripted upstream has no reply left"}})
            return
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if reply.until_in_flight:
                deadline = asyncio.get_running_loop().time() + reply.delay
                while self.in_flight < reply.until_in_flight and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.01)
            elif reply.delay:
                await asyncio.sleep(reply.delay)
            async with _watching(receive, received, bool(reply.padding)):
                await self._answer(send, path, reply, received)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _answer(self, send, path: str, reply: Reply, received: Received):
        request = received.json
        if reply.raw_body is not None or not isinstance(request, dict):
            await self._send(send, reply.status, (reply.raw_body or "").encode(), "application/json", reply.headers)
            received.finished = True
            return
        responses_api = path.endswith("/responses")
        token_ids = self.vllm_tokens and not responses_api and request.get("return_token_ids") is True
        if not request.get("stream"):
            if reply.padding and PAD not in (reply.content or ""):
                reply = replace(reply, content=(reply.content or "") + PAD)
            payload = responses_object(reply, request) if responses_api else chat_completion(reply, request)
            if token_ids:
                payload = vllm_tokens_whole(payload, reply, request)
            if reply.padding or reply.gate:
                await self._whole_in_pieces(send, reply, received, json.dumps(payload))
            else:
                await self._json(send, reply.status, payload, reply.headers)
                received.finished = True
            return
        if reply.padding:
            reply = replace(reply, content=(reply.content or "").replace(PAD, ""))
        events = responses_events(reply, request) if responses_api else chat_chunks(reply, request)
        if token_ids:
            events = vllm_tokens_chunks(events, reply, request)
        await self._stream(send, reply, received, events, responses_api)

    async def _stream(self, send, reply: Reply, received: Received, events: list[dict], responses_api: bool):
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        frames = sse_frames(events, responses_api)
        for n, frame in enumerate(frames):
            if n and reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            if reply.gate and n == len(frames) - 1:
                await self._held()
            await _body(send, received, frame)
            received.chunks_sent += 1
            if n == 0 and reply.padding:
                for piece in _padding_frames(events[0], reply.padding, responses_api):
                    if received.disconnected:
                        return
                    await _body(send, received, piece)
                    received.chunks_sent += 1
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        received.finished = True

    async def _held(self) -> None:
        while not self._gate.is_set():
            await asyncio.sleep(0.005)

    async def _whole_in_pieces(self, send, reply: Reply, received: Received, text: str):
        """A whole answer sent as it is made: its filler in pieces (padding), or its second half held (gate)."""
        head, _, tail = text.partition(PAD) if reply.padding else (text, "", "")
        head, tail = head.encode(), tail.encode()
        headers = [(b"content-type", b"application/json")]
        if reply.declare_length or not reply.padding:
            headers.append((b"content-length", str(len(head) + reply.padding + len(tail)).encode()))
        headers += [(k.encode(), str(v).encode()) for k, v in reply.headers.items()]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        if reply.gate:
            await _body(send, received, head[: len(head) // 2])
            await self._held()
            head = head[len(head) // 2 :]
        await _body(send, received, head)
        for piece in _padding(reply.padding):
            if received.disconnected:
                return
            await _body(send, received, piece)
        await _body(send, received, tail)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        received.finished = True

    async def _json(self, send, status: int, payload: dict, headers: dict | None = None):
        await self._send(send, status, json.dumps(payload).encode(), "application/json", headers or {})

    @staticmethod
    async def _send(send, status: int, body: bytes, content_type: str, headers: dict):
        raw = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
        raw += [(k.encode(), str(v).encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": body})

    # --- running it ---
    def start(self, host: str = "127.0.0.1", **config) -> "ScriptedUpstream":
        """host: another local address to listen on (the compose test's containers reach the host's bridge address)."""
        self.host = host
        self._server, self._thread, self.port = serve_in_thread(self, host=host, **config)
        return self

    def stop(self) -> None:
        self._gate.set()
        stop_server(self._server, self._thread)


async def _body(send, received: Received, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})
    received.bytes_sent += len(data)
    await asyncio.sleep(0)  # let the disconnect watcher run: a send to a gone caller returns at once


def _padding(size: int):
    piece = b"x" * PAD_PIECE
    for start in range(0, size, PAD_PIECE):
        yield piece[: min(PAD_PIECE, size - start)]


def _padding_frames(first: dict, size: int, responses_api: bool):
    """A padded stream's filler: content deltas (chat chunks, or Responses text deltas) of PAD_PIECE bytes each."""

    def frame(text: str) -> bytes:
        if responses_api:
            event = {
                "type": "response.output_text.delta",
                "item_id": "msg_padding",
                "output_index": 0,
                "content_index": 0,
                "delta": text,
                "sequence_number": 1,
            }
            return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
        chunk = {**first, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        return f"data: {json.dumps(chunk)}\n\n".encode()

    full = frame("x" * PAD_PIECE)
    for start in range(0, size, PAD_PIECE):
        yield full if size - start >= PAD_PIECE else frame("x" * (size - start))


@contextlib.asynccontextmanager
async def _watching(receive, received: Received, on: bool):
    """While the answer is sent, note when its caller goes away (ASGI's http.disconnect)."""
    if not on:
        yield
        return

    async def watch():
        while (await receive())["type"] != "http.disconnect":
            pass
        received.disconnected = True

    task = asyncio.ensure_future(watch())
    try:
        yield
    finally:
        task.cancel()


@pytest.fixture
def fast_llm_retries(settings):
    """Retries after 10–50 ms instead of seconds: a scripted upstream's errors need no real backoff."""
    settings.CLAWGYM_LLM_BACKOFF_SECONDS = 0.01
    settings.CLAWGYM_LLM_BACKOFF_MAX_SECONDS = 0.05


REFUSED_BY_THE_TEST = "model call writes refused by the test"


@contextlib.contextmanager
def call_writes_refused(*operations: str):
    """While the block runs, the database refuses every INSERT or UPDATE (`operations`) of a model call row, from every
    connection (a trigger raising an error, on SQLite and PostgreSQL alike): the proxy's record then fails as it does
    when the database refuses it or has gone away. Needs committed DDL: a `transaction=True` test."""
    from django.db import connection

    from .models import ModelCall

    table = connection.ops.quote_name(ModelCall._meta.db_table)
    postgres = connection.vendor == "postgresql"
    names = [f"clawgym_test_refuse_{operation.lower()}" for operation in operations]
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute(
                "CREATE OR REPLACE FUNCTION clawgym_test_refuse() RETURNS trigger AS $$ BEGIN"
                f" RAISE EXCEPTION '{REFUSED_BY_THE_TEST}'; END $$ LANGUAGE plpgsql"
            )
        for operation, name in zip(operations, names, strict=True):
            if postgres:
                body = "FOR EACH ROW EXECUTE FUNCTION clawgym_test_refuse()"
            else:
                body = f"BEGIN SELECT RAISE(ABORT, '{REFUSED_BY_THE_TEST}'); END"
            cursor.execute(f"CREATE TRIGGER {name} BEFORE {operation} ON {table} {body}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for name in names:
                cursor.execute(f"DROP TRIGGER IF EXISTS {name}" + (f" ON {table}" if postgres else ""))


@pytest.fixture
def scripted_upstream():
    upstream = ScriptedUpstream().start()
    yield upstream
    upstream.stop()


def scripted_endpoint(upstream, name="scripted", *, model="scripted-model", roles=("agent",), **fields):
    """A model endpoint whose model is `upstream` (a ScriptedUpstream); `fields` are its other columns (timeouts,
    retries, sampling, prices, api_key_env)."""
    from .models import ModelEndpoint

    return ModelEndpoint.objects.create(name=name, base_url=upstream.base_url, model=model, roles=list(roles), **fields)


@pytest.fixture
def agent_endpoint(scripted_upstream, db):
    """An agent endpoint whose model is the scripted upstream (rollouts run on it, the proxy's tests open sessions)."""
    return scripted_endpoint(scripted_upstream, timeout_seconds=30)


@pytest.fixture
def judge(scripted_upstream, db):
    """The judge endpoint "judge" whose model is the scripted upstream: no retries, and one call at a time (a test's
    transaction is its own: calls on other threads would not see its rows)."""
    return scripted_endpoint(
        scripted_upstream,
        "judge",
        model="judge-model",
        roles=["judge"],
        timeout_seconds=5,
        max_retries=0,
        max_concurrent=1,
    )


@pytest.fixture
def vllm_upstream():
    """A scripted upstream that answers vLLM's token fields when asked for them."""
    upstream = ScriptedUpstream(vllm_tokens=True).start()
    yield upstream
    upstream.stop()


@dataclass
class LiveAsgiServer:
    url: str  # http://127.0.0.1:PORT (no trailing slash)
    port: int


@pytest.fixture(scope="module")
def _live_server_asgi_module(django_db_setup, django_db_blocker):
    from django.conf import settings

    # The app was set up by pytest-django in this process: the server thread uses the test database.
    with django_db_blocker.unblock():
        server, thread, port = serve_in_thread("clawgym_site.asgi:application")
    live = LiveAsgiServer(url=f"http://127.0.0.1:{port}", port=port)
    previous = settings.CLAWGYM_PROXY_PUBLIC_URL
    settings.CLAWGYM_PROXY_PUBLIC_URL = live.url
    yield live
    settings.CLAWGYM_PROXY_PUBLIC_URL = previous
    stop_server(server, thread)
    from llm.recording import close_db_pool

    close_db_pool()  # its connections would keep the test database from being dropped


@pytest.fixture
def live_server_asgi(_live_server_asgi_module, transactional_db):
    """The ClawGym ASGI app under uvicorn on loopback; CLAWGYM_PROXY_PUBLIC_URL points at it for the test."""
    return _live_server_asgi_module
