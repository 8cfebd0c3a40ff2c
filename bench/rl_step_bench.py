#!/usr/bin/env python
"""The RL step bench: ClawGym's GRPO step against a bare forward/backward over the same step's tokens.

    .venv/bin/python bench/rl_step_bench.py [--model tiny|PATH] [--steps 4] [--warmup 1] [--prompts 4]
        [--generations 4] [--prompt-tokens 600] [--completion-tokens 900] [--gradient-checkpointing] [--beta 0]

Both sides train the same model from the same weights on the same rollouts, in this process, one after the other:

- ClawGym: the RL trainer as an RL run starts it (training.trainers.grpo: ClawGymGRPOTrainer with grpo_config and the
  checker reward), for warmup + steps optimizer steps, timed per step by a callback. Its rollout_func answers the
  step's generations at once from rollouts made up here (agent conversations' shape: a prompt, then the agent's turns
  trained and the tool results between them masked; rewards that differ within each group), so the step's time is
  the trainer's own, and the time the rollout_func took is measured and counted as the rollouts' wall time.
- bare: per step, the same rows as micro-batches of one group (the trainer's), a forward, the clipped surrogate on the
  trained tokens (their log-probabilities against the sampled ones, times the group's normalised reward), a backward,
  and an AdamW step: nothing else.

`--beta B` gives ClawGym's side the KL term (TRL's, against a reference copy of the model: one more forward a step,
without gradient); the bare loop has none, so the ratio with and without it shows what the term costs.

The aim: ClawGym's step at most 1.5x (bare forward/backward + the rollouts' wall time). The steps after the warm-up
count. One JSON line last:

    {"model", "steps", "rows_per_step", "tokens_per_step", "trained_tokens_per_step", "clawgym_step_s",
     "bare_step_s", "rollout_s", "rl_step_vs_bare", "gradient_checkpointing", "beta", "threads"}
"""

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BASE_DIR / "bench"))
from train_speed_bench import model_folder, step_clock  # noqa: E402  (the SFT bench's clock and --model)

AGENT_TURN = 60  # tokens of one agent turn (trained)
TOOL_RESULT = 140  # tokens of the tool result after it (in the context, not trained)


def rollouts(step: int, prompts: list[str], args, vocab: int, eos: int) -> dict:
    """The step's generations as the RL job answers them (training.rl.rollout_func.trl_output's shape), made up from
    the step's number and each prompt's place: the same on both sides."""
    out = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "checker_reward": []}
    out["rollout_id"], out["extra_samples"] = [], []
    for index, _ in enumerate(prompts):
        rng = random.Random(step * 10_007 + index)
        completion, mask = [], []
        while len(completion) < args.completion_tokens:
            turn = min(AGENT_TURN, args.completion_tokens - len(completion))
            completion += [rng.randrange(3, vocab) for _ in range(turn)]
            mask += [1] * turn
            result = min(TOOL_RESULT, args.completion_tokens - len(completion))
            completion += [rng.randrange(3, vocab) for _ in range(result)]
            mask += [0] * result
        completion[-1], mask[-1] = eos, 1  # the agent's last turn ends the conversation
        out["prompt_ids"].append([rng.randrange(3, vocab) for _ in range(args.prompt_tokens)])
        out["completion_ids"].append(completion)
        out["logprobs"].append([-rng.uniform(0.5, 3.0) for _ in completion])
        out["env_mask"].append(mask)
        out["checker_reward"].append(rng.choice((0.0, 0.5, 1.0)))
        out["rollout_id"].append(step * 1000 + index)
        out["extra_samples"].append([])
    return out


def rl_config(args, model_path: str, output_dir: str) -> dict:
    """An RL run's trainer configuration (the tiny-cpu preset with the bench's sizes), saving nothing."""
    from training.rl.presets import TINY_CPU

    return {
        **TINY_CPU,
        "base_model_path": model_path,
        "output_dir": output_dir,
        "cpu": True,
        "tasks": list(range(1, args.prompts + 1)),
        "prompts_per_step": args.prompts,
        "num_generations": args.generations,
        "max_steps": args.warmup + args.steps,
        "max_completion_length": args.completion_tokens,
        "max_context": args.prompt_tokens + args.completion_tokens,
        "learning_rate": 1e-5,
        "gradient_checkpointing": args.gradient_checkpointing,
        "beta": args.beta,
        "save_steps": 10**9,
        "seed": 0,
    }


def clawgym_side(config: dict, args):
    """(the trainer's step times, the rollout_func's times, each step's generations in order)."""
    from transformers import AutoTokenizer, set_seed

    from training.rl.rollout_func import StepState, checker_reward
    from training.trainers.grpo import grpo_config, prompts_dataset, trainer_class
    from training.trainers.sft import load_model

    set_seed(config["seed"])
    tokenizer = AutoTokenizer.from_pretrained(config["base_model_path"], local_files_only=True)
    model = load_model(config)
    vocab = model.config.vocab_size
    made, rollout_times = [], []

    def rollout_func(prompts: list, trainer) -> dict:
        started = time.perf_counter()
        out = rollouts(trainer.state.global_step + 1, prompts, args, vocab, tokenizer.eos_token_id)
        made.append(out)
        rollout_times.append(time.perf_counter() - started)
        return out

    clock = step_clock()
    trainer = trainer_class()(
        model=model,
        reward_funcs=[checker_reward],
        args=grpo_config(config),
        train_dataset=prompts_dataset(config),
        processing_class=tokenizer,
        rollout_func=rollout_func,
        callbacks=[clock],
    )
    trainer.rl_state = StepState()
    trainer.train()
    return clock.times, rollout_times, made


def bare_side(config: dict, steps: list[dict]) -> list[float]:
    """Step times of forward, clipped surrogate, backward and AdamW over each step's rows, from the same weights."""
    import torch
    from transformers import set_seed

    from training.trainers.sft import load_model

    set_seed(config["seed"])
    model = load_model(config)
    if config["gradient_checkpointing"]:
        model.gradient_checkpointing_enable()
    model.config.use_cache = False
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["learning_rate"], weight_decay=0.0)
    group, low, high = config["num_generations"], 1 - config["epsilon"], 1 + config["epsilon_high"]
    times = []
    for out in steps:
        started = time.perf_counter()
        rewards = torch.tensor(out["checker_reward"]).view(-1, group)
        advantages = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4)).view(-1)
        trained = sum(sum(mask) for mask in out["env_mask"])
        for first in range(0, len(out["prompt_ids"]), group):
            rows = range(first, first + group)
            ids = torch.tensor([out["prompt_ids"][r] + out["completion_ids"][r] for r in rows])
            width = len(out["completion_ids"][first])
            mask = torch.tensor([out["env_mask"][r] for r in rows], dtype=torch.float32)
            sampled = torch.tensor([out["logprobs"][r] for r in rows])
            logits = model(input_ids=ids).logits[:, -width - 1 : -1, :]
            logps = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, -width:].unsqueeze(-1)).squeeze(-1)
            ratio = torch.exp(logps - sampled)
            advantage = advantages[first : first + group].unsqueeze(1)
            surrogate = torch.minimum(ratio * advantage, torch.clamp(ratio, low, high) * advantage)
            loss = -(surrogate * mask).sum() / trained
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - started)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny, or a model folder")
    parser.add_argument("--steps", type=int, default=4, help="timed optimizer steps")
    parser.add_argument("--warmup", type=int, default=1, help="steps not timed")
    parser.add_argument("--prompts", type=int, default=4, help="groups a step")
    parser.add_argument("--generations", type=int, default=4, help="rollouts a group")
    parser.add_argument("--prompt-tokens", type=int, default=600)
    parser.add_argument("--completion-tokens", type=int, default=900)
    parser.add_argument(
        "--gradient-checkpointing",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="on both sides (the learning bench's RL runs with it, for memory)",
    )
    parser.add_argument(
        "--beta",
        type=float,
        default=0.0,
        help="the KL term's weight on ClawGym's side (a reference copy of the model, one more forward a step); the "
        "bare loop has none, so the ratio shows what the term costs",
    )
    args = parser.parse_args(argv)

    import torch

    with tempfile.TemporaryDirectory(prefix="rl-step-") as work:
        work = Path(work)
        model_path = model_folder(args.model, work)
        config = rl_config(args, model_path, str(work / "out"))
        clawgym_times, rollout_times, steps = clawgym_side(config, args)
        bare_times = bare_side(config, steps)

    if len(clawgym_times) != len(steps) or len(bare_times) != len(steps):
        print(f"the trainer ran {len(clawgym_times)} steps for {len(steps)} rollout batches", file=sys.stderr)
        return 1
    timed = slice(args.warmup, None)
    clawgym, bare, rollout = clawgym_times[timed], bare_times[timed], rollout_times[timed]
    if not clawgym:
        print("no step after the warm-up: raise --steps", file=sys.stderr)
        return 1
    clawgym_s, bare_s, rollout_s = (statistics.median(t) for t in (clawgym, bare, rollout))
    rows = len(steps[0]["prompt_ids"])
    print(
        json.dumps(
            {
                "model": args.model,
                "steps": len(clawgym),
                "rows_per_step": rows,
                "tokens_per_step": rows * (args.prompt_tokens + args.completion_tokens),
                "trained_tokens_per_step": sum(sum(m) for m in steps[0]["env_mask"]),
                "clawgym_step_s": round(clawgym_s, 4),
                "bare_step_s": round(bare_s, 4),
                "rollout_s": round(rollout_s, 4),
                "rl_step_vs_bare": round(clawgym_s / (bare_s + rollout_s), 3),
                "gradient_checkpointing": args.gradient_checkpointing,
                "beta": args.beta,
                "threads": torch.get_num_threads(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
