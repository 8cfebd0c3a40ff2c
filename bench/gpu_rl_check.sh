#!/usr/bin/env bash
# RL check for a machine with an NVIDIA GPU: a vLLM server started the way TRL 1.16's `trl vllm-serve` starts it
# (VLLM_SERVER_DEV_MODE=1 vllm serve … --weight-transfer-config '{"backend": "nccl"}' --logprobs-mode
# processed_logprobs --max-logprobs -1) and ClawGym's GRPO trainer (training.trainers.grpo's trainer class) on
# the same GPU, a Qwen3-architecture model initialised from a config (nothing downloaded). Each step the trainer syncs
# its weights into vLLM (TRL's vllm_mode="server"), our rollout_func samples through vLLM's OpenAI chat completions
# with return_token_ids + logprobs (what the recording proxy asks for), and the trainer computes the logprobs of
# exactly those tokens: their mismatch after a sync must be ~0 (bf16 noise), and grows if the sync did not happen.
# Each generation is --samples-per-generation samples (separate calls, as an OpenClaw rollout's are): the first is
# TRL's completion, the others go in `extra_samples`, which the trainer trains as rows of their own; the mismatch is
# over every row, so extra samples scored against the wrong tokens or positions would show.
# Prints ONE JSON object on its last line:
#   {"device", "policy": "vllm"|"live", "model": {...}, "steps", "seconds", "steps_per_second",
#    "samples_per_generation", "logprob_mismatch": [per step], "mismatch_after_sync": max over steps ≥ 2,
#    "synced": bool, "loss": [...]}
#
#   bench/gpu_rl_check.sh                                    # GPU: a Qwen3-0.6B-shaped model, vLLM on the same GPU
#   bench/gpu_rl_check.sh --cpu --hidden 64 --layers 2       # here: the live policy server instead of vLLM
#
# Flags: --cpu, --hidden N, --layers N, --heads N, --kv-heads N, --intermediate N, --steps N, --generations N,
# --prompts N, --samples-per-generation N, --max-tokens N, --lr X, --gpu-memory-utilization X (vLLM's share of the
# GPU), --port N.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false TRL_EXPERIMENTAL_SILENCE=1
exec "$PYTHON" - "$@" <<'PY'
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.getcwd())
parser = argparse.ArgumentParser(prog="bench/gpu_rl_check.sh")
parser.add_argument("--cpu", action="store_true")
parser.add_argument("--hidden", type=int, default=1024)
parser.add_argument("--layers", type=int, default=28)
parser.add_argument("--heads", type=int, default=16)
parser.add_argument("--kv-heads", type=int, default=8)
parser.add_argument("--intermediate", type=int, default=3072)
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--generations", type=int, default=8)
parser.add_argument("--prompts", type=int, default=2)
parser.add_argument("--samples-per-generation", type=int, default=2)
parser.add_argument("--max-tokens", type=int, default=256)
parser.add_argument("--lr", type=float, default=1e-5)
parser.add_argument("--temperature", type=float, default=0.7)
parser.add_argument("--gpu-memory-utilization", type=float, default=0.3)
parser.add_argument("--port", type=int, default=8011)
args = parser.parse_args(sys.argv[1:])

import torch
from datasets import Dataset
from transformers import Qwen3Config, Qwen3ForCausalLM, TrainerCallback
from trl import GRPOConfig

from training.rl.rollout_func import EXTRA_SAMPLES, StepState
from training.tiny_model import tiny_tokenizer
from training.trainers.grpo import trainer_class

if not args.cpu and not torch.cuda.is_available():
    sys.exit("no CUDA device visible: run with --cpu (and small sizes) on a machine without an NVIDIA GPU")
work = tempfile.mkdtemp(prefix="gpu-rl-check-")
model_dir = os.path.join(work, "model")
tokenizer = tiny_tokenizer()
tokenizer.save_pretrained(model_dir)
config = Qwen3Config(
    vocab_size=len(tokenizer), hidden_size=args.hidden, intermediate_size=args.intermediate,
    num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
    head_dim=max(args.hidden // args.heads, 8), max_position_embeddings=4096, tie_word_embeddings=True,
    eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
)
torch.manual_seed(0)
dtype = torch.float32 if args.cpu else torch.bfloat16
Qwen3ForCausalLM(config).to(dtype).save_pretrained(model_dir)
parameters = sum(p.numel() for p in Qwen3ForCausalLM(config).parameters())

vllm = None
holder = {}
policy_key = ""  # vLLM here is started without --api-key
if args.cpu:
    from training.rl.policy_server import LivePolicy, PolicyServer

    import secrets

    # The live server answers only its key (the job derives one per attempt; here any fresh one does).
    policy_key = secrets.token_urlsafe(24)
    server = PolicyServer(LivePolicy(lambda: holder["trainer"].accelerator.unwrap_model(holder["trainer"].model),
                                     tokenizer, temperature=args.temperature, max_tokens=args.max_tokens,
                                     max_context=4096), api_key=policy_key, port=0)
    policy_url = server.start()
    model_name = "policy"
else:
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    command = build_command(ScriptArguments(model=model_dir, port=args.port, enforce_eager=True, max_model_len=4096,
                                            gpu_memory_utilization=args.gpu_memory_utilization, dtype="bfloat16"))
    log = open(os.path.join(work, "vllm.log"), "w")
    vllm = subprocess.Popen(command, env={**os.environ, "VLLM_SERVER_DEV_MODE": "1"}, stdout=log, stderr=log,
                            start_new_session=True)
    policy_url, model_name = f"http://127.0.0.1:{args.port}/v1", model_dir
    deadline = time.monotonic() + 900
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{args.port}/health", timeout=2)
            break
        except OSError:
            if vllm.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"vLLM did not start: see {log.name}\n" + open(log.name).read()[-3000:])
            time.sleep(2)

rl_state = StepState()


def sample(prompt: str) -> dict:
    body = {"model": model_name, "messages": [{"role": "user", "content": prompt}], "max_tokens": args.max_tokens,
            "temperature": args.temperature, "logprobs": True, "return_token_ids": True}
    headers = {"Content-Type": "application/json"}
    if policy_key:
        headers["Authorization"] = f"Bearer {policy_key}"
    request = urllib.request.Request(f"{policy_url}/chat/completions", json.dumps(body).encode(), headers)
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)


def as_sample(reply) -> dict:
    choice = reply["choices"][0]
    ids = choice["token_ids"]
    return {"prompt_ids": reply["prompt_token_ids"], "completion_ids": ids, "env_mask": [1] * len(ids),
            "logprobs": [c["logprob"] for c in choice["logprobs"]["content"]]}


def rollout_func(prompts, trainer):
    per = args.samples_per_generation
    asked = [f"{prompt} (part {n + 1})" if n else prompt for prompt in prompts for n in range(per)]
    def ask():
        with ThreadPoolExecutor(max_workers=min(len(asked), 64)) as pool:
            return [as_sample(r) for r in pool.map(sample, asked)]

    # The live policy samples in this (the trainer's main) thread while the requests wait, as the trainer's does.
    replies = server.policy.sampling_while(ask) if args.cpu else ask()
    out = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "checker_reward": [],
           EXTRA_SAMPLES: []}
    for index in range(len(prompts)):
        first, *rest = replies[index * per : (index + 1) * per]
        for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask"):
            out[key].append(first[key])
        out[EXTRA_SAMPLES].append(rest)
        tokens = sum(len(s["completion_ids"]) for s in [first, *rest])
        out["checker_reward"].append((tokens % 7) / 6)  # any reward that differs within a group
    return out


def reward(prompts, completions, checker_reward, **kwargs):
    return list(checker_reward)


class Times(TrainerCallback):
    def __init__(self):
        self.losses = []

    def on_log(self, args_, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(logs["loss"])


extra = {} if args.cpu else {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": f"http://127.0.0.1:{args.port}"}
grpo = GRPOConfig(
    output_dir=os.path.join(work, "out"), learning_rate=args.lr, max_steps=args.steps,
    per_device_train_batch_size=args.generations, gradient_accumulation_steps=args.prompts,
    num_generations=args.generations, epsilon=0.2, epsilon_high=0.28, beta=0.0, temperature=args.temperature,
    max_completion_length=args.max_tokens, bf16=not args.cpu, use_cpu=args.cpu, save_strategy="no",
    logging_steps=1, report_to="none", disable_tqdm=True, gradient_checkpointing=not args.cpu, **extra,
)
prompts = Dataset.from_list([{"prompt": f"Write note {i} about the sales report."} for i in range(args.prompts * 4)])
model = Qwen3ForCausalLM.from_pretrained(model_dir, dtype=dtype)
times = Times()
trainer = trainer_class()(model=model, reward_funcs=[reward], args=grpo, train_dataset=prompts,
                          processing_class=tokenizer, rollout_func=rollout_func, callbacks=[times])
trainer.rl_state = rl_state
holder["trainer"] = trainer
started = time.monotonic()
try:
    trainer.train()
finally:
    if vllm is not None:
        os.killpg(vllm.pid, 15)
seconds = time.monotonic() - started
mismatch = [rl_state.metrics.get(step, {}).get("logprob_mismatch") for step in range(1, args.steps + 1)]
after = [m for m in mismatch[1:] if m is not None]
threshold = 1e-3 if args.cpu else 0.05  # fp32 on CPU; bf16 kernels of vLLM and the trainer differ a little
report = {
    "device": "cpu" if args.cpu else torch.cuda.get_device_name(0),
    "policy": "live" if args.cpu else "vllm",
    "model": {"architecture": "Qwen3ForCausalLM", "parameters": parameters, "hidden": args.hidden,
              "layers": args.layers, "dtype": str(dtype).removeprefix("torch.")},
    "steps": trainer.state.global_step, "seconds": round(seconds, 2),
    "samples_per_generation": args.samples_per_generation,
    "steps_per_second": round(trainer.state.global_step / seconds, 4) if seconds else None,
    "logprob_mismatch": mismatch, "mismatch_after_sync": max(after) if after else None,
    "synced": bool(after) and max(after) < threshold, "loss": times.losses,
}
print(json.dumps(report))
PY
