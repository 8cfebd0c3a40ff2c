"""The one way ClawGym code calls a model: the openai SDK against any OpenAI-compatible endpoint.

    from llm.client import complete, complete_json

    done = complete(endpoint, messages, purpose="synthesis.instruction", subject="batch:3")
    done.text, done.call                     # the answer and its ModelCall row

    obj, call = complete_json(endpoint, messages, SCHEMA, purpose="judge", served=revision)

Every call:
- waits for one of the endpoint's `max_concurrent` slots (held across processes, see llm.leases);
- reads the answer as it arrives and stops past CLAWGYM_MAX_RESPONSE_BYTES (llm.failures): the connection is
  dropped, the rest never read, and the call fails (AnswerTooLarge, retried like an unreadable body);
- retries 429, 5xx, timeouts, connection errors, unreadable (non-JSON) and over-large bodies up to
  `endpoint.max_retries` times, with exponential backoff and jitter (honouring a short Retry-After); the slot is
  given back meanwhile;
- is recorded as one ModelCall (request, response, usage, latency, cost, attempts, error), failed or not.

Errors: ModelCallError (the call failed; `.call` is its recorded row; AnswerTooLarge is its reason when the answer
was over the limit), InvalidJsonAnswer (complete_json got no
valid object even after its repair turns; `.calls` are all its rows), MissingApiKey, EndpointBusy, EndpointUnavailable.
Call it outside database transactions and from sync code (jobs, management commands, sync views).
"""

import random
import time
from dataclasses import dataclass, field

import httpx2  # the openai SDK's own HTTP client
import openai
from django.conf import settings

from . import jsonout
from .failures import answer_limit, declared_length, too_large
from .leases import EndpointBusy, endpoint_slot
from .models import RESERVED_SAMPLING_KEYS, MissingApiKey, ModelCall, ModelEndpoint, served_reference
from .sse import usage_of
from .wire import PURPOSE_HEADER

__all__ = [
    "AnswerTooLarge",
    "Completion",
    "ConnectionCheck",
    "EndpointBusy",
    "EndpointUnavailable",
    "InvalidJsonAnswer",
    "MissingApiKey",
    "ModelCallError",
    "check_connection",
    "complete",
    "complete_json",
    "get_endpoint",
]

SLOT_MARGIN_SECONDS = 30  # a dead holder's slot frees itself this long after the call's timeout
NO_KEY = "no-key"  # sent when the endpoint names no key: the SDK would otherwise send OPENAI_API_KEY anywhere


class ModelCallError(Exception):
    """The call failed (after its retries). `call` is the recorded ModelCall, with the error."""

    def __init__(self, message: str, call: ModelCall | None = None):
        super().__init__(message)
        self.call = call


class InvalidJsonAnswer(ModelCallError):
    """No valid JSON object after the repair turns. `calls` holds every attempt's ModelCall, `reason` the last problem."""

    def __init__(self, message: str, calls: list[ModelCall], reason: str):
        super().__init__(message, calls[-1] if calls else None)
        self.calls = calls
        self.reason = reason


class EndpointUnavailable(ModelCallError):
    """The endpoint is disabled, or no enabled endpoint has the name or role asked for."""


class AnswerTooLarge(openai.OpenAIError):
    """The answer's body passed CLAWGYM_MAX_RESPONSE_BYTES, or came compressed (its size unknown until decoded).

    Raised while the SDK reads the body, which it passes on as it is (an OpenAIError), so ModelCallError names it.
    """


@dataclass
class Completion:
    text: str
    call: ModelCall
    response: dict = field(repr=False)
    tool_calls: list = field(default_factory=list)


@dataclass
class ConnectionCheck:
    ok: bool
    latency_ms: float | None
    message: str
    call: ModelCall | None = None


def get_endpoint(name: str | None = None, *, role: str | None = None) -> ModelEndpoint:
    """The enabled endpoint called `name`, or the first enabled one (by name) that serves `role`."""
    endpoints = ModelEndpoint.objects.filter(enabled=True)
    if name:
        found = endpoints.filter(name=name).first()
        if found is None:
            raise EndpointUnavailable(f"no enabled model endpoint is named {name!r}")
        return found
    if role:
        # roles is a JSON list; filtering in Python works on SQLite and PostgreSQL alike (endpoints are few).
        for endpoint in endpoints:
            if endpoint.serves(role):
                return endpoint
        raise EndpointUnavailable(f"no enabled model endpoint serves the role {role!r}")
    raise ValueError("get_endpoint needs a name or a role")


_sdk_clients: dict[tuple, openai.OpenAI] = {}


class _BoundedBody(httpx2.SyncByteStream):
    """An answer's body as it arrives, stopped by AnswerTooLarge once it passes `limit` bytes (the SDK then closes
    the response, dropping the connection: the rest is never read)."""

    def __init__(self, stream, limit: int):
        self._stream, self._limit = stream, limit

    def __iter__(self):
        received = 0
        for chunk in self._stream:
            received += len(chunk)
            if received > self._limit:
                raise AnswerTooLarge(too_large(self._limit))
            yield chunk

    def close(self) -> None:
        self._stream.close()


def _bound_answer(response: httpx2.Response) -> None:
    """The SDK's HTTP client calls this with each response before reading a byte of its body."""
    limit = answer_limit()
    declared = declared_length(response.headers)
    if declared is not None and declared > limit:
        raise AnswerTooLarge(too_large(limit, declared))
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        # Asked for none (identity): a compressed body's size is only known once decoded, past any limit.
        raise AnswerTooLarge(
            f"upstream answer compressed ({encoding}) although none was asked for: its size cannot "
            "be bounded before it is decoded"
        )
    response.stream = _BoundedBody(response.stream, limit)


def _sdk(endpoint: ModelEndpoint) -> openai.OpenAI:
    """One SDK client per endpoint setting and key, reused for its connection pool. Retries are ours (max_retries=0).

    Its HTTP client bounds every answer's body as it is read (_bound_answer), and asks for it uncompressed, so the
    bytes counted are the answer's own."""
    key = endpoint.api_key() or NO_KEY
    cache_key = (endpoint.base_url, key, endpoint.timeout_seconds)
    client = _sdk_clients.get(cache_key)
    if client is None:
        http = openai.DefaultHttpxClient(event_hooks={"response": [_bound_answer]})
        client = openai.OpenAI(
            api_key=key,
            base_url=endpoint.base_url,
            timeout=endpoint.timeout_seconds,
            max_retries=0,
            default_headers={"Accept-Encoding": "identity"},
            http_client=http,
        )
        _sdk_clients[cache_key] = client
    return client


def _is_retryable(exc: Exception) -> bool:
    # Timeouts, a body that is not JSON, and one over the limit: the server's answer was unusable, not refused.
    if isinstance(exc, (openai.APIConnectionError, ValueError, AnswerTooLarge)):
        return True
    return isinstance(exc, openai.APIStatusError) and (exc.status_code == 429 or exc.status_code >= 500)


def _backoff_seconds(attempt: int, exc: Exception) -> float:
    """Exponential with jitter; a Retry-After the server sent wins when it is within the cap."""
    cap = settings.CLAWGYM_LLM_BACKOFF_MAX_SECONDS
    response = getattr(exc, "response", None)
    retry_after = response.headers.get("retry-after") if response is not None else None
    if retry_after:
        try:
            return min(cap, max(0.0, float(retry_after)))
        except ValueError:
            pass  # an HTTP date: fall back to our own schedule
    base = settings.CLAWGYM_LLM_BACKOFF_SECONDS * (2**attempt)
    return min(cap, base * random.uniform(0.5, 1.5))


def _describe(exc: Exception) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, ValueError):
        return f"the answer's body is not JSON: {exc}"
    if isinstance(exc, AnswerTooLarge):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _answer(api: str, response) -> tuple[str, list]:
    if api == ModelEndpoint.ApiStyle.RESPONSES:
        tools = [item.to_dict() for item in response.output if item.type == "function_call"]
        return response.output_text or "", tools
    if not response.choices:
        return "", []
    message = response.choices[0].message
    return message.content or "", [call.to_dict() for call in (message.tool_calls or [])]


def _request_body(endpoint: ModelEndpoint, messages: list[dict], sampling: dict | None) -> dict:
    reserved = RESERVED_SAMPLING_KEYS & set(sampling or {})
    if reserved:
        raise ValueError(f"sampling may not set {sorted(reserved)}: the client sets them (and never streams)")
    body = {"model": endpoint.model, **(endpoint.sampling or {}), **(sampling or {})}
    if endpoint.api_style == ModelEndpoint.ApiStyle.RESPONSES:
        body["input"] = messages
    else:
        body["messages"] = messages
    return body


def _send(endpoint: ModelEndpoint, body: dict, purpose: str = ""):
    sdk = _sdk(endpoint)
    headers = {PURPOSE_HEADER: purpose} if purpose else None
    if endpoint.api_style == ModelEndpoint.ApiStyle.RESPONSES:
        return sdk.responses.create(**body, extra_headers=headers)
    return sdk.chat.completions.create(**body, extra_headers=headers)


def complete(
    endpoint: ModelEndpoint,
    messages: list[dict],
    *,
    purpose: str,
    subject: str = "",
    served=None,
    sampling: dict | None = None,
) -> Completion:
    """One model call with retries, recorded. `sampling` overrides the endpoint's defaults for this call."""
    if not endpoint.enabled:
        raise EndpointUnavailable(f"model endpoint {endpoint.name!r} is disabled")
    body = _request_body(endpoint, messages, sampling)
    api = endpoint.api_style
    attempts, started = 0, time.monotonic()
    response, error, status_code = None, "", None
    hold = endpoint.timeout_seconds + SLOT_MARGIN_SECONDS
    while True:
        attempts += 1
        try:
            with endpoint_slot(endpoint, hold_seconds=hold):
                response = _send(endpoint, body, purpose)
            error = ""
            break
        except (openai.OpenAIError, ValueError) as exc:
            error = _describe(exc)
            status_code = getattr(exc, "status_code", None)
            if not _is_retryable(exc) or attempts > endpoint.max_retries:
                break
            time.sleep(_backoff_seconds(attempts - 1, exc))
    latency_ms = (time.monotonic() - started) * 1000
    response_body = response.to_dict(mode="json") if response is not None else None
    input_tokens, output_tokens = usage_of(api, response_body)
    served_type, served_id = served_reference(served)
    call = ModelCall.objects.create(
        endpoint=endpoint,
        endpoint_name=endpoint.name,
        model=endpoint.model,
        purpose=purpose,
        subject=subject,
        served_type=served_type,
        served_id=served_id,
        api=api,
        request=body,
        response=response_body,
        status_code=200 if response is not None else status_code,
        error=error,
        attempts=attempts,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        latency_ms=latency_ms,
        cost=endpoint.cost(input_tokens, output_tokens),
    )
    if response is None:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        raise ModelCallError(f"model call to {endpoint.name!r} failed after {tries}: {error}", call)
    text, tool_calls = _answer(api, response)
    return Completion(text=text, call=call, response=response_body, tool_calls=tool_calls)


def complete_json(
    endpoint: ModelEndpoint,
    messages: list[dict],
    schema: dict | None,
    *,
    purpose: str,
    subject: str = "",
    served=None,
    sampling: dict | None = None,
    repairs: int = 1,
) -> tuple[dict, ModelCall]:
    """A JSON object answer that matches `schema` (None: any object), and the ModelCall that produced it.

    When the answer holds no valid object, the model is shown its answer and the exact problem, and asked
    again, at most `repairs` times; then InvalidJsonAnswer (never a silent default).
    """
    conversation = list(messages)
    calls: list[ModelCall] = []
    for _turn in range(repairs + 1):
        done = complete(endpoint, conversation, purpose=purpose, subject=subject, served=served, sampling=sampling)
        calls.append(done.call)
        try:
            return jsonout.parse_answer(done.text, schema), done.call
        except jsonout.JsonAnswerError as exc:
            problem = str(exc)
            done.call.error = f"invalid JSON answer: {problem}"
            done.call.save(update_fields=["error"])
        conversation = conversation + [
            {"role": "assistant", "content": done.text},
            {
                "role": "user",
                "content": (
                    f"Your answer could not be used: {problem}. Reply again with only one JSON object"
                    + (" that matches the schema." if schema else ".")
                ),
            },
        ]
    raise InvalidJsonAnswer(
        f"{endpoint.name!r} gave no valid JSON answer in {repairs + 1} tries; last problem: {problem}", calls, problem
    )


def check_connection(endpoint: ModelEndpoint) -> ConnectionCheck:
    """A tiny real call; says how long it took or why it failed. Never raises for a model or network error."""
    cap = "max_output_tokens" if endpoint.api_style == ModelEndpoint.ApiStyle.RESPONSES else "max_tokens"
    messages = [{"role": "user", "content": "Reply with the single word: pong"}]
    try:
        done = complete(
            endpoint, messages, purpose="test_connection", subject=f"endpoint:{endpoint.name}", sampling={cap: 16}
        )
    except ModelCallError as exc:
        return ConnectionCheck(False, exc.call.latency_ms if exc.call else None, str(exc), exc.call)
    except (MissingApiKey, EndpointBusy) as exc:
        return ConnectionCheck(False, None, str(exc))
    return ConnectionCheck(True, done.call.latency_ms, f"answered {done.text.strip()[:80]!r}", done.call)
