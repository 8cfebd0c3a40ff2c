"""A dataset's statistics (stored on it at build time; the statistics page and the API show them).

Per trajectory: turns (assistant messages), tokens (its length as a sample: counted with the dataset's tokenizer, or
the usage estimate of datasets.sample_tokens), tool calls and tool types (distinct tools called), each with mean,
median and a histogram; the reward distribution; counts per benchmark category and task source; the split; and the
paper's averages beside ours. Counted with a tokenizer, also the assistant (trained) tokens and, per max_length, how
many samples keep all, some or none of their assistant tokens once cut to it.
"""

from collections import Counter, defaultdict
from statistics import mean, median

from evaluation.trajectory_stats import HISTOGRAMS

from .models import DatasetSample, TrainingDataset
from .token_counts import SampleTokens

# ClawGym-Agents' SFT corpus, averages per trajectory (the paper's Table: 13 turns, 18.67K tokens, 15.82 tool calls,
# 3.25 tool types).
PAPER = {"turns": 13.0, "tokens": 18670.0, "tool_calls": 15.82, "tool_types": 3.25}
METRICS = (("turns", "Turns"), ("tokens", "Tokens"), ("tool_calls", "Tool calls"), ("tool_types", "Tool types"))
EDGES = {
    "turns": HISTOGRAMS["turns"],
    "tokens": HISTOGRAMS["total_tokens"],
    "tool_calls": HISTOGRAMS["tool_calls"],
    "tool_types": HISTOGRAMS["tool_types"],
}
REWARD_BUCKETS = 10  # [0, 0.1), …, [0.9, 1.0]
MAX_LENGTHS = (2048, 4096, 8192, 16384, 32768, 65536)  # the presets' and the usual context lengths


def summary(values: list[float]) -> dict:
    if not values:
        return {"mean": None, "median": None, "min": None, "max": None}
    return {"mean": mean(values), "median": median(values), "min": min(values), "max": max(values)}


def histogram(values: list[int], edges, *, tokens: bool = False) -> list[dict]:
    """Counts per bucket [low, high); the last bucket is open."""
    buckets = []
    for low, high in zip(edges, [*edges[1:], None]):
        if tokens:
            label = (
                f"{low // 1000}k+"
                if high is None
                else f"<{high // 1000}k"
                if low == 0
                else f"{low // 1000}k–{high // 1000}k"
            )
        else:
            label = f"{low}+" if high is None else str(low) if high - low == 1 else f"{low}–{high - 1}"
        count = sum(1 for v in values if v >= low and (high is None or v < high))
        buckets.append({"label": label, "low": low, "high": high, "count": count})
    return buckets


def reward_histogram(rewards: list[float]) -> list[dict]:
    buckets = []
    for i in range(REWARD_BUCKETS):
        low, high = i / REWARD_BUCKETS, (i + 1) / REWARD_BUCKETS
        last = i == REWARD_BUCKETS - 1
        count = sum(1 for r in rewards if low <= r < high or (last and r >= high))
        buckets.append({"label": f"{low:.1f}–{high:.1f}", "low": low, "high": high, "count": count})
    return buckets


def _groups(rows: list[dict], key: str) -> list[dict]:
    grouped = defaultdict(list)
    for row in rows:
        grouped[row[key]].append(row)
    out = []
    for name, members in grouped.items():
        rewards = [m["reward"] for m in members if m["reward"] is not None]
        out.append(
            {
                "name": name,
                "trajectories": len(members),
                "tasks": len({m["task"] for m in members}),
                "mean_reward": mean(rewards) if rewards else None,
                "mean_turns": mean(m["turns"] for m in members),
                "mean_tokens": mean(m["tokens"] for m in members),
            }
        )
    return sorted(out, key=lambda g: (-g["trajectories"], g["name"]))


def dataset_statistics(dataset: TrainingDataset, *, candidates: int | None = None) -> dict:
    """The statistics of a dataset's samples (as stored in TrainingDataset.stats)."""
    samples = (
        DatasetSample.objects.filter(dataset=dataset)
        .select_related("trajectory__rollout__revision__task__benchmark_category")
        .only(
            "split",
            "task_external_id",
            "reward",
            "tokens",
            "assistant_spans",
            "trajectory__stats",
            "trajectory__rollout__revision__task__source",
            "trajectory__rollout__revision__task__benchmark_category__name",
        )
        .order_by("position")
    )
    rows = []
    for s in samples:
        stats = s.trajectory.stats or {}
        task = s.trajectory.rollout.revision.task
        tool_types = stats.get("tool_types") or []
        rows.append(
            {
                "task": s.task_external_id,
                "split": s.split,
                "reward": s.reward,
                "tokens": s.tokens,
                "counted": SampleTokens(s.tokens, [tuple(span) for span in s.assistant_spans or []]),
                "turns": int(stats.get("turns") or 0),
                "tool_calls": int(stats.get("tool_calls") or 0),
                "tool_types": len(tool_types) if isinstance(tool_types, list) else int(tool_types or 0),
                "tool_names": tool_types if isinstance(tool_types, list) else [],
                "category": task.benchmark_category.name if task.benchmark_category_id else "(none)",
                "source": task.source,
            }
        )
    metrics = {}
    for key, label in METRICS:
        values = [r[key] for r in rows]
        metrics[key] = {
            "label": label,
            **summary(values),
            "paper": PAPER[key],
            "histogram": histogram(values, EDGES[key], tokens=key == "tokens"),
        }
    rewards = [r["reward"] for r in rows if r["reward"] is not None]
    splits = {}
    for split in DatasetSample.Split.values:
        members = [r for r in rows if r["split"] == split]
        splits[split] = {"trajectories": len(members), "tasks": len({r["task"] for r in members})}
    tools = Counter(name for r in rows for name in r["tool_names"])
    return {
        "candidates": candidates,
        "trajectories": len(rows),
        "tasks": len({r["task"] for r in rows}),
        "metrics": metrics,
        "reward": {**summary(rewards), "histogram": reward_histogram(rewards)},
        "categories": _groups(rows, "category"),
        "sources": _groups(rows, "source"),
        "split": splits,
        "tool_usage": [{"tool": t, "trajectories": n} for t, n in sorted(tools.items(), key=lambda i: (-i[1], i[0]))],
        "paper": PAPER,
        "tokens_counted_with": "tokenizer" if dataset.tokenized else "usage",
        **(_assistant_figures([r["counted"] for r in rows]) if dataset.tokenized else {}),
    }


def _assistant_figures(counted: list[SampleTokens]) -> dict:
    """The assistant tokens per sample, and what a max_length leaves of them (samples keeping all, some, none)."""
    assistant = [c.assistant_tokens for c in counted]
    fits = []
    for max_length in MAX_LENGTHS:
        kept = [(c.trainable(max_length), c.assistant_tokens) for c in counted]
        fits.append(
            {
                "max_length": max_length,
                "all": sum(1 for k, a in kept if k == a > 0),
                "some": sum(1 for k, a in kept if 0 < k < a),
                "none": sum(1 for k, _ in kept if k == 0),
            }
        )
    return {
        "assistant_tokens": {**summary(assistant), "histogram": histogram(assistant, EDGES["tokens"], tokens=True)},
        "max_length_fit": fits,
    }
