"""SFT: fine-tune a base model on a built dataset (TRL's SFTTrainer, loss on the model's own tokens;
training.trainers.sft). Its presets, the rules across its keys, the checks before it is queued (kinds.sft_checks),
its `train --json` figures and its part of the run page (loss, validation loss and learning rate per step).
"""

import copy

from ..models import TrainingDataset
from .base import Launch, TrainingKind, TrainingRunError, checkpoints_of, edited, model_label, model_path
from .sft_checks import check_sft_run

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

METRICS_SHOWN = 500  # the curves' points; a longer run shows its last ones


def build_config(preset: str, overrides: dict | None = None, *, base: dict | None = None) -> dict:
    """The preset (or `base`, a stored config) with dotted-key edits applied, each checked against the preset's
    keys and types; then the derived values (gradient accumulation) and the cross-key rules."""
    if base is None:
        if preset not in PRESETS:
            raise TrainingRunError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
        base = PRESETS[preset]
    base = copy.deepcopy(base)
    base.pop("gradient_accumulation_steps", None)  # derived again below
    return _derive(edited(base, overrides, CHOICES))


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


def curves(run) -> tuple[list[dict], dict, dict]:
    metrics = list(run.metrics.order_by("-step", "-id")[:METRICS_SHOWN])[::-1]
    rows = [{"step": m.step, "epoch": m.epoch, **m.values} for m in metrics]
    steps = [m.step for m in metrics]

    def line(key: str, label: str, title: str) -> dict:
        # Both are never negative: from 0 up (a flat 0 would otherwise be drawn on an axis from -1 to 1).
        return {
            "type": "line",
            "labels": steps,
            "x": {"title": "step"},
            "y": {"min": 0, "title": title},
            "datasets": [{"label": label, "data": [m.values.get(key) for m in metrics]}],
        }

    loss = line("loss", "loss", "training loss")
    if any("eval_loss" in m.values for m in metrics):
        # The validation split's, at each checkpoint (training.trainers.sft): a line through those steps.
        loss["datasets"].append(
            {"label": "validation loss", "data": [m.values.get("eval_loss") for m in metrics], "spanGaps": True}
        )
    return rows, loss, line("learning_rate", "learning rate", "learning rate")


class SFT(TrainingKind):
    name = "sft"
    title = "Training run"
    job = "training.sft_run"
    presets = PRESETS
    choices = CHOICES
    page_template = "training_jobs/_sft_run.html"

    def build_config(self, preset, overrides=None, *, base=None):
        return build_config(preset, overrides, base=base)

    def for_cpu(self, config):
        return for_cpu(config)

    def prepare(
        self,
        *,
        base_model,
        base_model_path,
        preset,
        overrides,
        cpu,
        config,
        dataset=None,
        tasks=None,
        mix_tasks=None,
        harness="",
    ):
        """An SFT run trains on a dataset (not tasks, nor through a harness); what cannot train is refused first
        (kinds.sft_checks: the dataset, the base model's folder, the GPUs, the tokens left after the cut to
        max_length); what trains on less than asked comes back as warnings."""
        if tasks or mix_tasks or harness:
            raise TrainingRunError("an SFT run trains on a dataset, not on tasks through a harness (that is kind rl)")
        if not isinstance(dataset, TrainingDataset):
            raise TrainingRunError("give the dataset to train on (an SFT run trains on a built dataset)")
        base_model_path = model_path(base_model, base_model_path)
        config = build_config(preset, overrides, base=config)
        if cpu:
            config = for_cpu(config)
        warnings = check_sft_run(
            dataset=dataset, base_model_path=base_model_path, config=config, cpu=cpu, preset=preset
        )
        name = f"sft {dataset.name or dataset.pk} on {model_label(base_model, base_model_path)}"
        fields = {
            "name": name,
            "dataset": dataset,
            "base_model_path": base_model_path,
            "config": config,
            "log_tail": "".join(f"warning: {w}\n" for w in warnings),
        }
        return Launch(fields, warnings)

    def inputs(self, run):
        return {"dataset": run.dataset}

    def check_edit(self, run, config):
        # An edit (max_length, GPUs) may leave nothing to train on.
        check_sft_run(dataset=run.dataset, base_model_path=run.base_model_path, config=config, cpu=run.cpu)

    def report(self, run):
        losses = [
            m.values["loss"]
            for m in run.metrics.order_by("step", "id")
            if isinstance(m.values.get("loss"), int | float)
        ]
        return {
            "run": run.pk,
            "status": run.status,
            "steps": run.steps,
            "checkpoints": checkpoints_of(run),
            "metrics": {"loss": losses},
        }

    def page_context(self, run, query):
        rows, loss, lr = curves(run)
        return {"metric_rows": rows, "loss_chart": loss, "lr_chart": lr}
