"""Pages of evaluation runs: the list, starting one, one run (progress, figures, tasks and their repeats, actions,
exports), the leaderboard of a benchmark version and the paired comparison of two runs.

Every page reads stored figures (evaluation.reports, the EvalRunTask rows): never all rollouts of a run; a task's
repeats are loaded when its row is opened. A page whose work is still going polls its own partial (htmx gets the
partial, plain requests the page), so it follows a run to its end without a reload; the finished partial has no
polling attributes. Actions call services.runs (and the evaluation.regrade job); they hold no logic.
"""

import json
from urllib.parse import quote

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import F
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods, require_POST

import jobs
from accounts.decorators import admin_required, reviewer_required, viewer_required
from accounts.roles import ADMIN, has_role
from benchmarks.models import BenchmarkVersion
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.registry import UnknownJobKind
from lib.bounds import parse_id
from lib.htmx import render_page
from lib.listing import render_list
from lib.polled_figures import polled_figures
from tasks.models import BenchmarkCategory, Task

from .. import exports, reports
from ..figures import UNCATEGORIZED
from ..forms import PassThresholdForm, StartEvalRunForm
from ..job_kinds import REGRADE_JOB
from ..models import EvalRun, EvalRunTask, Outcome, Rollout
from ..services import runs
from ..services.run_progress import LARGE_FIELDS

URL_MARK, ROW_MARK = "__task__", 987654321  # placeholders of the links reversed once for every row
RUNS_PAGE_SIZE = 50
TASKS_PAGE_SIZE = (
    200  # rows of the run page's tasks table: a run of 20,000 tasks is shown (and polled) a page at a time
)
TASK_SORTS = {  # ?sort= of the run page's tasks table; every ordering ends on the task id
    "task": [F("task__external_id").asc()],
    "score": [F("mean").asc(nulls_first=True), F("task__external_id").asc()],  # the hardest first
    "-score": [F("mean").desc(nulls_last=True), F("task__external_id").asc()],
    "std": [F("std").desc(nulls_last=True), F("task__external_id").asc()],  # the least stable first
    "tokens": [F("tokens").desc(), F("task__external_id").asc()],
}

SORT_LABELS = [("task", "task"), ("score", "score ↑"), ("-score", "score ↓"), ("std", "std ↓"), ("tokens", "tokens ↓")]


# --- shared by the pages and the dashboard panel -----------------------------------------------------------------


def category_names() -> dict:
    """Category slug -> name, in the taxonomy's order, "uncategorized" last."""
    names = dict(BenchmarkCategory.objects.values_list("slug", "name"))
    names[UNCATEGORIZED] = "Uncategorized"
    return names


def ordered_groups(slugs, names: dict) -> list[str]:
    order = {slug: index for index, slug in enumerate(names)}
    return sorted(set(slugs), key=lambda slug: (order.get(slug, len(order)), slug))


def ci_row(figure: dict | None) -> dict:
    """{"mean", "lo", "hi", "tasks"} of a {"mean", "ci", "tasks"} figure (all None when there is none)."""
    figure = figure or {}
    lo, hi = (figure.get("ci") or [None, None])[:2]
    return {"mean": figure.get("mean"), "lo": lo, "hi": hi, "tasks": figure.get("tasks", 0)}


def bar_chart(
    labels: list[str], datasets: list[dict], *, y_title: str = "mean score", y_min=0, y_max=1, y_step=None
) -> dict:
    """The data static/js/charts.js draws: datasets are {"label", "data", "low", "high"} (low/high: CI whiskers)."""
    y = {"min": y_min, "max": y_max, "title": y_title, **({"step": y_step} if y_step else {})}
    return {"type": "bar", "labels": labels, "datasets": datasets, "y": y}


def leaderboard_table(entries: list[dict], names: dict) -> dict:
    """The leaderboard (reports.leaderboard) as table rows of models x categories and a grouped bar chart with CIs."""
    groups = ordered_groups((slug for e in entries for slug in e["categories"]), names)
    run_url = reverse("evaluations:detail", args=[ROW_MARK])
    rows = [
        {
            **entry,
            "cells": [ci_row(entry["categories"].get(slug)) for slug in groups],
            "overall_row": ci_row(entry["overall"]),
            "url": run_url.replace(str(ROW_MARK), str(entry["run"])),
        }
        for entry in entries
    ]
    datasets = []
    for row in rows:
        cells = [*row["cells"], row["overall_row"]]
        datasets.append(
            {
                "label": f"{row['endpoint']} · {row['harness']}",
                "data": [c["mean"] for c in cells],
                "low": [c["lo"] for c in cells],
                "high": [c["hi"] for c in cells],
            }
        )
    labels = [names.get(slug, slug) for slug in groups]
    return {
        "groups": [(slug, names.get(slug, slug)) for slug in groups],
        "rows": rows,
        "chart": bar_chart([*labels, "Overall"], datasets) if rows else None,
    }


def versions_with_complete_runs():
    return BenchmarkVersion.objects.filter(eval_runs__status=EvalRun.Status.COMPLETE).distinct()


def chosen_version(request):
    """(?version=ID, or the latest version with a complete run, or the latest version; the versions to choose)."""
    versions = list(BenchmarkVersion.objects.select_related("benchmark").order_by("-frozen_at", "-pk"))
    wanted = request.GET.get("version", "")
    by_pk = {str(v.pk): v for v in versions}
    if wanted in by_pk:
        return by_pk[wanted], versions
    complete = set(versions_with_complete_runs().values_list("pk", flat=True))
    default = next((v for v in versions if v.pk in complete), versions[0] if versions else None)
    return default, versions


def run_rows(queryset):
    """Runs as the lists show them: no stored figures loaded but the overall interval."""
    return (
        queryset.select_related("endpoint", "benchmark_version__benchmark", "created_by")
        .defer("summary", "config", "harness_options", "resumes", "on_finish_params")
        .annotate(overall_ci=F("summary__overall__ci"))
    )


# --- the list ----------------------------------------------------------------------------------------------------


@viewer_required
@require_GET
def run_list(request):
    # The list polls while a run on show is unfinished.
    return render_list(
        request,
        "evaluation/run_list.html",
        run_rows(EvalRun.objects.all()),
        partial="runs",
        context={"nav": "evaluations"},
        per_page=RUNS_PAGE_SIZE,
        statuses=EvalRun.Status.choices,
        is_live=lambda run: not run.is_finished,
    )


# --- starting ----------------------------------------------------------------------------------------------------


@admin_required
@require_http_methods(["GET", "POST"])
def run_start(request):
    if request.method == "GET":
        # ?endpoint=NAME: the training run page's "Start an evaluation" link for a checkpoint just served.
        form = StartEvalRunForm(
            initial={
                "harness": settings.CLAWGYM_DEFAULT_HARNESS,
                "repeats": 1,
                "pass_threshold": 1.0,
                "options": {},
                "endpoint": request.GET.get("endpoint"),
            }
        )
        return render_page(request, "evaluation/run_start.html", {"nav": "evaluations", "form": form})
    form = StartEvalRunForm(request.POST)
    if not form.is_valid():
        return render_page(request, "evaluation/run_start.html", {"nav": "evaluations", "form": form}, status=400)
    try:
        run, reused = runs.start_eval_run(user=request.user, **form.run_settings())
    except runs.EvalRunError as exc:
        form.add_error(None, str(exc))
        return render_page(request, "evaluation/run_start.html", {"nav": "evaluations", "form": form}, status=400)
    except JobEngineError as exc:
        messages.error(request, f"The run was created but its rollouts could not be queued: {exc}")
        return redirect("evaluations:list")
    if reused:
        messages.info(
            request,
            f"An earlier run had these settings: {run.name} (#{run.pk}) is resumed instead; "
            "its finished rollouts are kept.",
        )
    else:
        # Goes once the run has finished (static/js/started.js).
        messages.success(
            request, f"Started {run.name}: {run.rollouts_total} rollouts queued.", extra_tags=f"started:run-{run.pk}"
        )
    return redirect("evaluations:detail", pk=run.pk)


# --- one run -----------------------------------------------------------------------------------------------------


def _figures(run: EvalRun, summary: dict, names: dict) -> dict:
    overall = summary["overall"]
    groups = ordered_groups(summary["categories"], names)
    categories = [{"slug": s, "name": names.get(s, s), **ci_row(summary["categories"][s])} for s in groups]
    distribution = [{**b, "label": f"{b['lo']:.1f}–{b['hi']:.1f}"} for b in summary.get("distribution") or []]
    pass_rows = [
        {"k": k, "at": summary["pass_at_k"].get(k), "hat": summary["pass_hat_k"].get(k)}
        for k in sorted(set(summary["pass_at_k"]) | set(summary["pass_hat_k"]), key=int)
    ]
    counts = {**Outcome.counts_zero(), **(run.outcome_counts or {})}
    return {
        "overall": {
            **ci_row(overall),
            "std": overall.get("std_across_repeats"),
            "tasks_total": overall.get("tasks_total", 0),
        },
        "categories": categories,
        "category_chart": bar_chart(
            [c["name"] for c in categories],
            [
                {
                    "label": "mean score",
                    "data": [c["mean"] for c in categories],
                    "low": [c["lo"] for c in categories],
                    "high": [c["hi"] for c in categories],
                }
            ],
        ),
        "distribution": distribution,
        "distribution_chart": bar_chart(
            [b["label"] for b in distribution],
            [{"label": "tasks", "data": [b["count"] for b in distribution]}],
            y_title="tasks",
            y_max=None,
        )
        | {"integers": True},
        "pass_rows": pass_rows,
        "grading": [(name, ci_row(figure)) for name, figure in summary.get("grading", {}).items()],
        "outcomes": [(value, label, counts.get(value, 0)) for value, label in Outcome.choices],
        "missing": summary.get("missing") or [],
        "repeat_means": summary.get("repeat_means") or [],
    }


def _task_rows(run: EvalRun, sort: str, page):
    """One page of the tasks table (the page, its rows) in two queries (the count, the rows), as plain rows (no
    model instances), each with its links, reversed once and filled in per row."""
    rows = (
        EvalRunTask.objects.filter(run=run)
        .annotate(tokens=F("input_tokens") + F("output_tokens"))
        .order_by(*TASK_SORTS[sort])
        .values(
            "pk",
            "hybrid",
            "scores",
            "n",
            "mean",
            "std",
            "min",
            "max",
            "passes",
            "tokens",
            "cost",
            task_id_=F("task__external_id"),
            category=F("task__benchmark_category__name"),
            revision_number=F("revision__number"),
        )
    )
    task_page = Paginator(rows, TASKS_PAGE_SIZE).get_page(page)
    rows = list(task_page.object_list)
    task_url = reverse("tasks:detail", args=[URL_MARK])
    repeats_url = reverse("evaluations:repeats", args=[run.pk, ROW_MARK])
    for row in rows:
        row["task"] = row.pop("task_id_")
        row["task_url"] = task_url.replace(URL_MARK, quote(row["task"], safe=""))
        row["repeats_url"] = repeats_url.replace(str(ROW_MARK), str(row["pk"]))
    return task_page, rows


def shown_summary(run: EvalRun) -> dict:
    """The figures the run page shows: reports.current_summary, which for a running run is a pass over all its task
    rows (bootstrap intervals: about 2 s at 20,000 tasks); a polled page gets them through lib.polled_figures,
    computed again when the run's counters have moved (at once for a run of hundreds of tasks). The per-task
    figures ("tasks") are left out: the page reads the task rows themselves."""
    if run.is_finished and run.summary:  # read only for a finished run: the page defers it (1.7 MB at 20,000 tasks)
        return reports.current_summary(run)
    stamp = (
        run.status,
        run.rollouts_total,
        run.rollouts_finished,
        sorted((run.outcome_counts or {}).items()),
        run.input_tokens,
        run.output_tokens,
        str(run.cost),
        run.pass_threshold,
        run.repeats,
    )

    def compute() -> dict:
        return {k: v for k, v in reports.current_summary(run).items() if k != "tasks"}

    return polled_figures(f"eval-run:{run.pk}:{run.created_at.timestamp()}", stamp, compute)


def _run_context(request, run: EvalRun) -> dict:
    sort = request.GET.get("sort", "task")
    sort = sort if sort in TASK_SORTS else "task"
    regrade_job = None
    if regrade := parse_id(request.GET.get("regrade", "")):
        regrade_job = JobRun.objects.filter(pk=regrade, kind=REGRADE_JOB).first()
    names = category_names()
    summary = shown_summary(run)
    task_page, task_rows = _task_rows(run, sort, request.GET.get("page"))
    return {
        "nav": "evaluations",
        "run": run,
        "summary": summary,
        "fig": _figures(run, summary, names),
        "sort": sort,
        "sort_choices": SORT_LABELS,
        "task_rows": task_rows,
        "task_page": task_page,
        "regrade_job": regrade_job,
        # The live part polls while the run runs, or while a regrade it was asked for runs.
        "live": not run.is_finished or (regrade_job is not None and not regrade_job.is_finished),
        "threshold_form": PassThresholdForm(initial={"pass_threshold": run.pass_threshold}),
        "can_regrade_run": has_role(request.user, ADMIN),
    }


def _run(pk: int, defer: tuple[str, ...] = ()) -> EvalRun:
    return get_object_or_404(
        EvalRun.objects.select_related("endpoint", "benchmark_version__benchmark", "created_by").defer(*defer), pk=pk
    )


@viewer_required
@require_GET
def run_detail(request, pk: int):
    # The stored summary (per-task figures included) and config are read only where used: a running run's page,
    # polled every 2 s, has its figures from lib.polled_figures.
    run = _run(pk, defer=LARGE_FIELDS)
    return render_page(request, "evaluation/run_detail.html", _run_context(request, run), partial="live")


@viewer_required
@require_GET
def run_task_repeats(request, pk: int, row: int):
    """One task's repeats in a run, with links to their rollouts (loaded when the task's row is opened)."""
    task_row = get_object_or_404(EvalRunTask.objects.select_related("run", "task", "revision"), pk=row, run_id=pk)
    rollouts = list(
        Rollout.objects.filter(eval_run_id=pk, revision_id=task_row.revision_id)
        .only(
            "repeat_index",
            "attempt",
            "status",
            "outcome",
            "exit_reason",
            "score",
            "input_tokens",
            "output_tokens",
            "agent_seconds",
        )
        .order_by("repeat_index", "id")
    )
    labels = dict(Outcome.choices)
    for rollout in rollouts:
        rollout.outcome_label = labels.get(rollout.outcome, "")
    context = {"nav": "evaluations", "run": task_row.run, "task_row": task_row, "rollouts": rollouts}
    return render_page(request, "evaluation/run_repeats.html", context, partial="repeats")


@admin_required
@require_POST
def run_resume(request, pk: int):
    run = _run(pk)
    try:
        runs.resume_eval_run(run, user=request.user)
    except (runs.EvalRunError, JobEngineError) as exc:
        messages.error(request, f"The run was not resumed: {exc}")
    else:
        messages.success(
            request,
            f"{run.name} is resumed: what was left to run is queued again.",
            extra_tags=f"started:run-{run.pk}",
        )
    return redirect("evaluations:detail", pk=pk)


@admin_required
@require_POST
def run_cancel(request, pk: int):
    run = _run(pk)
    if run.is_finished:
        messages.error(request, f"{run.name} has finished already ({run.get_status_display()}).")
    else:
        runs.cancel_eval_run(run, user=request.user)
        messages.success(request, f"{run.name} is cancelled: queued rollouts will not run; running ones finish.")
    return redirect("evaluations:detail", pk=pk)


@reviewer_required
@require_POST
def run_regrade(request, pk: int):
    """Regrade the run's finished rollouts (admins), or every rollout of one of its tasks (`task`, reviewers too:
    whoever fixed a checker), as an evaluation.regrade job; the run page follows the job to its end."""
    run = _run(pk)
    task_id = request.POST.get("task", "").strip()
    if task_id:
        task = get_object_or_404(Task, external_id=task_id)
        if not EvalRunTask.objects.filter(run=run, task=task).exists():
            messages.error(request, f"{task_id} is not a task of this run.")
            return redirect("evaluations:detail", pk=pk)
        params, what = {"task_id": task.external_id}, f"every rollout of {task.external_id}"
    else:
        if not has_role(request.user, ADMIN):
            raise PermissionDenied("Regrading a whole run needs the admin role.")
        params, what = {"run_id": run.pk}, f"every finished rollout of {run.name}"
    try:
        job_run = jobs.enqueue(REGRADE_JOB, created_by=request.user, **params)
    except (UnknownJobKind, JobEngineError) as exc:
        messages.error(request, f"The regrade was not started: {exc}")
        return redirect("evaluations:detail", pk=pk)
    messages.success(request, f"Regrading {what} with the current checker and rubric (job #{job_run.pk}).")
    return redirect(f"{reverse('evaluations:detail', args=[pk])}?regrade={job_run.pk}")


@admin_required
@require_POST
def run_threshold(request, pk: int):
    run = _run(pk)
    form = PassThresholdForm(request.POST)
    if form.is_valid():
        try:
            runs.set_pass_threshold(run, form.cleaned_data["pass_threshold"], user=request.user)
        except runs.EvalRunError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"A repeat now passes at {form.cleaned_data['pass_threshold']:g}.")
    else:
        messages.error(request, f"The pass threshold was not changed: {form.errors['pass_threshold'][0]}")
    return redirect("evaluations:detail", pk=pk)


@viewer_required
@require_GET
def run_export_json(request, pk: int):
    run = _run(pk)
    encoded = json.JSONEncoder(ensure_ascii=False, indent=1, default=str).iterencode(exports.run_export(run))
    response = StreamingHttpResponse(encoded, content_type="application/json")
    response["Content-Disposition"] = content_disposition_header(True, f"eval-run-{run.pk}.json")
    return response


@viewer_required
@require_GET
def run_export_csv(request, pk: int):
    run = _run(pk)
    response = StreamingHttpResponse(exports.iter_csv(run), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, f"eval-run-{run.pk}.csv")
    return response


# --- leaderboard and comparison ----------------------------------------------------------------------------------


@viewer_required
@require_GET
def leaderboard(request):
    version, versions = chosen_version(request)
    entries = reports.leaderboard(version) if version is not None else []
    context = {
        "nav": "evaluations",
        "version": version,
        "versions": versions,
        "board": leaderboard_table(entries, category_names()),
        # Runs of this version left out: unfinished, incomplete or cancelled ones never enter the leaderboard.
        "left_out": EvalRun.objects.filter(benchmark_version=version).exclude(status=EvalRun.Status.COMPLETE).count(),
    }
    return render_page(request, "evaluation/leaderboard.html", context, partial="board")


def _picked(request, key: str):
    pk = parse_id(request.GET.get(key, ""))
    if pk is None:
        return None
    return EvalRun.objects.select_related("endpoint", "benchmark_version__benchmark").filter(pk=pk).first()


@viewer_required
@require_GET
def compare(request):
    a, b = _picked(request, "a"), _picked(request, "b")
    choices = (
        EvalRun.objects.filter(status__in=EvalRun.FINISHED)
        .select_related("endpoint", "benchmark_version__benchmark")
        .only("name", "status", "endpoint__name", "benchmark_version__number", "benchmark_version__benchmark__name")
    )
    context = {
        "nav": "evaluations",
        "a": a,
        "b": b,
        "pickers": [("a", a), ("b", b)],
        "choices": choices,
        "result": None,
        "error": "",
    }
    if a is not None and b is not None:
        try:
            result = reports.compare_runs(a, b)
        except reports.RunsNotComparable as exc:
            context["error"] = str(exc)
        else:
            names = category_names()
            groups = ordered_groups(result["categories"], names)
            categories = [{"slug": s, "name": names.get(s, s), "difference": result["categories"][s]} for s in groups]
            per_task = sorted(result["per_task"], key=lambda t: (-abs(t["difference"]), t["task"]))
            lo, hi = (result["ci"] or [None, None])[:2]
            task_url = reverse("tasks:detail", args=[URL_MARK])
            context.update(
                {
                    "result": result,
                    "lo": lo,
                    "hi": hi,
                    "categories": categories,
                    "per_task": [
                        {
                            **t,
                            "category_name": names.get(t["category"], t["category"]),
                            "url": task_url.replace(URL_MARK, quote(t["task"], safe="")),
                        }
                        for t in per_task
                    ],
                    "chart": bar_chart(
                        [c["name"] for c in categories],
                        [{"label": "A − B", "data": [c["difference"] for c in categories]}],
                        y_title="mean difference (A − B)",
                        y_min=-1,
                        y_max=1,
                        y_step=0.5,
                    ),
                }
            )
    elif request.GET.get("a") or request.GET.get("b"):
        context["error"] = "Choose two runs to compare."
    return render_page(request, "evaluation/compare.html", context)
