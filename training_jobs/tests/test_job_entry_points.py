"""Every training job's entry point is in training_jobs/jobs.py, the app's one room for them, registered under the
name job_kinds gives it (the services they hand the work to live beside: serving, run_jobs, base_models, …)."""

from jobs import registry
from training_jobs import job_kinds


def test_every_training_job_is_registered_from_the_jobs_module():
    names = {value for key, value in vars(job_kinds).items() if key.endswith("_JOB")}
    assert len(names) == 7
    assert {name: registry.get(name).func.__module__ for name in names} == dict.fromkeys(names, "training_jobs.jobs")
