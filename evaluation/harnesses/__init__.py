"""Agent harnesses: the interface (base.Harness) and its named implementations, picked by name.

    openclaw  the real OpenClaw CLI, unmodified (default; settings.CLAWGYM_DEFAULT_HARNESS)
    builtin   ClawGym's compact tool-calling loop, for fast tests and small-model RL

Both run inside the bubblewrap sandbox with the recording proxy as their only network route (sandboxed.run_agent).
"""

from django.conf import settings

from .base import AgentOutcome, AgentTask, ExitReason, Harness, HarnessUnavailable
from .builtin import BuiltinHarness
from .openclaw import OpenClawHarness

HARNESSES: dict[str, type[Harness]] = {OpenClawHarness.name: OpenClawHarness, BuiltinHarness.name: BuiltinHarness}
HARNESS_CHOICES = [(name, cls.title) for name, cls in HARNESSES.items()]
# Rollout options ClawGym enforces itself, whatever the harness: the sandbox's deadline (s), the proxy's token budget,
# and the proxy's recording of exact tokens (a training session). Each harness adds its own (Harness.options).
COMMON_OPTIONS = ("timeout", "token_limit", "record_tokens")
# Options that are a number of seconds. A rollout holds a sandbox slot and a worker until its deadline (timeout), so
# each is capped by CLAWGYM_MAX_ROLLOUT_TIMEOUT; nothing inside a rollout (a tool call, one model request) needs longer.
COMMON_DURATIONS = ("timeout",)


def check_options(harness: str, options: dict) -> None:
    """ValueError naming every option the harness does not take (a misspelt one would be ignored, and the run would
    not be the experiment asked for), a duration that is not a whole number of seconds within the cap, a count that
    is not a whole number from 1, or a flag that is not true or false."""
    known = sorted({*COMMON_OPTIONS, *HARNESSES[harness].options})
    unknown = sorted(set(options) - set(known))
    if unknown:
        hint = ""
        if "max_turns" in unknown:
            hint = " (it has no turn limit of its own: bound its runs by time, timeout, or by tokens, token_limit)"
        raise ValueError(
            f"the {harness} harness takes no option {', '.join(unknown)}{hint}; its options: {', '.join(known)}"
        )
    for name in (*COMMON_DURATIONS, *HARNESSES[harness].durations):
        if options.get(name) is not None:
            check_duration(name, options[name])
    for name in HARNESSES[harness].counts:
        value = options.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"the {name} option must be a whole number from 1, got {value!r}")
    for name in HARNESSES[harness].flags:
        if options.get(name) is not None and not isinstance(options[name], bool):
            raise ValueError(f"the {name} option must be true or false, got {options[name]!r}")


def check_duration(name: str, value) -> int:
    """`value` when it is a whole number of seconds from 1 to CLAWGYM_MAX_ROLLOUT_TIMEOUT, else ValueError saying why
    (and naming the setting that sets the cap)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"the {name} option must be a whole number of seconds, got {value!r}")
    cap = settings.CLAWGYM_MAX_ROLLOUT_TIMEOUT
    if value > cap:
        raise ValueError(f"{name} must be at most {cap} s (CLAWGYM_MAX_ROLLOUT_TIMEOUT), got {value}")
    return value


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
    "check_duration",
    "check_options",
    "get_harness",
]
