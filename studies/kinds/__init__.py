"""Kinds of study: the interface (base.StudyKind) and its named implementations, picked by name.

    stability           k evaluation runs of one endpoint on a category-stratified subset: std and CI of the mean
    training_exposure   each checkpoint of a training run evaluated on a benchmark version
    reward_threshold    an SFT dataset at each minimum reward → SFT → evaluated
    synthesis_routes    datasets of persona-driven, skill-grounded and both routes' tasks → SFT → evaluated

services.start_study(kind=NAME, …) is the one way to start any; an unknown name is refused.
"""

from .base import StudyError, StudyKind
from .exposure import TrainingExposure
from .sft import RewardThreshold, SynthesisRoutes
from .stability import Stability

KINDS: dict[str, StudyKind] = {
    k.name: k for k in (Stability(), TrainingExposure(), RewardThreshold(), SynthesisRoutes())
}
KIND_CHOICES = [(name, kind.title) for name, kind in KINDS.items()]


def get_kind(name: str) -> StudyKind:
    """A kind by name; unknown names raise StudyError naming the known ones."""
    try:
        return KINDS[name]
    except KeyError:
        raise StudyError(f"unknown study kind {name!r}; known: {', '.join(KINDS)}") from None


__all__ = ["KINDS", "KIND_CHOICES", "StudyError", "StudyKind", "get_kind"]
