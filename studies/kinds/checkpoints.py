"""Evaluating a training run's checkpoint for a study, through training_jobs.evaluations: the checkpoint is served
on a gpu worker and evaluated there (request_evaluation queues that job once; the evaluation runs it starts are
recorded as CheckpointEvaluation rows). A cell waits for its checkpoint's row and then follows that run."""

from __future__ import annotations

from evaluation.models import EvalRun
from jobs.models import JobRun
from training_jobs.evaluations import EvaluationError, evaluation_job, request_evaluation
from training_jobs.job_kinds import EVALUATE_JOB
from training_jobs.models import Checkpoint, CheckpointEvaluation

from ..models import Study, StudyCell
from .base import fail, follow_evaluation, mark


def checkpoint_eval_run(checkpoint: Checkpoint, version_id: int) -> EvalRun | None:
    row = (
        CheckpointEvaluation.objects.filter(checkpoint=checkpoint, eval_run__benchmark_version_id=version_id)
        .select_related("eval_run")
        .order_by("-created_at", "-pk")
        .first()
    )
    return row.eval_run if row else None


def evaluate_checkpoint(study: Study, cell: StudyCell, checkpoint: Checkpoint, *, version, harness: str, user) -> None:
    """Link the checkpoint's evaluation run on the version to the cell and follow it; without one, queue (once) the
    gpu job that serves and evaluates the run's checkpoints, or fail the cell when that job failed."""
    if cell.eval_run_id is None:
        run = checkpoint_eval_run(checkpoint, version.pk)
        if run is not None:
            mark(cell, StudyCell.Status.RUNNING, eval_run=run)
        else:
            _wait_for_serving(study, cell, checkpoint, version=version, harness=harness, user=user)
            return
    follow_evaluation(cell)


def _wait_for_serving(study: Study, cell: StudyCell, checkpoint: Checkpoint, *, version, harness: str, user) -> None:
    training = checkpoint.run
    if evaluation_job(training, version) is not None:
        mark(cell, StudyCell.Status.RUNNING)
        return
    ended = (
        JobRun.objects.filter(
            kind=EVALUATE_JOB,
            params__run_id=training.pk,
            params__version_id=version.pk,
            status__in=JobRun.FINISHED,
            created_at__gte=study.created_at,
        )
        .order_by("-pk")
        .first()
    )
    if ended is not None and ended.status != JobRun.Status.SUCCEEDED:
        last = (ended.error or ended.status).strip().splitlines()[-1:] or [ended.status]
        fail(cell, f"serving and evaluating training run #{training.pk} failed (job #{ended.pk}): {last[0]}")
        return
    if ended is not None and ended.created_at > checkpoint.created_at:
        fail(cell, f"job #{ended.pk} evaluated training run #{training.pk} but made no run for step {checkpoint.step}")
        return
    try:
        request_evaluation(training, version, user=user, harness=harness, include_base=False)
    except EvaluationError as exc:
        fail(cell, f"the checkpoint could not be evaluated: {exc}")
        return
    mark(cell, StudyCell.Status.RUNNING)
