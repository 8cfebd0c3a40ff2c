"""What an RL run's page and API show, read from the rows its job writes: the step metrics (reward mean ± std, loss,
groups dropped, inexact samples, rollout wall times; one TrainingMetric per optimizer step, named as
training_jobs.rl's trainer logs them) and the RLRollout rows (one per rollout the rollout_func started).

Reads only: every state change is training_jobs.services.runs'. Nothing here scans a whole run's rollouts for a page: the
per-step summary is one aggregate query, a step's rollouts one filtered query.
"""

from django.db.models import Avg, Count, Max, Q, Sum

from tasks.models import TaskRevision

from ..models import RLRollout, TrainingRun

METRICS_SHOWN = 500  # the curves' points; a longer run shows its last ones

# The step metrics as the table shows them, in order: (metric name, column title).
STEP_COLUMNS = [
    ("reward_mean", "Reward mean"),
    ("reward_std", "Reward std"),
    ("reward_spread", "Group spread"),
    ("groups_dropped", "Groups dropped"),
    ("inexact_samples", "Inexact samples"),
    ("samples", "Samples"),
    ("rollout_p50_s", "Rollout p50 (s)"),
    ("rollout_max_s", "Rollout max (s)"),
    ("tokens_sampled", "Tokens sampled"),
    ("logprob_mismatch", "Logprob mismatch"),
    ("loss", "Loss"),
    ("kl", "KL"),
    ("clip_fraction", "Clip fraction"),
]


def _number(value):
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def step_rows(run: TrainingRun) -> list[dict]:
    """The run's last METRICS_SHOWN steps, oldest first: {"step", "skipped", "groups", "rollouts", <metric>: number or
    None}. A step logged in more than one row (the rollouts' figures, then the optimizer's) is merged into one, as
    kinds.rl.rl_step_table does."""
    merged: dict[int, dict] = {}
    for metric in run.metrics.order_by("-step", "-id")[: METRICS_SHOWN * 2]:
        values = merged.setdefault(metric.step, {})
        for name, value in (metric.values or {}).items():
            values.setdefault(name, value)  # newest first: a later row's value wins
    rows = []
    for step in sorted(merged)[-METRICS_SHOWN:]:
        values = merged[step]
        row = {
            "step": step,
            "skipped": bool(values.get("skipped")),
            "groups": _number(values.get("groups")),
            "rollouts": _number(values.get("rollouts")),
        }
        row.update({name: _number(values.get(name)) for name, _ in STEP_COLUMNS})
        rows.append(row)
    return rows


def reward_chart(rows: list[dict]) -> dict:
    """Mean reward per step with ±std whiskers (charts.js draws `low`/`high`), on the score's [0, 1] scale."""
    means = [r["reward_mean"] for r in rows]
    stds = [r["reward_std"] for r in rows]
    low = [None if m is None or s is None else max(0.0, m - s) for m, s in zip(means, stds, strict=True)]
    high = [None if m is None or s is None else min(1.0, m + s) for m, s in zip(means, stds, strict=True)]
    return {
        "type": "line",
        "labels": [r["step"] for r in rows],
        "x": {"title": "step"},
        "y": {"min": 0, "max": 1, "title": "reward"},
        "datasets": [{"label": "reward mean", "data": means, "low": low, "high": high, "interval": "± std"}],
    }


def loss_chart(rows: list[dict]) -> dict:
    datasets = [{"label": "loss", "data": [r["loss"] for r in rows]}]
    if any(r["kl"] is not None for r in rows):
        datasets.append({"label": "KL", "data": [r["kl"] for r in rows]})
    return {
        "type": "line",
        "labels": [r["step"] for r in rows],
        "x": {"title": "step"},
        "y": {"title": "loss"},
        "datasets": datasets,
    }


def step_summaries(run: TrainingRun) -> list[dict]:
    """Per step, from the RLRollout rows (one aggregate query): rollouts, scored (a reward counted in the baseline),
    dropped, samples, inexact samples, the mean reward of those scored and the slowest rollout."""
    rows = (
        RLRollout.objects.filter(run=run)
        .values("step")
        .order_by("step")
        .annotate(
            rollouts=Count("id"),
            scored=Count("id", filter=Q(reward__isnull=False)),
            dropped=Count("id", filter=Q(dropped=True)),
            groups=Count("group_index", distinct=True),
            samples=Sum("samples"),
            inexact_samples=Sum("inexact_samples"),
            reward_mean=Avg("reward"),
            wall_max_s=Max("wall_seconds"),
        )
    )
    return list(rows)


def latest_reward(run: TrainingRun):
    """The last step's mean reward that was logged (None before the first step)."""
    for values in run.metrics.order_by("-step", "-id").values_list("values", flat=True)[:4]:
        reward = _number((values or {}).get("reward_mean"))
        if reward is not None:
            return reward
    return None


def rollouts_of_step(run: TrainingRun, step: int) -> list[dict]:
    """A step's rollouts by group: [{"index", "rewards": [...], "dropped", "rollouts": [RLRollout with .rollout]}]."""
    groups: dict[int, dict] = {}
    rows = RLRollout.objects.filter(run=run, step=step).select_related("rollout").order_by("group_index", "id")
    for row in rows:
        group = groups.setdefault(row.group_index, {"index": row.group_index, "rollouts": [], "dropped": False})
        group["rollouts"].append(row)
        group["dropped"] = group["dropped"] or row.dropped
    for group in groups.values():
        scored = [r.reward for r in group["rollouts"] if r.reward is not None]
        group["scored"] = len(scored)
        group["reward_mean"] = sum(scored) / len(scored) if scored else None
        group["task"] = _task_label(group["rollouts"][0].rollout)
    return list(groups.values())


def _task_label(rollout) -> str:
    revision = rollout.revision if rollout.revision_id else None
    return f"{revision.task.external_id} r{revision.number}" if revision is not None else ""


def rollout_steps(run: TrainingRun) -> list[int]:
    return list(RLRollout.objects.filter(run=run).order_by("step").values_list("step", flat=True).distinct())


def rl_context(run: TrainingRun, step: str | int | None) -> dict:
    """The RL part of the run page: the curves, the step table, the per-step summaries and one step's rollouts
    (`step` from the query string; the latest step with rollouts when not given or unknown)."""
    rows = step_rows(run)
    steps = rollout_steps(run)
    try:
        chosen = int(step) if step not in (None, "") else None
    except (TypeError, ValueError):
        chosen = None
    if chosen not in steps:
        chosen = steps[-1] if steps else None
    summaries = {s["step"]: s for s in step_summaries(run)}
    return {
        "step_rows": rows,
        "step_columns": STEP_COLUMNS,
        "reward_chart": reward_chart(rows),
        "loss_chart": loss_chart(rows),
        "rollout_steps": steps,
        "chosen_step": chosen,
        "step_summary": summaries.get(chosen),
        "step_groups": rollouts_of_step(run, chosen) if chosen is not None else [],
        "tasks": run_tasks(run),
    }


def run_tasks(run: TrainingRun) -> list[dict]:
    """The run's training tasks as its config names them: [{"external_id", "revision", "task", "mix"}] (revision ids or
    external ids, whichever the config holds; mix: one of its task mix's, training.rl.task_mix)."""
    given = (run.config or {}).get("tasks") or []
    mix = set((run.config or {}).get("mix_tasks") or [])
    ids = [t for t in given if isinstance(t, int)]
    revisions = {r.pk: r for r in TaskRevision.objects.filter(pk__in=ids).select_related("task")}
    shown = []
    for entry in given:
        revision = revisions.get(entry) if isinstance(entry, int) else None
        if revision is not None:
            shown.append({"external_id": revision.task.external_id, "revision": revision.number, "task": revision.task})
        else:
            shown.append({"external_id": str(entry), "revision": None, "task": None})
        shown[-1]["mix"] = entry in mix
    return shown
