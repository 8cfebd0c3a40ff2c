"""Job engines: django-q2 on the ORM broker (embedded default) and Celery on Redis (deployment).

The engine is picked by name from settings.CLAWGYM_JOB_ENGINE. An engine that cannot take the job
raises JobEngineError and the JobRun is marked failed with the reason. Nothing ever runs inline instead.
"""

import base64
import json
import logging
import time
from contextlib import contextmanager

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.tasks import async_task

from . import registry
from .models import JobRun

log = logging.getLogger(__name__)

CELERY_TASK = "clawgym.execute_job"


class JobEngineError(RuntimeError):
    """The job could not be handed to the engine (broker down, misconfiguration)."""


class DjangoQEngine:
    """django-q2 with the ORM broker: the queue is a table in the app's own database."""

    name = "django_q"

    def submit(self, run: JobRun) -> None:
        # One cluster serves every queue; the JobRun keeps its queue name for display and for Celery.
        async_task("jobs.runner.execute", run.pk, task_name=f"{run.kind}#{run.pk}", group=run.kind)


class CeleryEngine:
    """Celery with Redis: one queue per kind of worker machine (default, sandbox, gpu)."""

    name = "celery"

    @staticmethod
    @contextmanager
    def _broker():
        """The Celery app and a connection to the broker, connected."""
        app = import_string(settings.CLAWGYM_CELERY_APP)
        # The broker URL is read now (not when the Celery app was configured), so that it follows settings.
        with app.connection_for_write(url=settings.CELERY_BROKER_URL) as conn:
            # A few quick tries ride out a broker restart; a broker that is down fails in about a second.
            conn.ensure_connection(max_retries=2, interval_start=0.2, interval_step=0.3, timeout=5)
            yield app, conn

    def submit(self, run: JobRun) -> None:
        with self._broker() as (app, conn):
            app.send_task(CELERY_TASK, args=[run.pk], queue=run.queue, connection=conn, retry=False, ignore_result=True)

    def redeliver_unclaimed(self, older_than: float, unclaimed) -> list[int]:
        """Put back on its queue each delivery a worker took more than `older_than` seconds ago and never claimed.

        Redis keeps a delivered message in its `unacked` set until the worker acknowledges it after the job (acks_late)
        or the visibility timeout (hours) passes. A delivery no worker will ever claim stays there that long: the
        worker was killed before its pool process claimed the run, or its broker connection was cut, upon which Celery
        drops the deliveries it had not started yet (they "cannot be acked anyway"). `unclaimed(ids)` answers which
        of those runs are still queued in the database; only theirs go back. A worker that still holds one and gets to
        it after all finds it claimed by the other delivery and skips it (jobs.runner._claim). Returns the run ids.
        """
        with self._broker() as (_, conn):
            channel = conn.default_channel
            if not hasattr(channel, "unacked_key"):
                return []  # a broker that is not Redis keeps no such set
            client = channel.client
            tags = client.zrange(channel.unacked_index_key, 0, time.time() - older_than, byscore=True)
            stored = client.hmget(channel.unacked_key, tags) if tags else []
            held = {tag: run_id for tag, run_id in zip(tags, map(_job_run_of, stored)) if run_id is not None}
            waiting = unclaimed(set(held.values())) if held else set()
            for tag, run_id in held.items():
                if run_id in waiting:
                    channel.qos.restore_by_tag(tag, client)
            return sorted(waiting)


def _job_run_of(stored: bytes | None) -> int | None:
    """The JobRun id of an unacknowledged message as kombu's Redis transport stores it ([message, exchange, routing
    key], the body base64-encoded JSON [args, kwargs, embed]); None for any other task or a message it cannot read."""
    try:
        message = json.loads(stored)[0]
        if message["headers"]["task"] != CELERY_TASK:
            return None
        body = message["body"]
        if message["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        run_id = json.loads(body)[0][0]
    except (TypeError, ValueError, KeyError, IndexError):
        return None
    return run_id if isinstance(run_id, int) else None


ENGINES = {"django_q": DjangoQEngine, "celery": CeleryEngine}


def get_engine(name: str | None = None):
    name = name or settings.CLAWGYM_JOB_ENGINE
    try:
        return ENGINES[name]()
    except KeyError:
        raise JobEngineError(f"unknown job engine {name!r}; choose one of {sorted(ENGINES)}") from None


def _new_run(kind: str, *, created_by, parent, queue: str | None, total: int, held: bool, params: dict) -> JobRun:
    """The JobRun a job of `kind` is recorded as (not saved yet)."""
    spec = registry.get(kind)
    queue = queue or spec.queue
    if queue not in registry.QUEUES:
        raise JobEngineError(f"unknown queue {queue!r}; choose one of {registry.QUEUES}")
    subject, subject_url = spec.subject(params) if spec.subject else ("", "")
    return JobRun(
        kind=kind,
        queue=queue,
        engine=settings.CLAWGYM_JOB_ENGINE,
        params=params,
        subject=subject[:300],
        subject_url=subject_url[:500],
        progress_total=total,
        created_by=created_by if created_by is not None and created_by.is_authenticated else None,
        parent=parent,
        held=held,
    )


def submit_on_commit(run: JobRun) -> None:
    """Hand the recorded run to its engine once the current transaction commits (the worker must see the committed
    JobRun and whatever the caller wrote with it). An engine that refuses it fails the run with the reason and raises
    JobEngineError (inside `transaction.atomic()`, when the outermost block commits)."""
    engine = get_engine(run.engine)

    def submit():
        try:
            engine.submit(run)
        except Exception as exc:
            reason = f"The {engine.name} engine did not accept the job: {type(exc).__name__}: {exc}"
            JobRun.objects.filter(pk=run.pk, status=JobRun.Status.QUEUED).update(
                status=JobRun.Status.FAILED, error=reason, finished_at=timezone.now()
            )
            run.refresh_from_db()
            raise JobEngineError(f"could not start {run.kind} job #{run.pk} on {engine.name}: {exc}") from exc

    transaction.on_commit(submit, robust=False)


def enqueue(kind: str, *, created_by=None, parent=None, queue: str | None = None, total: int = 0, **params) -> JobRun:
    """Record a JobRun and hand it to the configured engine once the current transaction commits.

    Raises UnknownJobKind for an unregistered kind and JobEngineError when the engine refuses the job
    (inside `transaction.atomic()`, that happens when the outermost block commits). `params` must be JSON.
    """
    get_engine()  # an unknown engine fails here, before anything is recorded
    run = _new_run(kind, created_by=created_by, parent=parent, queue=queue, total=total, held=False, params=params)
    run.save()
    submit_on_commit(run)
    return run


def hold(kind: str, params: list[dict], *, parent: JobRun, created_by=None) -> int:
    """Record one held run of `kind` per params dict, as children of `parent`, none handed to the engine yet
    (jobs.fanout.release hands them over, a few at a time). Returns how many."""
    get_engine()
    runs = [
        _new_run(kind, created_by=created_by, parent=parent, queue=None, total=0, held=True, params=p) for p in params
    ]
    JobRun.objects.bulk_create(runs, batch_size=500)
    return len(runs)
