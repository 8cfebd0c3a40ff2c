"""Pages of background jobs: recent runs, one run's detail, the progress partial, and cancelling a run.

Viewers and up see jobs; only admins cancel. htmx requests get the page's named partial, plain requests
the whole page, so every page also works without JS.
"""

import json

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from accounts.decorators import admin_required, viewer_required
from lib.htmx import render_page
from lib.listing import render_list

from . import periodic, registry
from .models import JobRun
from .redaction import hide_paths, hide_paths_in, sees_server_details
from .services import cancel_job

PAGE_SIZE = 50
CHILDREN_SHOWN = 200


@viewer_required
@require_GET
def job_list(request):
    runs = JobRun.objects.select_related("created_by").with_failed_children()
    kind = request.GET.get("kind", "")
    if kind:
        runs = runs.filter(kind=kind)
    # Kinds that ran once may no longer be registered; both belong in the filter.
    known_kinds = set(registry.kinds()) | set(JobRun.objects.order_by().values_list("kind", flat=True).distinct())
    context = {"nav": "jobs", "kinds": sorted(known_kinds), "kind": kind}
    if not request.htmx:  # the filters swap only the results; the schedule is read for the whole page
        context["periodic"] = periodic.statuses()
        context["engine"] = settings.CLAWGYM_JOB_ENGINE
    # Not polling: the list of every job changes all the time; a run's page follows it.
    return render_list(
        request,
        "jobs/list.html",
        runs,
        partial="results",
        context=context,
        per_page=PAGE_SIZE,
        statuses=JobRun.Status.choices,
    )


def _detail_context(run: JobRun, user) -> dict:
    """The run for the detail page; server paths in its params, result and log only for admins (jobs.redaction)."""
    params, result, log = run.params, run.result, run.log_tail
    if not sees_server_details(user):
        params, result, log = hide_paths_in(params), hide_paths_in(result), hide_paths(log)
    return {
        "nav": "jobs",
        "run": run,
        "params_json": json.dumps(params, indent=2, sort_keys=True),
        "result_json": json.dumps(result, indent=2, sort_keys=True) if result is not None else "",
        "log_tail": log,
        "children": run.children.select_related("created_by").order_by("id")[:CHILDREN_SHOWN],
    }


@viewer_required
@require_GET
def job_detail(request, pk: int):
    run = get_object_or_404(JobRun.objects.select_related("created_by", "parent").with_failed_children(), pk=pk)
    # While the run is not finished, the "live" part of the page polls this view for itself.
    return render_page(request, "jobs/detail.html", _detail_context(run, request.user), partial="live")


@viewer_required
@require_GET
def batch_progress(request, pk: int):
    """The progress of a batch: a parent run and its children. It polls this URL until all have finished."""
    run = get_object_or_404(JobRun, pk=pk)
    batch = run.batch()
    response = TemplateResponse(request, "jobs/_batch_progress.html", {"batch": batch, "run": run})
    response["Cache-Control"] = "no-store"
    if batch.is_finished:
        trigger_client_event(response, "batch-finished", {"id": run.pk, "kind": run.kind, "failed": batch.failed})
    return response


@viewer_required
@require_GET
def job_progress(request, pk: int):
    """The progress partial any page includes; it polls this URL until the run finishes."""
    run = get_object_or_404(JobRun, pk=pk)
    response = TemplateResponse(request, "jobs/_progress.html", {"run": run})
    response["Cache-Control"] = "no-store"
    if run.is_finished:
        # Lets the including page refresh what the job changed (e.g. the task page's sanity card).
        trigger_client_event(
            response, "job-finished", {"id": run.pk, "kind": run.kind, "status": run.status, "outcome": run.outcome}
        )
    return response


@admin_required
@require_POST
def job_cancel(request, pk: int):
    run = get_object_or_404(JobRun, pk=pk)
    run = cancel_job(run, user=request.user)
    if run.status == JobRun.Status.CANCELLED:
        notice = "Cancelled."
    elif run.cancel_requested and not run.is_finished:
        notice = "Cancel requested: the job stops at its next progress report."
    else:
        notice = f"Nothing to cancel: the job already {run.status}."
    if request.htmx:
        context = _detail_context(run, request.user) | {"notice": notice}
        return TemplateResponse(request, "jobs/detail.html#live", context)
    messages.info(request, notice)
    return redirect("jobs:detail", pk=run.pk)
