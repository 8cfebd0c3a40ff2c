"""The `gpu` jobs of SFT and RL runs: write the trainer's config and the accelerate config, launch `accelerate launch
-m training.trainers.sft|grpo CONFIG.json` in a process group of its own, and stream the JSON events it prints
into TrainingMetric and Checkpoint rows. An SFT run's dataset is exported first; an RL run's trainer asks this job
for each step's rollouts over a loopback bridge (training_jobs.rl.batches), so the trainer never needs Django.

The trainer prints one JSON line per event ({"event": "dataset" | "start" | "metric" | "eval" | "checkpoint" |
"finished" | "error", …}); every other line is its log. An "eval" (the validation split's loss, SFT) joins its step's
metric row. A run ends "succeeded" only when the trainer finished and its prepared
dataset held trainable tokens; an "error" event is the trainer's refusal, and becomes the run's error as it says it. The job watches for a cancel (the run's status, or its JobRun's cancel request) and kills the group. If
the worker itself is killed, the trainer notices its watched parent is gone and exits (CLAWGYM_WATCH_PID): the run
keeps its checkpoints and `train --resume RUN` goes on from the last one.
"""

import contextlib
import hashlib
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F, TextField, Value
from django.db.models.functions import Concat, Right
from django.utils import timezone

from jobs.runner import JobCancelled
from lib import nulsafe
from llm.models import served_key

from .child_env import child_env
from .exports import export_messages
from .folders import run_dir, tensorboard_dir
from .models import Checkpoint, DatasetSample, TrainingMetric, TrainingRun
from .rl.batches import RolloutBridge, disable_policy_endpoint, policy_key_env
from .serving import stop_idle_servers

LOG_TAIL_CHARS = 20_000
KILL_GRACE_SECONDS = 10


class TrainingCancelled(Exception):
    pass


def execute_training(run_id: int, ctx=None) -> dict:
    """Run one attempt of the run to its end (the job body; `train --here` calls it without a job context)."""
    _stop_idle_servers()
    claimed = TrainingRun.objects.filter(pk=run_id, status=TrainingRun.Status.QUEUED).update(
        status=TrainingRun.Status.RUNNING,
        attempt=F("attempt") + 1,
        started_at=timezone.now(),
        finished_at=None,
        error="",
    )
    if not claimed and ctx is not None:
        claimed = _claim_after_lost_worker(run_id, ctx)
    run = TrainingRun.objects.select_related("dataset", "resumed_from").get(pk=run_id)
    if not claimed:
        return {"run": run.pk, "status": run.status, "note": "not queued: nothing to do"}
    folder = run_dir(run)
    folder.mkdir(parents=True, exist_ok=True)
    output_dir = folder / "output"
    TrainingRun.objects.filter(pk=run.pk).update(output_dir=str(output_dir))
    rl = run.kind == TrainingRun.Kind.RL
    with _rollout_bridge(run) as bridge:
        trainer_config = _rl_trainer_config(run, output_dir, bridge) if rl else _trainer_config(run, folder, output_dir)
        config_path = folder / f"trainer-{run.attempt}.json"
        config_path.write_text(json.dumps(trainer_config, indent=2))
        config_path.chmod(0o600)  # it holds the bridge's token
        accelerate_path = write_accelerate_config(run.config, folder, cpu=run.cpu)
        command = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(accelerate_path),
            "-m",
            f"training.trainers.{'grpo' if rl else 'sft'}",
            str(config_path),
        ]
        stream = _Stream(run)
        stream.log(f"attempt {run.attempt}: {' '.join(command)}")
        status, error = _launch(run, command, folder, stream, ctx)
        stream.flush(force=True)
    updates = {"finished_at": timezone.now(), "error": error[-5000:]}
    if status != TrainingRun.Status.CANCELLED:
        updates["status"] = status
    TrainingRun.objects.filter(pk=run.pk, status=TrainingRun.Status.RUNNING).update(**updates)
    run.refresh_from_db()
    if run.status == TrainingRun.Status.CANCELLED and ctx is not None:
        raise JobCancelled()
    if run.status == TrainingRun.Status.FAILED and ctx is not None:
        raise RuntimeError(f"training run #{run.pk} failed: {error[-500:]}")
    return {"run": run.pk, "status": run.status, "steps": run.steps}


def _claim_after_lost_worker(run_id: int, ctx) -> int:
    """The same job delivered again while its run still reads "running": its worker was lost mid-run (killed; the
    trainer, watching it, exited too) and jobs.recover_lost queued the job again. This attempt goes on from the
    run's last checkpoint, as `train --resume` would."""
    if ctx.run.attempts < 2:
        return 0
    # services.runs sits above the jobs it queues (and reaches this module through base_models): not at the top.
    from .services.runs import rewind_to

    last = Checkpoint.objects.filter(run_id=run_id).order_by("-step").first()
    with transaction.atomic():
        claimed = TrainingRun.objects.filter(pk=run_id, status=TrainingRun.Status.RUNNING, job_run=ctx.run).update(
            attempt=F("attempt") + 1,
            started_at=timezone.now(),
            finished_at=None,
            error="",
            resumed_from=last,
        )
        if claimed:
            rewind_to(TrainingRun.objects.get(pk=run_id), last)
    if claimed:
        ctx.log(
            f"the worker of the previous attempt was lost: resuming from "
            f"{f'checkpoint step {last.step}' if last else 'the start (no checkpoint)'}"
        )
    return claimed


@contextlib.contextmanager
def _rollout_bridge(run: TrainingRun):
    """An RL run's bridge to its trainer, up before the trainer starts and down after it ends; the run's policy
    endpoint is disabled then (the live policy server went with the trainer). None for an SFT run."""
    if run.kind != TrainingRun.Kind.RL:
        yield None
        return
    try:
        with RolloutBridge(run.pk) as bridge:
            yield bridge
    finally:
        disable_policy_endpoint(run)


def _rl_trainer_config(run: TrainingRun, output_dir: Path, bridge) -> dict:
    resume = run.resumed_from.path if run.resumed_from else None
    return {
        **run.config,
        "run_id": run.pk,
        "attempt": run.attempt,
        "base_model_path": run.base_model_path,
        "output_dir": str(output_dir),
        "resume_from_checkpoint": resume,
        "cpu": run.cpu,
        **_report_to(run),
        "bridge_url": bridge.url,
        "bridge_token": bridge.token,
        "policy_max_request_bytes": settings.CLAWGYM_SERVE_MAX_REQUEST_BYTES,
    }


def _stop_idle_servers() -> None:
    # A gpu worker starting a run first frees what idle checkpoint servers hold (their GPU memory above all).
    try:
        stop_idle_servers()
    except Exception:  # never in the way of the run
        logging.getLogger(__name__).exception("stopping idle checkpoint servers failed")


def _trainer_config(run: TrainingRun, folder: Path, output_dir: Path) -> dict:
    dataset_path = folder / "train.jsonl"
    if not dataset_path.exists():
        export_train_messages(run.dataset, dataset_path)
    # The validation split, when the dataset has one: the trainer evaluates it at each save (the validation loss).
    eval_path = folder / "validation.jsonl"
    if not eval_path.exists() and run.dataset.samples.filter(split=DatasetSample.Split.VALIDATION).exists():
        export_messages(run.dataset, eval_path, split=DatasetSample.Split.VALIDATION)
    resume = run.resumed_from.path if run.resumed_from else None
    return {
        **run.config,
        "run_id": run.pk,
        "attempt": run.attempt,
        "base_model_path": run.base_model_path,
        "dataset_path": str(dataset_path),
        "eval_dataset_path": str(eval_path) if eval_path.exists() else None,
        "output_dir": str(output_dir),
        "resume_from_checkpoint": resume,
        "cpu": run.cpu,
        **_report_to(run),
    }


def _report_to(run: TrainingRun) -> dict:
    """TRL's report_to, and the folder its TensorBoard events go to (the trainer sets TENSORBOARD_LOGGING_DIR)."""
    if run.report_to != "tensorboard":
        return {"report_to": "none"}
    return {"report_to": "tensorboard", "tensorboard_dir": str(tensorboard_dir(run))}


def export_train_messages(dataset, path: Path) -> int:
    """The dataset's train split as {"messages", "tools"} JSON lines; returns how many."""
    return export_messages(dataset, path, split="train")


def write_accelerate_config(config: dict, folder: Path, *, cpu: bool) -> Path:
    """accelerate's config file for the run: one process on CPU; one per GPU with DeepSpeed ZeRO-2/3 or FSDP2
    (their settings written beside it)."""
    dist = config["distributed"]
    gpus = max(dist["gpus"], 1)
    base = {
        "compute_environment": "LOCAL_MACHINE",
        "machine_rank": 0,
        "num_machines": 1,
        "main_training_function": "main",
        "rdzv_backend": "static",
        "same_network": True,
        "debug": False,
    }
    if cpu:
        accelerate = {**base, "distributed_type": "NO", "num_processes": 1, "use_cpu": True, "mixed_precision": "no"}
    else:
        precision = "bf16" if config["bf16"] else "no"
        accelerate = {
            **base,
            "num_processes": gpus,
            "use_cpu": False,
            "mixed_precision": precision,
            "distributed_type": "MULTI_GPU" if gpus > 1 else "NO",
        }
        if dist["deepspeed"]:
            stage = 3 if dist["deepspeed"] == "zero3" else 2
            ds_path = folder / "deepspeed.json"
            ds_path.write_text(json.dumps(deepspeed_config(stage, config), indent=2))
            accelerate.update(
                distributed_type="DEEPSPEED",
                deepspeed_config={"deepspeed_config_file": str(ds_path), "zero3_init_flag": stage == 3},
            )
            accelerate.pop("mixed_precision")  # the DeepSpeed file says it
        elif dist["fsdp"]:
            accelerate.update(
                distributed_type="FSDP",
                fsdp_config={
                    "fsdp_version": 2,
                    "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                    "fsdp_cpu_ram_efficient_loading": True,
                    "fsdp_offload_params": False,
                    "fsdp_reshard_after_forward": True,
                    "fsdp_state_dict_type": "SHARDED_STATE_DICT",
                    "fsdp_activation_checkpointing": bool(config["gradient_checkpointing"]),
                },
            )
    path = folder / "accelerate.json"  # accelerate reads JSON config files as well as YAML
    path.write_text(json.dumps(accelerate, indent=2))
    return path


def deepspeed_config(stage: int, config: dict) -> dict:
    zero = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True, "reduce_bucket_size": "auto"}
    if stage == 3:
        zero.update(
            stage3_gather_16bit_weights_on_model_save=True,
            stage3_prefetch_bucket_size="auto",
            stage3_param_persistence_threshold="auto",
        )
    return {
        "bf16": {"enabled": bool(config["bf16"])},
        "zero_optimization": zero,
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
    }


# --- the subprocess ---------------------------------------------------------------------------------------------


def trainer_env(**extra: str) -> dict:
    """The worker's environment by an allow-list (training_jobs.child_env: no SECRET_KEY, DATABASE_URL or model
    keys; the trainer knows no Django), offline, and what it is given on purpose."""
    return child_env(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
        CLAWGYM_WATCH_PID=str(os.getpid()),
        WANDB_DISABLED="true",
        **extra,
    )


def _launch(run: TrainingRun, command: list[str], folder: Path, stream, ctx) -> tuple[str, str]:
    extra = {}
    if run.kind == TrainingRun.Kind.RL:
        # The live policy server's key (the trainer serves it): derived here, given to the trainer alone.
        extra["CLAWGYM_POLICY_KEY"] = served_key(policy_key_env(run))
    proc = subprocess.Popen(
        command,
        cwd=settings.BASE_DIR,
        env=trainer_env(**extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
        bufsize=1,
    )
    (folder / "trainer.pid").write_text(str(proc.pid))
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=_read, args=(proc.stdout, lines), daemon=True)
    reader.start()
    try:
        while True:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                line = ""
            if line is None:  # the pipe closed: the trainer exited
                break
            if line:
                stream.line(line)
            _check_cancel(run, stream, ctx)
        rc = proc.wait()
    except BaseException as exc:  # cancelled, job lost, or this process interrupted: the trainer goes too
        kill_group(proc)
        stream.log(f"trainer stopped: {type(exc).__name__}")
        if isinstance(exc, TrainingCancelled):
            return TrainingRun.Status.CANCELLED, ""
        if isinstance(exc, JobCancelled):
            TrainingRun.objects.filter(pk=run.pk, status=TrainingRun.Status.RUNNING).update(
                status=TrainingRun.Status.CANCELLED, finished_at=timezone.now(), error="cancelled (job cancel)"
            )
            return TrainingRun.Status.CANCELLED, ""
        raise
    finally:
        reader.join(timeout=5)
    if stream.refused:  # the trainer said why it will not train: its input, which a resume would not change
        return TrainingRun.Status.FAILED, f"{stream.refused}\n" + stream.recent(3000)
    if rc == 0 and stream.finished:
        if stream.trainable_tokens == 0:
            return TrainingRun.Status.FAILED, "the trainer's steps saw no trainable token: nothing was learnt"
        return TrainingRun.Status.SUCCEEDED, ""
    why = f"the trainer exited with {rc}" + ("" if rc else " before saying it finished")
    if rc < 0:
        why = f"the trainer was killed by signal {-rc}"
    last = Checkpoint.objects.filter(run_id=run.pk).order_by("-step").first()
    then = (
        f"resumable from its last checkpoint, step {last.step} (`train --resume {run.pk}`)"
        if last
        else f"no checkpoint was saved, so `train --resume {run.pk}` starts it again from the start"
    )
    return TrainingRun.Status.FAILED, f"{why}; {then}\n" + stream.recent(3000)


def _read(pipe, lines: queue.Queue) -> None:
    for line in pipe:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def _check_cancel(run: TrainingRun, stream, ctx) -> None:
    if ctx is not None:
        ctx.progress(stream.steps, stream.total_steps, stream.message())  # raises JobCancelled
    if stream.due():
        stream.flush()
        status = TrainingRun.objects.filter(pk=run.pk).values_list("status", flat=True).first()
        if status == TrainingRun.Status.CANCELLED:
            raise TrainingCancelled()


def kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the trainer's process group (accelerate and its ranks), SIGKILL what is left after a grace."""
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_SECONDS), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while group_alive(proc.pid) and time.monotonic() < deadline:
            proc.poll()  # reap the launcher, so that it does not count as alive
            time.sleep(0.1)
        if not group_alive(proc.pid):
            break
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def group_alive(pgid: int) -> bool:
    """Whether a process of the group is still running (zombies waiting for their parent do not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


class _Stream:
    """The trainer's output: events become rows at once, log lines are written in batches."""

    FLUSH_SECONDS = 1.0

    def __init__(self, run: TrainingRun):
        self.run = run
        self.steps = run.steps
        self.total_steps = run.total_steps
        self.finished = False
        self.trainable_tokens: int | None = None  # as the trainer counted them in its prepared dataset
        self.refused = ""  # the trainer's reason for not training
        self.last_metrics: dict = {}
        self._pending: list[str] = []
        self._recent: list[str] = []
        self._last_flush = 0.0

    def line(self, text: str) -> None:
        event = _event(text)
        if event is None:
            self.log(text, stamp=False)
            return
        kind = event.pop("event")
        if kind == "start":
            self.total_steps = event.get("total_steps") or self.total_steps
            TrainingRun.objects.filter(pk=self.run.pk).update(total_steps=self.total_steps)
        elif kind == "metric":
            step = int(event.pop("step", self.steps))
            epoch = event.pop("epoch", None)
            values = {k: v for k, v in event.items() if isinstance(v, int | float) and not isinstance(v, bool)}
            TrainingMetric.objects.create(run_id=self.run.pk, step=step, epoch=epoch, values=values)
            self.last_metrics = {**self.last_metrics, **values}
            self.steps = max(self.steps, step)
            TrainingRun.objects.filter(pk=self.run.pk).update(steps=self.steps)
        elif kind == "eval":
            self.eval_metric(int(event.pop("step", self.steps)), event)
        elif kind == "dataset":
            self.trainable_tokens = event.get("trainable_tokens")
            self.log(
                f"the trainer's dataset: {event.get('samples')} samples in {event.get('sequences')} sequences, "
                f"{self.trainable_tokens} trainable tokens"
            )
        elif kind == "error":
            self.refused = str(event.get("message") or "the trainer refused to train")
            self.log(f"the trainer will not train: {self.refused}")
        elif kind == "checkpoint":
            self.checkpoint(int(event["step"]), event["path"])
        elif kind == "finished":
            self.finished = True
            self.steps = max(self.steps, int(event.get("step") or 0))
            TrainingRun.objects.filter(pk=self.run.pk).update(steps=self.steps)

    def eval_metric(self, step: int, event: dict) -> None:
        """The validation loss at `step`, kept on that step's row beside its training loss (one row a step, as the
        curves, the API and a checkpoint's metrics read them); a row of its own when the step logged nothing else."""
        epoch = event.pop("epoch", None)
        values = {k: v for k, v in event.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        row = TrainingMetric.objects.filter(run_id=self.run.pk, step=step).order_by("-id").first()
        if row is None:
            TrainingMetric.objects.create(run_id=self.run.pk, step=step, epoch=epoch, values=values)
        else:
            TrainingMetric.objects.filter(pk=row.pk).update(values={**row.values, **values})
        self.last_metrics = {**self.last_metrics, **values}

    def checkpoint(self, step: int, path: str) -> None:
        digest, size = hash_folder(Path(path))
        Checkpoint.objects.update_or_create(
            run_id=self.run.pk,
            step=step,
            defaults={"path": path, "sha256": digest, "size_bytes": size, "metrics": dict(self.last_metrics)},
        )
        self.log(f"checkpoint at step {step}: {path} ({size} bytes, sha256 {digest[:12]})")

    def message(self) -> str:
        loss, reward = self.last_metrics.get("loss"), self.last_metrics.get("reward_mean")
        return (
            f"step {self.steps}"
            + (f" of {self.total_steps}" if self.total_steps else "")
            + (f", loss {loss:.4f}" if isinstance(loss, int | float) else "")
            + (f", reward {reward:.3f}" if isinstance(reward, int | float) else "")
        )

    def log(self, text: str, *, stamp: bool = True) -> None:
        text = f"{timezone.now():%H:%M:%S} {text}" if stamp else text
        self._pending.append(text + "\n")
        self._recent = (self._recent + [text])[-200:]

    def recent(self, chars: int) -> str:
        return "\n".join(self._recent)[-chars:]

    def due(self) -> bool:
        return time.monotonic() - self._last_flush >= self.FLUSH_SECONDS

    def flush(self, force: bool = False) -> None:
        self._last_flush = time.monotonic()
        if not self._pending and not force:
            return
        text, self._pending = "".join(self._pending), []
        TrainingRun.objects.filter(pk=self.run.pk).update(
            log_tail=Right(Concat(F("log_tail"), Value(nulsafe.escape(text)), output_field=TextField()), LOG_TAIL_CHARS)
        )


def _event(text: str) -> dict | None:
    if not text.startswith('{"event"'):
        return None
    try:
        event = json.loads(text)
    except ValueError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def hash_folder(folder: Path) -> tuple[str, int]:
    """sha256 over the folder's files (relative names and contents, in name order) and their total size."""
    digest, size = hashlib.sha256(), 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
        digest.update(b"\0")
    return digest.hexdigest(), size
