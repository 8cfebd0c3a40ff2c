"""Background entry points of the LLM gateway."""

from jobs.registry import job

from .job_kinds import CLOSE_STALE_SESSIONS_JOB
from .services import close_expired_sessions


@job(CLOSE_STALE_SESSIONS_JOB, title="Close expired proxy sessions")
def close_stale_sessions(ctx) -> dict:
    """Periodic (jobs.periodic): sessions nobody closed (their rollout's worker died) are closed once expired."""
    return {"closed": close_expired_sessions()}
