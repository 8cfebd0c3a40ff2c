"""How many jobs of one run an engine holds at once, and handing it the next ones as those finish.

A batch of 20,000 items used to put 20,000 messages on the broker at once: a worker restart, a cancel or a second
batch behind it then had all of them to get through, and the jobs page listed them all as queued on the engine. Now
a batch job records its children *held* (JobRun.held: in the database, not on the engine), and `release` hands the
engine the next ones while fewer than `limit(queue)` of its children are queued there or running. Each child that
ends releases the next (jobs.runner.execute), and the periodic jobs.recover_lost releases what a killed worker left
waiting. Evaluation runs keep their rollouts the same way with the same limit (evaluation.services.run_progress.top_up).

The limit: settings.CLAWGYM_IN_FLIGHT when set, else twice the slots of the workers seen on the queue (so a slot
that frees finds its next job already on the broker), at least CLAWGYM_IN_FLIGHT_MIN.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .engine import submit_on_commit
from .models import JobRun, Worker

log = logging.getLogger(__name__)


def capacity(queue: str) -> int:
    """How many jobs of `queue` the workers seen within CLAWGYM_WORKER_SEEN_SECONDS run at once."""
    since = timezone.now() - timedelta(seconds=settings.CLAWGYM_WORKER_SEEN_SECONDS)
    return sum(
        slots
        for queues, slots in Worker.objects.filter(seen_at__gte=since).values_list("queues", "slots")
        if queue in queues.split(",")
    )


def limit(queue: str) -> int:
    """How many jobs of one run may be on the engine (queued there or running) at once."""
    if settings.CLAWGYM_IN_FLIGHT > 0:
        return settings.CLAWGYM_IN_FLIGHT
    return max(settings.CLAWGYM_IN_FLIGHT_MIN, 2 * capacity(queue))


def release(parent_id: int) -> int:
    """Hand the engine the parent's next held children (oldest first) while fewer than the limit are on it.
    Returns how many. The parent's row is locked meanwhile (PostgreSQL), so two children ending together do not both
    fill the same room; on SQLite the database takes one writer at a time."""
    with transaction.atomic():
        if not list(JobRun.objects.select_for_update().filter(pk=parent_id).values_list("pk", flat=True)):
            return 0  # (a list, not exists(): the row is read, so it is locked)
        children = JobRun.objects.filter(parent_id=parent_id)
        waiting = children.filter(held=True, status=JobRun.Status.QUEUED).order_by("pk")
        queue = waiting.values_list("queue", flat=True).first()
        if queue is None:
            return 0
        room = limit(queue) - children.filter(held=False, status__in=JobRun.ACTIVE).count()
        if room <= 0:
            return 0
        ids = list(waiting.values_list("pk", flat=True)[:room])
        JobRun.objects.filter(pk__in=ids, held=True, status=JobRun.Status.QUEUED).update(held=False)
        runs = list(JobRun.objects.filter(pk__in=ids, held=False, status=JobRun.Status.QUEUED).order_by("pk"))
        for run in runs:
            submit_on_commit(run)
    return len(runs)


def release_waiting() -> int:
    """Release the held children of every parent that has some (after a worker was killed between a child's end
    and its release). Returns how many runs were handed over."""
    held = JobRun.objects.filter(held=True, status=JobRun.Status.QUEUED)
    released = 0
    with transaction.atomic():  # a parent deleted meanwhile (SET_NULL) holds nothing back any more
        for run in held.filter(parent__isnull=True).select_for_update():
            JobRun.objects.filter(pk=run.pk).update(held=False)
            submit_on_commit(run)
            released += 1
    for parent_id in sorted(set(held.exclude(parent__isnull=True).values_list("parent_id", flat=True))):
        try:
            released += release(parent_id)
        except Exception:  # an engine that refuses one batch's children does not stop the others'
            log.exception("releasing the held children of job run %s failed", parent_id)
    return released
