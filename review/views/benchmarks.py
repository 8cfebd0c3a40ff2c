"""Benchmarks: their candidates by status, what the next freeze would pin, frozen versions and their downloads.

    benchmarks/                          every benchmark with its counts and latest version; admins POST a new one
    benchmarks/<name>/                   counts into the queue, the next freeze, versions; admins freeze and propose
    benchmarks/<name>/v<N>/              the revisions a version pins (its benchmark.json, as a page)
    benchmarks/<name>/v<N>/export/       ?format=tar.gz|zip: the version in the ClawGym folder format

Forms answer htmx with their own panel (errors in place) and, once done, send the browser to the benchmark's page
with a message; without JS they post normally and redirect the same way.

These pages live in review, not in the benchmarks app: they count a benchmark's candidates and their decisions and
they freeze, propose and set the accept gate through review.services, and benchmarks sits below review (review
imports benchmarks; the way back would be a circle).
"""

from collections import Counter, defaultdict

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, OuterRef, Subquery
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import admin_required, viewer_required
from accounts.roles import ADMIN, has_role
from benchmarks.exporting import ARCHIVE_FORMATS, download_response, manifest
from benchmarks.models import Benchmark, BenchmarkVersion
from benchmarks.services import get_or_create_benchmark
from lib.htmx import render_page
from tasks.models import BenchmarkCategory

from .. import services
from ..forms import BenchmarkForm, FreezeForm, LazyToleranceForm, ProposeForm
from ..models import BenchmarkCandidate, ReviewDecision

Status = BenchmarkCandidate.Status


# --- helpers ---------------------------------------------------------------------------------------------------


def _done(request, url: str, message: str):
    """After a successful form: a message, then the page at `url` (htmx: the browser navigates there)."""
    messages.success(request, message)
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)


def _invalid_status(request) -> int:
    # htmx swaps 2xx responses only: the form with its errors must still replace its panel.
    return 200 if request.htmx else 400


def _status_counts(benchmark) -> list[dict]:
    counts = dict(benchmark.candidates.order_by().values_list("status").annotate(n=Count("id")))
    return [{"status": value, "label": label, "count": counts.get(value, 0)} for value, label in Status.choices]


def _versions(benchmark):
    return benchmark.versions.select_related("created_by").annotate(task_count=Count("pins")).order_by("-number")


def _next_freeze(benchmark, latest: BenchmarkVersion | None) -> dict:
    """What services.freeze_version would pin now (each accepted candidate's latest accept decision), compared
    with the latest version: which tasks are new, which revisions changed, which tasks would be dropped."""
    decisions = (
        ReviewDecision.objects.filter(
            candidate__benchmark=benchmark, candidate__status=Status.ACCEPTED, decision=ReviewDecision.Decision.ACCEPT
        )
        .select_related(
            "candidate__task__benchmark_category", "candidate__task__current_revision", "revision", "reviewer"
        )
        .order_by("candidate_id", "-created_at", "-id")
    )
    latest_accept = {}
    for decision in decisions:
        latest_accept.setdefault(decision.candidate_id, decision)
    before = {}
    if latest is not None:
        before = dict(latest.pins.values_list("revision__task__external_id", "revision__number"))
    rows = []
    for decision in latest_accept.values():
        if decision.revision is None:
            continue  # freeze_version skips these too
        task = decision.candidate.task
        previous = before.get(task.external_id)
        rows.append(
            {
                "decision": decision,
                "task": task,
                "revision": decision.revision,
                "previous": previous,
                "change": "new"
                if previous is None
                else "unchanged"
                if previous == decision.revision.number
                else "changed",
            }
        )
    rows.sort(key=lambda row: row["task"].external_id)
    pinned = {row["task"].external_id for row in rows}
    changes = Counter(row["change"] for row in rows)
    return {"rows": rows, "changes": changes, "dropped": sorted(set(before) - pinned)}


def _get_version(name: str, number: int) -> BenchmarkVersion:
    return get_object_or_404(
        BenchmarkVersion.objects.select_related("benchmark", "created_by"), benchmark__name=name, number=number
    )


# --- the list of benchmarks ------------------------------------------------------------------------------------


def _list_page(request, form: BenchmarkForm, status: int = 200):
    benchmarks = list(Benchmark.objects.all())
    counts = defaultdict(dict)
    for benchmark_id, status_value, n in (
        BenchmarkCandidate.objects.order_by().values_list("benchmark_id", "status").annotate(n=Count("id"))
    ):
        counts[benchmark_id][status_value] = n
    newest = BenchmarkVersion.objects.filter(benchmark=OuterRef("pk")).order_by("-number").values("pk")[:1]
    latest_ids = Benchmark.objects.annotate(latest=Subquery(newest)).values_list("latest", flat=True)
    latest = {
        v.benchmark_id: v
        for v in BenchmarkVersion.objects.filter(pk__in=[pk for pk in latest_ids if pk])
        .select_related("created_by")
        .annotate(task_count=Count("pins"))
    }
    rows = [
        {
            "benchmark": b,
            "cells": [(value, counts[b.pk].get(value, 0)) for value in Status.values],
            "total": sum(counts[b.pk].values()),
            "latest": latest.get(b.pk),
        }
        for b in benchmarks
    ]
    context = {"nav": "review", "rows": rows, "statuses": Status.choices, "form": form}
    return render_page(request, "review/benchmark_list.html", context, partial="create", status=status)


@viewer_required
@require_http_methods(["GET", "POST"])
def benchmark_list(request):
    """The list; a POST (admins) creates a benchmark."""
    if request.method == "GET":
        return _list_page(request, BenchmarkForm())
    if not has_role(request.user, ADMIN):
        raise PermissionDenied("Creating a benchmark needs the admin role.")
    form = BenchmarkForm(request.POST)
    if form.is_valid():
        benchmark, made = get_or_create_benchmark(
            form.cleaned_data["name"], user=request.user, description=form.cleaned_data["description"]
        )
        if made:
            url = reverse("review:benchmark", args=[benchmark.name])
            return _done(request, url, f"Created the benchmark {benchmark.name}: propose tasks to it below.")
        form.add_error("name", f"There is already a benchmark called “{benchmark.name}”.")  # made meanwhile
    return _list_page(request, form, status=_invalid_status(request))


# --- one benchmark ---------------------------------------------------------------------------------------------


def _benchmark_page(
    request, benchmark, *, freeze_form=None, propose_form=None, tolerance_form=None, partial=None, status=200
):
    versions = list(_versions(benchmark))
    context = {
        "nav": "review",
        "benchmark": benchmark,
        "status_counts": _status_counts(benchmark),
        "next_freeze": _next_freeze(benchmark, versions[0] if versions else None),
        "versions": versions,
        "next_number": versions[0].number + 1 if versions else 1,
        "archive_formats": ARCHIVE_FORMATS,
        "freeze_form": freeze_form or FreezeForm(),
        "tolerance_form": tolerance_form or LazyToleranceForm(initial={"lazy_tolerance": benchmark.lazy_tolerance}),
        "propose_form": propose_form or ProposeForm(),
    }
    return render_page(request, "review/benchmark_detail.html", context, partial=partial, status=status)


@viewer_required
@require_GET
def benchmark_detail(request, name):
    return _benchmark_page(request, get_object_or_404(Benchmark, name=name))


@admin_required
@require_POST
def freeze(request, name):
    benchmark = get_object_or_404(Benchmark, name=name)
    form = FreezeForm(request.POST)
    if form.is_valid():
        try:
            version = services.freeze_version(benchmark, user=request.user, note=form.cleaned_data["note"])
        except services.ReviewError as exc:
            form.add_error(None, f"Nothing was frozen: {exc}.")
        else:
            count = version.pins.count()
            url = reverse("review:version", args=[benchmark.name, version.number])
            return _done(request, url, f"Froze {version}: {count} task{'' if count == 1 else 's'} pinned.")
    return _benchmark_page(request, benchmark, freeze_form=form, partial="freeze", status=_invalid_status(request))


@admin_required
@require_POST
def lazy_tolerance(request, name):
    benchmark = get_object_or_404(Benchmark, name=name)
    form = LazyToleranceForm(request.POST)
    if form.is_valid():
        tolerance = form.cleaned_data["lazy_tolerance"]
        services.set_lazy_tolerance(benchmark, tolerance, user=request.user)
        message = f"{benchmark.name} now accepts checkers that pay a lazy agent at most {tolerance:g}."
        return _done(request, reverse("review:benchmark", args=[benchmark.name]), message)
    return _benchmark_page(
        request, benchmark, tolerance_form=form, partial="tolerance", status=_invalid_status(request)
    )


@admin_required
@require_POST
def propose(request, name):
    benchmark = get_object_or_404(Benchmark, name=name)
    form = ProposeForm(request.POST)
    if form.is_valid():
        result = services.propose_candidates(benchmark, form.cleaned_data["tasks"], user=request.user)
        skipped = f", {len(result.skipped)} skipped (no revision yet)" if result.skipped else ""
        message = (
            f"Proposed to {benchmark.name}: {result.created} new candidate{'' if result.created == 1 else 's'}, "
            f"{result.existing} already {'a candidate' if result.existing == 1 else 'candidates'}{skipped}."
        )
        return _done(request, reverse("review:benchmark", args=[benchmark.name]), message)
    return _benchmark_page(request, benchmark, propose_form=form, partial="propose", status=_invalid_status(request))


# --- versions --------------------------------------------------------------------------------------------------


@viewer_required
@require_GET
def version_detail(request, name, number):
    version = _get_version(name, number)
    tasks = manifest(version)["tasks"]
    names = dict(BenchmarkCategory.objects.values_list("slug", "name"))
    for task in tasks:
        task["category_name"] = names.get(task["category"], task["category"])
    others = version.benchmark.versions.order_by("-number").values_list("number", flat=True)
    context = {
        "nav": "review",
        "version": version,
        "benchmark": version.benchmark,
        "tasks": tasks,
        "other_numbers": [n for n in others if n != version.number],
        "archive_formats": ARCHIVE_FORMATS,
    }
    return render_page(request, "review/benchmark_version.html", context)


@viewer_required
@require_GET
def version_export(request, name, number):
    version = _get_version(name, number)
    fmt = request.GET.get("format", ARCHIVE_FORMATS[0])
    if fmt not in ARCHIVE_FORMATS:
        return HttpResponseBadRequest(f"Unknown archive format “{fmt}”: choose {' or '.join(ARCHIVE_FORMATS)}.")
    return download_response(version, fmt)
