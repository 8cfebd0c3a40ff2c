"""The names of the job engine's own background jobs (jobs.registry), in one place."""

PING_JOB = "jobs.ping"  # check_workers and the test workers queue it to see a worker answer
RECOVER_LOST_JOB = "jobs.recover_lost"  # also in jobs.periodic's schedule
