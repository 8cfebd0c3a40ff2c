"""How the management commands that queue work wait for it (evaluate, rollout, train, synthesize, sanity_check,
diagnose, difficulty_filter): one loop and one set of flags, so that each gives up the same way.

No worker took the work within --start-timeout: it is cancelled (a worker starting later must not run what nobody
waits for) and the message says how to start a worker, or to pass --here (exit 3). Not finished within --timeout:
the command stops waiting and says where to follow the work (exit 1); the work goes on. A --timeout shorter than
--start-timeout that ends before any worker took the work leaves it queued when workers are seen on its queues (they
beat: jobs.workers), and cancels it as no worker's when none is. Now and then the work of lost workers is
reclaimed, as each kind of work does that, so that nothing looks "running" forever.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.core.management.base import CommandError

from .cli import NotStarted
from .workers import seen_by_queue

POLL_SECONDS = 0.5
RECHECK_LOST_SECONDS = 10.0
START_TIMEOUT_SECONDS = 60.0


class NoWorker(NotStarted):
    """No worker took the work within --start-timeout; it was cancelled."""


class NotFinished(CommandError):
    """The work did not finish within --timeout; the command stops waiting (exit 1)."""


def add_wait_arguments(parser, *, timeout: float, here: str = "run in this process instead of on the job workers"):
    """--here, --timeout and --start-timeout, the same on every command that waits."""
    parser.add_argument("--here", action="store_true", help=here)
    parser.add_argument(
        "--timeout",
        type=float,
        default=timeout,
        metavar="SECONDS",
        help=f"seconds to wait for the work to finish ({_duration(timeout)})",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=START_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"seconds to wait for a worker to take it before cancelling it ({START_TIMEOUT_SECONDS:g})",
    )


@dataclass
class Work:
    """What a command waits for, as callables over its own rows."""

    what: str  # what the workers take, for the message: "the rollout jobs of run #12"
    queues: tuple[str, ...]  # the queues whose workers take it
    finished: Callable[[], bool]
    taken: Callable[[], bool]  # whether a worker has started on it (asked until it has)
    cancel: Callable[[], object]  # when no worker took it
    cancelled: str = ""  # said after the cancel: "`manage.py evaluate --resume 12` runs it again."
    follow: str = ""  # where to follow it once the command stops waiting: "`manage.py eval_report 12` shows it"
    progress: Callable[[], object] | None = None  # reports on stderr what changed
    progress_every: float = 0.0  # seconds between reports (0: every poll)
    reclaim_lost: Callable[[], object] | None = None  # ends (or frees) what lost workers held, every 10 s
    workers_seen: Callable[[], bool] | None = None  # whether workers are alive on every queue (None: their beats)


def wait_for(work: Work, *, timeout: float, start_timeout: float) -> None:
    """Return once `work.finished()`; raise NoWorker or NotFinished as the module docstring says."""
    started = last_lost_check = last_progress = time.monotonic()
    taken = False
    while True:
        now = time.monotonic()
        if work.progress and now - last_progress >= work.progress_every:
            work.progress()
            last_progress = now
        if work.finished():
            return
        taken = taken or work.taken()
        waited = now - started
        if not taken and waited > start_timeout:
            work.cancel()
            raise NoWorker(no_worker_message(work, start_timeout))
        if waited > timeout:
            follow = f" ({work.follow})" if work.follow else ""
            if taken:
                raise NotFinished(f"{work.what} did not finish within {timeout:g} s; it goes on running{follow}")
            if not (work.workers_seen() if work.workers_seen else _workers_seen(work.queues)):
                work.cancel()  # nobody waits for it and nobody would take it
                raise NoWorker(no_worker_message(work, timeout))
            queues = " and ".join(work.queues)
            raise NotFinished(
                f"no worker took {work.what} within {timeout:g} s yet; it stays queued for the workers seen "
                f"on the {queues} queue{'s' if len(work.queues) > 1 else ''}{follow}"
            )
        if work.reclaim_lost and now - last_lost_check > RECHECK_LOST_SECONDS:
            work.reclaim_lost()
            last_lost_check = now
        time.sleep(POLL_SECONDS)


def _workers_seen(queues: tuple[str, ...]) -> bool:
    """Whether a worker beat recently on every one of `queues`."""
    counts = seen_by_queue()
    return all(counts.get(queue, 0) for queue in queues)


def no_worker_message(work: Work, seconds: float) -> str:
    queues = " and ".join(work.queues)
    checks = " and ".join(f"`manage.py check_workers --queue {q}`" for q in work.queues)
    message = (
        f"no job worker took {work.what} within {seconds:g} s: are workers running on the {queues} "
        f"queue{'s' if len(work.queues) > 1 else ''}? ({checks} tells; `manage.py qcluster` or a Celery worker with "
        f"-Q {','.join(work.queues)} starts one). Or pass --here to run it in this process."
    )
    return f"{message} {work.cancelled}" if work.cancelled else message


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"
