"""Jobs of the jobs app itself: small, real jobs used to check that an engine's workers are alive."""

import time

from .registry import job


@job("jobs.ping", title="Ping the workers")
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
