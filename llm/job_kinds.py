"""The names of the model layer's background jobs (jobs.registry), in one place."""

CLOSE_STALE_SESSIONS_JOB = "llm.close_stale_sessions"  # also in jobs.periodic's schedule, by name
