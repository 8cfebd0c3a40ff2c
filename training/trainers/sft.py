"""SFT with TRL: `accelerate launch [--config_file ACC] -m training.trainers.sft CONFIG.json`.

CONFIG.json is the run's stored config plus where things are (base_model_path, dataset_path: {"messages", "tools"}
JSON lines, eval_dataset_path: the validation split's, when the dataset has one, output_dir, resume_from_checkpoint,
cpu). Loss only on the model's own tokens (assistant_only_loss: TRL's
training chat template with {% generation %} markers), packing, LoRA via peft or full fine-tuning, YaRN rope scaling
when asked. On CPU the loss is taken from the LM head run on the labelled tokens only (head_on_labelled_tokens).
A dataset that keeps no assistant token once cut to max_length is refused before the first step: every
step would train on nothing (loss and grad_norm 0) and the run would look like a success. Events go to stdout as JSON
lines, from the main process only:

    {"event": "dataset", "samples", "sequences", "trainable_tokens"}   once prepared (tokenized, cut, packed)
    {"event": "error", "message"}                                      it will not train, and why (then exit 3)
    {"event": "start", "total_steps", "samples"}
    {"event": "metric", "step", "epoch", "loss", "learning_rate", "grad_norm", "tokens_per_second", "gpu_memory_bytes"}
    {"event": "eval", "step", "epoch", "eval_loss", "eval_mean_token_accuracy"}   the validation split's loss, at each
                                                                                 save (when CONFIG.json has an
                                                                                 eval_dataset_path)
    {"event": "checkpoint", "step", "path"}
    {"event": "finished", "step"}
"""

import functools
import json
import math
import os
import sys
import threading
import time
import types


def emit(event: str, **fields) -> None:
    if int(os.environ.get("RANK", "0")) != 0:
        return
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def watch_parent() -> None:
    """Exit when the job that launched us is gone (its worker was killed): nobody would record what we do, and the
    run is resumed from its last checkpoint by a new attempt."""
    pid = int(os.environ.get("CLAWGYM_WATCH_PID") or 0)
    if not pid:
        return

    def watch():
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(17)
            except PermissionError:
                pass
            time.sleep(1.0)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def load_samples(path: str):
    """The JSON lines as a datasets.Dataset, messages and tools kept as JSON (tool schemas differ from sample to
    sample: Arrow structs would fill them with nulls)."""
    from datasets import Dataset, Features, Json, List

    rows = []
    with open(path) as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                rows.append({"messages": row["messages"], "tools": row.get("tools") or []})
    features = Features({"messages": List(Json()), "tools": List(Json())})
    return Dataset.from_list(rows, features=features)


def load_model(config: dict):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    path = config["base_model_path"]
    model_config = AutoConfig.from_pretrained(path, local_files_only=True)
    yarn = config.get("yarn") or {}
    if yarn.get("enabled"):
        # Qwen3's 32K context extended with YaRN (the paper: factor 2 → 64K).
        original = int(yarn["original_max_position_embeddings"])
        rope = dict(getattr(model_config, "rope_parameters", None) or {})
        rope.update(rope_type="yarn", factor=float(yarn["factor"]), original_max_position_embeddings=original)
        model_config.rope_parameters = rope
        model_config.max_position_embeddings = int(original * float(yarn["factor"]))
    dtype = torch.bfloat16 if config["bf16"] and not config.get("cpu") else torch.float32
    return AutoModelForCausalLM.from_pretrained(path, config=model_config, dtype=dtype, local_files_only=True)


def sft_trainer(config: dict, train_dataset, eval_dataset=None, callbacks=()):
    """TRL's SFTTrainer as a run trains (main, and bench/train_speed_bench.py, which times it)."""
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    trainer = SFTTrainer(
        model=load_model(config),
        args=sft_config(config),
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=AutoTokenizer.from_pretrained(config["base_model_path"], local_files_only=True),
        peft_config=peft_config(config),
        callbacks=list(callbacks),
    )
    if config.get("cpu"):
        head_on_labelled_tokens(
            trainer.model.get_base_model() if hasattr(trainer.model, "get_base_model") else trainer.model
        )
    return trainer


# Configurations whose logits TRL's head scales, caps or extends (MoE router losses): its own head keeps them.
_HEAD_EXTRAS = ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling")


def head_on_labelled_tokens(model, temperature: float = 1.0) -> bool:
    """Score only the labelled tokens through the LM head, on a device without Triton (CPU).

    SFTTrainer's loss forward (`fused_lm_head=True`, trl.trainer.utils.add_fused_lm_head) takes the log-probabilities,
    the entropy and the top-1 hit from the LM head in vocabulary tiles. On CUDA a Triton kernel folds the tiles and
    only labelled positions are projected; without Triton every position is projected and each tile is folded by a
    dozen whole-tile torch operations, and the backward projects every position again. Profiled on CPU with
    SmolLM2-135M (bench/train_speed_bench.py) that head took about a fifth of a step, three times what the bare
    loop's head and cross-entropy take. Here the backbone runs as in TRL's forward, the head projects the labelled
    positions only (a quarter of a packed row of agent conversations), and the same fields come back: the loss and
    its gradients are TRL's (the log-softmax at each label, summed over the batch's labelled tokens; positions without
    a label contribute nothing either way), and the entropy and top-1 hit feeding `entropy` and
    `mean_token_accuracy` are computed on the same logits without gradient. The logits of the labelled rows are
    held at once, as a plain forward holds every row's. `temperature` divides the logits, as TRL's head for GRPO
    does (its policy's sampling temperature). Returns whether the head was replaced (TRL's is kept for logits it
    scales or caps and for MoE router losses)."""
    import torch
    from trl.trainer.utils import FusedCausalLMOutput

    text_config = model.config.get_text_config()
    if any(getattr(text_config, key, None) is not None for key in _HEAD_EXTRAS):
        return False
    if getattr(text_config, "output_router_logits", False):
        return False
    trl_forward = model.forward  # TRL's: its fused head, or the model's own forward without fused_lm_head

    @functools.wraps(type(model).forward)  # the model's signature, as TRL keeps it (Trainer and generate read it)
    def forward(self, *args, fused_lm_head=False, labels=None, shift_labels=None, num_items_in_batch=None, **kwargs):
        if not fused_lm_head or labels is None or shift_labels is not None:
            return trl_forward(
                *args,
                fused_lm_head=fused_lm_head,
                labels=labels,
                shift_labels=shift_labels,
                num_items_in_batch=num_items_in_batch,
                **kwargs,
            )
        kwargs["use_cache"] = False
        hidden = self.base_model(*args, **kwargs).last_hidden_state[:, :-1]
        labels = labels[:, 1:]
        mask = labels != -100
        targets = labels[mask]
        logits = self.get_output_embeddings()(hidden[mask]).float()
        if temperature != 1.0:
            logits = logits / temperature
        log_softmax = torch.log_softmax(logits, dim=-1)
        picked = log_softmax.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            entropy = -(log_softmax.exp() * log_softmax).sum(-1)
            is_top1 = logits.argmax(-1) == targets  # the first maximum, as TRL counts a tie

        def per_position(values):
            return values.new_zeros(mask.shape).masked_scatter(mask, values)

        log_probs = per_position(picked)
        loss = -log_probs.sum() / (mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch)
        return FusedCausalLMOutput(
            loss=loss,
            log_probs=log_probs,
            entropy=per_position(entropy),
            is_top1=per_position(is_top1),
            label_mask=mask,
        )

    model.forward = types.MethodType(forward, model)
    return True


def peft_config(config: dict):
    lora = config.get("lora") or {}
    if not lora.get("enabled"):
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=lora["r"],
        lora_alpha=lora["alpha"],
        lora_dropout=lora["dropout"],
        target_modules=lora["target_modules"],
        task_type="CAUSAL_LM",
    )


def sft_config(config: dict):
    from trl import SFTConfig

    evaluation = {}
    if config.get("eval_dataset_path"):
        # The validation loss where a checkpoint is saved: a point of the curve for each checkpoint that is evaluated.
        evaluation = {
            "eval_strategy": "steps",
            "eval_steps": config["save_steps"],
            "per_device_eval_batch_size": config["per_device_batch_size"],
        }
    return SFTConfig(
        **evaluation,
        output_dir=config["output_dir"],
        assistant_only_loss=True,
        packing=config["packing"],
        max_length=config["max_length"],
        bf16=bool(config["bf16"]) and not config.get("cpu"),
        use_cpu=bool(config.get("cpu")),
        learning_rate=config["learning_rate"],
        num_train_epochs=config["num_train_epochs"],
        max_steps=config["max_steps"],
        per_device_train_batch_size=config["per_device_batch_size"],
        gradient_accumulation_steps=config["gradient_accumulation_steps"],
        gradient_checkpointing=config["gradient_checkpointing"],
        lr_scheduler_type=config["lr_scheduler_type"],
        warmup_steps=float(config["warmup_ratio"]),
        weight_decay=config["weight_decay"],
        save_strategy="steps",
        save_steps=config["save_steps"],
        save_total_limit=config["save_total_limit"] or None,
        logging_steps=config["logging_steps"],
        seed=config["seed"],
        data_seed=config["seed"],
        report_to=report_to(config),
        disable_tqdm=True,
        include_num_input_tokens_seen="non_padding",
        dataset_num_proc=None,
        dataloader_num_workers=0,
    )


def report_to(config: dict) -> str:
    """TRL's report_to for the run: "tensorboard" writes event files into the run's tensorboard folder."""
    if config.get("report_to") != "tensorboard":
        return "none"
    os.environ["TENSORBOARD_LOGGING_DIR"] = config["tensorboard_dir"]  # read by transformers' TensorBoardCallback
    return "tensorboard"


def event_callback():
    import torch
    from transformers import TrainerCallback

    class JsonEvents(TrainerCallback):
        """One JSON line per log and per save, for the job that streams them into the database."""

        def __init__(self):
            self._last = (time.monotonic(), 0)

        def on_train_begin(self, args, state, control, **kwargs):
            emit("start", total_steps=state.max_steps, resumed_at=state.global_step)
            self._last = (time.monotonic(), state.num_input_tokens_seen or 0)

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = dict(logs or {})
            if "eval_loss" in logs:
                # NaN when no validation token was trained on (all cut to max_length): no point rather than a bad one.
                fields = {key: _number(logs[key]) for key in ("eval_loss", "eval_mean_token_accuracy") if key in logs}
                fields = {key: value for key, value in fields.items() if value is not None and math.isfinite(value)}
                if fields:
                    emit("eval", step=state.global_step, epoch=_number(state.epoch), **fields)
                return
            if "loss" not in logs:
                return  # the end-of-training summary; its figures are in the step metrics already
            now, seen = time.monotonic(), state.num_input_tokens_seen or 0
            then, seen_then = self._last
            self._last = (now, seen)
            tokens_per_second = (seen - seen_then) / (now - then) if now > then and seen >= seen_then else None
            memory = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
            fields = {
                "step": state.global_step,
                "epoch": state.epoch,
                "loss": logs.get("loss"),
                "learning_rate": logs.get("learning_rate"),
                "grad_norm": logs.get("grad_norm"),
                "tokens_per_second": tokens_per_second,
                "gpu_memory_bytes": memory,
                "tokens_seen": seen,
            }
            for key in ("mean_token_accuracy", "entropy", "num_tokens"):
                if key in logs:
                    fields[key] = logs[key]
            emit("metric", **{k: _number(v) for k, v in fields.items()})

        def on_save(self, args, state, control, **kwargs):
            path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            emit("checkpoint", step=state.global_step, path=os.path.abspath(path))

    return JsonEvents()


def trainable_tokens(dataset) -> int | None:
    """The tokens the loss is taken on in the prepared dataset (labels other than -100; None: no labels to read)."""
    columns = getattr(dataset, "column_names", None) or []
    name = "labels" if "labels" in columns else "assistant_masks" if "assistant_masks" in columns else None
    if name is None:
        return None
    total = 0
    for batch in dataset.select_columns([name]).iter(batch_size=256):
        for row in batch[name]:
            total += sum(1 for token in row if token != -100) if name == "labels" else sum(row)
    return total


def _number(value):
    if hasattr(value, "item"):
        value = value.item()
    return value if isinstance(value, int | float) or value is None else float(value)


def main(argv: list[str]) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    with open(argv[0]) as fh:
        config = json.load(fh)
    watch_parent()
    from transformers import set_seed

    set_seed(config["seed"])
    samples = load_samples(config["dataset_path"])
    validation = load_samples(config["eval_dataset_path"]) if config.get("eval_dataset_path") else None
    trainer = sft_trainer(config, samples, validation, callbacks=[event_callback()])
    trainable = trainable_tokens(trainer.train_dataset)
    emit("dataset", samples=len(samples), sequences=len(trainer.train_dataset), trainable_tokens=trainable)
    if trainable == 0:
        emit(
            "error",
            message=f"no sample would be trained on: cut to max_length {config['max_length']}, none of the "
            f"{len(samples)} samples keeps an assistant token, so every step would train on nothing. "
            "Raise max_length, or train on shorter samples.",
        )
        return 3
    resume = config.get("resume_from_checkpoint")
    trainer.train(resume_from_checkpoint=resume or None)
    emit("finished", step=trainer.state.global_step)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
