"""Jobs of the jobs app itself: small, real jobs used to check that an engine's workers are alive."""

import time

from .fanout import release_waiting
from .job_kinds import PING_JOB, RECOVER_LOST_JOB
from .registry import job
from .runner import recover_lost
from .workers import forget_gone


@job(PING_JOB, title="Ping the workers")
def ping(ctx, *, steps: int = 3, sleep: float = 0.0, fail: bool = False):
    """Report progress `steps` times; fail on request. Used by `check_workers` and the engine tests."""
    for i in range(steps):
        if sleep:
            time.sleep(sleep)
        ctx.log(f"step {i + 1} of {steps}")
        ctx.progress(i + 1, steps)
    if fail:
        raise RuntimeError("asked to fail")
    return {"steps": steps}


@job(RECOVER_LOST_JOB, title="Recover the runs of lost workers")
def recover_lost_runs(ctx) -> dict:
    """Periodic (jobs.periodic): what a starting worker does, for workers that died on hosts where none restarts.

    A run is lost when its worker's process is gone (this host) or it sent no heartbeat for CLAWGYM_JOB_STALE_SECONDS
    (any host); it is queued again up to MAX_ATTEMPTS, then failed. Workers not seen for a day are forgotten. Held
    children a batch still waits on are handed to the engine when there is room (jobs.fanout).
    """
    done = recover_lost()
    for outcome, ids in done.items():
        if ids:
            ctx.log(f"{outcome}: {', '.join(f'#{pk}' for pk in ids)}")
    released = release_waiting()
    if released:
        ctx.log(f"handed {released} held run(s) to the workers")
    return {
        **{outcome: len(ids) for outcome, ids in done.items()},
        "released": released,
        "workers_forgotten": forget_gone(),
    }
