"""Agent harnesses: the interface (base.Harness) and its named implementations, picked by name.

    openclaw  the real OpenClaw CLI, unmodified (default; settings.CLAWGYM_DEFAULT_HARNESS)
    builtin   ClawGym's compact tool-calling loop, for fast tests and small-model RL

Both run inside the bubblewrap sandbox with the recording proxy as their only network route (sandboxed.run_agent).
"""

from .base import AgentOutcome, AgentTask, ExitReason, Harness, HarnessUnavailable
from .builtin import BuiltinHarness
from .openclaw import OpenClawHarness

HARNESSES: dict[str, type[Harness]] = {OpenClawHarness.name: OpenClawHarness, BuiltinHarness.name: BuiltinHarness}
HARNESS_CHOICES = [(name, cls.title) for name, cls in HARNESSES.items()]
# Rollout options ClawGym enforces itself, whatever the harness: the sandbox's deadline (s), the proxy's token budget,
# and the proxy's recording of exact tokens (a training session). Each harness adds its own (Harness.options).
COMMON_OPTIONS = ("timeout", "token_limit", "record_tokens")


def check_options(harness: str, options: dict) -> None:
    """ValueError naming every option the harness does not take: a misspelt one would be ignored, and the run would
    not be the experiment asked for."""
    known = sorted({*COMMON_OPTIONS, *HARNESSES[harness].options})
    unknown = sorted(set(options) - set(known))
    if not unknown:
        return
    hint = ""
    if "max_turns" in unknown:
        hint = " (it has no turn limit of its own: bound its runs by time, timeout, or by tokens, token_limit)"
    raise ValueError(
        f"the {harness} harness takes no option {', '.join(unknown)}{hint}; its options: {', '.join(known)}"
    )


def get_harness(name: str) -> Harness:
    """A harness by name; unknown names raise ValueError naming the known ones."""
    try:
        return HARNESSES[name]()
    except KeyError:
        raise ValueError(f"unknown harness {name!r}; known: {', '.join(HARNESSES)}") from None


__all__ = [
    "HARNESSES",
    "COMMON_OPTIONS",
    "HARNESS_CHOICES",
    "AgentOutcome",
    "AgentTask",
    "ExitReason",
    "Harness",
    "HarnessUnavailable",
    "check_options",
    "get_harness",
]
