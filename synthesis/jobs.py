"""Background entry points of synthesis (registered with jobs.registry on start-up): annotating skills, a batch
fanning out one job per item, and assessing the quality of tasks; each hands the work to synthesis.services and the
pipeline."""

from jobs.registry import job
from jobs.runner import worker_id
from tasks.models import Task

from . import pipeline
from .annotation import AnnotationResult, annotator_endpoint
from .job_kinds import ANNOTATE_JOB, ASSESS_JOB, RUN_BATCH_JOB, RUN_ITEM_JOB
from .models import QualityAssessment, Skill, SynthesisBatch, SynthesisItem
from .qa_checks import STAGES, judge_endpoint
from .services import annotate_skills, assess_tasks, begin

# --- seeds: skill annotation ---------------------------------------------------------------------------------------


def _annotate_subject(params: dict) -> tuple[str, str]:
    ids = params.get("skill_ids")
    return ("every skill" if ids is None else f"{len(ids)} skill{'' if len(ids) == 1 else 's'}"), ""


@job(ANNOTATE_JOB, queue="default", title="Annotate skills", subject=_annotate_subject)
def annotate(ctx, *, skill_ids: list[int] | None = None, endpoint: str | None = None) -> dict:
    """Annotate each skill (`skill_ids`, or every skill), one model call each (synthesis.annotation).

    A second delivery of the same run asks only about the skills not annotated since the run was queued; one that
    failed is asked again. Failures are counted on the run and kept on their skills (Skill.annotation_error).
    """
    model = annotator_endpoint(endpoint)
    skills = Skill.objects.all() if skill_ids is None else Skill.objects.filter(pk__in=skill_ids)
    skills = list(skills.order_by("name"))
    done = set(
        Skill.objects.filter(
            pk__in=[s.pk for s in skills], annotations__created_at__gte=ctx.run.created_at
        ).values_list("pk", flat=True)
    )
    todo = [s for s in skills if s.pk not in done]
    total = len(skills)
    ctx.log(
        f"asking {model.name} about {len(todo)} skill{'' if len(todo) == 1 else 's'}"
        + (f" ({len(done)} annotated before)" if done else "")
    )
    ctx.progress(len(done), total, "annotating")

    def heard(result: AnnotationResult) -> None:
        if result.error:
            ctx.log(f"failed: {result.skill.name}: {result.error}")
        label = (
            "failed" if result.error else ("synthesizable" if result.annotation.synthesizable else "not synthesizable")
        )
        ctx.progress(ctx.run.progress_done + 1, total, f"{result.skill.name}: {label}")

    annotate_skills(todo, model, on_result=heard)
    annotated = set(
        Skill.objects.filter(
            pk__in=[s.pk for s in skills], annotations__created_at__gte=ctx.run.created_at
        ).values_list("pk", flat=True)
    )
    failed = [s for s in Skill.objects.filter(pk__in=[s.pk for s in skills]).order_by("name") if s.pk not in annotated]
    ctx.items_failed(len(failed), of=len(skills))
    ctx.log(f"annotated {len(annotated)}, failed {len(failed)}")
    return {
        "annotated": len(annotated),
        "failed": len(failed),
        "failures": [{"skill": s.name, "error": s.annotation_error} for s in failed[:20]],
    }


# --- the pipeline: a batch fans out one job per item ------------------------------------------------------------


def _batch_subject(params: dict) -> tuple[str, str]:
    return f"synthesis batch #{params.get('batch_id')}", ""


def _item_subject(params: dict) -> tuple[str, str]:
    item = SynthesisItem.objects.filter(pk=params.get("item_id")).values("batch_id", "index").first()
    if item is None:
        return f"synthesis item #{params.get('item_id')}", ""
    return f"batch #{item['batch_id']} item {item['index'] + 1}", ""


@job(RUN_BATCH_JOB, queue="default", title="Run a synthesis batch", subject=_batch_subject)
def run_batch(ctx, *, batch_id: int) -> dict:
    """Queue one synthesis.run_item job per item still to run, and return (a waiting job would hold a worker its
    items need). Items a dead worker left running go back to pending first. A batch with nothing left finishes."""
    batch = SynthesisBatch.objects.get(pk=batch_id)
    if batch.status not in pipeline.RUNNABLE:
        ctx.log(f"batch #{batch_id} is {batch.status}; nothing to run")
        return {"batch": batch_id, "items": 0}
    begin(batch)
    reclaimed = pipeline.reclaim_lost_items(batch)
    if reclaimed:
        ctx.log(f"items {', '.join(map(str, reclaimed))} were left running by a lost worker: pending again")
    pending = list(
        batch.items.filter(status=SynthesisItem.Status.PENDING).order_by("index").values_list("pk", flat=True)
    )
    queued = ctx.fan_out(RUN_ITEM_JOB, "item_id", pending, "items") if pending else 0
    pipeline.maybe_finish(batch_id)
    return {"batch": batch_id, "items": queued}


@job(RUN_ITEM_JOB, queue="sandbox", title="Synthesize one task", subject=_item_subject)
def run_item(ctx, *, item_id: int) -> dict:
    """Run the item's remaining stages (on the sandbox queue: the verify stage runs checkers in the sandbox).

    Delivered again after its worker died, it finds the item still running under this job run but another
    worker: that worker is lost, so the item goes back to pending and runs on from the stage it had reached."""
    item = SynthesisItem.objects.select_related("job_run").get(pk=item_id)
    lost = item.status == SynthesisItem.Status.RUNNING and item.job_run_id == ctx.run.pk and item.worker != worker_id()
    if lost:
        SynthesisItem.objects.filter(pk=item.pk, status=SynthesisItem.Status.RUNNING, worker=item.worker).update(
            status=SynthesisItem.Status.PENDING, worker="", job_run=None
        )
        ctx.log(f"item #{item_id}: its worker {item.worker} was lost; going on from stage {item.stage}")
    pipeline.reclaim_lost_items(item.batch)
    done = pipeline.run_item(item_id, job_run=ctx.run)
    if done is None:
        item.refresh_from_db()
        ctx.log(f"item #{item_id} is {item.status}; nothing to run")
        return {"item": item_id, "status": item.status, "stage": item.stage}
    ctx.log(f"item #{item_id}: {done.status} at {done.stage}" + (f": {done.reason[:200]}" if done.reason else ""))
    if done.status == SynthesisItem.Status.FAILED:  # rejected is a verdict the job reached; failed is not
        ctx.items_failed(1, of=1, reason=f"Item #{item_id} failed at {done.stage}: {done.reason[:500]}")
    return {"item": item_id, "status": done.status, "stage": done.stage}


# --- quality assessment: assess_tasks in the background (the command runs the same in its own process) -------------
#
# A second delivery of a run assesses only the tasks that have no verdict from this run yet (a verdict stored since
# the run was queued, for every stage asked, counts as done).


def _assess_subject(params: dict) -> tuple[str, str]:
    ids = params.get("task_ids")
    if ids is None:
        return "every task", ""
    return (ids[0] if len(ids) == 1 else f"{len(ids)} tasks"), ""


@job(ASSESS_JOB, queue="default", title="Assess task quality", subject=_assess_subject)
def assess(
    ctx, *, task_ids: list[str] | None = None, stages: list[str] | None = None, judge: str | None = None
) -> dict:
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
    ctx.log(
        f"assessing {len(todo)} task(s) ({', '.join(stages)})"
        + (f"; {done_before} done before" if done_before else "")
        + (f" with {endpoint.name}" if endpoint else "")
    )
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
