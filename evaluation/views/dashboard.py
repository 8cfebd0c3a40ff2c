"""The evaluation panel of the dashboard (registered in apps.py through tasks.dashboard_panels): per-category model
scores of the latest complete run of each model on the chosen benchmark version (?version=; default the latest
version with a complete run), as a table and a grouped bar chart with CIs, and the recent and running runs."""

from django.db.models import Q

from ..models import EvalRun

RECENT_RUNS = 6


def recent_context() -> dict:
    """The running runs and the latest others (at most RECENT_RUNS in all, running first)."""
    from .runs import run_rows

    running = list(run_rows(EvalRun.objects.filter(status__in=[EvalRun.Status.QUEUED, EvalRun.Status.RUNNING])))
    others = list(run_rows(EvalRun.objects.filter(~Q(pk__in=[r.pk for r in running])))[:RECENT_RUNS])
    shown = (running + others)[: max(RECENT_RUNS, len(running))]
    return {"recent": shown, "unfinished": bool(running)}


def panel_context(request) -> dict:
    from ..services import runs
    from .runs import category_names, chosen_version, leaderboard_table

    version, versions = chosen_version(request)
    entries = runs.leaderboard(version) if version is not None else []
    return {
        "version": version,
        "versions": versions,
        "board": leaderboard_table(entries, category_names()),
        **recent_context(),
    }
