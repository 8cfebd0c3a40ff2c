"""Every state change of the LLM gateway: endpoints and recording sessions. Views, the API and commands call these."""

import logging
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from lib.bounds import TextRefused, check_json

from .models import ModelEndpoint, ProxySession, hash_token, new_session_token

log = logging.getLogger(__name__)

ENDPOINT_FIELDS = {
    "base_url",
    "model",
    "api_style",
    "api_key_env",
    "roles",
    "timeout_seconds",
    "max_retries",
    "max_concurrent",
    "sampling",
    "price_input_per_mtok",
    "price_output_per_mtok",
    "enabled",
    "served_at",  # ClawGym's own registrations of servers it started (ModelEndpoint.served_at); no form or API sets it
    "served_key_env",  # and the served key they gave it (ModelEndpoint.served_key_env), likewise
}


def _who(user) -> str:
    return user.get_username() if user is not None else "a script"


def _check_fields(fields: dict) -> None:
    unknown = set(fields) - ENDPOINT_FIELDS
    if unknown:
        raise ValueError(f"unknown endpoint field(s): {sorted(unknown)}; known: {sorted(ENDPOINT_FIELDS)}")


def _full_clean(endpoint: ModelEndpoint) -> None:
    """The model's own checks (names and URLs within their columns) and a bound on its JSON settings."""
    endpoint.full_clean()
    for field in ("sampling", "roles"):
        try:
            check_json(getattr(endpoint, field), f"the {field}", setting="CLAWGYM_MAX_NOTE_BYTES")
        except TextRefused as exc:
            raise ValidationError({field: [str(exc)]}) from None


def create_endpoint(name: str, *, user=None, **fields) -> ModelEndpoint:
    """A new endpoint; ValidationError (from full_clean) names each bad field."""
    _check_fields(fields)
    endpoint = ModelEndpoint(name=name, **fields)
    _full_clean(endpoint)
    endpoint.save()
    log.info("model endpoint %s created by %s", endpoint.name, _who(user))
    return endpoint


def update_endpoint(endpoint: ModelEndpoint, *, user=None, **fields) -> ModelEndpoint:
    _check_fields(fields)
    for name, value in fields.items():
        setattr(endpoint, name, value)
    _full_clean(endpoint)
    endpoint.save()
    log.info("model endpoint %s changed by %s: %s", endpoint.name, _who(user), ", ".join(sorted(fields)) or "nothing")
    return endpoint


def open_proxy_session(
    endpoint: ModelEndpoint,
    *,
    subject: str = "",
    ttl_seconds: float | None = None,
    token_limit: int | None = None,
    record_tokens: bool = False,
    sampling: dict | None = None,
) -> ProxySession:
    """A new recording session on `endpoint`. The returned object's `token` is the agent's only credential and the
    only time the plaintext exists (only its hash is stored): hand it on, never log or show it. The session
    expires after `ttl_seconds` (default CLAWGYM_PROXY_SESSION_TTL_SECONDS) even if nobody closes it. With
    `token_limit`, the proxy refuses its calls once their input + output tokens reach it (llm.proxy). With
    `record_tokens` (a training session) the proxy stores each call's exact token ids and logprobs (llm.tokens). With
    `sampling` (a rollout's: llm.sampling.policy_for) the proxy holds every call to the run's sampling."""
    if not endpoint.enabled:
        raise ValueError(f"model endpoint {endpoint.name!r} is disabled; enable it before opening a session")
    ttl = settings.CLAWGYM_PROXY_SESSION_TTL_SECONDS if ttl_seconds is None else ttl_seconds
    if ttl <= 0:
        raise ValueError(f"a proxy session's time to live must be positive, got {ttl}")
    if token_limit is not None and (
        isinstance(token_limit, bool) or not isinstance(token_limit, int) or token_limit < 1
    ):
        raise ValueError(f"a proxy session's token limit must be a positive whole number, got {token_limit!r}")
    if not isinstance(record_tokens, bool):
        raise ValueError(f"record_tokens must be true or false, got {record_tokens!r}")
    if sampling is not None and not (isinstance(sampling, dict) and isinstance(sampling.get("max_output_tokens"), int)):
        raise ValueError(f"a session's sampling policy is llm.sampling.policy_for's shape, got {sampling!r}")
    token = new_session_token()
    session = ProxySession.objects.create(
        endpoint=endpoint,
        subject=subject,
        token_hash=hash_token(token),
        expires_at=timezone.now() + timedelta(seconds=ttl),
        token_limit=token_limit,
        record_tokens=record_tokens,
        sampling=sampling,
    )
    session.token = token
    return session


def close_proxy_session(session: ProxySession) -> ProxySession:
    """From now on its token gets 401. Closing twice is harmless (the first close time is kept)."""
    with transaction.atomic():
        ProxySession.objects.filter(pk=session.pk, is_open=True).update(is_open=False, closed_at=timezone.now())
    session.refresh_from_db()
    return session


def close_sessions_of(subject: str) -> int:
    """Close every open session recording `subject` (e.g. all attempts of one rollout); how many were open."""
    return ProxySession.objects.filter(subject=subject, is_open=True).update(is_open=False, closed_at=timezone.now())


def proxy_base_url(session: ProxySession) -> str:
    """The OpenAI base URL an agent is given for this session (ends in /v1). Only for a session just opened: the
    token is in the URL and only open_proxy_session's object holds it."""
    if not session.token:
        raise ValueError(f"proxy session #{session.pk}: its token is only known where it was opened")
    return f"{settings.CLAWGYM_PROXY_PUBLIC_URL.rstrip('/')}/proxy/{session.token}/v1"


def close_expired_sessions(now=None) -> int:
    """Close the sessions still open past their expiry (their tokens are refused already); how many.

    A rollout closes its session however the attempt ends, unless its worker died first: such sessions stay open
    until this runs (periodic job `llm.close_stale_sessions`), so open sessions mean agents that may still call.
    """
    now = now or timezone.now()
    return ProxySession.objects.filter(is_open=True, expires_at__lte=now).update(is_open=False, closed_at=now)
