#!/usr/bin/env bash
# SFT check for a machine with an NVIDIA GPU: a Qwen3-architecture model initialised from a config (no weights to
# download), trained with full fine-tuning (bf16, gradient checkpointing, AdamW) on packed sequences of 8K and 32K
# tokens with loss on the assistant share of each sequence only. Prints ONE JSON object on its last line:
#   {"device", "model": {...}, "runs": [{"length", "steps", "tokens_per_second", "peak_gpu_memory_bytes",
#    "loss": [...], "loss_trend": "falling"|"flat"|"rising"}]}
# The same batch is repeated, so a working step makes the loss fall: the trend is the check.
#
#   bench/gpu_sft_check.sh                       # GPU: a Qwen3-0.6B-shaped model at 8192 and 32768 tokens
#   bench/gpu_sft_check.sh --cpu --hidden 64 --layers 2 --lengths 256,512 --steps 3   # here, on CPU
#
# Flags: --cpu, --hidden N, --layers N, --heads N, --kv-heads N, --intermediate N, --vocab N, --lengths A,B,
# --steps N, --lr X, --yarn (rope scaling factor 2 over the original context, as the paper's 32K→64K).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "$PYTHON" - "$@" <<'PY'
import argparse
import json
import sys
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

parser = argparse.ArgumentParser(prog="bench/gpu_sft_check.sh")
parser.add_argument("--cpu", action="store_true")
parser.add_argument("--hidden", type=int, default=1024)
parser.add_argument("--layers", type=int, default=28)
parser.add_argument("--heads", type=int, default=16)
parser.add_argument("--kv-heads", type=int, default=8)
parser.add_argument("--intermediate", type=int, default=3072)
parser.add_argument("--vocab", type=int, default=151936)
parser.add_argument("--lengths", default="8192,32768")
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--lr", type=float, default=1e-4)
parser.add_argument("--yarn", action="store_true")
args = parser.parse_args(sys.argv[1:])

if not args.cpu and not torch.cuda.is_available():
    sys.exit("no CUDA device visible: run with --cpu (and small sizes) on a machine without an NVIDIA GPU")
device = torch.device("cpu" if args.cpu else "cuda")
dtype = torch.float32 if args.cpu else torch.bfloat16
lengths = [int(x) for x in args.lengths.split(",") if x]
head_dim = max(args.hidden // args.heads, 8)
config = Qwen3Config(
    vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
    num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
    head_dim=head_dim, max_position_embeddings=max(lengths + [32768]), tie_word_embeddings=True,
)
if args.yarn:
    original = max(lengths) // 2
    config.rope_parameters = {**(config.rope_parameters or {}), "rope_type": "yarn", "factor": 2.0,
                              "original_max_position_embeddings": original}
attention = "sdpa"
torch.manual_seed(0)
model = Qwen3ForCausalLM._from_config(config, dtype=dtype, attn_implementation=attention).to(device)
getattr(model, "activation_checkpointing_enable", model.gradient_checkpointing_enable)()
model.config.use_cache = False
parameters = sum(p.numel() for p in model.parameters())
report = {
    "device": "cpu" if args.cpu else torch.cuda.get_device_name(0),
    "model": {"architecture": "Qwen3ForCausalLM", "parameters": parameters, "hidden": args.hidden,
              "layers": args.layers, "dtype": str(dtype).removeprefix("torch."), "yarn": args.yarn,
              "attention": attention},
    "runs": [],
}


def trend(losses):
    if len(losses) < 2:
        return "flat"
    change = (losses[-1] - losses[0]) / max(abs(losses[0]), 1e-9)
    return "falling" if change < -0.001 else "rising" if change > 0.001 else "flat"


for length in lengths:
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(length)
    # A packed sequence of a few "turns" of a small vocabulary share (learnable), the loss on every other turn only:
    # the assistant-only mask of multi-turn SFT.
    input_ids = torch.randint(0, min(args.vocab, 512), (1, length), generator=generator)
    labels = input_ids.clone()
    turn = max(length // 8, 1)
    for start in range(0, length, 2 * turn):
        labels[0, start : start + turn] = -100
    input_ids, labels = input_ids.to(device), labels.to(device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
    losses, timed_tokens, timed_seconds = [], 0, 0.0
    for step in range(args.steps):
        started = time.perf_counter()
        loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        if step > 0 or args.steps == 1:  # the first step warms kernels and allocators up
            timed_tokens += length
            timed_seconds += seconds
        losses.append(round(float(loss.detach()), 4))
    report["runs"].append({
        "length": length, "steps": args.steps,
        "tokens_per_second": round(timed_tokens / timed_seconds, 1) if timed_seconds else None,
        "peak_gpu_memory_bytes": torch.cuda.max_memory_allocated() if device.type == "cuda" else None,
        "loss": losses, "loss_trend": trend(losses),
    })
    del optimizer
print(json.dumps(report))
PY
