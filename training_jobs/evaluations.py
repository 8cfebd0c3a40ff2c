"""Evaluate every checkpoint of a run on a benchmark version: serve each one (and the base model), start an
evaluation run per endpoint (evaluation.runs.start_eval_run), record CheckpointEvaluation rows and the run's
base_eval_run. Every server, the base model's included, is a ModelServer row: they stay up while their rollouts run
and are stopped when idle (training_jobs.serving.stop_idle_servers)."""

from evaluation.runs import start_eval_run

from .models import CheckpointEvaluation, TrainingRun
from .serving import ServingError, serve_base_model, serve_checkpoint


class EvaluationError(RuntimeError):
    pass


def evaluate_checkpoints(run: TrainingRun, version, *, user=None, harness: str | None = None,
                         include_base: bool = True) -> list:  # fmt: skip
    """The evaluation runs started (the base model's first when asked, then one per checkpoint in step order)."""
    checkpoints = list(run.checkpoints.order_by("step"))
    if not checkpoints:
        raise EvaluationError(f"run #{run.pk} has no checkpoint yet")
    started = []
    try:
        if include_base:
            endpoint = serve_base_model(run).endpoint
            eval_run, _ = start_eval_run(endpoint=endpoint, benchmark_version=version, harness=harness, user=user,
                                         name=f"base of training run #{run.pk} on {version}")  # fmt: skip
            TrainingRun.objects.filter(pk=run.pk).update(base_eval_run=eval_run)
            started.append(eval_run)
        for checkpoint in checkpoints:
            server = serve_checkpoint(checkpoint)
            eval_run, _ = start_eval_run(endpoint=server.endpoint, benchmark_version=version, harness=harness,
                                         user=user, name=f"{server.endpoint.name} on {version}")  # fmt: skip
            CheckpointEvaluation.objects.get_or_create(checkpoint=checkpoint, eval_run=eval_run)
            started.append(eval_run)
    except ServingError as exc:
        raise EvaluationError(f"serving failed after {len(started)} evaluation run(s) started: {exc}") from exc
    return started
