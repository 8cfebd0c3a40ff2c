"""The names of evaluation's background jobs (jobs.registry), in one place: jobs.py and run_jobs.py register their
entry points under them and the services, views and API that queue or look up those jobs read them here."""

ROLLOUT_JOB = "evaluation.run_rollout"
REGRADE_JOB = "evaluation.regrade"
TOP_UP_JOB = "evaluation.top_up_runs"  # also in jobs.periodic's schedule
SCAN_JOB = "evaluation.scan_run"  # queued by runs as they finish, and on demand (services.scans)
