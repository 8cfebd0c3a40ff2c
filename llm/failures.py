"""How the client and the proxy say that an upstream failed to deliver its answer, and how big an answer may be.

An answer is read as it arrives and counted; past CLAWGYM_MAX_RESPONSE_BYTES reading stops (the connection is
dropped, the rest never read), so no answer is ever held, stored or shown larger than that. The call is recorded as
failed with `too_large`'s text: the model's server misbehaved, the model was not wrong (a capped answer is never
a score, and the client retries it like any unusable body).

The proxy's error texts for an answer the upstream did not deliver (it timed out, broke off, or was over the
limit) begin with one of ANSWER_FAILURES. evaluation.infra reads them: a rollout that met one is the
infrastructure's failure, retried, never the model's 0, whatever the harness made of it (an error, or running out of
time while the upstream stalled).
"""

from django.conf import settings

TIMED_OUT = "upstream timed out"  # no answer began within the endpoint's timeout
BROKE_OFF = "upstream broke off the answer"  # a whole answer stopped coming (a read timed out, the connection died)
STREAM_BROKE_OFF = "upstream stream broke off"  # the same for a stream, once its first bytes were passed on
TOO_LARGE = "upstream answer over the limit"
ANSWER_FAILURES = (TIMED_OUT, BROKE_OFF, STREAM_BROKE_OFF, TOO_LARGE)


def answer_limit() -> int:
    """The most bytes one answer may have, as they arrive (every byte of a stream counted)."""
    return settings.CLAWGYM_MAX_RESPONSE_BYTES


def too_large(limit: int, declared: int | None = None) -> str:
    said = f" (it declared {declared} bytes)" if declared is not None else ""
    return f"{TOO_LARGE} of {limit} bytes (CLAWGYM_MAX_RESPONSE_BYTES){said}; the rest was not read"


def declared_length(headers) -> int | None:
    """The Content-Length an answer's headers declare, when it is a number."""
    value = (headers.get("content-length") or "").strip()
    return int(value) if value.isascii() and value.isdigit() else None


def is_answer_failure(error: str) -> bool:
    """Whether a recorded call's error says the upstream did not deliver its answer (not that the model erred)."""
    return bool(error) and error.startswith(ANSWER_FAILURES)
