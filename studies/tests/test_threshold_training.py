"""A reward-threshold study end to end on CPU, each gpu job run here as its worker would run it: the SFT run the
study starts on its own dataset (training_jobs.run_jobs.execute_training: `accelerate launch` of the SFT trainer, the
tiny Qwen3), then "evaluate every checkpoint" (its job body: the last checkpoint served by `transformers serve` and
its evaluation run started), whose rollouts run here through the live proxy and bubblewrap with the builtin harness.
The tiny model's answers are noise: what is checked is that the study gets its figures, not how good they are."""

import os
from io import StringIO

import pytest
from django.core.management import call_command

from evaluation.services.runs import run_here
from evaluation.testing import freeze, make_tasks, needs_bwrap
from jobs.models import JobRun
from jobs.runner import execute
from studies.models import Study, StudyCell
from studies.services import advance_study, create_study, study_json
from training.tiny_model import tiny_model
from training_jobs.job_kinds import EVALUATE_JOB
from training_jobs.models import BaseModel, CheckpointEvaluation, ModelServer, TrainingRun
from training_jobs.run_jobs import execute_training
from training_jobs.testing.corpus import make_corpus

pytestmark = [needs_bwrap, pytest.mark.once, pytest.mark.django_db(transaction=True)]


def test_a_threshold_cell_trains_is_served_and_evaluated(live_server_asgi, settings, tmp_path, monkeypatch):
    settings.CLAWGYM_SERVE_BACKEND = "transformers"
    settings.CLAWGYM_SERVED_MAX_TOKENS = 32  # the tiny model's noise never ends a turn: a call stops at the cap
    settings.CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS = 0
    settings.CLAWGYM_TRAINING_DIR = tmp_path / "training"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    corpus = make_corpus()
    version = freeze([make_tasks()["eval-a"]])  # one task: the tiny model's rollouts are slow on a busy CPU
    BaseModel.objects.create(name="tiny", path=str(tiny_model(tmp_path / "tiny-qwen3")))
    study = create_study(
        kind="reward_threshold",
        params={
            "values": "0.5",
            "eval_runs": [corpus.run.pk],
            "base_model": "tiny",
            "benchmark_version": version.pk,
            # One checkpoint, so one server started: that the job serves every checkpoint of a run is
            # training_jobs/tests/test_serving.py's test_evaluate_checkpoints_serves_each_and_the_base_and_charts_them.
            "overrides": {"save_steps": 2},
        },
        user=None,
    )
    advance_study(study.pk)  # the dataset
    advance_study(study.pk)  # the SFT run
    cell = study.cells.get()
    run = cell.training_run
    assert run.dataset_id == cell.dataset_id and run.cpu and run.preset == "tiny-cpu"
    assert (run.config["max_steps"], run.config["save_steps"]) == (2, 2)  # the study's overrides reach its run

    execute_training(run.pk)  # what its gpu job does
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.SUCCEEDED, run.log_tail
    assert run.checkpoints.exists() and os.path.isdir(run.checkpoints.order_by("-step").first().path)

    advance_study(study.pk)
    cell.refresh_from_db()
    assert cell.status == StudyCell.Status.RUNNING and cell.error == ""
    job = JobRun.objects.get(kind=EVALUATE_JOB)
    assert (job.params["run_id"], job.params["version_id"], job.queue) == (run.pk, version.pk, "gpu")

    try:
        assert execute(job.pk) == JobRun.Status.SUCCEEDED, JobRun.objects.get(pk=job.pk).error  # served, run started
        cell.refresh_from_db()
        # The run's one checkpoint (its last step's) is evaluated, the job's way; it is the cell's.
        last = run.checkpoints.get()
        assert last.step == 2
        assert CheckpointEvaluation.objects.filter(checkpoint__run=run).count() == run.checkpoints.count()
        evaluation = CheckpointEvaluation.objects.get(checkpoint=last).eval_run
        assert evaluation.endpoint.name == f"ckpt-{run.pk}-{last.step}"
        advance_study(study.pk)
        cell.refresh_from_db()
        assert cell.eval_run == evaluation and cell.status == StudyCell.Status.RUNNING
        evaluation = run_here(evaluation)
        assert evaluation.status == "complete", evaluation.summary
        study = advance_study(study.pk)
    finally:
        for server in ModelServer.objects.exclude(status="stopped").exclude(endpoint=None):
            call_command("serve_checkpoint", "--stop", server.endpoint.name, stdout=StringIO())
    assert study.status == Study.Status.COMPLETE
    report = study_json(study)
    [row] = report["cells"]
    assert (row["dataset"], row["training_run"], row["eval_run"]) == (cell.dataset_id, run.pk, evaluation.pk)
    assert 0.0 <= row["mean"] <= 1.0 and row["mean"] == evaluation.summary["overall"]["mean"]
    assert report["best"]["label"] == "threshold 0.5" and report["missing"] == [] and report["comparisons"] == []
