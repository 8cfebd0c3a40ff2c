"""Quality assessment stored: the verdicts of synthesis.qa_checks as QualityAssessment rows, one task or many, here or
as the job (synthesis.jobs.assess)."""

from __future__ import annotations

import jobs
from tasks.models import Task

from ..job_kinds import ASSESS_JOB
from ..models import QAStage, QualityAssessment
from ..novelty import catalog_index
from ..qa_checks import assess, judge_endpoint, parse_stages, qa_task_from_revision


def assess_revision(
    revision, stages, *, judge, user, item=None, thresholds=None, pool=None
) -> dict[str, QualityAssessment]:
    """Assess a task revision and store each stage's verdict as a QualityAssessment row (append-only: the latest
    per revision and stage is the one shown). The model calls' subject is "task:<external id>"."""
    task = qa_task_from_revision(revision)
    verdicts = assess(
        task, list(stages), judge=judge, thresholds=thresholds, pool=pool, subject=f"task:{task.external_id}"
    )
    person = user if user is not None and user.is_authenticated else None
    stored = {}
    for stage, v in verdicts.items():
        stored[stage] = QualityAssessment.objects.create(
            revision=revision,
            stage=stage,
            verdict=v.verdict,
            reason=v.reason,
            details=v.details,
            endpoint_name=v.endpoint_name,
            prompt_version=v.prompt_version,
            model_call_id=v.model_call_id,
            item=item,
            created_by=person,
        )
    return stored


def assess_tasks(tasks, stages, *, judge, user, on_assessed=None) -> dict[str, dict[str, QualityAssessment]]:
    """assess_revision for each task's current revision, one after another, sharing one novelty pool (the
    catalog's). {external id: {stage: row}}; `on_assessed(task, rows)` hears of each as it is stored."""
    pool = None
    if QAStage.NOVELTY in stages:
        try:
            pool = catalog_index()
        except (ImportError, OSError, ValueError):
            pool = None  # each task's novelty verdict says why (an "error")
    done = {}
    for task in tasks:
        rows = assess_revision(task.current_revision, stages, judge=judge, user=user, pool=pool)
        done[task.external_id] = rows
        if on_assessed is not None:
            on_assessed(task, rows)
    return done


def start_assessment(
    *, user, task_ids: list[str] | None = None, stages: list[str] | None = None, judge: str | None = None
):
    """Queue an assessment of `task_ids` (external ids; None: every task with a revision); returns its JobRun.
    Raises QAError (unknown stage, no judge) before queuing, and jobs.engine.JobEngineError."""
    stages = parse_stages(",".join(stages) if stages else None)
    judge_endpoint(judge, stages)
    total = (
        Task.objects.filter(current_revision__isnull=False)
        if task_ids is None
        else Task.objects.filter(external_id__in=task_ids, current_revision__isnull=False)
    ).count()
    return jobs.enqueue(ASSESS_JOB, created_by=user, total=total, task_ids=task_ids, stages=stages, judge=judge)
