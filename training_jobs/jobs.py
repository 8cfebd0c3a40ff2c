"""Background entry points of training (registered with jobs.registry on start-up): each takes ids, can run twice
safely, reports its progress to its JobRun, and hands the work to the module that does it (datasets' services, the
training runs, serving, base models, checkpoint evaluations). Their names are job_kinds'."""

from django.contrib.auth import get_user_model
from django.urls import reverse

from benchmarks.models import BenchmarkVersion
from jobs.registry import job

from .base_models import add_converted
from .evaluations import evaluate_checkpoints
from .job_kinds import BUILD_JOB, CONVERT_JOB, EVALUATE_JOB, RL_RUN_JOB, SERVE_JOB, SFT_RUN_JOB, STOP_IDLE_SERVERS_JOB
from .models import TrainingDataset, TrainingRun
from .run_jobs import execute_training
from .services.datasets import empty_reason, fill_dataset, summary
from .serving import kill_stopped_here, start_requested_server, stop_idle_servers


def _dataset_subject(params: dict) -> tuple[str, str]:
    pk = params.get("dataset_id")
    return f"dataset #{pk}", reverse("training:dataset", args=[pk]) if pk else ""


def _run_subject(params: dict) -> tuple[str, str]:
    return f"training run #{params.get('run_id')}", f"/training/runs/{params.get('run_id')}/"


def _server_subject(params: dict) -> tuple[str, str]:
    if params.get("base_model"):
        return f"base model {params['base_model']}'s server #{params.get('server_id')}", "/training/base-models/"
    return f"checkpoint server #{params.get('server_id')}", f"/training/runs/{params.get('run_id')}/"


def _base_model_subject(params: dict) -> tuple[str, str]:
    return f"base model {params.get('name', '?')}", reverse("training:base-models")


@job(BUILD_JOB, queue="default", title="Build a training dataset", subject=_dataset_subject)
def build_dataset(ctx, *, dataset_id: int) -> dict:
    """Select, filter, split and hash the dataset's samples (training_jobs.services.datasets.fill_dataset). A
    second delivery of a dataset built already returns its summary without building it again."""
    dataset = TrainingDataset.objects.get(pk=dataset_id)
    ctx.progress(0, 1, f"building {dataset}")
    dataset = fill_dataset(dataset)
    ctx.log(f"{dataset.trajectories_count} trajectories kept; left out: {dataset.excluded or 'none'}")
    if dataset.status == dataset.Status.EMPTY:  # built to its end, with nothing to train on: not a success
        ctx.items_failed(1, of=1, reason=f"The dataset is empty: {empty_reason(dataset)}.")
    ctx.progress(1, 1, f"empty: {empty_reason(dataset)}" if dataset.status == dataset.Status.EMPTY else "ready")
    return summary(dataset)


@job(SFT_RUN_JOB, queue="gpu", title="SFT run", subject=_run_subject)
def sft_run(ctx, *, run_id: int):
    return execute_training(run_id, ctx=ctx)


@job(RL_RUN_JOB, queue="gpu", title="RL run", subject=_run_subject)
def rl_run(ctx, *, run_id: int):
    return execute_training(run_id, ctx=ctx)


@job(SERVE_JOB, queue="gpu", title="Serve a model", subject=_server_subject)
def serve_checkpoint_job(ctx, *, server_id: int, run_id: int | None = None, base_model: str | None = None) -> dict:
    """Start the row's server (a checkpoint's or a registered base model's; run_id and base_model only say which, for
    the jobs page) on this gpu worker and return once it answers; it outlives the job (a session of its own). A
    second run of the job does nothing to a row no longer starting (serving.start_requested_server)."""
    return start_requested_server(server_id, progress=ctx.progress)


@job(STOP_IDLE_SERVERS_JOB, queue="gpu", title="Stop idle checkpoint servers")
def stop_idle_servers_job(ctx) -> dict:
    killed = kill_stopped_here()
    return {"stopped": stop_idle_servers(), **({"killed": killed} if killed else {})}


@job(CONVERT_JOB, queue="gpu", title="Convert a base model", subject=_base_model_subject)
def convert_base_model_job(ctx, *, name: str) -> dict:
    """Convert and register the shipped model `name` (a second delivery finds it registered and does nothing)."""
    ctx.progress(0, 1, f"converting {name}")
    row, created = add_converted(name, log=ctx.log)
    ctx.progress(1, 1, "registered" if created else "registered already")
    return {"base_model": row.name, "path": row.path, "created": created}


@job(EVALUATE_JOB, queue="gpu", title="Evaluate every checkpoint", subject=_run_subject)
def evaluate_checkpoints_job(
    ctx,
    *,
    run_id: int,
    version_id: int,
    user_id: int | None = None,
    harness: str | None = None,
    include_base: bool = True,
) -> dict:
    """Serve the base model and each checkpoint on this gpu worker (detached: they outlive the job) and start their
    evaluation runs; a second run of the job starts only what the first did not."""
    run = TrainingRun.objects.get(pk=run_id)
    version = BenchmarkVersion.objects.get(pk=version_id)
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    ctx.progress(0, run.checkpoints.count() + int(include_base), f"serving and evaluating on {version}")
    started = evaluate_checkpoints(
        run, version, user=user, harness=harness, include_base=include_base, progress=ctx.progress
    )
    return {"run": run.pk, "evaluations": [{"eval_run": e.pk, "endpoint": e.endpoint.name} for e in started]}
