"""SFT and RL runs: start one from a preset and edits, cancel, resume from the last checkpoint, clone with edits.

A run's whole config is stored on it (what the trainer is given, nothing else), so a run page shows exactly what
ran and a clone starts from exactly that. The trainer itself runs in a subprocess a `gpu` job launches
(training_jobs.run_jobs); nothing here imports torch.
"""

import copy
import json

from django.db import transaction
from django.utils import timezone

from .kinds import RL_RUN_JOB, SFT_RUN_JOB
from .models import BaseModel, Checkpoint, RLRollout, TrainingDataset, TrainingMetric, TrainingRun
from .rl.presets import RL_CHOICES, RL_PRESETS

# The paper's SFT setup (ClawGym-Agents on Qwen3-8B): lr 1e-5, 3 epochs, global batch 128, 64K tokens with packing,
# bf16, the 32K context extended to 64K with YaRN; 8 GPUs with DeepSpeed ZeRO-3.
PAPER = {
    "learning_rate": 1e-5,
    "num_train_epochs": 3.0,
    "max_steps": -1,  # -1: as many as the epochs take
    "global_batch_size": 128,  # = per_device_batch_size × gradient accumulation × GPUs
    "per_device_batch_size": 1,
    "max_length": 65536,
    "packing": True,
    "bf16": True,
    "gradient_checkpointing": True,
    "lr_scheduler_type": "cosine",
    "warmup_ratio": 0.03,
    "weight_decay": 0.0,
    "save_steps": 50,
    "save_total_limit": 0,  # 0: keep every checkpoint (each one is evaluated)
    "logging_steps": 1,
    "seed": 42,
    "lora": {"enabled": False, "r": 64, "alpha": 128, "dropout": 0.05, "target_modules": "all-linear"},
    "yarn": {"enabled": True, "factor": 2.0, "original_max_position_embeddings": 32768},
    "distributed": {"deepspeed": "zero3", "fsdp": None, "gpus": 8},
}

# Two optimizer steps of a tiny model on a laptop's CPU (tests, trying the path out).
TINY_CPU = {
    **PAPER,
    "learning_rate": 1e-3,
    "num_train_epochs": 1.0,
    "max_steps": 2,
    "global_batch_size": 2,
    "max_length": 2048,  # above the tiny samples: packing truncates longer ones
    "bf16": False,
    "gradient_checkpointing": False,
    "warmup_ratio": 0.0,
    "save_steps": 1,
    "yarn": {**PAPER["yarn"], "enabled": False},
    "distributed": {"deepspeed": None, "fsdp": None, "gpus": 0},
}

PRESETS = {"paper": PAPER, "tiny-cpu": TINY_CPU}

# Keys whose preset value is None (or may be): the values they take.
CHOICES = {
    "distributed.deepspeed": (None, "zero2", "zero3"),
    "distributed.fsdp": (None, "fsdp2"),
    "lr_scheduler_type": ("linear", "cosine", "constant", "constant_with_warmup", "cosine_with_min_lr"),
}


class TrainingRunError(ValueError):
    """A run that cannot be started, resumed or cancelled as asked; the message says why."""


# --- config -----------------------------------------------------------------------------------------------------


def parse_overrides(pairs: list[str]) -> dict:
    """["lora.enabled=true", "learning_rate=2e-5"] → {"lora.enabled": True, "learning_rate": 2e-5} (JSON values;
    anything that is not JSON is a string)."""
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise TrainingRunError(f"--set takes KEY=VALUE, got {pair!r}")
        try:
            overrides[key.strip()] = json.loads(value)
        except ValueError:
            overrides[key.strip()] = value
    return overrides


def build_config(preset: str, overrides: dict | None = None, *, base: dict | None = None) -> dict:
    """The preset (or `base`, a stored config) with dotted-key edits applied, each checked against the preset's
    keys and types; then the derived values (gradient accumulation) and the cross-key rules."""
    if base is None:
        if preset not in PRESETS:
            raise TrainingRunError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
        base = PRESETS[preset]
    config = copy.deepcopy(base)
    config.pop("gradient_accumulation_steps", None)  # derived again below
    for key, value in (overrides or {}).items():
        _set(config, key, value)
    return _derive(config)


def _set(config: dict, key: str, value, choices: dict = CHOICES) -> None:
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
        if not isinstance(node.get(part), dict):
            raise TrainingRunError(f"unknown config key {key!r}; known: {', '.join(known_keys(config))}")
        node = node[part]
    if leaf not in node or isinstance(node[leaf], dict):
        raise TrainingRunError(f"unknown config key {key!r}; known: {', '.join(known_keys(config))}")
    current = node[leaf]
    if key in choices:
        if value in ("null", "none", ""):
            value = None
        if value not in choices[key]:
            raise TrainingRunError(f"{key} takes one of {', '.join(map(str, choices[key]))}, got {value!r}")
    elif isinstance(current, bool):
        if not isinstance(value, bool):
            raise TrainingRunError(f"{key} takes true or false, got {value!r}")
    elif isinstance(current, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TrainingRunError(f"{key} takes a number, got {value!r}")
        value = float(value)
    elif isinstance(current, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TrainingRunError(f"{key} takes an integer, got {value!r}")
    elif isinstance(current, str):
        if isinstance(value, list) and key == "lora.target_modules":
            value = [str(v) for v in value]
        elif not isinstance(value, str):
            raise TrainingRunError(f"{key} takes a string, got {value!r}")
    node[leaf] = value


def known_keys(config: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in config.items():
        if key == "gradient_accumulation_steps":
            continue
        keys += known_keys(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"]
    return keys


def _derive(config: dict) -> dict:
    dist = config["distributed"]
    if dist["deepspeed"] and dist["fsdp"]:
        raise TrainingRunError("choose DeepSpeed or FSDP, not both (distributed.deepspeed / distributed.fsdp)")
    if dist["gpus"] < 0:
        raise TrainingRunError("distributed.gpus cannot be negative")
    per_step = config["per_device_batch_size"] * max(dist["gpus"], 1)
    if config["per_device_batch_size"] < 1 or config["global_batch_size"] % per_step:
        raise TrainingRunError(
            f"global_batch_size {config['global_batch_size']} is not a multiple of per_device_batch_size × GPUs "
            f"({per_step})"
        )
    if config["save_steps"] < 1 or config["logging_steps"] < 1:
        raise TrainingRunError("save_steps and logging_steps must be at least 1")
    config["gradient_accumulation_steps"] = config["global_batch_size"] // per_step
    return config


def for_cpu(config: dict) -> dict:
    """What a CPU run cannot do: bf16 mixed precision, DeepSpeed/FSDP, GPUs."""
    config = copy.deepcopy(config)
    config["bf16"] = False
    config["distributed"] = {"deepspeed": None, "fsdp": None, "gpus": 0}
    return _derive(config)


# --- state changes ----------------------------------------------------------------------------------------------


def start_training_run(*, kind: str = "sft", dataset: TrainingDataset, base_model: BaseModel | None = None,
                       base_model_path: str = "", preset: str = "paper", overrides: dict | None = None,
                       cpu: bool = False, user=None, name: str = "", enqueue: bool = True,
                       config: dict | None = None, cloned_from: TrainingRun | None = None) -> TrainingRun:  # fmt: skip
    """Record a run with its whole config and queue it on the `gpu` queue (enqueue=False: the caller runs the job
    body itself, `train --here`). What cannot train is refused first (training_jobs.run_checks: the dataset, the
    base model's folder, the GPUs, the tokens left after the cut to max_length); what trains on less than asked is
    written in the run's log and given back as `run.warnings`."""
    from .run_checks import check_sft_run

    if kind != TrainingRun.Kind.SFT:
        raise TrainingRunError(f"only kind 'sft' runs are implemented (got {kind!r})")
    if base_model is not None:
        base_model_path = base_model_path or base_model.path
    if not base_model_path:
        raise TrainingRunError("give a base model (a registered one or a local path)")
    config = build_config(preset, overrides, base=config)
    if cpu:
        config = for_cpu(config)
    warnings = check_sft_run(dataset=dataset, base_model_path=base_model_path, config=config, cpu=cpu, preset=preset)
    with transaction.atomic():
        run = TrainingRun.objects.create(
            name=name or f"sft {dataset.name or dataset.pk} on {model_label(base_model, base_model_path)}"[:200],
            kind=kind, dataset=dataset, base_model=base_model, base_model_path=base_model_path, config=config,
            preset=preset, cpu=cpu, created_by=user if user is not None and user.is_authenticated else None,
            cloned_from=cloned_from, log_tail="".join(f"warning: {w}\n" for w in warnings),
        )  # fmt: skip
        if enqueue:
            _enqueue(run, user)
    run.warnings = warnings
    return run


def _enqueue(run: TrainingRun, user) -> None:
    from jobs import enqueue

    job = RL_RUN_JOB if run.kind == TrainingRun.Kind.RL else SFT_RUN_JOB
    job_run = enqueue(job, created_by=user, run_id=run.pk)
    TrainingRun.objects.filter(pk=run.pk).update(job_run=job_run)
    run.job_run = job_run


def cancel_training_run(run: TrainingRun, *, user=None) -> TrainingRun:
    """Cancel a queued run at once; a running one's job kills the trainer's process group within a second (it
    watches the run's status and its JobRun's cancel request)."""
    from jobs.services import cancel_job

    who = user.get_username() if user is not None and user.is_authenticated else "system"
    ended = TrainingRun.objects.filter(pk=run.pk, status__in=[TrainingRun.Status.QUEUED, TrainingRun.Status.RUNNING])
    ended.update(status=TrainingRun.Status.CANCELLED, finished_at=timezone.now(), error=f"cancelled by {who}")
    if run.job_run_id:
        cancel_job(run.job_run, user=user)
    run.refresh_from_db()
    return run


def last_checkpoint(run: TrainingRun) -> Checkpoint | None:
    return run.checkpoints.order_by("-step").first()


def rewind_to(run: TrainingRun, checkpoint: Checkpoint | None) -> None:
    """Forget what came after `checkpoint` (the start when None), for an attempt that goes on from it."""
    step = checkpoint.step if checkpoint else 0
    # Metrics past the checkpoint are logged again by the resumed trainer.
    TrainingMetric.objects.filter(run=run, step__gt=step).delete()
    # So are an RL run's rollouts: the steps past the checkpoint are sampled again, by the resumed policy.
    RLRollout.objects.filter(run=run, step__gt=step).delete()
    TrainingRun.objects.filter(pk=run.pk).update(steps=step)


def resume_training_run(run: TrainingRun, *, user=None, overrides: dict | None = None,
                        enqueue: bool = True) -> TrainingRun:  # fmt: skip
    """Queue the run's next attempt from its last checkpoint (from the start when it has none).

    A run whose worker was killed still reads "running": it is resumable once its JobRun is finished or lost
    (its worker process gone, or silent past CLAWGYM_JOB_STALE_SECONDS). `overrides` edit the stored config
    (e.g. more max_steps); the edit is written in the run's log."""
    from jobs.models import JobRun
    from jobs.runner import append_log, log_line, lost_reason

    run.refresh_from_db()
    if run.status == TrainingRun.Status.SUCCEEDED and not overrides:
        raise TrainingRunError(f"run #{run.pk} succeeded: nothing to resume (clone it to train again)")
    if run.status in (TrainingRun.Status.QUEUED, TrainingRun.Status.RUNNING):
        job = run.job_run
        reason = lost_reason(job) if job else None
        if job and not job.is_finished and not reason:
            raise TrainingRunError(f"run #{run.pk} is {run.status} on job #{job.pk}; cancel it first")
        if job and reason:
            JobRun.objects.filter(pk=job.pk, status=JobRun.Status.RUNNING).update(
                status=JobRun.Status.FAILED, finished_at=timezone.now(), error=f"Worker lost: {reason}.",
                log_tail=append_log(log_line(f"worker lost: {reason}; the training run is resumed")),
            )  # fmt: skip
    if overrides:
        build = build_rl_config if run.kind == TrainingRun.Kind.RL else build_config
        config = build(run.preset, overrides, base=run.config)
        if run.kind == TrainingRun.Kind.SFT:  # an edit (max_length, GPUs) may leave nothing to train on
            from .run_checks import check_sft_run

            check_sft_run(dataset=run.dataset, base_model_path=run.base_model_path, config=config, cpu=run.cpu)
    else:
        config = run.config
    checkpoint = last_checkpoint(run)
    note = f"attempt {run.attempt + 1}: resumed from " + (f"checkpoint step {checkpoint.step}" if checkpoint else
                                                          "the start (no checkpoint)")  # fmt: skip
    if overrides:
        note += f"; config edited: {json.dumps(overrides)}"
    with transaction.atomic():
        rewind_to(run, checkpoint)
        TrainingRun.objects.filter(pk=run.pk).update(
            status=TrainingRun.Status.QUEUED, error="", finished_at=None, resumed_from=checkpoint, config=config,
            log_tail=(run.log_tail + note + "\n")[-20000:],
        )  # fmt: skip
        run.refresh_from_db()
        if enqueue:
            _enqueue(run, user)
    return run


def clone_training_run(run: TrainingRun, overrides: dict | None = None, *, user=None,
                       enqueue: bool = True) -> TrainingRun:  # fmt: skip
    """A new run from this one's stored config with edits (same dataset or tasks, and base model)."""
    if run.kind == TrainingRun.Kind.RL:
        return create_rl_run(
            user, base_model=run.base_model, base_model_path=run.base_model_path, tasks=run.config["tasks"],
            harness=run.config["harness"], preset=run.preset, overrides=overrides, cpu=run.cpu, enqueue=enqueue,
            config=run.config, cloned_from=run, name=f"{run.name} (clone)"[:200],
        )  # fmt: skip
    return start_training_run(
        kind=run.kind, dataset=run.dataset, base_model=run.base_model, base_model_path=run.base_model_path,
        preset=run.preset, overrides=overrides, cpu=run.cpu, user=user, enqueue=enqueue, config=run.config,
        cloned_from=run, name=f"{run.name} (clone)"[:200],
    )  # fmt: skip


def run_json(run: TrainingRun) -> dict:
    """The `train --json` shape."""
    run.refresh_from_db()
    if run.kind == TrainingRun.Kind.RL:
        return rl_run_json(run)
    checkpoints = [{"id": c.pk, "step": c.step, "path": c.path} for c in run.checkpoints.order_by("step")]
    losses = [
        m.values["loss"] for m in run.metrics.order_by("step", "id") if isinstance(m.values.get("loss"), int | float)
    ]
    return {"run": run.pk, "status": run.status, "steps": run.steps, "checkpoints": checkpoints,
            "metrics": {"loss": losses}}  # fmt: skip


# --- RL runs ----------------------------------------------------------------------------------------------------


def model_label(base_model, base_model_path: str) -> str:
    """What a run's default name calls its model: the registered name, or the folder's last part (everyone sees a
    run's name; only admins see server paths)."""
    return base_model.name if base_model else (base_model_path.rstrip("/").rsplit("/", 1)[-1] or base_model_path)


def build_rl_config(preset: str, overrides: dict | None = None, *, base: dict | None = None) -> dict:
    """An RL preset (or a stored RL config) with typed dotted-key edits, then the rules across keys. The run's tasks
    are kept as they are (they are given apart from the edits)."""
    if base is None:
        if preset not in RL_PRESETS:
            raise TrainingRunError(f"unknown RL preset {preset!r}; choose one of {', '.join(RL_PRESETS)}")
        base = RL_PRESETS[preset]
    config = copy.deepcopy(base)
    tasks = config.pop("tasks", None)
    for key, value in (overrides or {}).items():
        _set(config, key, value, RL_CHOICES)
    _check_rl(config)
    if tasks is not None:
        config["tasks"] = tasks
    return config


def _check_rl(config: dict) -> None:
    generations, survivors = config["num_generations"], config["min_group_survivors"]
    if generations < 2:
        raise TrainingRunError("num_generations must be at least 2 (GRPO compares the rollouts of a group)")
    if not 1 <= survivors <= generations:
        raise TrainingRunError(f"min_group_survivors must be between 1 and num_generations ({generations})")
    for key in ("prompts_per_step", "max_steps", "save_steps", "max_completion_length", "max_context", "max_turns",
                "rollout_timeout", "batch_timeout"):  # fmt: skip
        if config[key] < 1:
            raise TrainingRunError(f"{key} must be at least 1")
    if config["max_completion_length"] >= config["max_context"]:
        raise TrainingRunError("max_completion_length must be below max_context (the prompt needs room)")
    if config["temperature"] <= 0:
        raise TrainingRunError("temperature must be above 0 (GRPO samples; greedy rollouts of a group are alike)")
    if config["beta"] < 0 or config["epsilon"] < 0 or config["epsilon_high"] < config["epsilon"]:
        raise TrainingRunError("beta and epsilon cannot be negative, and epsilon_high is at least epsilon")
    dist = config["distributed"]
    if dist["deepspeed"] and dist["fsdp"]:
        raise TrainingRunError("choose DeepSpeed or FSDP, not both (distributed.deepspeed / distributed.fsdp)")
    _check_policy(config["policy"])


def _check_policy(policy: dict) -> None:
    """A vLLM policy's key variable is fenced like an endpoint's (it becomes the run's policy endpoint's)."""
    from llm.models import SERVED_KEY_PREFIX, key_env_refusal

    key_env = policy.get("api_key_env") or ""
    if key_env:
        refusal = key_env_refusal(key_env)
        if not refusal and key_env.startswith(SERVED_KEY_PREFIX):
            refusal = f"{SERVED_KEY_PREFIX}… names the keys of servers ClawGym starts itself"
        if refusal:
            raise TrainingRunError(f"policy.api_key_env: {refusal}")
    endpoint_url = policy.get("endpoint_url") or ""
    if endpoint_url and not endpoint_url.startswith(("http://", "https://")):
        raise TrainingRunError(f"policy.endpoint_url must be an http(s) URL, got {endpoint_url!r}")


def rl_for_cpu(config: dict) -> dict:
    """A CPU run: no bf16, no DeepSpeed/FSDP, and the live policy server (vLLM needs a GPU)."""
    config = copy.deepcopy(config)
    config.update(bf16=False, distributed={"deepspeed": None, "fsdp": None, "gpus": 0})
    config["policy"] = {**config["policy"], "backend": "live"}
    return config


def resolve_tasks(tasks) -> list:
    """Task revisions from revisions, tasks, revision ids, or task external ids (a task: its current revision).
    Benchmark tasks are refused (the contamination guard of datasets: a task with any revision pinned by a benchmark
    version is never trained on), and so is a task without a revision."""
    from benchmarks.models import PinnedRevision
    from tasks.models import Task, TaskRevision

    revisions = []
    for item in tasks or []:
        if isinstance(item, TaskRevision):
            revision = item
        elif isinstance(item, Task) or (isinstance(item, str) and not item.isdigit()):
            task = item if isinstance(item, Task) else Task.objects.filter(external_id=item).first()
            if task is None:
                raise TrainingRunError(f"no task {item!r}")
            revision = task.current_revision or task.revisions.order_by("-number").first()
            if revision is None:
                raise TrainingRunError(f"task {task.external_id!r} has no revision")
        else:
            revision = TaskRevision.objects.filter(pk=int(item)).first()
            if revision is None:
                raise TrainingRunError(f"no task revision #{item}")
        revisions.append(revision)
    if not revisions:
        raise TrainingRunError("give the tasks to train on (task ids, or a selection of tasks)")
    pinned = set(PinnedRevision.objects.filter(revision__task_id__in=[r.task_id for r in revisions])
                 .values_list("revision__task__external_id", flat=True))  # fmt: skip
    if pinned:
        raise TrainingRunError(
            f"benchmark tasks are never trained on (contamination guard): {', '.join(sorted(pinned))}"
        )
    return list({r.pk: r for r in revisions}.values())


def tasks_from(selection: str) -> list:
    """The current revisions of the tasks a selection names (tasks.selection: status=…, source=…, category=…,
    prefix=…, limit=N, e.g. "status=ready,source=skill,limit=200", or a curriculum's train split
    "prefix=curriculum-s0-train-"); newest first, benchmark tasks left out (the contamination guard)."""
    from benchmarks.models import PinnedRevision
    from tasks.models import Task
    from tasks.selection import SelectionError, select_tasks

    unpinned = Task.objects.exclude(pk__in=PinnedRevision.objects.values("revision__task_id"))
    try:
        chosen = [t.current_revision for t in select_tasks(selection, unpinned)]
    except SelectionError as exc:
        raise TrainingRunError(str(exc)) from None
    if not chosen:
        raise TrainingRunError(f"the selection {selection!r} names no task (benchmark tasks are left out)")
    return chosen


def create_rl_run(user, *, base_model_path: str = "", base_model: BaseModel | None = None, tasks, harness: str = "",
                  preset: str = "paper", overrides: dict | None = None, cpu: bool = False, name: str = "",
                  enqueue: bool = True, config: dict | None = None,
                  cloned_from: TrainingRun | None = None) -> TrainingRun:  # fmt: skip
    """Record an RL (GRPO) run over `tasks` with its whole config and queue it on the `gpu` queue (enqueue=False:
    the caller runs the job body itself, `train --here`). `harness` is the agent run in each rollout's sandbox."""
    from evaluation.harnesses import HARNESSES

    revisions = resolve_tasks(tasks)
    if base_model is not None:
        base_model_path = base_model_path or base_model.path
    if not base_model_path:
        raise TrainingRunError("give a base model (a registered one or a local path)")
    edits = dict(overrides or {})
    if harness:
        edits["harness"] = harness
    config = build_rl_config(preset, edits, base=config)
    if config["harness"] not in HARNESSES:
        raise TrainingRunError(f"unknown harness {config['harness']!r}; known: {', '.join(HARNESSES)}")
    if cpu:
        config = rl_for_cpu(config)
    config["tasks"] = [r.pk for r in revisions]
    model_name = model_label(base_model, base_model_path)
    with transaction.atomic():
        run = TrainingRun.objects.create(
            name=name or f"rl on {len(revisions)} task(s) from {model_name}"[:200], kind=TrainingRun.Kind.RL,
            base_model=base_model, base_model_path=base_model_path, config=config, preset=preset, cpu=cpu,
            created_by=user if user is not None and user.is_authenticated else None, cloned_from=cloned_from,
            total_steps=config["max_steps"],
        )  # fmt: skip
        if enqueue:
            _enqueue(run, user)
    return run


def rl_step_table(run: TrainingRun) -> list[dict]:
    """One row per optimizer step of an RL run: the step's metrics (names in training_jobs.rl.groups.METRICS)."""
    rows = {}
    for metric in run.metrics.order_by("step", "id"):
        rows.setdefault(metric.step, {"step": metric.step}).update(metric.values)
    return list(rows.values())


def rl_run_json(run: TrainingRun) -> dict:
    """`train --kind rl --json`: {"run", "status", "steps", "rollouts", "checkpoints", "metrics": [per step]}."""
    keys = ("reward_mean", "reward_std", "groups_dropped", "inexact_samples", "rollout_p50_s", "rollout_max_s", "loss")
    checkpoints = [{"id": c.pk, "step": c.step, "path": c.path} for c in run.checkpoints.order_by("step")]
    metrics = [{"step": row["step"], **{k: row.get(k) for k in keys}} for row in rl_step_table(run)]
    return {"run": run.pk, "status": run.status, "steps": run.steps, "rollouts": run.rl_rollouts.count(),
            "checkpoints": checkpoints, "metrics": metrics}  # fmt: skip
