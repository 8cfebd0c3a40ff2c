"""Difficulty filtering on the pages (review.difficulty does the work).

    GET  benchmarks/<name>/difficulty/              the thresholds, the candidates by verdict, the filters run
    POST benchmarks/<name>/difficulty/start/        admins: filter every open and accepted candidate
    POST benchmarks/<name>/difficulty/thresholds/   admins: the thresholds of the next filters
    POST candidates/<pk>/difficulty/                admins: run the filter again for this candidate alone

The candidate page's "Difficulty" card (`difficulty_context`) shows the latest verdict, its means and thresholds,
the two evaluation runs and the rollouts behind it, and polls itself while a filter of the candidate runs.
Forms answer htmx with their panel (errors in place) or, once done, a redirect; without JS they post normally.
"""

from collections import defaultdict

from django.contrib import messages
from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.decorators import admin_required, viewer_required
from benchmarks.models import Benchmark
from evaluation.models import Rollout
from jobs.engine import JobEngineError
from lib.htmx import render_page

from .. import services
from ..difficulty import DifficultyError, default_candidates, set_difficulty_thresholds, start_difficulty_filter
from ..forms import DifficultyFilterForm, DifficultyThresholdsForm
from ..models import BenchmarkCandidate, DifficultyFilter, DifficultyResult, DifficultyVerdict

RECENT_FILTERS = 20


def run_url(run_id: int) -> str:
    """The evaluation run's page (its URL name where the evaluation app has one, else its path)."""
    for name in ("evaluation:run-detail", "evaluations:detail"):
        try:
            return reverse(name, args=[run_id])
        except NoReverseMatch:
            continue
    return f"/evaluations/{run_id}/"


def _runs(flt: DifficultyFilter) -> list[dict]:
    return [
        {"side": side, "endpoint": endpoint, "run": run, "url": run_url(run.pk)}
        for side, endpoint, run in (
            ("strong", flt.strong_endpoint, flt.strong_run),
            ("small", flt.small_endpoint, flt.small_run),
        )
        if run is not None
    ]


# --- the candidate page's card ---------------------------------------------------------------------------------


def difficulty_context(candidate: BenchmarkCandidate, form=None, notice: str = "", error: str = "") -> dict:
    """The latest result with the rollouts behind it, a filter of this candidate still running, the earlier
    results, and the rerun form (defaults: the last filter that covered the candidate, else the benchmark's)."""
    latest = candidate.latest_difficulty()
    rollouts = defaultdict(list)
    runs = []
    if latest is not None:
        flt = DifficultyFilter.objects.select_related(
            "strong_run", "small_run", "strong_endpoint", "small_endpoint"
        ).get(pk=latest.filter_id)
        runs = _runs(flt)
        side_of = {entry["run"].pk: entry["side"] for entry in runs}
        behind = Rollout.objects.filter(eval_run_id__in=side_of, revision_id=latest.revision_id).order_by(
            "eval_run_id", "repeat_index"
        )
        for rollout in behind.only("pk", "eval_run_id", "repeat_index", "status", "score", "outcome", "attempt"):
            rollouts[side_of[rollout.eval_run_id]].append(rollout)
        for entry in runs:
            entry["rollouts"] = rollouts[entry["side"]]
    running = (
        candidate.difficulty_filters.filter(status=DifficultyFilter.Status.RUNNING)
        .select_related("strong_run", "small_run", "strong_endpoint", "small_endpoint")
        .order_by("-created_at", "-id")
        .first()
    )
    earlier = list(
        candidate.difficulty_results.select_related("filter", "revision")
        .filter(filter__status=DifficultyFilter.Status.FINISHED)
        .order_by("-filter__created_at", "-filter_id")[1:6]
    )
    if form is None:
        last = (
            candidate.difficulty_filters.select_related("strong_endpoint", "small_endpoint")
            .order_by("-created_at", "-id")
            .first()
            or candidate.benchmark.difficulty_filters.select_related("strong_endpoint", "small_endpoint").first()
        )
        form = DifficultyFilterForm(last=last)
    return {
        "difficulty": latest,
        "difficulty_filter": latest.filter if latest else None,
        "difficulty_runs": runs,
        "difficulty_running": running,
        "difficulty_running_runs": _runs(running) if running else [],
        "difficulty_earlier": earlier,
        "difficulty_form": form,
        "difficulty_notice": notice,
        "difficulty_error": error,
    }


@admin_required
@require_POST
def candidate_difficulty(request, pk):
    """Run the difficulty filter again for this candidate alone (after a fix, or with other agents)."""
    candidate = get_object_or_404(BenchmarkCandidate.objects.select_related("task", "benchmark"), pk=pk)
    form = DifficultyFilterForm(request.POST)
    error = notice = ""
    if not form.is_valid():
        error = "The filter could not start: " + " ".join(e for errors in form.errors.values() for e in errors)
    else:
        try:
            flt = start_difficulty_filter(
                candidate.benchmark, candidates=[candidate], user=request.user, **form.filter_settings()
            )
        except (DifficultyError, services.NotAllowed) as exc:
            error = f"The filter could not start: {exc}."
        except JobEngineError as exc:
            error = f"The filter's rollouts could not be queued: {exc}"
        else:
            notice = (
                f"Difficulty filter #{flt.pk} started: {flt.n} rollout{'' if flt.n == 1 else 's'} each of "
                f"{flt.strong_endpoint.name} and {flt.small_endpoint.name}."
            )
            form = None  # the card shows the defaults again, now this filter's
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.success(request, notice)
        return redirect(reverse("review:candidate", args=[candidate.pk]) + "#difficulty")
    candidate.refresh_from_db()
    context = {"candidate": candidate, **difficulty_context(candidate, form=form, notice=notice, error=error)}
    return TemplateResponse(request, "review/candidate.html#difficulty", context)


# --- the benchmark's page --------------------------------------------------------------------------------------


def _filters(benchmark) -> list[DifficultyFilter]:
    filters = list(
        benchmark.difficulty_filters.select_related(
            "strong_endpoint", "small_endpoint", "strong_run", "small_run", "created_by"
        ).annotate(covered=Count("candidates", distinct=True))[:RECENT_FILTERS]
    )
    counts = defaultdict(dict)
    results = DifficultyResult.objects.filter(filter__in=filters).order_by()
    for filter_id, verdict, n in results.values_list("filter_id", "verdict").annotate(n=Count("id")):
        counts[filter_id][verdict] = n
    for flt in filters:
        flt.verdicts = [(value, label, counts[flt.pk].get(value, 0)) for value, label in DifficultyVerdict.choices]
        flt.run_links = _runs(flt)
    return filters


def _benchmark_page(request, benchmark, *, start_form=None, thresholds_form=None, partial=None, status=200):
    by_verdict = dict(benchmark.candidates.order_by().values_list("difficulty_verdict").annotate(n=Count("id")))
    filters = _filters(benchmark)
    context = {
        "nav": "review",
        "benchmark": benchmark,
        "verdict_counts": [(value, label, by_verdict.get(value, 0)) for value, label in DifficultyVerdict.choices],
        "unfiltered": by_verdict.get("", 0),
        "filters": filters,
        "start_form": start_form or DifficultyFilterForm(last=filters[0] if filters else None),
        "thresholds_form": thresholds_form or DifficultyThresholdsForm.for_benchmark(benchmark),
        "covered": default_candidates(benchmark).count(),
    }
    return render_page(request, "review/benchmark_difficulty.html", context, partial=partial, status=status)


@viewer_required
@require_GET
def benchmark_difficulty(request, name):
    return _benchmark_page(request, get_object_or_404(Benchmark, name=name))


def _done(request, url: str, message: str):
    messages.success(request, message)
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)


def _invalid_status(request) -> int:
    return 200 if request.htmx else 400  # htmx swaps 2xx answers only


@admin_required
@require_POST
def difficulty_start(request, name):
    """Filter every open and accepted candidate of the benchmark."""
    benchmark = get_object_or_404(Benchmark, name=name)
    form = DifficultyFilterForm(request.POST)
    if form.is_valid():
        try:
            flt = start_difficulty_filter(benchmark, user=request.user, **form.filter_settings())
        except (DifficultyError, services.NotAllowed) as exc:
            form.add_error(None, f"The filter could not start: {exc}.")
        except JobEngineError as exc:
            form.add_error(None, f"The filter's rollouts could not be queued: {exc}")
        else:
            count = flt.candidates.count()
            message = (
                f"Difficulty filter #{flt.pk} started over {count} candidate{'' if count == 1 else 's'}: "
                f"{flt.strong_run.rollouts_total + flt.small_run.rollouts_total} rollouts."
            )
            return _done(request, reverse("review:difficulty", args=[benchmark.name]), message)
    return _benchmark_page(request, benchmark, start_form=form, partial="start", status=_invalid_status(request))


@admin_required
@require_POST
def difficulty_thresholds(request, name):
    benchmark = get_object_or_404(Benchmark, name=name)
    form = DifficultyThresholdsForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        set_difficulty_thresholds(
            benchmark,
            strong_min=data["strong_min"],
            small_max=data["small_max"],
            margin=data["margin"],
            user=request.user,
        )
        message = (
            f"{benchmark.name}'s next difficulty filters keep strong >= {data['strong_min']:g}, "
            f"small <= {data['small_max']:g}, strong > small + {data['margin']:g}."
        )
        return _done(request, reverse("review:difficulty", args=[benchmark.name]), message)
    return _benchmark_page(
        request, benchmark, thresholds_form=form, partial="thresholds", status=_invalid_status(request)
    )
