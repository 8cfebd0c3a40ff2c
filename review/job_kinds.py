"""The names of the review's background jobs (jobs.registry), in one place: jobs.py registers its entry points
under them and the services and views that queue or look up those jobs read them here, so neither imports jobs.py
(whose entry points hand the work to the services)."""

DIAGNOSE_JOB = "review.diagnose"
DIAGNOSE_BATCH_JOB = "review.diagnose_batch"
DIFFICULTY_JOB = "review.difficulty_verdicts"
EXPIRE_CLAIMS_JOB = "review.expire_claims"  # also in jobs.periodic's schedule, by name
SOLVE_JOB = "review.solve"  # the checker on a reviewer's scratch workspace (review.solving)
