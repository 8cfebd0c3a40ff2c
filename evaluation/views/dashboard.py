"""The evaluation panel of the dashboard (registered in apps.py through tasks.dashboard_panels): per-category model
scores of the latest complete run of each model on the chosen benchmark version (?version=; default the latest
version with a complete run), as a table and a grouped bar chart with CIs, and the recent and running runs; and the
two views that redraw its parts. It reads the run pages' tables (views.runs), which never import it back."""

from django.db.models import Q
from django.views.decorators.http import require_GET

from accounts.decorators import viewer_required
from lib.htmx import render_page

from .. import reports
from ..models import EvalRun
from .runs import category_names, chosen_version, leaderboard_table, run_rows

RECENT_RUNS = 6


def recent_context() -> dict:
    """The running runs and the latest others (at most RECENT_RUNS in all, running first)."""
    running = list(run_rows(EvalRun.objects.filter(status__in=[EvalRun.Status.QUEUED, EvalRun.Status.RUNNING])))
    others = list(run_rows(EvalRun.objects.filter(~Q(pk__in=[r.pk for r in running])))[:RECENT_RUNS])
    shown = (running + others)[: max(RECENT_RUNS, len(running))]
    return {"recent": shown, "unfinished": bool(running)}


def panel_context(request) -> dict:
    version, versions = chosen_version(request)
    entries = reports.leaderboard(version) if version is not None else []
    return {
        "version": version,
        "versions": versions,
        "board": leaderboard_table(entries, category_names()),
        **recent_context(),
    }


@viewer_required
@require_GET
def recent_runs(request):
    """The dashboard panel's recent and running runs (it polls this while one of them runs)."""
    return render_page(request, "evaluation/_run_recent.html", recent_context())


@viewer_required
@require_GET
def dashboard_panel(request):
    """The dashboard panel alone, for another benchmark version (?version=)."""
    return render_page(request, "evaluation/_dashboard_panel.html", {"panel": panel_context(request)})
