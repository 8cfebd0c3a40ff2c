"""Evaluate every checkpoint of a run on a benchmark version: serve each one (and the base model), start an
evaluation run per endpoint (evaluation.runs.start_eval_run), record CheckpointEvaluation rows and the run's
base_eval_run. Every server, the base model's included, is a ModelServer row: they stay up while their rollouts run
and are stopped when idle (training_jobs.serving.stop_idle_servers).

The pages and the API never serve anything themselves: request_evaluation() queues the
`training.evaluate_checkpoints` job (gpu queue), which calls evaluate_checkpoints() on its worker, so the servers
live there and their endpoints name the host it advertises (CLAWGYM_SERVE_ADVERTISE_HOST, see serving.py).
`manage.py evaluate_checkpoints` calls it on the machine it runs on and waits. A checkpoint (or base model) already
evaluated on the version is not served nor started again: the job can run twice, and a second request adds only
the checkpoints saved since."""

from django.contrib.auth import get_user_model
from django.db import transaction

from evaluation.runs import start_eval_run
from jobs.models import JobRun
from jobs.registry import job

from .models import CheckpointEvaluation, TrainingRun
from .serving import ServingError, serve_base_model, serve_checkpoint

EVALUATE_JOB = "training.evaluate_checkpoints"


class EvaluationError(RuntimeError):
    pass


def evaluate_checkpoints(run: TrainingRun, version, *, user=None, harness: str | None = None,
                         include_base: bool = True, progress=None) -> list:  # fmt: skip
    """The evaluation runs of the base model (first, when asked) and of every checkpoint in step order on the
    version: those evaluated already as they are, the others served here and started. `progress(done, total,
    message)` is told after each."""
    checkpoints = list(run.checkpoints.order_by("step"))
    if not checkpoints:
        raise EvaluationError(f"run #{run.pk} has no checkpoint yet")
    earlier = {e.checkpoint_id: e.eval_run for e in CheckpointEvaluation.objects.filter(
        checkpoint__run=run, eval_run__benchmark_version=version).select_related("eval_run", "eval_run__endpoint")}  # fmt: skip
    base_run = (
        run.base_eval_run if run.base_eval_run_id and run.base_eval_run.benchmark_version_id == version.pk else None
    )
    total = len(checkpoints) + int(include_base)
    report = progress or (lambda done, total, message: None)
    started = []
    try:
        if include_base:
            if base_run is None:
                endpoint = serve_base_model(run).endpoint
                base_run, _ = start_eval_run(endpoint=endpoint, benchmark_version=version, harness=harness,
                                             user=user, name=f"base of training run #{run.pk} on {version}")  # fmt: skip
                TrainingRun.objects.filter(pk=run.pk).update(base_eval_run=base_run)
            started.append(base_run)
            report(len(started), total, f"base model: evaluation run #{base_run.pk}")
        for checkpoint in checkpoints:
            eval_run = earlier.get(checkpoint.pk)
            if eval_run is None:
                server = serve_checkpoint(checkpoint)
                eval_run, _ = start_eval_run(endpoint=server.endpoint, benchmark_version=version, harness=harness,
                                             user=user, name=f"{server.endpoint.name} on {version}")  # fmt: skip
                CheckpointEvaluation.objects.get_or_create(checkpoint=checkpoint, eval_run=eval_run)
            started.append(eval_run)
            report(len(started), total, f"step {checkpoint.step}: evaluation run #{eval_run.pk}")
    except ServingError as exc:
        raise EvaluationError(f"serving failed after {len(started)} evaluation run(s) started: {exc}") from exc
    return started


def request_evaluation(run: TrainingRun, version, *, user=None, harness: str | None = None,
                       include_base: bool = True) -> JobRun:  # fmt: skip
    """Queue the training.evaluate_checkpoints job on a gpu worker and return its JobRun at once; while one for the
    same run and version is queued or running, that one."""
    from jobs import enqueue

    if not run.checkpoints.exists():
        raise EvaluationError(f"run #{run.pk} has no checkpoint yet")
    with transaction.atomic():
        # Two clicks at once: the second waits for the first's job row (PostgreSQL; SQLite writes one at a time).
        TrainingRun.objects.select_for_update().filter(pk=run.pk).first()
        current = evaluation_job(run, version)
        if current is not None:
            return current
        return enqueue(EVALUATE_JOB, created_by=user, run_id=run.pk, version_id=version.pk,
                       user_id=user.pk if user is not None and user.is_authenticated else None, harness=harness,
                       include_base=include_base)  # fmt: skip


def evaluation_job(run: TrainingRun, version=None) -> JobRun | None:
    """The run's evaluate job still queued or running (on that version, when given): the run page polls while it is."""
    jobs = JobRun.objects.filter(kind=EVALUATE_JOB, params__run_id=run.pk, status__in=JobRun.ACTIVE)
    if version is not None:
        jobs = jobs.filter(params__version_id=version.pk)
    return jobs.order_by("-pk").first()


def _evaluate_subject(params: dict) -> tuple[str, str]:
    return f"training run #{params.get('run_id')}", f"/training/runs/{params.get('run_id')}/"


@job(EVALUATE_JOB, queue="gpu", title="Evaluate every checkpoint", subject=_evaluate_subject)
def evaluate_checkpoints_job(ctx, *, run_id: int, version_id: int, user_id: int | None = None,
                             harness: str | None = None, include_base: bool = True) -> dict:  # fmt: skip
    """Serve the base model and each checkpoint on this gpu worker (detached: they outlive the job) and start their
    evaluation runs; a second run of the job starts only what the first did not."""
    from review.models import BenchmarkVersion

    run = TrainingRun.objects.get(pk=run_id)
    version = BenchmarkVersion.objects.get(pk=version_id)
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    ctx.progress(0, run.checkpoints.count() + int(include_base), f"serving and evaluating on {version}")
    started = evaluate_checkpoints(run, version, user=user, harness=harness, include_base=include_base,
                                   progress=ctx.progress)  # fmt: skip
    return {"run": run.pk, "evaluations": [{"eval_run": e.pk, "endpoint": e.endpoint.name} for e in started]}
