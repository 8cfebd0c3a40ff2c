"""What a worker does with a JobRun id, whatever the engine: claim it, run it, record how it ended."""

import logging
import os
import socket
import time
import traceback
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections
from django.db.models import F, Q
from django.utils import timezone

from . import registry
from .models import JobRun

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3


class JobCancelled(Exception):
    pass


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _worker_gone(worker: str) -> bool:
    """True when `worker` ran on this host and its process no longer exists."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class JobContext:
    """Handed to every job function: report progress, write log lines, notice cancellation."""

    FLUSH_SECONDS = 0.5

    def __init__(self, run: JobRun):
        self.run = run
        self._log: list[str] = []
        self._dirty = False
        self._last_flush = 0.0

    @property
    def id(self) -> int:
        return self.run.pk

    def log(self, line: str) -> None:
        stamp = timezone.now().strftime("%H:%M:%S")
        self._log.append(f"{stamp} {line}")
        self._dirty = True
        self._maybe_flush()

    def progress(self, done: int, total: int | None = None, message: str | None = None) -> None:
        """Record progress; raises JobCancelled when someone asked to cancel this job."""
        self.run.progress_done = done
        if total is not None:
            self.run.progress_total = total
        if message is not None:
            self.run.message = message[:300]
        self._dirty = True
        self._maybe_flush(force=total is not None and done >= total)

    def _maybe_flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_flush >= self.FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        updates = {"heartbeat_at": timezone.now()}
        if self._dirty:
            updates.update(
                progress_done=self.run.progress_done,
                progress_total=self.run.progress_total,
                message=self.run.message,
            )
            if self._log:
                tail = (self.run.log_tail + ("\n" if self.run.log_tail else "") + "\n".join(self._log))
                self.run.log_tail = tail[-JobRun.LOG_TAIL_CHARS:]
                updates["log_tail"] = self.run.log_tail
                self._log = []
            self._dirty = False
        JobRun.objects.filter(pk=self.run.pk).update(**updates)
        if JobRun.objects.filter(pk=self.run.pk, cancel_requested=True).exists():
            raise JobCancelled()


def _claim(job_run_id: int) -> JobRun | None:
    """Take the run with a conditional UPDATE, so two deliveries never both run it."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.CLAWGYM_JOB_STALE_SECONDS)
    run = JobRun.objects.filter(pk=job_run_id).first()
    if run is None:
        log.warning("job run %s does not exist; nothing to do", job_run_id)
        return None
    claimable = Q(status=JobRun.Status.QUEUED)
    if run.status == JobRun.Status.RUNNING and (
        (run.heartbeat_at and run.heartbeat_at < stale) or _worker_gone(run.worker)
    ):
        # Its worker died mid-job (the engine delivered it again): run it again, a bounded number of times.
        if run.attempts >= MAX_ATTEMPTS:
            JobRun.objects.filter(pk=run.pk, status=JobRun.Status.RUNNING).update(
                status=JobRun.Status.FAILED,
                finished_at=now,
                error=f"The worker running this job was lost {run.attempts} times ({run.worker}); giving up.",
            )
            return None
        claimable |= Q(status=JobRun.Status.RUNNING, worker=run.worker)
    if run.cancel_requested and run.status == JobRun.Status.QUEUED:
        JobRun.objects.filter(pk=run.pk, status=JobRun.Status.QUEUED).update(
            status=JobRun.Status.CANCELLED, finished_at=now
        )
        return None
    claimed = JobRun.objects.filter(claimable, pk=job_run_id).update(
        status=JobRun.Status.RUNNING,
        started_at=now,
        heartbeat_at=now,
        finished_at=None,
        attempts=F("attempts") + 1,
        worker=worker_id(),
    )
    if not claimed:
        log.info("job run %s is %s; not running it again", job_run_id, run.status)
        return None
    return JobRun.objects.get(pk=job_run_id)


def execute(job_run_id: int) -> str | None:
    """Run one JobRun to its end. Safe to call twice: the second call finds it claimed and returns."""
    close_old_connections()
    run = _claim(job_run_id)
    if run is None:
        return None
    ctx = JobContext(run)
    if run.attempts > 1:
        ctx.log(f"attempt {run.attempts}: the previous worker was lost")
    try:
        spec = registry.get(run.kind)
        result = spec.func(ctx, **run.params)
    except JobCancelled:
        _finish(ctx, JobRun.Status.CANCELLED)
    except Exception as exc:  # the job's own failure: record it, the worker carries on
        log.exception("job %s failed", run)
        _finish(ctx, JobRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}")
    else:
        _finish(ctx, JobRun.Status.SUCCEEDED, result=result)
    finally:
        close_old_connections()
    return JobRun.objects.filter(pk=job_run_id).values_list("status", flat=True).first()


def _finish(ctx: JobContext, status: str, *, error: str = "", result=None) -> None:
    try:
        ctx.flush()
    except JobCancelled:
        if status == JobRun.Status.SUCCEEDED:
            pass  # it finished before it noticed the request: it succeeded
    updates = dict(status=status, finished_at=timezone.now(), heartbeat_at=timezone.now(), error=error[:100_000])
    if result is not None:
        updates["result"] = result
    if status == JobRun.Status.SUCCEEDED and ctx.run.progress_total:
        updates["progress_done"] = ctx.run.progress_total
    JobRun.objects.filter(pk=ctx.run.pk).update(**updates)


def reap_stale(now=None) -> int:
    """Mark running jobs whose worker stopped sending heartbeats as failed. Returns how many."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.CLAWGYM_JOB_STALE_SECONDS)
    count = 0
    for run in JobRun.objects.filter(status=JobRun.Status.RUNNING):
        if (run.heartbeat_at and run.heartbeat_at < stale) or _worker_gone(run.worker):
            count += JobRun.objects.filter(pk=run.pk, status=JobRun.Status.RUNNING, worker=run.worker).update(
                status=JobRun.Status.FAILED,
                finished_at=now,
                error=f"Worker lost: {run.worker} stopped without finishing the job "
                f"(last heartbeat {run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC).",
            )
    return count
