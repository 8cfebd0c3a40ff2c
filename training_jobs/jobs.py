"""Background entry points of training (registered with jobs.registry on start-up)."""

from django.urls import reverse

from jobs.registry import job

from .job_kinds import BUILD_JOB
from .models import TrainingDataset
from .services.datasets import empty_reason, fill_dataset, summary


def _dataset_subject(params: dict) -> tuple[str, str]:
    pk = params.get("dataset_id")
    return f"dataset #{pk}", reverse("training:dataset", args=[pk]) if pk else ""


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


from . import base_models, evaluations, run_jobs, serving  # noqa: E402,F401  (training.sft_run, .serve_checkpoint, .evaluate_checkpoints, .convert_base_model, … gpu queue)
