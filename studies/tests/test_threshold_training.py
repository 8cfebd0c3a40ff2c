"""A reward-threshold cell trains for real: the SFT run the study starts on its own dataset is run here as its gpu
job would run it (training_jobs.run_jobs.execute_training: `accelerate launch` of the SFT trainer on CPU, the tiny
Qwen3), and the next step of the study asks for its last checkpoint to be served and evaluated."""

import os

import pytest

from evaluation.tests.evalkit import make_tasks
from evaluation.tests.helpers import freeze
from jobs.models import JobRun
from studies.models import StudyCell
from studies.services import advance_study, create_study
from training_jobs.job_kinds import EVALUATE_JOB
from training_jobs.models import BaseModel, TrainingRun
from training_jobs.run_jobs import execute_training
from training_jobs.tests.datakit import make_corpus
from training_jobs.tiny import tiny_model

pytestmark = [pytest.mark.once, pytest.mark.django_db(transaction=True)]


def test_the_cells_sft_run_trains_on_its_dataset_and_its_checkpoint_is_sent_to_evaluation(
    settings, tmp_path, monkeypatch
):
    settings.CLAWGYM_TRAINING_DIR = tmp_path / "training"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    corpus = make_corpus()
    version = freeze(make_tasks().values())
    BaseModel.objects.create(name="tiny", path=str(tiny_model(tmp_path / "tiny-qwen3")))
    study = create_study(
        kind="reward_threshold",
        params={"values": "0.5", "eval_runs": [corpus.run.pk], "base_model": "tiny", "benchmark_version": version.pk},
        user=None,
    )
    advance_study(study.pk)  # the dataset
    advance_study(study.pk)  # the SFT run
    cell = study.cells.get()
    run = cell.training_run
    assert run.dataset_id == cell.dataset_id and run.cpu and run.preset == "tiny-cpu"

    execute_training(run.pk)  # what its gpu job does
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.SUCCEEDED, run.log_tail
    assert run.checkpoints.exists() and os.path.isdir(run.checkpoints.order_by("-step").first().path)

    advance_study(study.pk)
    cell.refresh_from_db()
    assert cell.status == StudyCell.Status.RUNNING and cell.error == ""
    job = JobRun.objects.get(kind=EVALUATE_JOB)
    assert (job.params["run_id"], job.params["version_id"], job.queue) == (run.pk, version.pk, "gpu")
