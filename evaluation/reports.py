"""The read side of evaluation runs: their figures, task rows, JSON, comparisons and leaderboards, built from what is
stored (the per-task rows, EvalRunTask, and the run's stored summary), never from all of a run's rollouts.

The write side (evaluation.services) keeps those rows up to date as rollouts change; nothing here changes what a run
measured. The one write is a cache's: a finished run's stored figures are recomputed and stored again when its tasks'
categories have changed since (`current_summary`, `store_summary`).
"""

from __future__ import annotations

from django.db.models import F
from django.db.models.fields.json import KT

from tasks.models import Task

from .figures import TaskRow, category_stamp, compare_figures, run_figures
from .models import EvalRun, EvalRunTask, Outcome

BOARD_FIGURES = ("overall", "categories", "pass_at_k")  # what a leaderboard entry takes of a run's summary


class RunsNotComparable(ValueError):
    """Two runs are not over the same tasks, so they have no paired comparison; the message says why."""


# --- figures -------------------------------------------------------------------------------------------------


def task_rows(run: EvalRun) -> list[TaskRow]:
    """The run's per-task rows as the figures take them (one query), categories as they are now."""
    values = (
        EvalRunTask.objects.filter(run=run)
        .values_list(
            "task__external_id",
            "task__benchmark_category__slug",
            "hybrid",
            "scores",
            "input_tokens",
            "output_tokens",
            "cost",
            "agent_seconds",
        )
        .order_by("task__external_id")
    )
    return [
        TaskRow(
            task=t,
            category=c,
            hybrid=h,
            scores=tuple(s or ()),
            input_tokens=i,
            output_tokens=o,
            cost=float(cost or 0),
            agent_seconds=a or 0.0,
        )
        for t, c, h, s, i, o, cost, a in values
    ]


def store_summary(run: EvalRun) -> dict:
    summary = run_figures(task_rows(run), repeats=run.repeats, pass_threshold=run.pass_threshold)
    EvalRun.objects.filter(pk=run.pk).update(summary=summary, overall_mean=summary["overall"]["mean"])
    run.summary, run.overall_mean = summary, summary["overall"]["mean"]
    return summary


def current_summary(run: EvalRun, *, stamp: str | None = None) -> dict:
    """The run's figures: stored for a finished run (recomputed and stored again when its tasks' categories have
    changed since: pass `stamp` = category_stamp of the run's tasks when the caller knows it), computed from the
    task rows for a running one."""
    if not run.is_finished or not run.summary:
        return run_figures(task_rows(run), repeats=run.repeats, pass_threshold=run.pass_threshold)
    if stamp is None:
        stamp = category_stamp(
            EvalRunTask.objects.filter(run=run).values_list("task__external_id", "task__benchmark_category__slug")
        )
    if run.summary.get("category_stamp") != stamp:
        return store_summary(run)
    return run.summary


def run_json(run: EvalRun) -> dict:
    """The `evaluate --json` shape."""
    summary = current_summary(run)
    overall = summary["overall"]
    counts = {**Outcome.counts_zero(), **(run.outcome_counts or {})}
    return {
        "run": run.pk,
        "status": run.status,
        "overall": {"mean": overall["mean"], "ci": overall["ci"], "std_across_repeats": overall["std_across_repeats"]},
        "categories": summary["categories"],
        "tasks": summary["tasks"],
        "pass_at_k": summary["pass_at_k"],
        "outcomes": {key: counts[key] for key in Outcome.values},
        "tokens": run.input_tokens + run.output_tokens,
        "cost": float(run.cost),
        # Beyond the contract, for people who want more:
        "name": run.name,
        "endpoint": run.endpoint.name,
        "harness": run.harness,
        "repeats": run.repeats,
        "benchmark_version": str(run.benchmark_version) if run.benchmark_version_id else None,
        "pass_hat_k": summary["pass_hat_k"],
        "grading": summary["grading"],
        "missing": summary["missing"],
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "agent_seconds": run.agent_seconds,
    }


def compare_runs(a: EvalRun, b: EvalRun) -> dict:
    """The paired comparison of two runs over the same task revisions (the `compare --json` shape and more)."""
    if a.benchmark_version_id != b.benchmark_version_id or (
        a.benchmark_version_id is None and a.config.get("revisions") != b.config.get("revisions")
    ):
        raise RunsNotComparable(
            f"runs #{a.pk} and #{b.pk} are not over the same benchmark version (or the same task "
            "revisions): a paired comparison needs the same tasks"
        )
    figures = compare_figures(task_rows(a), task_rows(b), pass_threshold=a.pass_threshold)
    figures.update({"a": a.pk, "b": b.pk})
    return figures


# --- leaderboard ---------------------------------------------------------------------------------------------


def leaderboard(version) -> list[dict]:
    """The latest complete run of each model (endpoint and harness) on a benchmark version, best first:
    [{"run", "endpoint", "harness", "overall", "categories", "cost", "tokens", ...}]. Incomplete runs never enter."""
    runs = (
        EvalRun.objects.filter(benchmark_version=version, status=EvalRun.Status.COMPLETE)
        .select_related("endpoint")
        # Only the figures a leaderboard shows: a stored summary holds every task's too (some 20 kB a run of 200
        # tasks, and decoding 50 of them was most of the leaderboard's time).
        .defer("summary", "config", "harness_options", "limits", "resumes", "on_finish_params")
        .annotate(
            board_stamp=KT("summary__category_stamp"), **{f"board_{key}": F(f"summary__{key}") for key in BOARD_FIGURES}
        )
        .order_by("endpoint__name", "harness", "-created_at", "-id")
    )
    latest: dict[tuple, EvalRun] = {}
    for run in runs:
        latest.setdefault((run.endpoint_id, run.harness), run)
    stamp = version_category_stamp(version)
    entries = []
    for run in latest.values():
        if run.board_stamp == stamp and run.board_overall is not None:
            summary = {key: getattr(run, f"board_{key}") for key in BOARD_FIGURES}
        else:  # a category changed since the figures were stored (or none are): recomputed and stored again
            summary = current_summary(run, stamp=stamp)
        entries.append(
            {
                "run": run.pk,
                "name": run.name,
                "endpoint": run.endpoint.name,
                "model": run.endpoint.model,
                "harness": run.harness,
                "repeats": run.repeats,
                "finished_at": run.finished_at.isoformat() if run.finished_at else None,
                "overall": summary["overall"],
                "categories": summary["categories"],
                "pass_at_k": summary["pass_at_k"],
                "cost": float(run.cost),
                "tokens": run.input_tokens + run.output_tokens,
            }
        )
    entries.sort(key=lambda e: (-(e["overall"]["mean"] or 0.0), e["endpoint"], e["harness"]))
    return entries


def version_category_stamp(version) -> str:
    pairs = Task.objects.filter(revisions__benchmark_versions=version).values_list(
        "external_id", "benchmark_category__slug"
    )
    return category_stamp(pairs)
