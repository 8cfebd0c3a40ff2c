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


def get_harness(name: str) -> Harness:
    """A harness by name; unknown names raise ValueError naming the known ones."""
    try:
        return HARNESSES[name]()
    except KeyError:
        raise ValueError(f"unknown harness {name!r}; known: {', '.join(HARNESSES)}") from None


__all__ = [
    "HARNESSES",
    "HARNESS_CHOICES",
    "AgentOutcome",
    "AgentTask",
    "ExitReason",
    "Harness",
    "HarnessUnavailable",
    "get_harness",
]
