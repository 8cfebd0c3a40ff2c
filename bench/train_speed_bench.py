#!/usr/bin/env python
"""The training speed bench: ClawGym's SFT path against a bare PyTorch loop, on the same model and packed batches.

    .venv/bin/python bench/train_speed_bench.py [--model tiny|PATH] [--steps 12] [--warmup 2] [--max-length 1024]
        [--batch 2] [--samples 96]

Both sides train the same model from the same weights on the same batches, in this process, one after the other:

- ClawGym: the SFT trainer as a training run builds it (training.trainers.sft.sft_trainer: TRL's SFTTrainer with
  packing, the loss on assistant tokens only and, on CPU, ClawGym's LM head on the labelled tokens), for warmup + steps
  optimizer steps, timed per step by a callback.
- bare: the batches that trainer's dataloader yields (the same packed rows, their labels masked the same way, passed
  whole to the model as the trainer passes them), and per batch a forward, the loss on the labelled tokens, a
  backward, the gradient-norm clipping the trainer does (its max_grad_norm) and the trainer's AdamW (fused when its
  optim is adamw_torch_fused): nothing else.

The steps after the warm-up count. Tokens are the batches' tokens (packed rows hold no padding), the same for both.
`--model tiny` builds the tests' tiny Qwen3 (training.tiny_model) in a temporary folder; a PATH names a model folder
(e.g. the converted SmolLM2-135M-Instruct under the training folder, `manage.py base_models list --json`).
The aim: ClawGym at 0.8x the bare loop's tokens/s or better. One JSON line last:

    {"model", "steps", "tokens_per_step", "clawgym_tokens_per_s", "bare_tokens_per_s", "train_speed_vs_bare",
     "clawgym_step_s", "bare_step_s", "threads"}
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

# The samples: agent conversations of a few tool rounds (read, exec, write), each with its own numbers, so that packing
# and the assistant mask see what training data holds.
ROUNDS = (
    ("read", {"path": "sales.csv"}, "region,amount\nnorth,{a}\nsouth,{b}\nnorth,{c}\n"),
    ("exec", {"command": "python3 -c 'print({a}+{c}, {b})'"}, "{s} {b}\n"),
    ("write", {"path": "totals.md", "content": "north: {s}\nsouth: {b}\n"}, "wrote 20 bytes"),
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {key: {"type": "string"} for key in args}},
        },
    }
    for name, args, _ in ROUNDS
]


def sample(n: int) -> dict:
    a, b, c = n % 7 + 1, n % 5 + 2, n % 3 + 4
    values = {"a": a, "b": b, "c": c, "s": a + c}
    messages = [
        {"role": "system", "content": "You are a careful agent working in a local workspace. Use the tools."},
        {"role": "user", "content": f"Request {n}: sum the amounts in sales.csv per region into totals.md."},
    ]
    for i, (name, args, result) in enumerate(ROUNDS):
        arguments = json.dumps({key: value.format(**values) for key, value in args.items()})
        call = {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
        messages.append({"role": "assistant", "content": f"Step {i + 1}.", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": result.format(**values)})
    messages.append({"role": "assistant", "content": f"Done: north {a + c}, south {b}."})
    return {"messages": messages, "tools": TOOLS}


def trainer_config(args, model_path: str, dataset_path: str, output_dir: str) -> dict:
    """A training run's trainer configuration (the keys training.trainers.sft reads), on CPU, saving nothing."""
    return {
        "base_model_path": model_path,
        "dataset_path": dataset_path,
        "output_dir": output_dir,
        "packing": True,
        "max_length": args.max_length,
        "bf16": False,
        "cpu": True,
        "learning_rate": 1e-4,
        "num_train_epochs": 1,
        "max_steps": args.warmup + args.steps,
        "per_device_batch_size": args.batch,
        "gradient_accumulation_steps": 1,
        "gradient_checkpointing": False,
        "lr_scheduler_type": "constant",
        "warmup_ratio": 0.0,
        "weight_decay": 0.0,
        "save_steps": 10**9,
        "save_total_limit": 0,
        "logging_steps": 10**9,
        "seed": 0,
    }


def batch_tokens(batch) -> int:
    return int(batch["input_ids"].numel())


def step_clock():
    """A trainer callback that times each optimizer step (its `times`, in seconds)."""
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def __init__(self):
            self.times = []

        def on_step_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter() - self.started)

    return Clock()


def model_folder(model: str, work: Path) -> str:
    """`--model`: "tiny" builds the tests' tiny Qwen3 in `work`; anything else names a model folder."""
    if model == "tiny":
        from training.tiny_model import tiny_model

        return str(tiny_model(work / "tiny"))
    return str(Path(model).resolve())


def clawgym_side(config: dict):
    """(the trainer's step times, the batches its dataloader yields in order, the trainer's TrainingArguments)."""
    from transformers import set_seed

    from training.trainers.sft import load_samples, sft_trainer

    set_seed(config["seed"])
    clock = step_clock()
    trainer = sft_trainer(config, load_samples(config["dataset_path"]), callbacks=[clock])
    batches = list(islice(trainer.get_train_dataloader(), config["max_steps"]))
    trainer.train()
    return clock.times, batches, trainer.args


def bare_side(config: dict, batches: list, trainer_args) -> list[float]:
    """Step times of forward, masked loss, backward, clipping and AdamW over `batches`, from the same weights, with
    the trainer's optimizer settings (`trainer_args`: its TrainingArguments)."""
    import torch
    from transformers import set_seed

    from training.trainers.sft import load_model

    set_seed(config["seed"])
    model = load_model(config)
    model.train()
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=trainer_args.learning_rate,
        betas=(trainer_args.adam_beta1, trainer_args.adam_beta2),
        eps=trainer_args.adam_epsilon,
        weight_decay=trainer_args.weight_decay,
        fused=trainer_args.optim == "adamw_torch_fused" or None,
    )
    times = []
    for batch in batches:
        started = time.perf_counter()
        loss = model(**batch).loss
        loss.backward()
        if trainer_args.max_grad_norm and trainer_args.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), trainer_args.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - started)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny, or a model folder")
    parser.add_argument("--steps", type=int, default=12, help="timed optimizer steps")
    parser.add_argument("--warmup", type=int, default=2, help="steps not timed")
    parser.add_argument("--max-length", type=int, default=1024, help="packed row length")
    parser.add_argument("--batch", type=int, default=2, help="packed rows a step")
    parser.add_argument("--samples", type=int, default=96)
    args = parser.parse_args(argv)

    import torch

    with tempfile.TemporaryDirectory(prefix="train-speed-") as work:
        work = Path(work)
        model_path = model_folder(args.model, work)
        dataset = work / "samples.jsonl"
        dataset.write_text("".join(json.dumps(sample(n)) + "\n" for n in range(args.samples)))
        config = trainer_config(args, model_path, str(dataset), str(work / "out"))
        clawgym_times, batches, trainer_args = clawgym_side(config)
        bare_times = bare_side(config, batches, trainer_args)

    timed = slice(args.warmup, None)
    tokens = [batch_tokens(b) for b in batches][timed]
    clawgym, bare = clawgym_times[timed], bare_times[timed]
    if not tokens or len(clawgym) != len(tokens):
        print(f"the trainer ran {len(clawgym_times)} steps for {len(batches)} batches", file=sys.stderr)
        return 1
    clawgym_rate = sum(tokens) / sum(clawgym)
    bare_rate = sum(tokens) / sum(bare)
    print(
        json.dumps(
            {
                "model": args.model,
                "steps": len(tokens),
                "tokens_per_step": round(statistics.mean(tokens), 1),
                "clawgym_tokens_per_s": round(clawgym_rate, 1),
                "bare_tokens_per_s": round(bare_rate, 1),
                "train_speed_vs_bare": round(clawgym_rate / bare_rate, 3),
                "clawgym_step_s": round(statistics.median(clawgym), 4),
                "bare_step_s": round(statistics.median(bare), 4),
                "threads": torch.get_num_threads(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
