"""Background entry points of synthesis (registered with jobs.registry on start-up)."""

from jobs.registry import job
from jobs.runner import worker_id

from . import pipeline, qa_jobs  # noqa: F401  (qa_jobs registers synthesis.assess_tasks; jobs are found as <app>.jobs)
from .annotation import AnnotationResult, annotate_skills, annotator_endpoint
from .batches import begin
from .kinds import ANNOTATE_JOB, RUN_BATCH_JOB, RUN_ITEM_JOB
from .models import Skill, SynthesisBatch, SynthesisItem

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
        Skill.objects.filter(pk__in=[s.pk for s in skills], annotations__created_at__gte=ctx.run.created_at)
        .values_list("pk", flat=True)
    )
    todo = [s for s in skills if s.pk not in done]
    total = len(skills)
    ctx.log(f"asking {model.name} about {len(todo)} skill{'' if len(todo) == 1 else 's'}"
            + (f" ({len(done)} annotated before)" if done else ""))  # fmt: skip
    ctx.progress(len(done), total, "annotating")

    def heard(result: AnnotationResult) -> None:
        if result.error:
            ctx.log(f"failed: {result.skill.name}: {result.error}")
        label = "failed" if result.error else ("synthesizable" if result.annotation.synthesizable else "not synthesizable")
        ctx.progress(ctx.run.progress_done + 1, total, f"{result.skill.name}: {label}")

    annotate_skills(todo, model, on_result=heard)
    annotated = set(
        Skill.objects.filter(pk__in=[s.pk for s in skills], annotations__created_at__gte=ctx.run.created_at)
        .values_list("pk", flat=True)
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
    pending = list(batch.items.filter(status=SynthesisItem.Status.PENDING).order_by("index").values_list("pk", flat=True))
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
    return {"item": item_id, "status": done.status, "stage": done.stage}
