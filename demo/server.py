"""The demo models' server: one OpenAI-compatible chat-completions server on loopback, answering by model and prompt.

    python manage.py demo_models          # serves until stopped; `make demo` runs it beside the web app and worker

The model a request names decides which of the demo models answers, and each answers only its own kind of request:
an agent model (demo.agent: its skill) only agent requests, which offer tools; the generator the synthesis stages
(demo.generator: the tasks, their files, checkers and reference solutions); the judge quality assessment, rubric
judging and candidate diagnosis (demo.judge); either of those two categorizing and skill annotation (their callers
take a generator or a judge endpoint). Within a model, the request says which one it is: the purpose ClawGym's own
client sends with each call (llm.wire.PURPOSE_HEADER: "synthesis:<stage>" for the synthesis stages, "qa:<stage>"
for quality assessment), or the system prompt of rubric judging, categorizing, skill annotation and diagnosis.
Anything else gets one sentence saying what the demo models are. An agent's calls come through the proxy, which sends
no purpose: a weak agent gets no reference solution, whatever its prompt says.

Requests need the key of CLAWGYM_KEY_SERVED_DEMO (llm.models.served_key: derived from SECRET_KEY, so every ClawGym
process knows it and nothing stores it): the demo agents answer with the catalog's reference solutions, which are
nobody else's to read. Whole answers and streams (`"stream": true`) both; the Responses API is not served.
"""

from __future__ import annotations

import hmac
import json
import logging
import socket

import uvicorn
from asgiref.sync import sync_to_async
from django.db import close_old_connections

from llm.models import served_key
from llm.wire import PURPOSE_HEADER, Reply, chat_chunks, chat_completion, sse_frames
from review.diagnosis import SYSTEM_PROMPT as DIAGNOSIS
from synthesis.annotation import SYSTEM_PROMPT as ANNOTATION
from tasks.categorizing import SYSTEM_PROMPT as CATEGORIZING
from tasks.judging import SYSTEM_PROMPT as RUBRIC_JUDGING
from tasks.lazy_workspaces import LLM_PURPOSE as LAZY_PURPOSE

from . import agent, generator, judge

log = logging.getLogger(__name__)

KEY_ENV = "CLAWGYM_KEY_SERVED_DEMO"
MAX_BODY_BYTES = 33 * 1024 * 1024  # the proxy's 32 MiB and room for what it adds
GENERATOR, JUDGE = "clawgym-demo/generator", "clawgym-demo/judge"
MODELS = [*agent.AGENTS, JUDGE, GENERATOR]
UNKNOWN = (
    "I am a ClawGym demo model ({model}): I answer ClawGym's own prompts (the synthesis stages, quality assessment, "
    "rubric judging, categorizing, skill annotation, diagnosis) and, as an agent, work catalog tasks that have a "
    "reference solution. This request is none of those."
)


def _text(content) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def structured(model: str, system: str, user: str, messages: list[dict], purpose: str = "") -> dict | None:
    """The JSON answer of `model` (the generator or the judge) to one of the ClawGym requests it serves, or None when
    the request is none of them."""
    if model == GENERATOR:
        if purpose.startswith("synthesis:"):
            return generator.answer(purpose.removeprefix("synthesis:"), messages)
    elif model == JUDGE:
        if purpose.startswith("qa:"):
            return judge.qa(purpose.removeprefix("qa:"), user)
        if purpose == LAZY_PURPOSE:  # the sanity check's model-written lazy workspace: the laziest, a claim alone
            return {"files": [], "delete": [], "final_message": "All done: every file is ready."}
        if system == RUBRIC_JUDGING:
            return judge.rubric_verdict(user)
        if system == DIAGNOSIS:
            return judge.diagnosis(user)
    else:
        return None
    if system == CATEGORIZING:
        return judge.category(user)
    if system == ANNOTATION:
        return judge.annotation()
    return None


def answer(body: dict, purpose: str = "") -> Reply:
    """The demo models' answer to one chat-completions request body and the purpose its caller named (none: an
    agent's call, or someone else's)."""
    model = str(body.get("model") or "")
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if model in agent.AGENTS:
        if body.get("tools"):
            return agent.reply(body, agent.AGENTS[model])
        return Reply.text(UNKNOWN.format(model=model))
    system = next((_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")), "")
    user = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
    found = structured(model, system, user, messages, purpose)
    if found is None:
        return Reply.text(UNKNOWN.format(model=model or "no model named"))
    return Reply.text(json.dumps(found))


def _answer_in_thread(body: dict, purpose: str) -> Reply:
    # The catalog is read in a worker thread: its connection is closed when stale, as Django does for a request.
    close_old_connections()
    try:
        return answer(body, purpose)
    finally:
        close_old_connections()


class DemoServer:
    """The ASGI app: GET /v1/models, POST /v1/chat/completions (whole or streamed)."""

    def __init__(self, api_key: str):
        self.api_key = api_key

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        given = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), self.api_key.encode()):
            return await _json(send, 401, {"error": {"message": f"the demo models need the key of {KEY_ENV}"}})
        body = await _body(receive)
        if body is None:
            return await _json(send, 413, {"error": {"message": f"request body over {MAX_BODY_BYTES:,} bytes"}})
        path = scope["path"].rstrip("/")
        if path.endswith("/models"):
            return await _json(
                send,
                200,
                {
                    "object": "list",
                    "data": [{"id": model, "object": "model", "owned_by": "clawgym-demo"} for model in MODELS],
                },
            )
        if not path.endswith("/chat/completions") or scope["method"] != "POST":
            message = f"no route {scope['method']} {path}: the demo models serve /v1/chat/completions only"
            return await _json(send, 404, {"error": {"message": message}})
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if not isinstance(request, dict):
            return await _json(send, 400, {"error": {"message": "the body is not a JSON object"}})
        try:
            purpose = headers.get(PURPOSE_HEADER.lower(), "")
            reply = await sync_to_async(_answer_in_thread, thread_sensitive=False)(request, purpose)
        except Exception as exc:  # a defect: said to the caller (an infrastructure error there), and logged
            log.exception("demo models: answering a request")
            return await _json(send, 500, {"error": {"message": f"the demo server failed: {type(exc).__name__}"}})
        if not request.get("stream"):
            return await _json(send, 200, chat_completion(reply, request))
        start = {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
        await send(start)
        for frame in sse_frames(chat_chunks(reply, request)):
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _body(receive) -> bytes | None:
    body = bytearray()
    while True:
        message = await receive()
        body += message.get("body", b"")
        if len(body) > MAX_BODY_BYTES:
            return None
        if not message.get("more_body"):
            return bytes(body)


async def _json(send, status: int, payload: dict) -> None:
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def app() -> DemoServer:
    return DemoServer(served_key(KEY_ENV))


def bind(host: str, port: int) -> socket.socket:
    """The listening socket (port 0: a free one), bound before the endpoints are registered with its address."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def serve(sock: socket.socket) -> None:
    """Serve on the bound socket until SIGINT or SIGTERM (uvicorn's handlers: it finishes the answers in flight)."""
    config = uvicorn.Config(app(), log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=3)
    uvicorn.Server(config).run(sockets=[sock])
