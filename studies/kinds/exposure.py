"""training_exposure: the checkpoint curve of a training run as a study. Each checkpoint (by step) is a cell,
evaluated on a benchmark version the way "evaluate every checkpoint" does it (served on a gpu worker); a checkpoint
evaluated on the version already is not evaluated again."""

from __future__ import annotations

from benchmarks.models import BenchmarkVersion
from training_jobs.models import TrainingRun

from ..models import Study, StudyCell
from . import params as params_
from .base import StudyError, StudyKind, fail
from .checkpoints import evaluate_checkpoint


class TrainingExposure(StudyKind):
    name = "training_exposure"
    title = "Training exposure: every checkpoint of a run evaluated"
    axis = "step"

    def prepare(self, params: dict, *, user) -> dict:
        value = params.get("training_run")
        if value in (None, ""):
            raise StudyError("a training run is needed (training_run: its id)")
        run = TrainingRun.objects.filter(pk=params_.an_id(value, "training_run")).first()
        if run is None:
            raise StudyError(f"no training run #{value}")
        steps = list(run.checkpoints.order_by("step").values_list("step", flat=True))
        if not steps:
            raise StudyError(f"training run #{run.pk} has no checkpoint yet")
        version = params_.version(params.get("benchmark_version"))
        return {
            "training_run": run.pk,
            "benchmark_version": version.pk,
            "harness": params_.harness(params.get("harness")),
            "steps": steps,
        }

    def cells(self, params: dict) -> list[dict]:
        return [{"step": step} for step in params["steps"]]

    def advance(self, study: Study, cell: StudyCell, *, user, here: bool = False) -> None:
        params = study.params
        checkpoint = (
            TrainingRun.objects.get(pk=params["training_run"]).checkpoints.filter(step=cell.coordinates["step"]).first()
        )
        if checkpoint is None:
            fail(cell, f"training run #{params['training_run']} has no checkpoint at step {cell.coordinates['step']}")
            return
        version = BenchmarkVersion.objects.get(pk=params["benchmark_version"])
        evaluate_checkpoint(study, cell, checkpoint, version=version, harness=params["harness"], user=user)
