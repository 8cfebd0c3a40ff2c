"""What a worker does with a JobRun id, whatever the engine: claim it, run it, record how it ended.

Ownership: a worker owns a run while `status == running` and `worker == its id`. Every write it makes
is conditional on both, so a run that was taken over (its first worker was judged lost) is never
overwritten by the old worker if that one turns out to be alive after all.

A worker that dies mid-job leaves its run "running". Such a run is *lost* when its worker process is
gone (same host) or its heartbeat is older than CLAWGYM_JOB_STALE_SECONDS (any host; a thread beats
while the job runs, so a slow job step does not look dead). Lost runs are run again, up to
MAX_ATTEMPTS, when an engine delivers them again or a worker starts (`recover_lost`), and marked
failed with the reason by `reap_stale` (the `reap_jobs` command). A lost run someone asked to cancel
is not run again: it ends cancelled. Both first remove the scratch folders (workspaces) that dead processes left on
this machine (jobs.scratch), so a run seen lost or queued again has no workspace of a dead worker left here.
"""

import json
import logging
import os
import socket
import threading
import time
import traceback
from datetime import timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection, connections
from django.db.models import F, Q, TextField, Value
from django.db.models.functions import Concat, Right
from django.utils import timezone

from lib import nulsafe

from . import fanout, registry, scratch
from .engine import get_engine, hold
from .models import JobRun

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
# How long a job's claim, or the record of how it ended, waits for an unreachable database (see when_reachable).
CLAIM_WAIT_SECONDS = 60


class JobCancelled(Exception):
    """Someone asked to cancel the run; raised from JobContext.progress."""


class JobLost(Exception):
    """This worker no longer owns the run (another worker took it over, or it was reaped)."""


# --- who runs a job -----------------------------------------------------------------------------------------


def process_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (Linux): state, parent, process group, ...; None when the
    process is not there. A zombie (exited, not reaped yet) is still there, with state Z or X."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; the fields after the last ")" do not.
    return stat.rpartition(")")[2].split()


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux); None when it is not running or unknown.

    Part of the worker id, so that a pid reused by a new process (common in containers) is not
    mistaken for the worker that died.
    """
    fields = process_stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None  # gone, or killed and not yet reaped by its parent: as gone as it gets
    return fields[19]


def worker_id() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_process_start(pid) or ''}"


def worker_gone(worker: str) -> bool:
    """True when `worker` ran on this host and that process no longer exists. Other hosts: unknown (False)."""
    host, pid, start = (worker.split(":") + ["", "", ""])[:3]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if start:
        return _process_start(int(pid)) != start
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _stale_before(now):
    return now - timedelta(seconds=settings.CLAWGYM_JOB_STALE_SECONDS)


def lost_reason(run: JobRun, now=None) -> str | None:
    """Why a running run counts as lost, or None while its worker is believed alive."""
    if run.status != JobRun.Status.RUNNING:
        return None
    if worker_gone(run.worker):
        return f"its worker {run.worker} exited without finishing it"
    beat = run.heartbeat_at or run.started_at or run.created_at
    if beat < _stale_before(now or timezone.now()):
        return f"its worker {run.worker} sent no heartbeat since {beat:%Y-%m-%d %H:%M:%S} UTC"
    return None


def append_log(text: str):
    """An update expression appending `text` to the log tail in the database, keeping only its end.

    Appending in SQL (not in Python) keeps lines written by others, e.g. who asked to cancel. The text goes in as the
    field stores it (NUL escaped, lib.nulsafe): an expression's value does not pass through the field.
    """
    return Right(Concat(F("log_tail"), Value(nulsafe.escape(text)), output_field=TextField()), JobRun.LOG_TAIL_CHARS)


def log_line(text: str) -> str:
    return f"{timezone.now():%H:%M:%S} {text}\n"


# --- the job's view of its run ------------------------------------------------------------------------------


class JobContext:
    """Handed to every job function: report progress, write log lines, notice cancellation.

    Writes are batched: at most one UPDATE every FLUSH_SECONDS, plus one at the end. They use the job's
    own database connection, so call progress() and log() outside `transaction.atomic()` blocks: inside
    one, nobody sees them until it commits.
    """

    FLUSH_SECONDS = 0.5

    def __init__(self, run: JobRun):
        self.run = run
        self._pending: list[str] = []
        self._dirty = False
        self._last_flush = 0.0
        self.cancel_requested = False  # seen at the last flush
        self.failed_items = 0
        self.items_total = 0
        self.failure_reason = ""

    def items_failed(self, count: int, *, of: int, reason: str = "") -> None:
        """How many of the job's `of` items failed although the job went on: the run ends "completed with
        failures", or failed when every one of them did (a job that did nothing has not succeeded). `reason` is the
        failed run's error (default: its items failed, see the log and the result)."""
        self.failed_items = count
        self.items_total = of
        self.failure_reason = reason

    @property
    def id(self) -> int:
        return self.run.pk

    def log(self, line: str) -> None:
        self._pending.append(log_line(line))
        self._maybe_flush()

    def progress(self, done: int, total: int | None = None, message: str | None = None) -> None:
        """Record progress. Raises JobCancelled (at most FLUSH_SECONDS late) when a cancel was requested."""
        self.run.progress_done = done
        if total is not None:
            self.run.progress_total = total
        if message is not None:
            self.run.message = message[:300]
        self._dirty = True
        self._maybe_flush()
        if self.cancel_requested:
            raise JobCancelled()

    def fan_out(self, kind: str, param: str, values: list, noun: str) -> int:
        """Queue one `kind` run per value (as `param=value`), as children of this run, so they spread across workers.

        The batch jobs' one body: it returns once they are recorded (a waiting job would hold a worker its children
        need; JobRun.batch() tells how far they are). They are recorded held and handed to the engine a few at a time
        (jobs.fanout: at most fanout.limit on it at once, the next as one ends). A second delivery records only the
        values that have no child yet. Returns how many children the run has in all.
        """
        queued = {child.params.get(param) for child in JobRun.objects.filter(parent=self.run).only("params")}
        todo = [value for value in values if value not in queued]
        self.progress(0, len(todo), f"queueing {noun}")
        hold(kind, [{param: value} for value in todo], parent=self.run, created_by=self.run.created_by)
        self.progress(len(todo), len(todo))
        released = fanout.release(self.run.pk)
        self.log(
            f"queued {len(todo)} {noun}"
            + (f" ({len(queued)} were queued before)" if queued else "")
            + f"; {released} handed to the workers now, the rest as those finish"
        )
        return len(todo) + len(queued)

    def _maybe_flush(self) -> None:
        if time.monotonic() - self._last_flush >= self.FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Write what is pending and the heartbeat; note a cancel request. Raises JobLost if not ours any more."""
        self._last_flush = time.monotonic()
        updates = {"heartbeat_at": timezone.now()}
        if self._dirty:
            updates.update(
                progress_done=self.run.progress_done,
                progress_total=self.run.progress_total,
                message=self.run.message,
            )
        if self._pending:
            updates["log_tail"] = append_log("".join(self._pending))
        owned = JobRun.objects.filter(pk=self.run.pk, status=JobRun.Status.RUNNING, worker=self.run.worker)
        updated = owned.update(**updates)
        self._dirty, self._pending = False, []  # written (a write the database refused keeps them for the next)
        if not updated:
            raise JobLost(f"job run {self.run.pk} is no longer owned by {self.run.worker}")
        self.cancel_requested = owned.filter(cancel_requested=True).exists()


class _Heartbeat(threading.Thread):
    """Beats for the run while its job works, so that a long step without progress does not look dead."""

    def __init__(self, run: JobRun):
        super().__init__(name=f"heartbeat-{run.pk}", daemon=True)
        self.run_id, self.worker = run.pk, run.worker
        self.interval = max(1.0, min(30.0, settings.CLAWGYM_JOB_STALE_SECONDS / 5))
        self._stop_event = threading.Event()

    def run(self):
        try:
            while not self._stop_event.wait(self.interval):
                try:
                    JobRun.objects.filter(pk=self.run_id, status=JobRun.Status.RUNNING, worker=self.worker).update(
                        heartbeat_at=timezone.now()
                    )
                except Exception:  # a database hiccup must not end the beats; the next one may get through
                    log.exception("heartbeat for job run %s failed", self.run_id)
        finally:
            connections.close_all()  # this thread's connections only

    def stop(self):
        self._stop_event.set()
        self.join(timeout=10)


# --- running a run ------------------------------------------------------------------------------------------


def _fail(run: JobRun, reason: str, now) -> int:
    """Mark a run that `run.worker` owned as failed; 0 when someone else changed it first."""
    return JobRun.objects.filter(pk=run.pk, status=run.status, worker=run.worker).update(
        status=JobRun.Status.FAILED,
        finished_at=now,
        error=reason,
        log_tail=append_log(log_line(reason)),
    )


def _give_up(run: JobRun, reason: str, now) -> str | None:
    """End a lost run that is not run again: cancelled when someone asked for that, else failed.

    Returns the status it ended with, or None when someone else changed the run first.
    """
    owned = JobRun.objects.filter(pk=run.pk, status=run.status, worker=run.worker)
    if run.cancel_requested:
        note = log_line(f"worker lost: {reason}; not run again: cancel was requested")
        ended = owned.update(status=JobRun.Status.CANCELLED, finished_at=now, log_tail=append_log(note))
        return JobRun.Status.CANCELLED if ended else None
    ended = _fail(run, f"Worker lost: {reason}; gave up after {run.attempts} attempts.", now)
    return JobRun.Status.FAILED if ended else None


def _claim(job_run_id: int) -> JobRun | None:
    """Take the run with a conditional UPDATE, so that two deliveries never both run it."""
    now = timezone.now()
    run = JobRun.objects.filter(pk=job_run_id).first()
    if run is None:
        log.warning("job run %s does not exist; nothing to do", job_run_id)
        return None
    claimable = Q(status=JobRun.Status.QUEUED)
    reason = lost_reason(run, now)
    if reason:
        # The engine delivered it again because its worker died: run it again, a bounded number of times.
        _sweep_scratch()  # the dead worker's workspaces go before its run is taken over or given up
        if run.cancel_requested or run.attempts >= MAX_ATTEMPTS:
            _give_up(run, reason, now)
            return None
        claimable |= Q(status=JobRun.Status.RUNNING, worker=run.worker)
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


def when_reachable(write, what: str, *, seconds: float = CLAIM_WAIT_SECONDS):
    """write(), waiting out a database that does not answer (a restart, a failover), bounded; returns its result.

    A connection the database dropped stays broken until closed, so each try after the first gets a new one. Never
    inside a transaction (a test calling execute() directly): there the error is the caller's.
    """
    deadline = time.monotonic() + seconds
    while True:
        try:
            return write()
        except (OperationalError, InterfaceError):
            if time.monotonic() > deadline or connection.in_atomic_block:
                raise
            log.warning("%s: the database does not answer; trying again in a second", what)
            connection.close()
            time.sleep(1.0)


def _claim_when_reachable(job_run_id: int) -> JobRun | None:
    # The engine acknowledges a delivered job whatever execute() raises, so a claim that failed on a database restart
    # would leave its run queued forever with its message gone (found by bench/load_bench.py's PostgreSQL restart).
    return when_reachable(lambda: _claim(job_run_id), f"claiming job run {job_run_id}")


def _drop_stale_connections() -> None:
    # Workers reuse processes for many jobs: drop connections the database closed meanwhile. Never inside
    # a caller's transaction (a test calling execute() directly): closing would break that transaction.
    if not connection.in_atomic_block:
        close_old_connections()


def execute(job_run_id: int) -> str | None:
    """Run one JobRun to its end and return its final status.

    Safe to call twice: a call that finds the run already claimed or finished does nothing.
    """
    _drop_stale_connections()
    try:
        run = _claim_when_reachable(job_run_id)
        if run is None:
            return JobRun.objects.filter(pk=job_run_id).values_list("status", flat=True).first()
        ctx = JobContext(run)
        heartbeat = _Heartbeat(run)
        heartbeat.start()
        error, result = "", None
        try:
            if run.attempts > 1:
                ctx.log(f"attempt {run.attempts} of {MAX_ATTEMPTS}: a previous worker was lost before finishing")
            spec = registry.get(run.kind)
            result = spec.func(ctx, **run.params)
            json.dumps(result)  # JSONField would fail later, after the run was marked done
            status = JobRun.Status.SUCCEEDED
        except JobLost as exc:
            log.warning("%s; leaving it to its new owner", exc)
            return None
        except JobCancelled:
            status = JobRun.Status.CANCELLED
        except Exception as exc:  # the job's own failure: record it; the worker carries on
            log.exception("job %s failed", run)
            status, result = JobRun.Status.FAILED, None
            error = f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}"
        finally:
            heartbeat.stop()
        # A job that failed on a database restart must still be seen to have ended once the database is back.
        when_reachable(lambda: _finish(ctx, status, error=error, result=result), f"recording how {run} ended")
        if run.parent_id:
            _release_siblings(run.parent_id)
        return JobRun.objects.filter(pk=job_run_id).values_list("status", flat=True).first()
    finally:
        _drop_stale_connections()


def _release_siblings(parent_id: int) -> None:
    """A child ended: hand the engine its parent's next held child. A failure here is logged; the periodic
    recover_lost releases what is left waiting."""
    try:
        fanout.release(parent_id)
    except Exception:
        log.exception("releasing the next children of job run %s failed", parent_id)


def _finish(ctx: JobContext, status: str, *, error: str = "", result=None) -> None:
    try:
        ctx.flush()
    except JobLost as exc:
        log.warning("%s; not recording how it ended", exc)
        return
    now = timezone.now()
    if status == JobRun.Status.SUCCEEDED and ctx.items_total and ctx.failed_items >= ctx.items_total:
        status = JobRun.Status.FAILED
        error = error or ctx.failure_reason or all_failed_error(ctx.failed_items)
    updates = dict(status=status, finished_at=now, heartbeat_at=now, error=error[:100_000], result=result)
    if status == JobRun.Status.SUCCEEDED and ctx.run.progress_total:
        updates["progress_done"] = ctx.run.progress_total
    if result is not None:  # also a run whose every item failed: its result lists the failures
        updates["failed_items"] = ctx.failed_items
        updates["items_total"] = ctx.items_total
    if status == JobRun.Status.CANCELLED:
        updates["log_tail"] = append_log(log_line("stopped: cancel requested"))
    JobRun.objects.filter(pk=ctx.run.pk, status=JobRun.Status.RUNNING, worker=ctx.run.worker).update(**updates)


def all_failed_error(count: int) -> str:
    which = "Its only item" if count == 1 else f"All {count} of its items"
    return f"{which} failed: the log and the result say why."


# --- lost workers -------------------------------------------------------------------------------------------


def _sweep_scratch() -> None:
    """Remove the scratch folders of dead processes on this machine. Never in the way of ending lost runs."""
    try:
        scratch.sweep()
    except Exception:
        log.exception("removing the scratch folders of dead workers failed")


_RECOVERIES: list = []


def register_recovery(sweep) -> None:
    """Another app's sweep of the work lost workers left "running" beside their job runs (evaluation: rollouts). It
    runs whenever lost runs are recovered or reaped: as a worker starts, periodically, and by `reap_jobs`; so such
    work never waits for a later job of its kind to notice it."""
    if sweep not in _RECOVERIES:
        _RECOVERIES.append(sweep)


def _sweep_recoveries() -> None:
    for sweep in _RECOVERIES:
        try:
            sweep()
        except Exception:  # one app's sweep failing must not stop the others, nor the recovery of the job runs
            log.exception("sweeping what lost workers left (%s) failed", getattr(sweep, "__qualname__", sweep))


def _lost_runs(now):
    for run in JobRun.objects.filter(status=JobRun.Status.RUNNING).order_by("pk"):
        reason = lost_reason(run, now)
        if reason:
            yield run, reason


def reap_stale(now=None) -> int:
    """End running jobs whose worker is lost: failed with the reason (cancelled if that was asked for).

    Returns how many.
    """
    now = now or timezone.now()
    _sweep_scratch()
    count = 0
    for run, reason in _lost_runs(now):
        if run.cancel_requested:
            count += _give_up(run, reason, now) is not None
        else:
            count += _fail(run, f"Worker lost: {reason}.", now)
    _sweep_recoveries()
    return count


def redeliver_unclaimed(now=None) -> list[int]:
    """Queued runs whose delivery a worker took more than CLAWGYM_JOB_STALE_SECONDS ago without claiming it: their
    messages go back on their queues (Celery on Redis; jobs.engine.CeleryEngine.redeliver_unclaimed says how a
    delivery gets stuck). Returns their ids; [] when no run of that engine has been queued that long, or the broker
    does not answer (the next recovery tries again)."""
    now = now or timezone.now()
    stale = settings.CLAWGYM_JOB_STALE_SECONDS
    queued = JobRun.objects.filter(status=JobRun.Status.QUEUED, engine="celery")
    if not queued.filter(created_at__lt=_stale_before(now)).exists():
        return []

    def unclaimed(ids: set[int]) -> set[int]:
        return set(queued.filter(pk__in=ids).values_list("pk", flat=True))

    try:
        redelivered = get_engine("celery").redeliver_unclaimed(stale, unclaimed)
    except Exception:  # a broker down now is no reason to stop recovering the runs the database knows about
        log.exception("handing unclaimed deliveries back to the broker failed")
        return []
    if redelivered:
        log.warning("job runs delivered but never claimed, handed back to the broker: %s", redelivered)
    return redelivered


def recover_lost(now=None) -> dict:
    """Queue lost runs again on their engine (bounded attempts); end those out of attempts or cancelled.

    Called when a worker starts: a worker killed mid-job is usually followed by a new one on the same host. Runs
    delivered to a worker that never claimed them go back to the broker too (`redeliver_unclaimed`).
    Returns the run ids by outcome: {"requeued": [...], "failed": [...], "cancelled": [...], "redelivered": [...]}.
    """
    now = now or timezone.now()
    _sweep_scratch()
    done = {"requeued": [], "failed": [], "cancelled": [], "redelivered": redeliver_unclaimed(now)}
    for run, reason in _lost_runs(now):
        if run.cancel_requested or run.attempts >= MAX_ATTEMPTS:
            ended = _give_up(run, reason, now)
            if ended:
                done[ended].append(run.pk)
            continue
        requeued = JobRun.objects.filter(pk=run.pk, status=JobRun.Status.RUNNING, worker=run.worker).update(
            status=JobRun.Status.QUEUED,
            worker="",
            message="Queued again: its worker was lost",
            log_tail=append_log(log_line(f"worker lost: {reason}; queued again")),
        )
        if not requeued:
            continue  # another worker got there first
        try:
            get_engine(run.engine).submit(run)
        except Exception as exc:
            JobRun.objects.filter(pk=run.pk, status=JobRun.Status.QUEUED).update(
                status=JobRun.Status.FAILED,
                finished_at=now,
                error=f"Worker lost: {reason}; queueing it again failed: {type(exc).__name__}: {exc}",
            )
            done["failed"].append(run.pk)
        else:
            done["requeued"].append(run.pk)
    _sweep_recoveries()
    return done
