"""Into the catalog: the draft becomes a task (tasks.services.save_package), a draft for reviewers to look at.

Task.source is the route (persona / skill); the revision's metadata["synthesis"] says how it was made: {batch,
item, route, seed, prompt_versions}. The QA verdicts become QualityAssessment rows of the new revision. Running
the stage again (a worker lost after the save) changes nothing: the same content is the same revision
(save_package answers "unchanged") and the verdicts are stored once per revision and item.
"""

from __future__ import annotations

from django.db import transaction

from tasks.models import Task
from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package

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
            "batch": batch.pk, "item": item.pk, "route": batch.route, "seed": item.seed,
            "prompt_versions": batch.prompt_versions,
        },
    }  # fmt: skip
    if draft.get("category"):
        metadata["scenario_category"] = draft["category"]
        metadata["scenario_subcategory"] = draft.get("subcategory")
    if draft.get("skills"):
        metadata["skills"] = draft["skills"]
    return TaskPackage(
        external_id=external_id(item), instruction=draft["instruction"], metadata=metadata, files=files,
        rubric=draft.get("rubric") or [], code_weight=draft.get("code_weight", 0.7),
    )  # fmt: skip


def run(item, ctx):
    source = Task.Source.SKILL if item.batch.route == Route.SKILL else Task.Source.PERSONA
    with transaction.atomic():
        saved = save_package(package(item), user=ctx.batch.created_by, stage="synthesis",
                             message=f"synthesized by batch #{item.batch_id}, item {item.index + 1}",
                             source=source, status=Task.Status.DRAFT)  # fmt: skip
        stored = QualityAssessment.objects.filter(revision=saved.revision, item=item).exists()
        for stage, verdict in ({} if stored else item.draft.get("qa") or {}).items():
            QualityAssessment.objects.create(
                revision=saved.revision, stage=stage, verdict=verdict["verdict"], reason=verdict["reason"],
                details=verdict.get("details") or {}, endpoint_name=verdict.get("endpoint_name", ""),
                prompt_version=verdict.get("prompt_version", ""), model_call_id=verdict.get("model_call_id"),
                item=item, created_by=ctx.batch.created_by,
            )  # fmt: skip
    return StageResult(PASS, f"{saved.task.external_id} r{saved.revision.number} ({saved.outcome.value})",
                       details={"task": saved.task.external_id, "task_pk": saved.task.pk,
                                "revision": saved.revision.number})  # fmt: skip
