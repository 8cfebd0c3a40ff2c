"""Pages of the task catalog: dashboard, task list, task detail, file viewer, revision diff and import.

htmx requests get the page's named partial, plain requests the whole page, so every page works without JS.
The review pages show the same file tree, checker and sanity cards: they build them with files_by_role,
checker_files and sanity_context from here, and render them with the tasks/_*.html partials.
"""

import posixpath
from collections import defaultdict

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, F, OuterRef, Subquery
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import admin_required, reviewer_required, viewer_required
from jobs.engine import JobEngineError
from jobs.models import JobRun
from lib.htmx import render_page

from . import dashboard_panels
from .diffing import diff_revisions, role_folder
from .forms import CompareForm, ImportForm, TaskFilterForm
from .importing import start_upload_import
from .job_kinds import IMPORT_JOB, SANITY_JOB
from .models import BenchmarkCategory, Blob, RevisionFile, SanityReport, Task, TaskRevision
from .sanity import start_sanity_check
from .viewers import view_file

PAGE_SIZE = 50
RECENT_JOBS = 8


# --- dashboard ---------------------------------------------------------------------------------------------


def _category_table(categories, cells):
    """Rows of {category (None: no category), cells [(status, count)], total} and the per-status totals."""
    statuses = Task.Status.values
    counts = defaultdict(lambda: dict.fromkeys(statuses, 0))
    for category_id, status, n in cells:
        counts[category_id][status] = n
    rows = []
    for category in [*categories, None]:
        key = category.pk if category else None
        if category is None and key not in counts:
            continue  # no uncategorised tasks: no row for them
        rows.append(
            {"category": category, "cells": [(s, counts[key][s]) for s in statuses], "total": sum(counts[key].values())}
        )
    totals = [sum(counts[key][s] for key in counts) for s in statuses]
    return rows, totals


@viewer_required
@require_GET
def dashboard(request):
    categories = list(BenchmarkCategory.objects.all())
    cells = Task.objects.order_by().values_list("benchmark_category_id", "status").annotate(n=Count("id"))
    rows, totals = _category_table(categories, cells)
    source_counts = dict(Task.objects.order_by().values_list("source").annotate(n=Count("id")))
    panels, panel_scripts = dashboard_panels.rendered(request)  # other apps' panels (tasks.dashboard_panels)
    context = {
        "nav": "dashboard",
        "statuses": Task.Status.choices,
        "status_totals": list(zip(Task.Status.choices, totals, strict=True)),
        "category_rows": rows,
        "totals": totals,
        "grand_total": sum(totals),
        "sources": [(value, label, source_counts.get(value, 0)) for value, label in Task.Source.choices],
        "recent_jobs": JobRun.objects.select_related("created_by").with_failed_children()[:RECENT_JOBS],
        "panels": panels,
        "panel_scripts": panel_scripts,
    }
    return TemplateResponse(request, "tasks/dashboard.html", context)


# --- task list ---------------------------------------------------------------------------------------------


# The task list's sorts: every ordering ends on a unique key so that pages never overlap.
TASK_SORTS = {
    "updated": [F("updated_at").desc(), F("id").desc()],
    # Never-checked tasks last: they have no lazy score.
    "lazy": [F("lazy_score").desc(nulls_last=True), F("updated_at").desc(), F("id").desc()],
}


def list_queryset(form: TaskFilterForm):
    """The filtered tasks with exactly what a row shows, in one query (the page count runs on Task alone); each
    row carries `latest_sanity_id`, its current revision's latest sanity report (see with_sanity)."""
    tasks = form.filter(Task.objects.all())
    sort = form.cleaned_data.get("sort") or "updated"
    latest = SanityReport.latest_for(OuterRef("current_revision"))
    tasks = tasks.annotate(latest_sanity_id=Subquery(latest.values("pk")[:1]))
    if sort == "lazy":
        tasks = tasks.annotate(lazy_score=SanityReport.latest_lazy_score(OuterRef("current_revision")))
    return (
        tasks.order_by(*TASK_SORTS[sort])
        .select_related("benchmark_category", "current_revision")
        .only(
            "external_id",
            "title",
            "status",
            "source",
            "updated_at",
            "benchmark_category",
            "benchmark_category__name",
            "benchmark_category__slug",
            "current_revision",
            "current_revision__number",
        )
    )


def with_sanity(tasks: list) -> list:
    """Attach `sanity` (the verdict facts of the latest report, or None) to each task, in one query."""
    ids = [t.latest_sanity_id for t in tasks if t.latest_sanity_id]
    fields = ("crashed", "over_lenient", "solvable", "lazy_score", "tolerance")
    reports = SanityReport.objects.only(*fields).in_bulk(ids)
    for task in tasks:
        task.sanity = reports.get(task.latest_sanity_id)
    return tasks


@viewer_required
@require_GET
def task_list(request):
    form = TaskFilterForm(request.GET)
    page = Paginator(list_queryset(form), PAGE_SIZE).get_page(request.GET.get("page"))
    page.object_list = with_sanity(list(page.object_list))
    context = {"nav": "tasks", "form": form, "page": page}
    return render_page(request, "tasks/task_list.html", context, partial="results")


# --- task detail -------------------------------------------------------------------------------------------


def _get_task(external_id: str) -> Task:
    return get_object_or_404(
        Task.objects.select_related("benchmark_category", "scenario_category", "scenario_subcategory"),
        external_id=external_id,
    )


def _get_revision(task: Task, number) -> TaskRevision:
    """Revision `number` of the task (the current one when None); 404 for anything else."""
    revisions = TaskRevision.objects.select_related("author_user")
    if number in (None, ""):
        if task.current_revision_id is None:
            raise Http404(f"{task.external_id} has no revision yet")
        return revisions.get(pk=task.current_revision_id)
    try:
        number = int(number)
    except (TypeError, ValueError):
        raise Http404(f"no revision {number!r}") from None
    return get_object_or_404(revisions, task=task, number=number)


def files_by_role(revision: TaskRevision) -> list[dict]:
    """The revision's files grouped for a file tree: [{role, label, files, size}] in role order.

    Sizes only: file contents stay in the database until a file is opened.
    """
    files = revision.files.select_related("blob").only("role", "path", "revision", "blob", "blob__size")
    groups = {role: [] for role in RevisionFile.Role.values}
    for f in files:
        groups[f.role].append(f)
    return [
        {"role": role, "label": label, "files": groups[role], "size": sum(f.blob.size for f in groups[role])}
        for role, label in RevisionFile.Role.choices
    ]


def checker_files(groups) -> list[dict]:
    """The reward files of `files_by_role` groups, each with its rendered view, for a checker card."""
    reward = next(g["files"] for g in groups if g["role"] == RevisionFile.Role.REWARD)
    blobs = Blob.objects.in_bulk([f.blob_id for f in reward])
    return [{"file": f, "view": view_file(f.path, blobs[f.blob_id].content)} for f in reward]


@viewer_required
@require_GET
def task_detail(request, external_id):
    task = _get_task(external_id)
    revision = _get_revision(task, request.GET.get("rev"))
    history = list(
        task.revisions.select_related("author_user").only(
            "number", "message", "created_at", "author_stage", "author_user__username", "task"
        )
    )
    numbers = [r.number for r in history]
    older = [n for n in numbers if n < revision.number]
    compare = CompareForm(numbers=numbers, initial={"a": older[0] if older else revision.number, "b": revision.number})
    groups = files_by_role(revision)
    context = {
        "nav": "tasks",
        "task": task,
        "revision": revision,
        "is_current": revision.pk == task.current_revision_id,
        "rubric_weight": round(1 - revision.code_weight, 6),
        "groups": groups,
        "checker_files": checker_files(groups),
        "history": history,
        "compare": compare,
        **sanity_context(revision),
    }
    # htmx asks for the sanity card alone (it refreshes itself when a job finishes).
    return render_page(request, "tasks/task_detail.html", context, partial="sanity")


def sanity_context(revision: TaskRevision) -> dict:
    """The revision's latest sanity report as table rows, and a sanity job still under way for it."""
    report = SanityReport.latest_for(revision).first()
    rows = []
    if report is not None:
        rows = list(report.runs.items())
        if report.solution_run is not None:
            rows.append(("solution", report.solution_run))
    running = (
        JobRun.objects.filter(kind=SANITY_JOB, params__revision_id=revision.pk)
        .exclude(status__in=JobRun.FINISHED)
        .first()
    )
    return {"sanity": report, "sanity_rows": rows, "sanity_job": running}


@reviewer_required
@require_POST
def sanity_start(request, external_id):
    """Queue a sanity check of the current revision: htmx gets the job's progress, a plain form the job page."""
    task = _get_task(external_id)
    try:
        run = start_sanity_check(task, user=request.user)
    except (ValueError, JobEngineError) as exc:
        error = f"The sanity check could not be started: {exc}"
        if not request.htmx:
            messages.error(request, error)
            return redirect(reverse("tasks:detail", args=[task.external_id]) + "#sanity")
        # htmx swaps 2xx responses only: the reason must still reach the card.
        return TemplateResponse(request, "tasks/task_detail.html#sanity-job", {"sanity_error": error})
    if not request.htmx:
        return redirect("jobs:detail", run.pk)
    return TemplateResponse(request, "tasks/task_detail.html#sanity-job", {"sanity_job": run})


def _get_file(external_id: str, number: int, role: str, path: str):
    task = _get_task(external_id)
    revision = get_object_or_404(TaskRevision, task=task, number=number)
    rf = get_object_or_404(RevisionFile.objects.select_related("blob"), revision=revision, role=role, path=path)
    return task, revision, rf


@viewer_required
@require_GET
def file_view(request, external_id, number, role, path):
    task, revision, rf = _get_file(external_id, number, role, path)
    context = {
        "nav": "tasks",
        "task": task,
        "revision": revision,
        "file": rf,
        "shown_path": role_folder(rf.role) + rf.path,
        "view": view_file(rf.path, rf.blob.content),
    }
    return render_page(request, "tasks/file.html", context, partial="viewer")


@viewer_required
@require_GET
def file_raw(request, external_id, number, role, path):
    _, _, rf = _get_file(external_id, number, role, path)
    # Always a download: task files may be HTML or SVG written by anyone, never rendered by the browser here.
    response = HttpResponse(rf.blob.content, content_type="application/octet-stream")
    response["Content-Disposition"] = content_disposition_header(True, posixpath.basename(rf.path))
    response["Content-Security-Policy"] = "sandbox"
    return response


@viewer_required
@require_GET
def diff_view(request, external_id):
    task = _get_task(external_id)
    numbers = list(task.revisions.order_by("-number").values_list("number", flat=True))
    data = request.GET if ("a" in request.GET or "b" in request.GET) else None
    if data is None and len(numbers) >= 2:
        data = {"a": numbers[1], "b": numbers[0]}  # by default: what the latest revision changed
    form = CompareForm(data, numbers=numbers)
    diff = None
    status = 200
    if data is not None:
        if form.is_valid():
            old = task.revisions.select_related("author_user").get(number=form.cleaned_data["a"])
            new = task.revisions.select_related("author_user").get(number=form.cleaned_data["b"])
            diff = diff_revisions(old, new)
        else:
            status = 400
    context = {"nav": "tasks", "task": task, "form": form, "diff": diff, "numbers": numbers}
    return TemplateResponse(request, "tasks/diff.html", context, status=status)


# --- import ------------------------------------------------------------------------------------------------


def _recent_imports(started=None):
    runs = JobRun.objects.filter(kind=IMPORT_JOB).select_related("created_by")
    if started is not None:
        runs = runs.exclude(pk=started.pk)  # it is on show above the list
    return runs[:20]


@admin_required
@require_http_methods(["GET", "POST"])
def import_page(request):
    run = None
    status = 200
    if request.method == "POST":
        form = ImportForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                run = start_upload_import(
                    form.cleaned_data["archive"], fmt=form.cleaned_data["format"], user=request.user
                )
            except JobEngineError as exc:
                form.add_error(None, f"The import could not be started: {exc}")
                status = 503
            else:
                if not request.htmx:
                    return redirect("jobs:detail", run.pk)
                form = ImportForm()  # a fresh form for the next upload, with the started job below it
        else:
            status = 400
    else:
        form = ImportForm()
    if request.htmx:
        status = 200  # htmx swaps 2xx responses only, and the form with its errors must replace the panel
    context = {"nav": "import", "form": form, "run": run, "recent": _recent_imports(started=run)}
    # The recent imports refresh themselves (when a job finishes): that htmx GET targets their card.
    partial = "recent" if request.method == "GET" and request.htmx.target == "recent-imports-card" else "panel"
    return render_page(request, "tasks/import.html", context, partial=partial, status=status)
