"""The names of the studies' background jobs (jobs.registry), in one place: jobs.py registers them; the services
and the kinds (whose evaluation runs queue the advance job as they finish) read them here."""

ADVANCE_JOB = "studies.advance"  # one step of one study: each cell looks at its objects and starts what is next
ADVANCE_RUNNING_JOB = "studies.advance_running"  # periodic (jobs.periodic): every running study, one step
