"""Job engines: django-q2 on the ORM broker (embedded default) and Celery on Redis (deployment).

The engine is picked by name from settings.CLAWGYM_JOB_ENGINE. An engine that cannot take the job
raises JobEngineError; the JobRun is then marked failed. Nothing ever runs inline instead.
"""

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from . import registry
from .models import JobRun

log = logging.getLogger(__name__)


class JobEngineError(RuntimeError):
    """The job could not be handed to the engine (broker down, misconfiguration)."""


class DjangoQEngine:
    name = "django_q"

    def submit(self, run: JobRun) -> None:
        from django_q.tasks import async_task

        # django-q2 runs one cluster per deployment; the queue name is kept on the JobRun for display.
        async_task("jobs.runner.execute", run.pk, task_name=f"{run.kind}#{run.pk}", group=run.kind)


class CeleryEngine:
    name = "celery"

    def submit(self, run: JobRun) -> None:
        from clawgym_site.celery import app

        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=5)
            app.send_task(
                "clawgym.execute_job", args=[run.pk], queue=run.queue, connection=conn, retry=False
            )


ENGINES = {"django_q": DjangoQEngine, "celery": CeleryEngine}


def get_engine(name: str | None = None):
    name = name or settings.CLAWGYM_JOB_ENGINE
    try:
        return ENGINES[name]()
    except KeyError:
        raise JobEngineError(f"unknown job engine {name!r}; choose one of {sorted(ENGINES)}") from None


def enqueue(kind: str, *, created_by=None, parent=None, queue: str | None = None, total: int = 0, **params) -> JobRun:
    """Record a JobRun and hand it to the configured engine once the current transaction commits.

    Raises UnknownJobKind for an unregistered kind and JobEngineError when the engine refuses it.
    """
    spec = registry.get(kind)
    queue = queue or spec.queue
    if queue not in registry.QUEUES:
        raise JobEngineError(f"unknown queue {queue!r}; choose one of {registry.QUEUES}")
    engine = get_engine()
    run = JobRun.objects.create(
        kind=kind,
        queue=queue,
        engine=engine.name,
        params=params,
        progress_total=total,
        created_by=created_by if created_by is not None and created_by.is_authenticated else None,
        parent=parent,
    )

    def submit():
        try:
            engine.submit(run)
        except Exception as exc:
            JobRun.objects.filter(pk=run.pk).update(
                status=JobRun.Status.FAILED,
                error=f"The {engine.name} engine did not accept the job: {exc!r}",
                finished_at=timezone.now(),
            )
            run.refresh_from_db()
            raise JobEngineError(f"could not start {kind} job #{run.pk} on {engine.name}: {exc}") from exc

    # The worker must see the committed JobRun (and whatever the caller wrote with it).
    transaction.on_commit(submit, robust=False)
    return run
