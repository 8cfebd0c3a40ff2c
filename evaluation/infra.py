"""Telling infrastructure failures from the model's own: a rollout whose agent never reached its model is failed
(retryable), never scored as the model's 0.

The checks:
- before the agent starts, `preflight` asks the recording proxy for the session's model over the very URL the
  sandbox's relay uses (CLAWGYM_PROXY_PUBLIC_URL/proxy/<token>/v1/models): a web app that is not running, listens on
  another port, is another ClawGym, or lacks the endpoint's key in its environment is found in a second, with the
  fix named, instead of after the harness's retries (102 s for OpenClaw);
- after the agent stopped in error, `upstream_failure` looks at what the proxy recorded: when the session's last
  call failed for a reason that is not the model's (the model's server unreachable, timing out, 5xx, refusing our
  key, rate limiting, breaking off a stream, answering past CLAWGYM_MAX_RESPONSE_BYTES) or the relay could not reach
  the proxy at all, the error was the infrastructure's;
- after the agent ran out of time, `answer_failure` does the same for any call of the session whose answer the
  upstream did not deliver (timed out, broke off, over the limit: llm.failures): the agent's time went waiting on
  the model's server, so running out of it is not the model's limit either;
- however the agent stopped, `unrecorded_answers` (after `settle_calls` let the proxy write what the agent left in
  flight) finds any call whose answer the proxy could not record: withheld from the agent, but a stream's chunks
  before its end did reach it, so what it did next is not the model's on the record.
"""

from __future__ import annotations

import time
from functools import reduce
from operator import or_

import httpx
from django.conf import settings
from django.db.models import Q

from llm.failures import ANSWER_FAILURES, is_answer_failure
from llm.models import ModelCall, ProxySession

PREFLIGHT_TIMEOUT = httpx.Timeout(10.0, connect=3.0)
# Upstream answers that say nothing about the model's ability: our key, the model's name, the server's health.
INFRA_STATUSES = {401, 403, 404, 408, 429}


def _where() -> str:
    return settings.CLAWGYM_PROXY_PUBLIC_URL.rstrip("/")


def preflight(session: ProxySession, proxy_base: str) -> str:
    """ "" when the agent can reach its model through the proxy; otherwise why not, and what to do about it."""
    where = _where()
    try:
        response = httpx.get(
            f"{proxy_base}/models",
            headers={"authorization": f"Bearer {session.token}"},
            timeout=PREFLIGHT_TIMEOUT,
            trust_env=False,
        )
    except httpx.HTTPError as exc:
        return (
            f"the recording proxy at {where} is unreachable from this worker ({type(exc).__name__}: {exc}): start the "
            "web app (scripts/run.sh) or set CLAWGYM_PROXY_PUBLIC_URL to where it listens (by default it follows PORT)"
        )
    try:
        body = response.json()
    except ValueError:
        body = None
    message = _message(body)
    if response.status_code == 200 and isinstance(body, dict):
        served = [m.get("id") for m in body.get("data") or [] if isinstance(m, dict)]
        if served == [session.endpoint.model]:
            return ""
        return (
            f"{where} answered for model(s) {served}, not {session.endpoint.model!r}: CLAWGYM_PROXY_PUBLIC_URL "
            "points at another ClawGym; set it to this installation's web app"
        )
    if response.status_code == 401 and message:
        return (
            f"the proxy at {where} does not know this rollout's session ({message}): CLAWGYM_PROXY_PUBLIC_URL points "
            "at a ClawGym with another database; set it to this installation's web app"
        )
    if response.status_code == 502 and message:
        return (
            f"the proxy at {where} cannot call the model: {message}. Set it in the web app's environment (the proxy "
            "runs there) and restart it"
        )
    return (
        f"{where} is not a ClawGym proxy (HTTP {response.status_code} for {proxy_base.split('/proxy/')[0]}/proxy/…/v1/"
        "models): set CLAWGYM_PROXY_PUBLIC_URL to the address of this installation's web app"
    )


def _message(body) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message) if message else ""


def is_infra_call(status_code: int | None, error: str) -> bool:
    """A failed call whose failure is the model server's or ours, not the model's answer."""
    if not error:
        return False
    # A stream that broke off, or went past the limit, was answered 200 before it failed: its error text says so.
    return status_code is None or status_code >= 500 or status_code in INFRA_STATUSES or is_answer_failure(error)


def upstream_failure(session_id: int | None, relay_failures: list[str]) -> str:
    """Why an agent that ended in error was stopped by the infrastructure, or "" when its error is its own."""
    calls = ModelCall.objects.filter(session_id=session_id).only("status_code", "error")  # never the bodies
    last = calls.order_by("-created_at", "-id").first() if session_id else None
    if last is not None and is_infra_call(last.status_code, last.error):
        failed = ModelCall.objects.filter(session_id=session_id).exclude(error="")
        count = sum(1 for status, error in failed.values_list("status_code", "error") if is_infra_call(status, error))
        return (
            f"the model's server failed, not the model: the proxy recorded {count} failed call"
            f"{'s' if count != 1 else ''}, the last: {last.error}"[:1500]
        )
    # The relay could not reach the proxy (the web app went away mid-run): nothing of it is recorded, so it counts
    # unless the last call that was recorded failed on the model's side (then the agent stopped on that).
    if relay_failures and (last is None or not last.error):
        return (
            f"the agent could not reach the recording proxy at {_where()} during the run: {relay_failures[-1]}; "
            "check that the web app kept running"
        )
    return ""


def answer_failure(session_id: int | None) -> str:
    """Why an agent that ran out of time did so waiting on its model's server, or "" when no call of its session says
    so: the proxy recorded an answer the upstream did not deliver (llm.failures.ANSWER_FAILURES)."""
    return _calls_failure(
        session_id,
        reduce(or_, (Q(error__startswith=prefix) for prefix in ANSWER_FAILURES)),
        "the model's server failed, not the model: the proxy recorded {count} answer{s} it did not deliver",
    )


def _calls_failure(session_id: int | None, which: Q, summary: str) -> str:
    """`summary` ({count} and {s} filled in for the session's calls that match `which`) and the last one's error, or ""
    when none matches."""
    if not session_id:
        return ""
    calls = ModelCall.objects.filter(session_id=session_id).filter(which)
    last = calls.only("error").order_by("-created_at", "-id").first()
    if last is None:
        return ""
    count = calls.count()
    return f"{summary.format(count=count, s='s' if count != 1 else '')}, the last: {last.error}"[:1500]


# How long the end of a rollout waits for the proxy to settle the calls its agent left in flight (a call whose caller
# went away is written a moment after, by the web app): a call still pending then is one whose answer was never written.
SETTLE_SECONDS = 30.0


def settle_calls(session_id: int | None) -> None:
    """Wait until no call of a closed session is pending (ModelCall.AnswerState), at most SETTLE_SECONDS: what the
    agent left in flight when it stopped is then recorded, and a call still pending is one the proxy could not write
    the answer of (its database failed, or it died). Returns at once when none is pending."""
    if not session_id:
        return
    pending = ModelCall.objects.filter(session_id=session_id, answer_state=ModelCall.AnswerState.PENDING)
    deadline, pause = time.monotonic() + SETTLE_SECONDS, 0.02
    while pending.exists() and time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def unrecorded_answers(session_id: int | None) -> str:
    """Why a rollout is the infrastructure's failure because the proxy holds no record of an answer of its session
    (withheld from the agent, unrecorded or still pending after settle_calls), or "" when every answer is recorded.
    The agent may have seen part of such an answer (a stream's chunks before its end) that no record holds, so its
    workspace is never scored as the model's: retried, never a 0."""
    return _calls_failure(
        session_id,
        ~Q(answer_state=ModelCall.AnswerState.RECORDED),
        "the recording proxy could not record the answer of {count} model call{s} of this rollout (the agent may have "
        "seen part of it)",
    )
