"""pytest fixtures and helpers for code that trains or serves a model (registered in the root conftest.py): the tiny
Qwen3 (training.tiny_model), built once a session, for the training library's tests and the training_jobs app's; and
ClawGym's GRPO trainer on it in this process, fed hand-made steps (`make_trainer`, `step_generations`)."""

import random

import pytest

from .rl.rollout_func import StepState, prompt_for, trl_output
from .tiny_model import tiny_model

TEMPERATURE, EPSILON, EPSILON_HIGH = 0.7, 0.2, 0.28


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> str:
    return str(tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-qwen3"))


def sample(rng, *, env_runs: int) -> dict:
    """A multi-turn sample: policy tokens, then `env_runs` times environment tokens (masked) and policy tokens."""
    completion, mask = [], []
    for run in range(2 * env_runs + 1):
        size = rng.randint(2, 5)
        completion += [rng.randrange(20, 700) for _ in range(size)]
        mask += [0 if run % 2 else 1] * size
    return {
        "prompt_ids": [rng.randrange(20, 700) for _ in range(rng.randint(4, 9))],
        "completion_ids": completion,
        "env_mask": mask,
        "logprobs": [-1.0 if m else 0.0 for m in mask],
        "exact": True,
    }


def step_generations(rewards=None) -> list[dict]:
    """Two groups of three rollouts as the job answers them (run_step): samples per rollout 3, 1, 0 (no reward) and
    2, 1, 1; rewards that differ in each group, so every advantage but the reward-less rollout's is non-zero (or
    `rewards`, one per rollout, the reward-less one's None)."""
    rng = random.Random(7)
    shape = [(1.0, [1, 0, 2]), (0.0, [1]), (None, []), (0.8, [0, 1]), (0.0, [2]), (1.0, [0])]
    if rewards is not None:
        shape = [(reward, runs) for reward, (_, runs) in zip(rewards, shape, strict=True)]
    return [
        {"rollout": n, "reward": reward, "note": "", "samples": [sample(rng, env_runs=e) for e in runs]}
        for n, (reward, runs) in enumerate(shape)
    ]


def make_trainer(path, tmp_path, generations, *, seen=None, rl_state=None, callbacks=None, **config):
    """ClawGymGRPOTrainer on the model at `path` whose rollout_func answers `generations` at every step (two prompts
    of three generations, two micro-batches); `config`: GRPOConfig fields over these."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from .trainers.grpo import trainer_class

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)

    def rollout_func(prompts, trainer):
        return trl_output(generations, tokenizer.eos_token_id)

    def reward(prompts, completions, checker_reward, **kwargs):
        if seen is not None:
            seen.append(set(kwargs))
        return list(checker_reward)

    torch.manual_seed(0)
    args = GRPOConfig(
        **{
            "output_dir": str(tmp_path / "out"),
            "use_cpu": True,
            "bf16": False,
            "per_device_train_batch_size": 3,
            "gradient_accumulation_steps": 2,
            "num_generations": 3,
            "num_iterations": 2,
            "temperature": TEMPERATURE,
            "epsilon": EPSILON,
            "epsilon_high": EPSILON_HIGH,
            "beta": 0.0,
            "loss_type": "dapo",
            "max_completion_length": 64,
            "max_steps": 1,
            "save_strategy": "no",
            "report_to": "none",
            "disable_tqdm": True,
            "dataloader_num_workers": 0,
            **config,
        }
    )
    trainer = trainer_class()(
        model=AutoModelForCausalLM.from_pretrained(path, local_files_only=True),
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": prompt_for(1)}, {"prompt": prompt_for(2)}]),
        processing_class=tokenizer,
        rollout_func=rollout_func,
        callbacks=callbacks,
    )
    trainer.rl_state = rl_state if rl_state is not None else StepState()
    trainer.current_gradient_accumulation_steps = 2  # what Trainer's loop sets before a step's micro-batches
    return trainer


def step_inputs():
    return [{"prompt": prompt_for(n)} for n in (1, 1, 1, 2, 2, 2)]  # distinct dicts: TRL writes fields into each


def reference_model(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, local_files_only=True)  # its own copy of the same weights
