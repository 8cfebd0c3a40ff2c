"""The task mix of an RL run: which tasks each step draws when the run mixes other tasks into the ones it trains on.

A run that trains only on the tasks it aims at (say the kinds of task its starting checkpoint solves in part) can
forget what it does not see: its policy drifts on every other kind. A task mix keeps some of them in every step: of a
step's `prompts_per_step` prompts, `mix_prompts(share, prompts_per_step)` come from the run's mix tasks and the rest
from its own tasks, so every step holds both in the same proportion (drawn at random from one pool, a step could hold
none of the mix). Within each pool the tasks are taken in turn, in an order shuffled once by the run's seed, so that
over the run every task of a pool is drawn about equally often and a step never repeats a task while its pool has
others left.

    order = step_prompts(tasks, mix_tasks, share=0.25, prompts_per_step=8, steps=50, seed=42)

Plain Python (no torch, no Django): the trainer builds its prompts from it (training.trainers.grpo.prompts_dataset)
and the run's config is checked with the same arithmetic (training_jobs.kinds.rl).
"""

from __future__ import annotations

import random


class TaskMixError(ValueError):
    """A task mix that cannot be drawn as asked; the message says why."""


def mix_prompts(share: float, prompts_per_step: int) -> int:
    """How many of a step's prompts come from the mix tasks: `share` of them, rounded to the nearest whole prompt."""
    return int(round(float(share) * int(prompts_per_step)))


def check_mix(share: float, prompts_per_step: int, *, tasks: int, mix_tasks: int) -> None:
    """Refuse a mix that cannot be drawn: a share outside [0, 1), a share without mix tasks or mix tasks without a
    share, or a share that leaves a step no prompt of either pool."""
    if not 0 <= share < 1:
        raise TaskMixError(
            f"mix_share is the share of a step's prompts drawn from the mix tasks: in [0, 1), got {share}"
        )
    if share > 0 and not mix_tasks:
        raise TaskMixError(
            "mix_share needs mix tasks to draw from (train --mix-task, the API's mix_tasks, the RL form's mix task ids)"
        )
    if mix_tasks and share == 0:
        raise TaskMixError("mix tasks are given but mix_share is 0: set the share of each step they take")
    if not mix_tasks:
        return
    if not tasks:
        raise TaskMixError("a run with mix tasks still needs tasks of its own to train on")
    mixed = mix_prompts(share, prompts_per_step)
    if not 1 <= mixed <= prompts_per_step - 1:
        raise TaskMixError(
            f"mix_share {share} of prompts_per_step {prompts_per_step} rounds to {mixed} mix prompt(s) a step: "
            "each step needs at least one prompt of each pool"
        )


def step_prompts(
    tasks: list[int], mix_tasks: list[int], *, share: float, prompts_per_step: int, steps: int, seed: int
) -> list[int]:
    """The prompts (task revision ids) of `steps` steps, step after step: each step's own tasks first, then its mix
    tasks. The trainer walks this order as it is (no shuffle)."""
    check_mix(share, prompts_per_step, tasks=len(tasks), mix_tasks=len(mix_tasks))
    mixed = mix_prompts(share, prompts_per_step)
    own, mix = _rotation(tasks, seed, "tasks"), _rotation(mix_tasks, seed, "mix")
    order: list[int] = []
    for step in range(steps):
        order += own(step, prompts_per_step - mixed) + mix(step, mixed)
    return order


def _rotation(pool: list[int], seed: int, name: str):
    """take(step, n): the step's n tasks of `pool`, taken in turn from where the step before stopped."""
    shuffled = list(pool)
    random.Random(f"clawgym-task-mix:{seed}:{name}").shuffle(shuffled)

    def take(step: int, n: int) -> list[int]:
        start = step * n
        return [shuffled[(start + i) % len(shuffled)] for i in range(n)] if shuffled else []

    return take
