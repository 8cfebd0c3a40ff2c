"""Training runs for training_jobs' tests: one executed in a thread of the test and its trainer's pid, a finished run
with metric rows, a finished run with a checkpoint to serve, and what the serving worker (conftest's `gpu_worker`) is
started with."""

import threading
from pathlib import Path

from lib.testing import wait_until
from training_jobs.kinds.sft import build_config
from training_jobs.models import Checkpoint, TrainingMetric, TrainingRun
from training_jobs.run_jobs import execute_training, run_dir


def in_thread(run_id: int) -> threading.Thread:
    def body():
        from django.db import connection

        try:
            execute_training(run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def trainer_pid(run: TrainingRun) -> int:
    path = run_dir(run) / "trainer.pid"
    wait_until(path.exists, "the trainer's pid file", timeout=300)
    return int(path.read_text())


def served_run(model_path: str, tmp_path: Path, *, lora_without_hash: bool = False) -> Checkpoint:
    """A finished run with one checkpoint: a folder of its own linked to the tiny model (or a LoRA adapter with no
    sha256, which cannot be merged)."""
    run = TrainingRun.objects.create(
        name="served",
        base_model_path=model_path,
        config=build_config("tiny-cpu"),
        preset="tiny-cpu",
        cpu=True,
        status=TrainingRun.Status.SUCCEEDED,
    )
    folder = tmp_path / f"run-{run.pk}" / "checkpoint-2"
    folder.parent.mkdir(parents=True)
    if lora_without_hash:
        folder.mkdir()
        (folder / "adapter_config.json").write_text("{}")
    else:
        folder.symlink_to(model_path, target_is_directory=True)
    return Checkpoint.objects.create(run=run, step=2, path=str(folder))


def make_run(name: str, kind: str = "sft", steps: dict | None = None, **fields) -> TrainingRun:
    """A run with one metric row per step of `steps` ({step: values}); an RL step may be two rows (`[values, …]`)."""
    fields = {"status": "succeeded", "steps": max(steps or {0: None})} | fields
    run = TrainingRun.objects.create(name=name, kind=kind, base_model_path="/models/tiny", **fields)
    for step, values in (steps or {}).items():
        for row in values if isinstance(values, list) else [values]:
            TrainingMetric.objects.create(run=run, step=step, epoch=step / 10, values=row)
    return run


MAX_BODY = 64 * 1024


PROBE = "probe-secret-of-the-worker"
