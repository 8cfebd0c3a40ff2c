"""Groups of an RL step: which rewards count, which groups are dropped, which samples of a rollout are trained, and
the step's metrics. Plain Python (no Django, no torch): the job that runs a step's rollouts and the trainer both use it.

GRPO's baseline is the mean reward of a prompt's group. A rollout that failed for infra reasons, or left no sample to
train on, has reward None: TRL 1.16 turns None into NaN, leaves it out of the group's mean and std (nanmean/nanstd)
and gives it advantage 0. A group with fewer than `min_group_survivors` rewards is dropped for the step: every reward
None, so it moves nothing. A step whose every group dropped is not trained on at all (the trainer skips it).

Every main-chain sample of a rollout is trained, each with the rollout's advantage (training.trainers.grpo); a
rollout without a reward trains none (its tokens would only weigh in the step's token count). Side samples are
counted, never trained.
"""

import math
import statistics
from dataclasses import dataclass, field

# The metric names of one RL step (TrainingMetric.values, one row per optimizer step): the rollout side here, the
# optimizer side from TRL's logs (training.trainers.grpo).
ROLLOUT_METRICS = (
    "reward_mean",
    "reward_std",
    "reward_spread",
    "groups_dropped",
    "groups",
    "inexact_samples",
    "samples",
    "samples_trained",
    "side_samples",
    "rollouts",
    "rollout_p50_s",
    "rollout_max_s",
    "tokens_sampled",
    "tokens_trained",
)
TRAINER_METRICS = ("logprob_mismatch", "loss", "kl", "clip_fraction", "learning_rate", "skipped")
METRICS = ROLLOUT_METRICS + TRAINER_METRICS


@dataclass
class Generation:
    """One rollout of a group as the trainer sees it: its main-chain samples (cut to fit), its reward."""

    rollout_id: int | None
    reward: float | None
    main: list = field(default_factory=list)  # training_jobs.rl.samples.Sample, in the order they were made
    samples: int = 0  # every sample of the rollout, side ones too
    side_samples: int = 0
    inexact_samples: int = 0
    tokens_sampled: int = 0  # policy tokens over every sample of the rollout
    wall_seconds: float | None = None
    note: str = ""

    @property
    def trained(self) -> list:
        """The samples the trainer gets: every main-chain one, none without a reward (a dropped group, no score)."""
        return self.main if self.reward is not None else []


@dataclass
class Group:
    index: int
    generations: list[Generation] = field(default_factory=list)
    dropped: bool = False

    @property
    def survivors(self) -> int:
        return sum(1 for g in self.generations if g.reward is not None)


def apply_min_survivors(group: Group, min_survivors: int) -> Group:
    """Drop the group (every reward None) when fewer than `min_survivors` of its rollouts have a reward."""
    if group.survivors < min_survivors:
        group.dropped = True
        for generation in group.generations:
            if generation.reward is not None:
                generation.note = (
                    generation.note or f"group dropped: {group.survivors} of {len(group.generations)} survived"
                )
            generation.reward = None
    return group


def policy_tokens(sample) -> int:
    return sum(1 for m in sample.env_mask if m)


def main_samples(samples: list) -> list:
    """The main chain's samples of a rollout, in order: a rollout holds several when its calls do not chain (a
    history rewrite or compaction, OpenClaw's internal-context message), and each is trained. A side call's sample
    (`side`: a prompt the agent chose, not its conversation's next turn) is never trained, however long."""
    return [s for s in samples if not getattr(s, "side", False)]


def truncate(sample, max_completion: int, max_context: int):
    """The sample cut to `max_completion` completion tokens and `max_context` in all (prompt + completion); None if
    its prompt alone does not fit. Cutting keeps exactly the sampled tokens (a prefix), so logprobs stay aligned."""
    room = min(max_completion, max_context - len(sample.prompt_ids))
    if room < 1:
        return None
    if len(sample.completion_ids) <= room:
        return sample
    import dataclasses

    return dataclasses.replace(
        sample,
        completion_ids=list(sample.completion_ids[:room]),
        logprobs=list(sample.logprobs[:room]),
        env_mask=list(sample.env_mask[:room]),
    )


def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) with linear interpolation, None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def step_metrics(groups: list[Group]) -> dict:
    """The rollout side of a step's metrics: rewards over the rewards that count (after dropping), the mean over
    groups of the reward spread (max − min; 0 means the group teaches nothing), counts (samples built, trained and
    side; policy tokens sampled and trained), and rollout wall time (p50 and max: the max is the straggler every step
    waits for)."""
    rewards = [g.reward for group in groups for g in group.generations if g.reward is not None]
    spreads = [
        max(r) - min(r)
        for r in (
            [g.reward for g in group.generations if g.reward is not None] for group in groups if not group.dropped
        )
        if r
    ]
    walls = [g.wall_seconds for group in groups for g in group.generations if g.wall_seconds is not None]
    generations = [g for group in groups for g in group.generations]
    return {
        "reward_mean": statistics.fmean(rewards) if rewards else None,
        "reward_std": statistics.pstdev(rewards) if len(rewards) > 1 else (0.0 if rewards else None),
        "reward_spread": statistics.fmean(spreads) if spreads else None,
        "groups_dropped": sum(1 for group in groups if group.dropped),
        "groups": len(groups),
        "inexact_samples": sum(g.inexact_samples for g in generations),
        "samples": sum(g.samples for g in generations),
        "samples_trained": sum(len(g.trained) for g in generations),
        "side_samples": sum(g.side_samples for g in generations),
        "rollouts": len(generations),
        "rollout_p50_s": percentile(walls, 0.5),
        "rollout_max_s": max(walls) if walls else None,
        "tokens_sampled": sum(g.tokens_sampled for g in generations),
        # the loss's normaliser (training.trainers.grpo; on several GPUs this process's share of it)
        "tokens_trained": sum(policy_tokens(s) for g in generations for s in g.trained),
    }


def all_dropped(groups: list[Group]) -> bool:
    return bool(groups) and all(group.dropped for group in groups)
