"""The validation loss of a real SFT run: a dataset with a validation split is exported beside the train split, the
trainer (accelerate launch, a tiny Qwen3 on CPU) evaluates it at each save, and each step's row holds it beside the
training loss, as the run page, the overlay and a checkpoint's metrics read it."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from training_jobs.models import Checkpoint, DatasetSample, TrainingMetric, TrainingRun
from training_jobs.run_jobs import run_dir

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.once, pytest.mark.usefixtures("training_dir")]


def test_an_sft_run_logs_the_validation_loss_at_each_checkpoint(dataset, tiny_model_path):
    validation = dataset.samples.filter(split=DatasetSample.Split.VALIDATION)
    assert validation.exists()  # the corpus keeps one task aside
    out = StringIO()
    call_command(
        "train",
        "--kind",
        "sft",
        "--dataset",
        str(dataset.pk),
        "--base-model",
        tiny_model_path,
        "--preset",
        "tiny-cpu",
        "--cpu",
        "--here",
        "--json",
        stdout=out,
        stderr=StringIO(),
    )
    run = TrainingRun.objects.get(pk=json.loads(out.getvalue().strip().splitlines()[-1])["run"])
    assert run.status == "succeeded", run.log_tail
    exported = (run_dir(run) / "validation.jsonl").read_text().splitlines()
    assert len(exported) == validation.count()
    config = json.loads((run_dir(run) / f"trainer-{run.attempt}.json").read_text())
    assert config["eval_dataset_path"] == str(run_dir(run) / "validation.jsonl")
    rows = list(TrainingMetric.objects.filter(run=run).order_by("step"))
    assert [row.step for row in rows] == [1, 2]  # one row a step: the validation loss joined its step's
    for row in rows:  # tiny-cpu saves (and so evaluates) at every step
        assert row.values["loss"] > 0 and row.values["eval_loss"] > 0, row.values
    assert Checkpoint.objects.get(run=run, step=2).metrics["eval_loss"] == rows[-1].values["eval_loss"]
