"""Background entry points of rollouts: one job per rollout attempt, on the `sandbox` queue."""

import time

from django.urls import reverse

from jobs.registry import job
from jobs.runner import JobCancelled

from ..job_kinds import ROLLOUT_JOB
from ..models import Rollout
from ..services.rollouts import execute_rollout, fail_lost_rollouts, fail_redelivered
from ..services.run_progress import rollout_changed


def _rollout_subject(params: dict) -> tuple[str, str]:
    rollout = Rollout.objects.select_related("revision__task", "endpoint").filter(pk=params["rollout_id"]).first()
    if rollout is None:
        return f"rollout #{params['rollout_id']}", ""
    text = f"#{rollout.pk} {rollout.revision.task.external_id} r{rollout.revision.number} with {rollout.endpoint.name}"
    return text, reverse("evaluation:detail", args=[rollout.pk])


@job(ROLLOUT_JOB, queue="sandbox", title="Run a rollout", subject=_rollout_subject)
def run_rollout(ctx, *, rollout_id: int, not_before: float | None = None) -> dict:
    """Run the rollout's queued attempt and return its summary.

    Delivered again after its worker died, it finds the rollout still running from that worker: the attempt is
    marked failed (worker lost, retryable) and not run again by itself; a retry is an explicit, new attempt.
    Any other rollout left running by a dead worker is marked failed on the way (as `recover_lost` does for jobs).
    `not_before` (epoch seconds): an evaluation run's retry after an infrastructure failure waits until then.
    """
    lost = fail_lost_rollouts()
    if lost:
        ctx.log(f"marked failed, their workers were lost: rollouts {', '.join(map(str, lost))}")
    rollout = Rollout.objects.select_related("revision__task", "endpoint").get(pk=rollout_id)
    if fail_redelivered(rollout, ctx.run):
        ctx.log(f"rollout #{rollout_id}: the worker of attempt {rollout.attempt} was lost; marked failed")
    rollout.refresh_from_db()
    if rollout.status != Rollout.Status.QUEUED:
        ctx.log(f"rollout #{rollout_id} is {rollout.status}; nothing to run")
        if rollout.job_run_id == ctx.run.pk:
            _attempt_failed(ctx, rollout)  # this job's attempt, lost with its worker (failed here or by a recovery)
        return rollout.as_dict()
    ctx.log(f"rollout #{rollout_id}: {rollout.harness} with {rollout.endpoint.name} on {rollout.revision}")
    ctx.progress(0, 1, "waiting for a sandbox slot")

    def waiting(seconds: float) -> None:
        ctx.progress(0, 1, f"waiting for a sandbox slot ({seconds:.0f} s)")

    try:
        while not_before is not None and time.time() < not_before:
            ctx.progress(0, 1, f"retrying after an infrastructure failure in {not_before - time.time():.0f} s")
            time.sleep(min(1.0, max(not_before - time.time(), 0.0)))
        rollout = execute_rollout(rollout_id, job_run=ctx.run, on_wait=waiting)
    except JobCancelled:
        cancelled = Rollout.objects.filter(pk=rollout_id, status=Rollout.Status.QUEUED).update(
            status=Rollout.Status.CANCELLED, exit_reason="cancelled", error="cancelled before it started"
        )
        if cancelled:
            rollout_changed(rollout_id)
        raise
    ctx.log(f"rollout #{rollout_id} {rollout.status}: {rollout.exit_reason}, score {rollout.score}")
    ctx.progress(1, 1, f"{rollout.status}")
    _attempt_failed(ctx, rollout)
    return rollout.as_dict()


def _attempt_failed(ctx, rollout: Rollout) -> None:
    """The attempt this job ran failed, so the job has failed too (its run says why), whatever a retry does next:
    the rollout ended failed, or it is queued again for its next attempt under another job (an evaluation run's)."""
    if rollout.status == Rollout.Status.FAILED:
        exit_reason, error, then = rollout.exit_reason, rollout.error, ""
    elif rollout.status == Rollout.Status.QUEUED and rollout.job_run_id != ctx.run.pk and rollout.previous_attempts:
        last = rollout.previous_attempts[-1]
        exit_reason, error = last.get("exit_reason", ""), last.get("error") or ""
        then = f"; attempt {rollout.attempt + 1} is queued"
    else:
        return
    first_line = error.splitlines()[0] if error else ""
    ctx.items_failed(1, of=1, reason=f"Rollout #{rollout.pk} failed ({exit_reason}): {first_line}{then}")
