"""Statistics over a corpus of trajectories (evaluation.trajectories rebuilds them): means, distributions and
exclusions, as the trajectories page shows them and training datasets bucket them (HISTOGRAMS).

Pure logic on plain values: no Django.
"""

from collections import Counter
from collections.abc import Iterable
from statistics import mean, median

from .trajectories import TrajectoryData

COUNT_EDGES = (0, 1, 2, 3, 5, 9, 17, 33, 65)
HISTOGRAMS = {  # metric -> bucket lower bounds (the last bucket is open)
    "turns": COUNT_EDGES,
    "tool_calls": COUNT_EDGES,
    "tool_types": (0, 1, 2, 3, 4, 5, 6, 8),
    "total_tokens": (0, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000),
}
METRICS = ("turns", "tool_calls", "tool_types", "prompt_tokens", "completion_tokens", "total_tokens")


def corpus_stats(trajectories: Iterable[TrajectoryData], *, include_excluded: bool = False) -> dict:
    """Means and distributions over a corpus (excluded trajectories are counted, not measured, unless asked).

    metrics: {name: {mean, median, min, max}} (None for an empty corpus); histograms: {name: [{label, low,
    high (exclusive, None when open), count}]}; tool_usage: how many trajectories called each tool.
    """
    trajectories = list(trajectories)
    measured = [t for t in trajectories if include_excluded or not t.excluded]
    values = {
        name: [len(t.stats.tool_types) if name == "tool_types" else getattr(t.stats, name) for t in measured]
        for name in METRICS
    }
    excluded = [t for t in trajectories if t.excluded]
    return {
        "trajectories": len(trajectories),
        "included": len(trajectories) - len(excluded),
        "excluded": len(excluded),
        "exclusion_reasons": _ranked(Counter(t.exclusion_reason for t in excluded), "reason", "count"),
        "metrics": {name: _summary(values[name]) for name in METRICS},
        "histograms": {
            name: _histogram(values[name], edges, tokens=name.endswith("tokens")) for name, edges in HISTOGRAMS.items()
        },
        "tool_usage": _ranked(Counter(n for t in measured for n in t.stats.tool_types), "tool", "trajectories"),
    }


def _ranked(counter: Counter, name: str, count: str) -> list[dict]:
    return [{name: key, count: n} for key, n in sorted(counter.items(), key=lambda item: (-item[1], item[0]))]


def _summary(values: list[int]) -> dict:
    if not values:
        return {"mean": None, "median": None, "min": None, "max": None}
    return {"mean": mean(values), "median": median(values), "min": min(values), "max": max(values)}


def _histogram(values: list[int], edges: tuple[int, ...], *, tokens: bool) -> list[dict]:
    buckets = []
    for low, high in zip(edges, [*edges[1:], None]):
        if tokens:  # thousands read better as half-open ranges: "<1k", "1k–2k", "128k+"
            k = f"{low // 1000}k"
            label = f"{k}+" if high is None else f"<{high // 1000}k" if low == 0 else f"{k}–{high // 1000}k"
        else:
            label = f"{low}+" if high is None else str(low) if high - low == 1 else f"{low}–{high - 1}"
        count = sum(1 for v in values if v >= low and (high is None or v < high))
        buckets.append({"label": label, "low": low, "high": high, "count": count})
    return buckets
