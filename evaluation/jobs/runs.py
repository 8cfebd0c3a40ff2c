"""Background entry points of evaluation runs (registered through evaluation/jobs/__init__.py): regrade, and the
periodic top-up of running runs' jobs."""

from django.urls import reverse

from jobs.registry import job
from tasks.models import Task

from ..job_kinds import REGRADE_JOB, TOP_UP_JOB
from ..models import EvalRun, Rollout
from ..services.regrade import regradable, regrade_rollouts
from ..services.run_progress import top_up_runs


class NothingToRegrade(LookupError):
    """No such run or task; the message says which."""


def rollouts_to_regrade(*, run_id: int | None = None, task_id: str | None = None):
    """The rollouts a regrade scores again: the run's, or every one of the task (in all runs and alone), that
    stored a final workspace."""
    if (run_id is None) == (task_id is None):
        raise ValueError("regrade takes a run or a task")
    if run_id is not None:
        run = EvalRun.objects.filter(pk=run_id).first()
        if run is None:
            raise NothingToRegrade(f"no evaluation run #{run_id}")
        return regradable(run.rollouts.all()).order_by("pk")
    task = Task.objects.filter(external_id=task_id).first()
    if task is None:
        raise NothingToRegrade(f"no such task: {task_id}")
    return regradable(Rollout.objects.filter(revision__task=task)).order_by("pk")


def _regrade_subject(params: dict) -> tuple[str, str]:
    if params.get("run_id") is not None:
        return f"run #{params['run_id']}", ""
    return f"task {params.get('task_id')}", reverse("tasks:detail", args=[params.get("task_id")])


@job(REGRADE_JOB, queue="sandbox", title="Regrade rollouts", subject=_regrade_subject)
def regrade(ctx, *, run_id: int | None = None, task_id: str | None = None) -> dict:
    """Score again, with the task's current checker and rubric, the stored final workspaces of a run's rollouts or
    of every rollout of a task. On the sandbox queue: the checkers run in the sandbox. Running it twice only adds
    a second, equal scoring record per rollout."""
    rollouts = rollouts_to_regrade(run_id=run_id, task_id=task_id)
    total = rollouts.count()
    ctx.log(f"regrading {total} rollout(s) of {f'run #{run_id}' if run_id is not None else f'task {task_id}'}")
    ctx.progress(0, total, "regrading")
    result = regrade_rollouts(rollouts, user=ctx.run.created_by, on_progress=lambda done, n: ctx.progress(done, n))
    for failure in result["failed"]:
        ctx.log(f"rollout #{failure['rollout']}: {failure['error']}")
    ctx.items_failed(len(result["failed"]), of=total)
    ctx.progress(total, total, f"{result['changed']} of {result['rollouts']} score(s) changed")
    return result


@job(TOP_UP_JOB, queue="default", title="Top up evaluation runs")
def top_up(ctx) -> dict:
    """Periodic (jobs.periodic): give the next queued rollouts of every running evaluation run a job where fewer
    than the in-flight limit have one (runs do so themselves as rollouts finish; this catches a worker killed in
    between, an engine that refused a job, and room that workers joining made)."""
    queued = top_up_runs()
    for run_id, count in queued.items():
        ctx.log(f"run #{run_id}: {count} rollout(s) handed to the workers")
    return {"runs": len(queued), "rollouts": sum(queued.values())}
