"""The recording proxy: OpenAI-compatible routes that forward to a session's endpoint and store every call.

    POST /proxy/<token>/v1/chat/completions      POST /proxy/<token>/v1/responses      GET /proxy/<token>/v1/models

The token (a ProxySession) is the only credential: no session or CSRF, the caller's Authorization header is
dropped, and the upstream key is added here, so an agent never sees it. The session's endpoint fixes the model
(the body's "model" is replaced); everything else in the body passes through untouched.

Async views under the ASGI app with one shared httpx.AsyncClient per event loop: 64 streaming agents are 64
coroutines, and /proxy/ skips the site's middleware (llm/asgi.py); the session lookup and the call's record run on
a small pool of database threads of their own (llm.recording). A stream is passed on chunk by chunk as it arrives
and assembled on the side (llm.sse). The ModelCall row is written before the call is forwarded (its request, its
answer pending) and its answer added when the answer has come: for a stream when its end marker arrives, just before
that last chunk goes out, so a caller that has seen the end of a response can find its record. Upstream errors pass
through with their status and body.
An answer is read as it arrives and stopped past CLAWGYM_MAX_RESPONSE_BYTES (llm.failures): a whole one is then
a recorded 502 `upstream_error`, a stream ends with an error event after the bytes already passed on; either way
the rest is never read (the connection is dropped), and the call is recorded as the upstream's failure. So is a
stream that broke off, whose caller gets the same error event rather than a silently cut-off answer.
Every call is recorded or refused, never passed on unrecorded. A call whose row could not be written is never
forwarded (a 503). A request whose record could not be stored (NaN, Infinity, a number past the float range such as
1e999, a lone surrogate: lib.strict_json) is a recorded 400 and never goes upstream; an answer holding one is not
passed on (a recorded 502, or a stream's error event in its place); and an answer whose record could not be written
(the database refused it or was unreachable) is withheld: a 503, or for a stream an error event instead of the chunk
with its end marker, so the caller never sees a clean end of an answer the record, the budget, the rollout page and
the training data do not hold. Its row stays without the answer (ModelCall.AnswerState), still counted against the
session's token limit, and the rollout holding it is the infrastructure's failure (evaluation.infra): a stream's
chunks before its end did reach the caller.
The proxy does not retry (the agent harness decides) and does not take endpoint slots (rollout concurrency is
bounded by the sandboxes).

A session with a token limit (a rollout's `token_limit` option) is held to it here: before each call the tokens of
its recorded calls are summed (an aggregate on the session's indexed key, in the lookup of the session itself:
llm.recording), a call once they reach the limit is refused with a 400 `token_limit_exceeded` (not retryable, so
the harness stops) and recorded, and a call under it has its output cap (max_completion_tokens / max_tokens /
max_output_tokens) lowered to what is left, so one answer cannot run far past it. Every forwarded call counts, whatever
its body: from the moment it is forwarded until its answer's usage is recorded it holds its output cap
(ModelCall.held_tokens), so calls in flight together share what is left, and a call whose answer or usage was never
recorded (its caller went away first) keeps counting its cap (a prompt counts only with its usage: only prompts can
pass the limit). A streamed chat call is asked for its usage (stream_options.include_usage), without which it would
count only its cap.

A training session (`record_tokens`, an RL rollout's) also asks the upstream for the exact token ids and logprobs and
stores them with the call as its ModelCallTokens row, in the same transaction (the prompt as a reference to an
earlier call of the session plus its new ids: llm.token_chain); the agent still gets the answer it
asked for (llm.tokens says what is added and what is taken back out).

A rollout's session (ProxySession.sampling) is held to its run's sampling before anything else: temperature, top_p,
seed and n set, the output cap at the endpoint's limit, and a call asking for anything that changes how the model
samples refused with a recorded 400 (llm.sampling); what was changed is recorded on the call. Such a session's
Responses calls may name as `previous_response_id` only a response recorded in the same session, since the
upstream's stored conversation is history the record would not show.
"""

import asyncio
import json
import logging
import time
import weakref

import httpx
from django.conf import settings
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from lib import strict_json

from . import metrics
from .failures import BROKE_OFF, STREAM_BROKE_OFF, answer_limit, declared_length, too_large
from .models import MissingApiKey, ModelEndpoint, ProxySession
from .recording import ProxiedCall, in_db, response_recorded, usable_session
from .sampling import SAMPLING_NOT_ALLOWED, Held, hold_to_sampling
from .sse import StreamAssembler
from .tokens import TokenStream, ask_for_tokens, whole_answer

log = logging.getLogger(__name__)

PASSED_HEADERS = ("retry-after", "x-request-id")  # besides content-type, which every response sets itself
CONNECT_TIMEOUT = 10.0
UPSTREAM_KEEPALIVE_SECONDS = 2.0
# Failures of a reused connection before any answer came: the request is sent once more, on a new connection.
STALE_CONNECTION_ERRORS = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)

_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]" = weakref.WeakKeyDictionary()


def upstream_client() -> httpx.AsyncClient:
    """The process's client for the running event loop (a client cannot cross loops)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        # Idle connections are dropped after 2 s: uvicorn and vLLM close theirs after 5 s, and a request sent on a
        # connection the server is closing fails with a ReadError (seen under load by bench/load_bench.py).
        limits = httpx.Limits(
            max_connections=settings.CLAWGYM_PROXY_MAX_CONNECTIONS,
            max_keepalive_connections=64,
            keepalive_expiry=UPSTREAM_KEEPALIVE_SECONDS,
        )
        client = httpx.AsyncClient(limits=limits, trust_env=False)
        _clients[loop] = client
    return client


def _error(status: int, message: str, kind: str = "proxy_error") -> JsonResponse:
    return JsonResponse({"error": {"message": message, "type": kind, "code": status}}, status=status)


TOKEN_LIMIT_EXCEEDED = "token_limit_exceeded"  # the error type and code of a call refused for its session's budget
SESSION_SCOPE_KEY = "clawgym.proxy_session"  # the lane (llm.asgi) puts the session it checked here


def token_refusal() -> JsonResponse:
    return _error(401, "unknown, closed or expired proxy session token", "invalid_request_error")


async def _session(request, token: str) -> ProxySession | None:
    checked = request.scope.get(SESSION_SCOPE_KEY) if hasattr(request, "scope") else None
    return checked if checked is not None else await usable_session(token)


def json_depth_over(value, limit: int) -> bool:
    """Whether `value` nests deeper than `limit` (counted without recursion: the point is not to recurse)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _parsed(content: bytes):
    """The answer's JSON; one that is not JSON as its text. Raises strict_json.NotStorable (see there)."""
    try:
        return strict_json.loads(content)
    except strict_json.NotStorable:
        raise
    except ValueError:
        return _raw(content)


def _raw(content: bytes) -> dict:
    return {"raw": content[:RAW_KEPT].decode("utf-8", errors="replace")}


def _error_text(status: int, body) -> str:
    message = body.get("error") if isinstance(body, dict) else None
    if isinstance(message, dict):
        message = message.get("message")
    return f"upstream HTTP {status}: {message or body}"[:2000]


def _passed_headers(response: HttpResponse, upstream: httpx.Response) -> HttpResponse:
    for name in PASSED_HEADERS:
        if name in upstream.headers:
            response[name] = upstream.headers[name]
    return response


class _Refused(Exception):
    """The request is refused before anything goes upstream; `response` says why."""

    def __init__(self, response: JsonResponse):
        super().__init__(response.status_code)
        self.response = response


async def _read_request(request, token: str, api: str, started: float):
    """(session, body, raw bytes). Refused: 401 unknown or closed token, 413 too large, 400 not a JSON object (and
    a recorded 400 for JSON its record could not store: strict_json), 503 endpoint disabled."""
    session = await _session(request, token)
    if session is None:
        raise _Refused(token_refusal())
    limit = settings.CLAWGYM_PROXY_MAX_REQUEST_BYTES
    declared = request.META.get("CONTENT_LENGTH")
    if declared and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise _Refused(_error(413, f"request body over the proxy's limit of {limit} bytes"))
    # read(), not .body: the limit here is the proxy's own, not DATA_UPLOAD_MAX_MEMORY_SIZE.
    raw = request.read(limit + 1)
    if len(raw) > limit:
        raise _Refused(_error(413, f"request body over the proxy's limit of {limit} bytes"))
    depth = settings.CLAWGYM_PROXY_MAX_JSON_DEPTH
    too_deep = _Refused(_error(400, f"the request body nests deeper than {depth} levels", "invalid_request_error"))
    try:
        body = strict_json.loads(raw)
    except strict_json.NotStorable as exc:
        # Never forwarded: its record could not be written, so it would go uncounted and unseen.
        raise _Refused(await _refuse_unstorable(ProxiedCall(session, api, _raw(raw), started), exc)) from None
    except ValueError as exc:
        raise _Refused(_error(400, f"the request body is not JSON: {exc}", "invalid_request_error")) from None
    except RecursionError:
        raise too_deep from None  # nested past Python's own limit
    if json_depth_over(body, depth):
        raise too_deep
    if not isinstance(body, dict):
        raise _Refused(_error(400, "the request body must be a JSON object", "invalid_request_error"))
    if not session.endpoint.enabled:
        raise _Refused(_error(503, f"model endpoint {session.endpoint.name!r} is disabled"))
    return session, body, raw


async def _forward(request, token: str, api: str, path: str):
    started = time.perf_counter()
    if request.method != "POST":
        return _error(405, f"{request.method} is not allowed here; use POST")
    try:
        session, body, raw = await _read_request(request, token, api, started)
    except _Refused as refused:
        return refused.response
    endpoint = session.endpoint
    changed = body.get("model") != endpoint.model
    body["model"] = endpoint.model
    held = None
    if session.sampling is not None:
        held = hold_to_sampling(api, body, session.sampling)
        refusal = await _history_refusal(session, api, body) if not held.refused else None
        if held.refused or refusal:
            return await _refuse_sampling(ProxiedCall(session, api, body, started), held, refusal)
        changed |= bool(held.changes)
    if session.token_limit is not None:
        used = session.tokens_spent  # summed by the session's lookup, in the same query
        if used >= session.token_limit:
            return await _refuse_over_budget(ProxiedCall(session, api, body, started), used)
        changed |= hold_to_budget(api, body, session.token_limit - used)
    tokens = ask_for_tokens(api, body) if session.record_tokens else None
    if changed or tokens is not None:
        raw = json.dumps(body).encode()  # otherwise the caller's bytes go upstream as they came
    call = ProxiedCall(session, api, body, started, tokens)
    if held is not None:
        call.sampling_changes = held.changes
    if session.token_limit is not None:
        call.held_tokens = output_cap(api, body)  # what the limit counts it for until its usage is recorded
    headers = {"content-type": "application/json", "accept-encoding": "identity"}
    try:
        key = endpoint.api_key()
    except MissingApiKey as exc:
        call.status_code, call.error = 502, f"proxy misconfigured: {exc}"
        await call.record()
        return _error(502, call.error)
    if key:
        headers["authorization"] = f"Bearer {key}"
    if not await call.open():
        return _error(503, NOT_FORWARDED)  # a call forwarded without its row would go uncounted and unseen
    try:
        return await _send(call, path, raw, headers)
    except BaseException as exc:
        # The caller went away (the request is cancelled) or the proxy failed before the answer was recorded: the
        # call's row gets what the call has, and says why it holds no answer.
        gone = isinstance(exc, asyncio.CancelledError)
        call.abandon(
            "the caller went away before the answer came" if gone else f"the proxy failed: {type(exc).__name__}"
        )
        raise


async def _send(call: ProxiedCall, path: str, raw: bytes, headers: dict):
    """Forward a call whose row is written, and answer its caller: as a whole (_whole) or as a stream (_relay)."""
    endpoint = call.session.endpoint
    client = upstream_client()
    url = endpoint.base_url.rstrip("/") + path
    timeout = httpx.Timeout(endpoint.timeout_seconds, connect=CONNECT_TIMEOUT)
    upstream_request = client.build_request("POST", url, content=raw, headers=headers, timeout=timeout)
    try:
        try:
            upstream = await client.send(upstream_request, stream=True)
        except STALE_CONNECTION_ERRORS as exc:
            log.info("proxy: upstream connection failed before an answer (%s); sending once more", type(exc).__name__)
            upstream = await client.send(
                client.build_request("POST", url, content=raw, headers=headers, timeout=timeout), stream=True
            )
    except httpx.TimeoutException as exc:
        call.status_code, call.error = 504, f"upstream timed out: {type(exc).__name__}"
        await call.record()
        return _error(504, call.error)
    except httpx.HTTPError as exc:
        call.status_code, call.error = 502, f"upstream unreachable: {type(exc).__name__}: {exc}"
        await call.record()
        return _error(502, call.error)
    call.status_code = upstream.status_code
    content_type = upstream.headers.get("content-type", "application/json")
    if upstream.status_code >= 400 or "text/event-stream" not in content_type:
        return await _whole(call, upstream, content_type)
    response = StreamingHttpResponse(_relay(call, upstream), status=upstream.status_code, content_type=content_type)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx in front must not buffer the stream either
    return _passed_headers(response, upstream)


# The fields that cap a call's output tokens, by API; the first is the one added when the caller set none.
OUTPUT_CAP_FIELDS = {
    ModelEndpoint.ApiStyle.CHAT: ("max_completion_tokens", "max_tokens"),
    ModelEndpoint.ApiStyle.RESPONSES: ("max_output_tokens",),
}


def hold_to_budget(api: str, body: dict, remaining: int) -> bool:
    """Lower the call's output caps to the `remaining` tokens of its session (the caller's own, when smaller, is
    kept), and ask a streamed chat call for its usage. Whether the body changed."""
    changed = False
    fields = OUTPUT_CAP_FIELDS[api]
    for name in [f for f in fields if body.get(f) is not None] or fields[:1]:
        asked = body.get(name)
        if not (isinstance(asked, int) and not isinstance(asked, bool) and asked <= remaining):
            body[name] = remaining
            changed = True
    if api == ModelEndpoint.ApiStyle.CHAT and body.get("stream"):
        options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
        if not options.get("include_usage"):
            body["stream_options"] = {**options, "include_usage": True}
            changed = True
    return changed


def output_cap(api: str, body: dict) -> int:
    """The most output tokens a call held to its session's limit may use: the smallest of its caps (hold_to_budget
    set each at most what was left)."""
    caps = [body[name] for name in OUTPUT_CAP_FIELDS[api] if type(body.get(name)) is int]
    return max(min(caps, default=0), 0)


async def _refuse_over_budget(call: ProxiedCall, used: int) -> JsonResponse:
    """The session's tokens are spent: a 400 (a client error, so no harness retries it), recorded like any call."""
    limit = call.session.token_limit
    body = {
        "error": {
            "message": f"token limit of {limit} reached for this rollout (used {used})",
            "type": TOKEN_LIMIT_EXCEEDED,
            "code": TOKEN_LIMIT_EXCEEDED,
        }
    }
    call.status_code, call.response, call.error = 400, body, f"{TOKEN_LIMIT_EXCEEDED}: {body['error']['message']}"
    await call.record()
    return JsonResponse(body, status=400)


async def _history_refusal(session: ProxySession, api: str, body: dict) -> dict | None:
    """The refusal of a Responses call continuing a conversation this session did not record, None when it may go."""
    previous = body.get("previous_response_id")
    if api != ModelEndpoint.ApiStyle.RESPONSES or previous is None:
        return None
    if isinstance(previous, str) and previous and await in_db(response_recorded, session.pk, previous):
        return None
    return {
        "error": {
            "message": f"previous_response_id {str(previous)[:80]!r} is no response recorded in this rollout's session: "
            "its conversation would be history nobody recorded; send the input items instead",
            "type": SAMPLING_NOT_ALLOWED,
            "code": SAMPLING_NOT_ALLOWED,
            "param": "previous_response_id",
        }
    }


async def _refuse_unstorable(call: ProxiedCall, reason: strict_json.NotStorable) -> JsonResponse:
    """A request its record could not store: a 400 naming why, recorded with the request's text."""
    message = f"the request body holds {reason}"
    body = {"error": {"message": message, "type": "invalid_request_error", "code": 400}}
    call.status_code, call.response, call.error = 400, body, message
    await call.record()
    return JsonResponse(body, status=400)


async def _refuse_sampling(call: ProxiedCall, held: Held, refusal: dict | None) -> JsonResponse:
    """A call asking for sampling the run does not allow: a 400 (a client error, not retried), recorded with what it
    asked, so the rollout page shows the attempt."""
    body = refusal if refusal is not None else held.refusal()
    call.sampling_changes = held.changes
    call.status_code, call.response = 400, body
    call.error = f"{SAMPLING_NOT_ALLOWED}: {body['error']['message']}"[:2000]
    await call.record()
    return JsonResponse(body, status=400)


UPSTREAM_ERROR = "upstream_error"  # the error type of an answer the proxy would not pass on (over the limit)
RAW_KEPT = 100_000  # characters kept of a body that is not JSON, or of one over the limit
# What the caller gets instead of an answer whose record could not be written (the database refused it, or was
# unreachable): nothing goes back that the record, the budget, the rollout page and the training data would not see.
UNRECORDED = "the proxy could not record this call, so its answer is withheld"
# What the caller gets instead when even the call's row could not be written before forwarding it: it is never sent.
NOT_FORWARDED = "the proxy could not record this call, so it was not sent to the model"


def _stream_error(message: str, kind: str = UPSTREAM_ERROR, code: int = 502) -> bytes:
    """The last event of a stream that failed after its headers went out: the SDKs raise it as an APIError."""
    body = {"error": {"message": message, "type": kind, "code": code}}
    return f"data: {json.dumps(body)}\n\n".encode()


async def _whole(call: ProxiedCall, upstream: httpx.Response, content_type: str) -> HttpResponse:
    """A non-streamed answer or an upstream error: read as it arrives up to the limit on answers, record it, pass it
    on as it came. One over the limit (declared, or found so while reading) is not read further: a recorded 502."""
    limit = answer_limit()
    declared = declared_length(upstream.headers)
    over = declared is not None and declared > limit
    pieces, received = [], 0
    try:
        if not over:
            async for chunk in upstream.aiter_raw():
                received += len(chunk)
                if received > limit:
                    over = True
                    break
                pieces.append(chunk)
    except httpx.HTTPError as exc:
        call.status_code, call.error = 502, f"{BROKE_OFF}: {type(exc).__name__}"
        await call.record()
        return _error(502, call.error)
    finally:
        await upstream.aclose()  # before the end of an answer over the limit: the connection is dropped
    call.first_chunk_at = time.perf_counter()
    content = b"".join(pieces)
    if over:
        call.status_code, call.error = 502, too_large(limit, declared if declared and declared > limit else None)
        call.response = {"raw": content[:RAW_KEPT].decode("utf-8", errors="replace")} if content else None
        await call.record()
        return _error(502, call.error, UPSTREAM_ERROR)
    try:
        call.response = _parsed(content)
    except strict_json.NotStorable as exc:
        call.status_code, call.error = 502, f"the upstream's answer holds {exc}: not passed on"
        call.response = _raw(content)
        await call.record()
        return _error(502, call.error, UPSTREAM_ERROR)
    if upstream.status_code >= 400:
        call.error = _error_text(upstream.status_code, call.response)
    elif call.tokens is not None:
        content, call.response = whole_answer(call.tokens, call.capture, content, call.response)
    if not await call.record():
        return _error(503, UNRECORDED)
    response = HttpResponse(content, status=upstream.status_code, content_type=content_type)
    return _passed_headers(response, upstream)


async def _relay(call: ProxiedCall, upstream: httpx.Response):
    """Pass each chunk on as it arrives. The record is written just before the chunk holding the stream's end
    marker goes out, so a caller that has seen [DONE] (and the SDK stops there) can already find it."""
    assembler = StreamAssembler(call.api)
    # A training call's stream is split into events here (its tokens collected, logprobs the agent did not ask for
    # taken out); any other passes on as it came, whole events at a time (llm.sse), so a stream cut short here
    # ends between two events and its error event reads as one.
    tokens = TokenStream(call.tokens, call.capture, assembler) if call.tokens is not None else None
    recorded = finished = unrecorded = False
    limit, received = answer_limit(), 0
    metrics.STREAMS_IN_FLIGHT.inc()
    try:
        async for chunk in upstream.aiter_raw():
            received += len(chunk)
            if received > limit:
                # Not passed on, nor read further: the caller has had at most `limit` bytes, then the error event.
                call.error = too_large(limit)
                break
            if call.first_chunk_at is None:
                call.first_chunk_at = time.perf_counter()
            chunk = assembler.feed(chunk) if tokens is None else tokens.feed(chunk)
            if assembler.refused:
                # An event the record could not store: neither it nor anything after it is passed on.
                call.error = f"the upstream's answer holds {assembler.refused}: not passed on"
                if chunk:
                    yield chunk  # the whole events before it
                break
            if assembler.complete and not recorded:
                call.response = assembler.result()
                if not await call.record():
                    unrecorded = True  # the chunk with the end marker is withheld: the caller gets an error
                    break
                recorded = True
            if chunk:
                yield chunk
        else:
            if rest := (assembler.rest() if tokens is None else tokens.finish()):
                yield rest
        finished = True
    except httpx.HTTPError as exc:
        # Headers are gone already: the caller gets an error event (below), the record says why.
        call.error = f"{STREAM_BROKE_OFF}: {type(exc).__name__}: {exc}"
        finished = True
    finally:
        metrics.STREAMS_IN_FLIGHT.dec()
        await upstream.aclose()
        if not recorded and not finished:
            call.response = assembler.result()
            call.error = call.error or "the caller went away before the stream ended"
            call.record_detached()  # being closed or cancelled: a write awaited here could be cut short
    if finished and not recorded and not unrecorded:
        call.response = assembler.result()
        unrecorded = not await call.record()
    if unrecorded:
        yield _stream_error(UNRECORDED, "proxy_error", 503)  # never a clean end for an answer nobody recorded
    elif finished and call.error and not assembler.complete:
        yield _stream_error(call.error)  # after the record, as the end marker is


@csrf_exempt
async def chat_completions(request, token: str):
    return await _forward(request, token, ModelEndpoint.ApiStyle.CHAT, "/chat/completions")


@csrf_exempt
async def responses(request, token: str):
    return await _forward(request, token, ModelEndpoint.ApiStyle.RESPONSES, "/responses")


@csrf_exempt
async def models(request, token: str):
    """The session's one model, answered here (no upstream call, nothing recorded); 502 when the proxy could not call
    it for want of its key (what a rollout's preflight checks, evaluation.infra)."""
    session = await _session(request, token)
    if session is None:
        return token_refusal()
    try:
        session.endpoint.api_key()  # a rollout's preflight asks here: the key must be in this process's environment
    except MissingApiKey as exc:
        return _error(502, f"proxy misconfigured: {exc}")
    created = int(session.endpoint.created_at.timestamp())
    model = {"id": session.endpoint.model, "object": "model", "created": created, "owned_by": "clawgym"}
    return JsonResponse({"object": "list", "data": [model]})
