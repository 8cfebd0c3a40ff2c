"""Workers that say they are alive: each worker process beats (a Worker row) while it runs, whatever the engine.

A django-q2 cluster beats from each of its worker processes (they all take every queue); a Celery worker beats from
its main process, with the queues it consumes. The beat is a daemon thread, so a worker busy with a long job still
beats; a killed worker just stops, and /healthz no longer counts it once its last beat is older than
CLAWGYM_WORKER_SEEN_SECONDS. `seen_by_queue` is what /healthz and /metrics read; `queue_wait` is what a page says of
a queued run (no worker on its queue, or the runs before it). A worker starting also re-queues the runs a dead one
left "running" (`recover_on_worker_start`, jobs.runner.recover_lost).
"""

import logging
import socket
import threading
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connections
from django.dispatch import receiver
from django.utils import timezone
from django_q.signals import post_spawn

from .models import JobRun, Worker
from .registry import QUEUES
from .runner import recover_lost, worker_id

log = logging.getLogger(__name__)

FORGET_AFTER = timedelta(days=1)  # rows of workers not seen for this long are removed (forget_gone)


def beat(name: str, engine: str, queues, started_at, slots: int = 1) -> None:
    """Record that worker `name` is alive now, taking jobs from `queues`, `slots` at a time."""
    now = timezone.now()
    updated = Worker.objects.filter(name=name).update(seen_at=now, queues=",".join(queues), engine=engine, slots=slots)
    if not updated:
        Worker.objects.update_or_create(
            name=name,
            defaults={
                "host": socket.gethostname(),
                "engine": engine,
                "queues": ",".join(queues),
                "started_at": started_at,
                "seen_at": now,
                "slots": slots,
            },
        )


class Beat(threading.Thread):
    """Beats for this process every CLAWGYM_WORKER_BEAT_SECONDS until stopped; a failed beat is logged and retried."""

    def __init__(self, engine: str, queues, slots: int = 1):
        super().__init__(name="worker-beat", daemon=True)
        self.worker, self.engine, self.queues, self.slots = worker_id(), engine, list(queues), slots
        self.started_at = timezone.now()
        self._stop_event = threading.Event()

    def run(self):
        try:
            while True:
                try:
                    close_old_connections()  # a connection the database dropped (a restart) is not reused
                    beat(self.worker, self.engine, self.queues, self.started_at, self.slots)
                except Exception:  # the database may be restarting: the next beat may get through
                    log.exception("worker beat of %s failed", self.worker)
                if self._stop_event.wait(settings.CLAWGYM_WORKER_BEAT_SECONDS):
                    break
        finally:
            connections.close_all()  # this thread's connections only

    def stop(self, *, forget: bool = True) -> None:
        """Stop beating; with `forget`, remove the row (a worker that shuts down cleanly is gone at once)."""
        self._stop_event.set()
        self.join(timeout=10)
        if forget:
            try:
                Worker.objects.filter(name=self.worker).delete()
            except Exception:
                log.exception("could not remove the worker row of %s", self.worker)
            finally:
                connections.close_all()


_beat: Beat | None = None


def start_beat(engine: str, queues, *, slots: int = 1) -> Beat:
    """Start this process's beat (once per process: a forked child starts its own)."""
    global _beat
    if _beat is None or not _beat.is_alive():
        _beat = Beat(engine, queues, slots)
        _beat.start()
    return _beat


def stop_beat() -> None:
    global _beat
    if _beat is not None:
        _beat.stop()
        _beat = None


def seen_by_queue(now=None) -> dict[str, int]:
    """How many workers were seen recently for each queue (every queue named, 0 when none)."""
    since = (now or timezone.now()) - timedelta(seconds=settings.CLAWGYM_WORKER_SEEN_SECONDS)
    counts = dict.fromkeys(QUEUES, 0)
    for queues in Worker.objects.filter(seen_at__gte=since).values_list("queues", flat=True):
        for queue in queues.split(","):
            if queue in counts:
                counts[queue] += 1
    return counts


def forget_gone(now=None) -> int:
    """Remove the rows of workers not seen for a day; how many."""
    return Worker.objects.filter(seen_at__lt=(now or timezone.now()) - FORGET_AFTER).delete()[0]


@dataclass(frozen=True)
class QueueWait:
    """Why a queued run has not started: the runs of its queue before it and running, the workers taking it."""

    queue: str
    ahead: int  # runs queued on the same queue before this one (the engines take them in that order)
    running: int  # runs of that queue running now
    workers: int  # workers seen on that queue within CLAWGYM_WORKER_SEEN_SECONDS
    seen_seconds: int
    engine: str


def queue_wait(run) -> QueueWait | None:
    """What a queued JobRun waits for (None once it is no longer queued): three small queries."""
    if run is None or run.status != JobRun.Status.QUEUED:
        return None
    on_queue = JobRun.objects.filter(queue=run.queue)
    return QueueWait(
        queue=run.queue,
        ahead=on_queue.filter(status=JobRun.Status.QUEUED, pk__lt=run.pk).count(),
        running=on_queue.filter(status=JobRun.Status.RUNNING).count(),
        workers=seen_by_queue().get(run.queue, 0),
        seen_seconds=settings.CLAWGYM_WORKER_SEEN_SECONDS,
        engine=settings.CLAWGYM_JOB_ENGINE,
    )


def recover_on_worker_start(engine_name: str) -> None:
    """Re-queue the runs a dead worker left "running". Engines call this when a worker starts."""
    try:
        done = recover_lost()
    except Exception:  # a worker that cannot recover others' runs can still do new work
        log.exception("%s worker start: recovering lost job runs failed", engine_name)
        return
    if any(done.values()):
        log.warning("%s worker start: lost job runs %s", engine_name, done)


@receiver(post_spawn, dispatch_uid="clawgym-jobs-recover")
def _recover_when_a_django_q_worker_starts(sender, proc_name, **kwargs):
    # Sent in each new django-q worker process, also when the cluster replaces one that died mid-job.
    recover_on_worker_start("django_q")


@receiver(post_spawn, dispatch_uid="clawgym-jobs-worker-beat")
def _django_q_worker_spawned(sender, proc_name, **kwargs):
    # Sent in each new django-q worker process; one cluster serves every queue (jobs.engine.DjangoQEngine).
    start_beat("django_q", QUEUES)
