"""The task mix of an RL run (training.rl.task_mix): every step holds its share of mix tasks and the rest of the run's
own tasks, each pool taken in turn; a mix that cannot be drawn is refused; and the trainer (a real TRL 1.16
GRPOTrainer on the tiny Qwen3, built from a run's config as the RL job builds it) asks its rollout_func for exactly
those prompts, step by step."""

import random

import pytest

from training.rl.presets import TINY_CPU
from training.rl.rollout_func import StepState, checker_reward, revision_of, trl_output
from training.rl.task_mix import TaskMixError, check_mix, mix_prompts, step_prompts
from training.testing import sample

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # TRL's experimental rollout_func and the like

OWN, MIX = [11, 12, 13, 14, 15], [21, 22, 23]


def steps_of(order: list[int], size: int) -> list[list[int]]:
    return [order[i : i + size] for i in range(0, len(order), size)]


def test_each_step_holds_its_share_of_mix_tasks_taken_in_turn():
    order = step_prompts(OWN, MIX, share=0.25, prompts_per_step=4, steps=6, seed=42)
    steps = steps_of(order, 4)
    assert len(steps) == 6 and mix_prompts(0.25, 4) == 1
    for step in steps:
        assert [t in OWN for t in step] == [True, True, True, False]  # its own tasks first, then the mix
        assert len(set(step)) == 4  # no task twice in a step while its pool has others left
    # Over the run, every task of a pool comes round in turn: the three mix tasks twice each in six steps.
    mixed = [step[-1] for step in steps]
    assert sorted(mixed) == sorted(MIX * 2) and mixed[:3] == mixed[3:]
    own = [t for step in steps for t in step[:3]]
    assert max(map(own.count, OWN)) - min(map(own.count, OWN)) <= 1  # 18 draws over 5 tasks: 4 or 3 each
    # The run's seed orders each pool: the same seed draws the same steps, another seed another order.
    assert step_prompts(OWN, MIX, share=0.25, prompts_per_step=4, steps=6, seed=42) == order
    assert step_prompts(OWN, MIX, share=0.25, prompts_per_step=4, steps=6, seed=7) != order
    half = steps_of(step_prompts(OWN, MIX, share=0.5, prompts_per_step=4, steps=3, seed=1), 4)
    assert all(sum(t in MIX for t in step) == 2 for step in half)


def test_a_mix_that_cannot_be_drawn_is_refused():
    check_mix(0.0, 8, tasks=3, mix_tasks=0)  # no mix: nothing to check
    check_mix(0.25, 8, tasks=3, mix_tasks=2)
    for share, steps, tasks, mixed, why in (
        (1.0, 8, 3, 2, r"in \[0, 1\)"),
        (-0.1, 8, 3, 2, r"in \[0, 1\)"),
        (0.25, 8, 3, 0, "needs mix tasks"),
        (0.0, 8, 3, 2, "mix_share is 0"),
        (0.1, 4, 3, 2, "rounds to 0 mix prompt"),
        (0.9, 4, 3, 2, "rounds to 4 mix prompt"),
        (0.5, 4, 0, 2, "tasks of its own"),
    ):
        with pytest.raises(TaskMixError, match=why):
            check_mix(share, steps, tasks=tasks, mix_tasks=mixed)


def test_the_trainer_asks_for_each_steps_prompts_in_order(tiny_model_path, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.trainers.grpo import grpo_config, prompts_dataset, trainer_class

    config = {
        **TINY_CPU,
        "tasks": OWN + MIX,
        "mix_tasks": MIX,
        "mix_share": 0.25,
        "prompts_per_step": 4,
        "num_generations": 2,
        "max_steps": 3,
        "save_steps": 100,
        "learning_rate": 1e-3,
        "output_dir": str(tmp_path / "out"),
        "cpu": True,
    }
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path, local_files_only=True)
    asked, rng = [], random.Random(3)

    def rollout_func(prompts, trainer):
        revisions = [revision_of(p) for p in prompts]
        asked.append(revisions[:: config["num_generations"]])  # each prompt comes num_generations times in a row
        generations = [
            {"rollout": n, "reward": float(n % 2), "note": "", "samples": [sample(rng, env_runs=0)]}
            for n in range(len(prompts))
        ]
        return trl_output(generations, tokenizer.eos_token_id)

    trainer = trainer_class()(
        model=AutoModelForCausalLM.from_pretrained(tiny_model_path, local_files_only=True),
        reward_funcs=[checker_reward],
        args=grpo_config(config),
        train_dataset=prompts_dataset(config),
        processing_class=tokenizer,
        rollout_func=rollout_func,
    )
    trainer.rl_state = StepState()
    trainer.train()
    expected = step_prompts(OWN, MIX, share=0.25, prompts_per_step=4, steps=3, seed=config["seed"])
    assert asked == steps_of(expected, 4)
    assert all(sum(t in MIX for t in step) == 1 for step in asked)
    # Without a mix, TRL draws the run's tasks shuffled, as before.
    plain = {**config, "mix_tasks": [], "mix_share": 0.0}
    assert grpo_config(plain).shuffle_dataset and not grpo_config(config).shuffle_dataset
    assert len(prompts_dataset(plain)) == len(OWN + MIX)
