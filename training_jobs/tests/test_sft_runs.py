"""SFT runs on CPU with a tiny Qwen3: the same `accelerate launch -m training.trainers.sft` path a GPU worker
takes, its metrics and checkpoints in the database, `train --json`, cancel, and a killed trainer resumed from its
last checkpoint."""

import json
import os
import signal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from lib.testing import wait_until
from training_jobs.kinds import TrainingRunError, parse_overrides
from training_jobs.kinds.sft import build_config
from training_jobs.models import Checkpoint, TrainingMetric, TrainingRun
from training_jobs.run_jobs import group_alive, hash_folder, run_dir
from training_jobs.services.runs import cancel_training_run, clone_training_run, start_training_run
from training_jobs.testing.runs import in_thread, trainer_pid

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("training_dir")]


# --- config --------------------------------------------------------------------------------------------------


def test_paper_preset_and_typed_edits():
    config = build_config("paper")
    assert (config["learning_rate"], config["num_train_epochs"], config["global_batch_size"]) == (1e-5, 3.0, 128)
    assert (config["max_length"], config["packing"], config["bf16"]) == (65536, True, True)
    assert config["gradient_accumulation_steps"] == 16  # 128 / (1 per device × 8 GPUs)
    edited = build_config(
        "paper",
        parse_overrides(
            ["lora.enabled=true", "distributed.gpus=4", "learning_rate=2e-5", "distributed.deepspeed=zero2"]
        ),
    )
    assert edited["lora"]["enabled"] is True and edited["gradient_accumulation_steps"] == 32
    assert edited["distributed"]["deepspeed"] == "zero2" and edited["learning_rate"] == 2e-5
    for bad, says in [
        ("lora.rank=8", "unknown config key 'lora.rank'"),
        ("packing=3", "true or false"),
        ("save_steps=1.5", "an integer"),
        ("distributed.deepspeed=zero9", "one of"),
        ("distributed.gpus=3", "not a multiple"),
    ]:
        with pytest.raises(TrainingRunError, match=says):
            build_config("paper", parse_overrides([bad]))
    with pytest.raises(TrainingRunError, match="not both"):
        build_config("paper", parse_overrides(["distributed.fsdp=fsdp2"]))


def test_start_stores_the_whole_config_and_queues_a_gpu_job(dataset, tiny_model_path, settings):
    settings.CLAWGYM_TRAINING_GPUS = 8  # the paper preset's (this machine may have none: the run is only queued)
    run = start_training_run(
        kind="sft",
        dataset=dataset,
        base_model_path=tiny_model_path,
        preset="paper",
        overrides={"save_steps": 10},
        user=None,
    )
    run.refresh_from_db()
    assert run.job_run.kind == "training.sft_run" and run.job_run.queue == "gpu"
    assert run.config["save_steps"] == 10 and run.config["yarn"]["factor"] == 2.0 and run.status == "queued"
    clone = clone_training_run(run, {"learning_rate": 3e-5}, enqueue=False, user=None)
    assert clone.cloned_from == run and clone.config == {**run.config, "learning_rate": 3e-5}
    cancelled = cancel_training_run(run, user=None)
    assert cancelled.status == "cancelled" and cancelled.job_run.status == "cancelled"


# --- training -------------------------------------------------------------------------------------------------


def test_two_sft_steps_through_accelerate_launch(dataset, tiny_model_path):
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
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    run = TrainingRun.objects.get(pk=report["run"])
    assert set(report) == {"run", "status", "steps", "checkpoints", "metrics"}
    assert report["status"] == "succeeded" and report["steps"] == 2, run.log_tail
    assert [c["step"] for c in report["checkpoints"]] == [1, 2]
    assert len(report["metrics"]["loss"]) == 2 and all(loss > 0 for loss in report["metrics"]["loss"])
    assert "accelerate.commands.launch" in run.log_tail and "training.trainers.sft" in run.log_tail
    metric = TrainingMetric.objects.filter(run=run).order_by("step").last()
    assert metric.step == 2 and metric.values["learning_rate"] > 0 and metric.values["tokens_per_second"] > 0
    checkpoint = Checkpoint.objects.get(run=run, step=2)
    assert (Path(checkpoint.path) / "config.json").exists()
    assert (checkpoint.sha256, checkpoint.size_bytes) == hash_folder(Path(checkpoint.path))
    assert checkpoint.metrics["loss"] == report["metrics"]["loss"][-1]
    accelerate = json.loads((run_dir(run) / "accelerate.json").read_text())
    assert accelerate["use_cpu"] is True and accelerate["num_processes"] == 1


def test_cancel_kills_the_trainer(dataset, tiny_model_path):
    run = start_training_run(
        kind="sft",
        dataset=dataset,
        base_model_path=tiny_model_path,
        preset="tiny-cpu",
        cpu=True,
        overrides={"max_steps": 400, "save_steps": 100},
        enqueue=False,
        user=None,
    )
    thread = in_thread(run.pk)
    pid = trainer_pid(run)
    wait_until(lambda: TrainingMetric.objects.filter(run=run).exists(), "a first metric", timeout=300)
    cancel_training_run(run, user=None)
    thread.join(timeout=60)
    assert not thread.is_alive()
    run.refresh_from_db()
    assert run.status == "cancelled" and run.steps < 400
    assert not group_alive(pid)  # accelerate and the trainer are gone


def test_a_killed_trainer_resumes_from_its_last_checkpoint(dataset, tiny_model_path):
    run = start_training_run(
        kind="sft",
        dataset=dataset,
        base_model_path=tiny_model_path,
        preset="tiny-cpu",
        cpu=True,
        overrides={"max_steps": 400, "save_steps": 2},
        enqueue=False,
        user=None,
    )
    thread = in_thread(run.pk)
    pid = trainer_pid(run)
    wait_until(lambda: Checkpoint.objects.filter(run=run).exists(), "a first checkpoint", timeout=300)
    os.killpg(pid, signal.SIGKILL)
    thread.join(timeout=60)
    run.refresh_from_db()
    assert run.status == "failed" and "killed by signal 9" in run.error and "--resume" in run.error
    last = Checkpoint.objects.filter(run=run).order_by("-step").first()

    out = StringIO()
    call_command(
        "train",
        "--resume",
        str(run.pk),
        "--set",
        f"max_steps={last.step + 2}",
        "--here",
        "--json",
        stdout=out,
        stderr=StringIO(),
    )
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    run.refresh_from_db()
    assert report["status"] == "succeeded" and report["steps"] == last.step + 2, run.log_tail
    assert run.attempt == 2 and run.resumed_from == last
    assert f"resumed from checkpoint step {last.step}" in run.log_tail
    assert report["checkpoints"][-1]["step"] == last.step + 2
    # The resumed trainer logged from past the checkpoint on: one metric per step, none twice.
    steps = list(TrainingMetric.objects.filter(run=run).order_by("step").values_list("step", flat=True))
    assert steps == sorted(set(steps)) and steps[-1] == last.step + 2


def test_train_without_a_gpu_worker_says_how_to_start_one(dataset, tiny_model_path):
    with pytest.raises(CommandError, match="gpu queue.*--here"):
        call_command(
            "train",
            "--dataset",
            str(dataset.pk),
            "--base-model",
            tiny_model_path,
            "--preset",
            "tiny-cpu",
            "--cpu",
            "--start-timeout",
            "0.5",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    run = TrainingRun.objects.get()
    assert run.status == "cancelled" and run.job_run.status == "cancelled"
