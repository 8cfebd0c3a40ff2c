"""Kinds of training run: the interface (base.TrainingKind) and its named implementations, picked by name.

    sft  fine-tune on a built dataset (TRL's SFTTrainer; kinds.sft)
    rl   GRPO on sandboxed rollouts of tasks, their checker's score the reward (kinds.rl)

services.runs.start_training_run(kind=NAME, …) is the one way to start either; an unknown name is refused.
"""

from .base import Launch, TrainingKind, TrainingRunError, known_keys, parse_overrides
from .rl import RL
from .sft import SFT

KINDS: dict[str, TrainingKind] = {kind.name: kind for kind in (SFT(), RL())}


def get_kind(name: str) -> TrainingKind:
    """A kind by name; unknown names raise TrainingRunError naming the known ones."""
    try:
        return KINDS[name]
    except KeyError:
        raise TrainingRunError(f"unknown training kind {name!r}; known: {', '.join(KINDS)}") from None


__all__ = ["KINDS", "Launch", "TrainingKind", "TrainingRunError", "get_kind", "known_keys", "parse_overrides"]
