"""Background entry points of synthesis (registered with jobs.registry on start-up)."""

from jobs.registry import job

from .annotation import ANNOTATE_JOB, AnnotationResult, annotate_skills, annotator_endpoint
from .models import Skill

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
    ctx.items_failed(len(failed))
    ctx.log(f"annotated {len(annotated)}, failed {len(failed)}")
    return {
        "annotated": len(annotated),
        "failed": len(failed),
        "failures": [{"skill": s.name, "error": s.annotation_error} for s in failed[:20]],
    }
