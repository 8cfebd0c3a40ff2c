"""Transcript scanners: what agents did wrong in a run's rollouts, found in what the proxy and the sandbox recorded.
The interface is base.Scanner (a RolloutView in, Findings out); its named implementations are picked by name.

    reward_access     the agent read or wrote the reward folder or the checker's paths
    placeholder_paid  it wrote an empty or placeholder file and a check then paid
    false_success     its final message claims success while the checker failed
    loop              it made the same tool call again and again
    sandbox_error     a tool failed because of the sandbox (a missing command, a refused permission)
    refusal           it declined the task
    out_of_budget     it ran out of turns or tokens
    judge             a judge model names what it did wrong (LLM-judged: one recorded call per rollout)

The rule-based ones (DEFAULT_SCANNERS) run on every evaluation run as it finishes (the evaluation.scan_run job);
any of them, the judge included, on demand (`manage.py scan_run`, the API, the run page). Findings are stored as
evaluation.models.ScanFinding (evaluation.services.scans).
"""

from .base import Finding, RolloutView, ScanError, Scanner, ToolStep, WorkspaceFile
from .judged import JudgedScanner
from .rules import RULE_SCANNERS

SCANNERS: dict[str, type[Scanner]] = {cls.name: cls for cls in (*RULE_SCANNERS, JudgedScanner)}
DEFAULT_SCANNERS = tuple(name for name, cls in SCANNERS.items() if not cls.judged)


def check_names(names) -> list[str]:
    """The names, in the registry's order, each once; ValueError naming the unknown ones and the known ones."""
    names = list(names)
    unknown = sorted(set(names) - set(SCANNERS))
    if unknown:
        raise ValueError(f"unknown scanner {', '.join(map(repr, unknown))}; known: {', '.join(SCANNERS)}")
    return [name for name in SCANNERS if name in names]


def get_scanner(name: str, **options) -> Scanner:
    """A scanner by name; an unknown name raises ValueError naming the known ones. `options` go to the LLM-judged
    ones (the judge takes `endpoint=`); the rule-based ones take none and ignore them."""
    [name] = check_names([name])
    cls = SCANNERS[name]
    return cls(**options) if cls.judged else cls()


__all__ = [
    "DEFAULT_SCANNERS",
    "SCANNERS",
    "Finding",
    "RolloutView",
    "ScanError",
    "Scanner",
    "ToolStep",
    "WorkspaceFile",
    "check_names",
    "get_scanner",
]
