"""Into the catalog: the draft becomes a task (tasks.services.save_package), a draft for reviewers to look at.

Task.source is the route (persona / skill); the revision's metadata["synthesis"] says how it was made: {batch,
item, route, seed, prompt_versions}. The QA verdicts become QualityAssessment rows of the new revision, and the
verify stage's sandboxed check its SanityReport (when the revision holds exactly what that check ran on, and has
no report yet). Running the stage again (a worker lost after the save) changes nothing: the same content is the
same revision (save_package answers "unchanged") and the verdicts are stored once per revision and item.
"""

from __future__ import annotations

from django.db import transaction

from jobs.models import JobRun
from tasks.models import SanityReport, Task
from tasks.package import PackageFile, TaskPackage
from tasks.sanity import SanityMaterial, material_digest
from tasks.services import SaveOutcome, save_package

from ..models import QualityAssessment, Route
from ..pipeline import PASS, StageResult

STAGE = "catalog"


def external_id(item) -> str:
    return f"syn-{item.batch_id}-{item.index + 1}"


def package(item) -> TaskPackage:
    draft, batch = item.draft, item.batch
    files = [PackageFile(path, text.encode(), "input") for path, text in sorted(draft["files"].items())]
    files += [PackageFile(path, text.encode(), "reward") for path, text in sorted(draft["checker"].items())]
    files += [PackageFile(path, text.encode(), "solution") for path, text in sorted(draft["solution"].items())]
    metadata = {
        "grading_type": "hybrid" if draft.get("rubric") else "automated",
        "difficulty": draft.get("difficulty"),
        "expected_behavior": draft.get("expected_behavior", ""),
        "required_operations": draft.get("required_operations") or [],
        "synthesis": {
            "batch": batch.pk,
            "item": item.pk,
            "route": batch.route,
            "seed": item.seed,
            "prompt_versions": batch.prompt_versions,
        },
    }
    if draft.get("category"):
        metadata["scenario_category"] = draft["category"]
        metadata["scenario_subcategory"] = draft.get("subcategory")
    if draft.get("skills"):
        metadata["skills"] = draft["skills"]
    return TaskPackage(
        external_id=external_id(item),
        instruction=draft["instruction"],
        metadata=metadata,
        files=files,
        rubric=draft.get("rubric") or [],
        code_weight=draft.get("code_weight", 0.7),
    )


# What became of the package, in words (a synthesized task is a new task, not an imported one).
SAVED = {SaveOutcome.CREATED: "new task", SaveOutcome.UPDATED: "new revision", SaveOutcome.UNCHANGED: "unchanged"}


def store_sanity_report(revision, report: dict | None):
    """The verify stage's check as the revision's SanityReport; None (nothing stored) without one, when the
    revision has a report already, or when it does not hold what was checked."""
    if not report or SanityReport.objects.filter(revision=revision).exists():
        return None
    fields = {k: v for k, v in report.items() if k not in ("digest", "job_run")}
    if report.get("digest") != material_digest(SanityMaterial.from_revision(revision)):
        return None
    job_run = JobRun.objects.filter(pk=report.get("job_run")).first() if report.get("job_run") else None
    return SanityReport.objects.create(revision=revision, job_run=job_run, **fields)


def run(item, ctx):
    source = Task.Source.SKILL if item.batch.route == Route.SKILL else Task.Source.PERSONA
    with transaction.atomic():
        saved = save_package(
            package(item),
            user=ctx.batch.created_by,
            stage="synthesis",
            message=f"synthesized by batch #{item.batch_id}, item {item.index + 1}",
            source=source,
            status=Task.Status.DRAFT,
        )
        stored = QualityAssessment.objects.filter(revision=saved.revision, item=item).exists()
        for stage, verdict in ({} if stored else item.draft.get("qa") or {}).items():
            QualityAssessment.objects.create(
                revision=saved.revision,
                stage=stage,
                verdict=verdict["verdict"],
                reason=verdict["reason"],
                details=verdict.get("details") or {},
                endpoint_name=verdict.get("endpoint_name", ""),
                prompt_version=verdict.get("prompt_version", ""),
                model_call_id=verdict.get("model_call_id"),
                item=item,
                created_by=ctx.batch.created_by,
            )
        store_sanity_report(saved.revision, item.draft.get("sanity_report"))
    return StageResult(
        PASS,
        f"{saved.task.external_id} r{saved.revision.number} ({SAVED[saved.outcome]})",
        details={"task": saved.task.external_id, "task_pk": saved.task.pk, "revision": saved.revision.number},
    )
