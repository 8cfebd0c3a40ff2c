"""The Celery app used when CLAWGYM_JOB_ENGINE=celery.

Workers: `celery -A clawgym_site worker -Q default,sandbox,gpu` (a sandbox or GPU machine listens on its
queue only). Settings come from Django settings with the CELERY_ prefix. Messages are acknowledged
after the job (acks_late) and put back when the worker process dies, so a killed worker's job is
delivered again; jobs.runner decides whether to run it again.

Periodic jobs: `celery -A clawgym_site beat` (one process for the deployment) sends the ticks of jobs.periodic's
table; a `default` worker runs each tick, which queues the job itself on its own queue.
"""

import os

from celery import Celery
from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")

from jobs.periodic import CELERY_TICK_TASK, beat_schedule, tick  # noqa: E402  (reads the settings named above)

app = Celery("clawgym")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.beat_schedule = beat_schedule()


@app.task(name="clawgym.execute_job", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def execute_job(job_run_id: int) -> None:
    from jobs.runner import execute

    execute(job_run_id)


@app.task(name=CELERY_TICK_TASK, ignore_result=True)
def periodic_tick(kind: str) -> int | None:
    return tick(kind)


@worker_ready.connect
def recover_lost_runs(sender=None, **kwargs):
    # When the whole worker was killed, its unacknowledged message only comes back after the broker's
    # visibility timeout (hours); a worker starting on the same host re-queues such runs at once.
    from django.db import connections

    from jobs.workers import recover_on_worker_start, start_beat

    try:
        recover_on_worker_start("celery")
    finally:
        connections.close_all()  # the main process runs no jobs; do not keep a connection open
    # The main process beats for the worker, with the queues it consumes (-Q) and its concurrency (-c), so /healthz
    # can count it and jobs.fanout knows how many of a batch's jobs it takes at once.
    slots = getattr(getattr(sender, "controller", None), "concurrency", None) or 1
    start_beat("celery", sorted(sender.app.amqp.queues.consume_from), slots=slots)


@worker_shutdown.connect
def forget_worker(sender=None, **kwargs):
    from jobs.workers import stop_beat

    stop_beat()


@worker_process_shutdown.connect
def release_sandbox_pools(**kwargs):
    # A pool process ends with os._exit, where atexit does not run: the volumes and ready containers it kept for its
    # next runs are released here (sandbox.backends.process_exit).
    from sandbox.backends.process_exit import release

    release()
