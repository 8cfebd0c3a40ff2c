"""An evaluation run's figures from its per-task rows (EvalRunTask), and the paired comparison of two runs.

Everything here reads the per-task rows only (one per task revision: a few hundred for a benchmark), never the
rollouts: the rows are kept up to date as rollouts finish (evaluation.services.run_progress). A run's stored
`summary` is `run_figures` of its rows; it names the category assignment it was computed with (`category_stamp`), so
a category accepted later is noticed and the summary recomputed (evaluation.reports.current_summary).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass

from . import stats

UNCATEGORIZED = "uncategorized"


@dataclass(frozen=True)
class TaskRow:
    """What the figures need of one task of a run."""

    task: str  # external id
    category: str | None  # benchmark category slug
    hybrid: bool
    scores: tuple  # per repeat: the score or None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    agent_seconds: float = 0.0

    @property
    def scored(self) -> list[float]:
        return [s for s in self.scores if s is not None]

    @property
    def mean(self) -> float | None:
        scored = self.scored
        return sum(scored) / len(scored) if scored else None

    @property
    def group(self) -> str:
        return self.category or UNCATEGORIZED


def category_stamp(assignment) -> str:
    """A fingerprint of (task, category) pairs: it changes when any task of the run changes category."""
    text = "\n".join(f"{task}\t{category or ''}" for task, category in sorted(assignment))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_figures(rows: list[TaskRow], *, repeats: int, pass_threshold: float) -> dict:
    """The figures of a run (the `summary` shape; `evaluate --json` reports a part of it)."""
    with_score = [r for r in rows if r.scored]
    means = [r.mean for r in with_score]
    per_repeat = []
    for index in range(repeats):
        values = [r.scores[index] for r in rows if index < len(r.scores) and r.scores[index] is not None]
        per_repeat.append(sum(values) / len(values) if values else None)
    overall = stats.mean_with_ci(means)
    overall["std_across_repeats"] = stats.std_across_repeats(per_repeat)
    overall["tasks_total"] = len(rows)

    groups: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        groups.setdefault(row.group, [])
        if row.scored:
            groups[row.group].append(row.mean)
    categories = {name: stats.mean_with_ci(values) for name, values in sorted(groups.items())}
    grading = {}
    for name, hybrid in (("code", False), ("hybrid", True)):
        values = [r.mean for r in with_score if r.hybrid is hybrid]
        if values or any(r.hybrid is hybrid for r in rows):
            grading[name] = stats.mean_with_ci(values)
    passes = [(len(r.scored), sum(1 for s in r.scored if s >= pass_threshold)) for r in with_score]
    pass_at, pass_hat = stats.pass_rates(passes, repeats)
    return {
        "overall": overall,
        "categories": categories,
        "grading": grading,
        "pass_at_k": {str(k): v for k, v in pass_at.items()},
        "pass_hat_k": {str(k): v for k, v in pass_hat.items()},
        "pass_threshold": pass_threshold,
        "repeat_means": per_repeat,
        "tasks": {r.task: stats.task_figures(r.scored) for r in rows},
        # Tasks with fewer scored repeats than asked for: the run is incomplete while there are any.
        "missing": sorted(r.task for r in rows if len(r.scored) < repeats),
        "unscored": sorted(r.task for r in rows if not r.scored),
        "distribution": stats.histogram(means),
        "tokens": {"input": sum(r.input_tokens for r in rows), "output": sum(r.output_tokens for r in rows)},
        "cost": round(sum(r.cost for r in rows), 8),
        "agent_seconds": round(sum(r.agent_seconds for r in rows), 3),
        "category_stamp": category_stamp((r.task, r.category) for r in rows),
    }


def compare_figures(a: list[TaskRow], b: list[TaskRow], *, pass_threshold: float) -> dict:
    """The paired comparison of run A with run B over the tasks both scored (the `compare --json` shape, plus the
    per-task rows the compare page shows)."""
    b_by_task = {r.task: r for r in b}
    pairs = [(ra, b_by_task[ra.task]) for ra in a if ra.task in b_by_task and ra.scored and b_by_task[ra.task].scored]
    a_means = [ra.mean for ra, _ in pairs]
    b_means = [rb.mean for _, rb in pairs]
    figures = stats.paired_difference(a_means, b_means)
    by_category: dict[str, list[float]] = defaultdict(list)
    for ra, rb in pairs:
        by_category[ra.group].append(ra.mean - rb.mean)
    a_only = sorted(ra.task for ra, rb in pairs if ra.mean >= pass_threshold > rb.mean)
    b_only = sorted(ra.task for ra, rb in pairs if rb.mean >= pass_threshold > ra.mean)
    only_one = sorted({r.task for r in a} ^ {r.task for r in b})
    unpaired = sorted({r.task for r in a} & {r.task for r in b} - {ra.task for ra, _ in pairs})
    return {
        "mean_difference": figures["mean_difference"],
        "ci": figures["ci"],
        "p_value": figures["p_value"],
        "flipped": {"a_only": a_only, "b_only": b_only},
        "categories": {name: sum(v) / len(v) for name, v in sorted(by_category.items())},
        "tasks_compared": figures["tasks"],
        "tasks_not_compared": sorted(set(only_one) | set(unpaired)),
        "per_task": [
            {"task": ra.task, "category": ra.group, "a": ra.mean, "b": rb.mean, "difference": ra.mean - rb.mean}
            for ra, rb in pairs
        ],
    }
