"""The quality-assessment job: assess_tasks in the background (the command runs the same in its own process).

    run = start_assessment(user=admin, task_ids=["fruit-summary"], stages=["novelty", "leak"])

Registered with jobs.registry from this module; jobs are discovered as <app>.jobs, so synthesis/jobs.py imports
it. A second delivery of a run assesses only the tasks that have no verdict from this run yet (a verdict stored
since the run was queued, for every stage asked, counts as done).
"""

import jobs
from jobs.registry import job
from tasks.models import Task

from .kinds import ASSESS_JOB
from .models import QualityAssessment
from .qa import STAGES, assess_tasks, judge_endpoint, parse_stages


def _subject(params: dict) -> tuple[str, str]:
    ids = params.get("task_ids")
    if ids is None:
        return "every task", ""
    return (ids[0] if len(ids) == 1 else f"{len(ids)} tasks"), ""


def start_assessment(*, user, task_ids: list[str] | None = None, stages: list[str] | None = None,
                     judge: str | None = None):  # fmt: skip
    """Queue an assessment of `task_ids` (external ids; None: every task with a revision); returns its JobRun.
    Raises QAError (unknown stage, no judge) before queuing, and jobs.engine.JobEngineError."""
    stages = parse_stages(",".join(stages) if stages else None)
    judge_endpoint(judge, stages)
    total = (Task.objects.filter(current_revision__isnull=False) if task_ids is None else
             Task.objects.filter(external_id__in=task_ids, current_revision__isnull=False)).count()  # fmt: skip
    return jobs.enqueue(ASSESS_JOB, created_by=user, total=total, task_ids=task_ids, stages=stages, judge=judge)


@job(ASSESS_JOB, queue="default", title="Assess task quality", subject=_subject)
def assess(ctx, *, task_ids: list[str] | None = None, stages: list[str] | None = None,
           judge: str | None = None) -> dict:  # fmt: skip
    stages = stages or list(STAGES)
    endpoint = judge_endpoint(judge, stages)
    tasks = Task.objects.filter(current_revision__isnull=False)
    if task_ids is not None:
        tasks = tasks.filter(external_id__in=task_ids)
    tasks = list(tasks.select_related("current_revision").order_by("external_id"))
    # Verdicts stored since this run was queued: a second delivery does not ask about those tasks again.
    since = QualityAssessment.objects.filter(created_at__gte=ctx.run.created_at, stage__in=stages)
    seen: dict[int, set] = {}
    for revision_id, stage in since.values_list("revision_id", "stage"):
        seen.setdefault(revision_id, set()).add(stage)
    todo = [t for t in tasks if seen.get(t.current_revision_id, set()) != set(stages)]
    done_before = len(tasks) - len(todo)
    ctx.log(f"assessing {len(todo)} task(s) ({', '.join(stages)})" + (f"; {done_before} done before" if done_before else "")
            + (f" with {endpoint.name}" if endpoint else ""))  # fmt: skip
    ctx.progress(done_before, len(tasks), "assessing")
    counts = {"pass": 0, "fail": 0, "error": 0}
    errors = []

    def heard(task, rows):
        for stage, row in rows.items():
            counts[row.verdict] = counts.get(row.verdict, 0) + 1
            if row.verdict == "error":
                errors.append({"task": task.external_id, "stage": stage, "reason": row.reason})
                ctx.log(f"error: {task.external_id} {stage}: {row.reason}")
        ctx.progress(ctx.run.progress_done + 1, len(tasks), task.external_id)

    assess_tasks(todo, stages, judge=endpoint, user=ctx.run.created_by, on_assessed=heard)
    if errors:
        # Counted per assessment (a task's stage): a task whose one stage erred was still assessed by the others.
        ctx.items_failed(len(errors), of=len(todo) * len(stages))
    return {"assessed": len(todo), "done_before": done_before, "stages": stages, "verdicts": counts, "errors": errors}
