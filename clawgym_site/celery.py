"""The Celery app used when CLAWGYM_JOB_ENGINE=celery. Workers run `celery -A clawgym_site worker -Q default,sandbox,gpu`."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")

app = Celery("clawgym")
app.config_from_object("django.conf:settings", namespace="CELERY")


@app.task(name="clawgym.execute_job", acks_late=True, reject_on_worker_lost=True)
def execute_job(job_run_id: int) -> None:
    from jobs.runner import execute

    execute(job_run_id)
