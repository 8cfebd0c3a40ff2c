"""The category proposals page (/tasks/categories/): what a model proposed for each task, and the admin's decisions.

Everyone with a role reads it; admins start a categorization of the uncategorized tasks (a job with a progress bar),
accept proposals in bulk (the selected ones here and now; "all pending" as a job, there may be thousands), choose
another category for one, or reject one. Plain forms that post back to the page, so it works without JavaScript;
with htmx the started job's progress appears in place and the table refreshes itself when the job finishes.
"""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from accounts.decorators import viewer_required
from accounts.roles import ADMIN, has_role
from jobs.engine import JobEngineError
from jobs.models import JobRun
from lib.bounds import parse_id
from lib.htmx import render_page

from .categorizing import (
    CategorizingError,
    ProposalError,
    accept_proposals,
    awaiting_proposal,
    edit_proposal,
    reject_proposal,
    start_accept_all,
    start_categorization,
)
from .job_kinds import ACCEPT_JOB, CATEGORIZE_JOB
from .models import BenchmarkCategory, CategoryProposal, Task

PAGE_SIZE = 50
SHOWN_STATUSES = [("", "Open"), *CategoryProposal.Status.choices, ("all", "All")]  # "": pending and failed


def _proposals(status: str):
    rows = CategoryProposal.objects.select_related(
        "task", "revision", "category", "category_before", "decided_category", "decided_by", "decided_revision"
    )
    if status == "all":
        return rows
    if status in CategoryProposal.Status.values:
        return rows.filter(status=status)
    # Open: what awaits a decision, pending ones first (failed ones need a category picked by hand).
    return rows.filter(status__in=CategoryProposal.OPEN).order_by("-status", "-created_at", "-id")


def _status_tabs(by_status: dict) -> list[tuple[str, str, int]]:
    """(value, label, count) for each tab; "" is the open ones (pending and failed), "all" every proposal."""
    counts = {**by_status, "": sum(by_status.get(s, 0) for s in CategoryProposal.OPEN), "all": sum(by_status.values())}
    return [(value, label, counts.get(value, 0)) for value, label in SHOWN_STATUSES]


def _running(kind: str):
    return JobRun.objects.filter(kind=kind).exclude(status__in=JobRun.FINISHED).order_by("-created_at").first()


def _page_url(request) -> str:
    """Where a form goes back to: its `next` when it is a URL of this site, else the page."""
    wanted = request.POST.get("next")
    if wanted and url_has_allowed_host_and_scheme(wanted, {request.get_host()}, require_https=request.is_secure()):
        return wanted
    return reverse("tasks:categories")


@viewer_required
@require_http_methods(["GET", "POST"])
def category_proposals(request):
    if request.method == "POST":
        if not has_role(request.user, ADMIN):
            raise PermissionDenied("Deciding category proposals needs the admin role.")
        return _decide(request)
    status = request.GET.get("status", "")
    if status not in dict(SHOWN_STATUSES):
        status = ""
    page = Paginator(_proposals(status), PAGE_SIZE).get_page(request.GET.get("page"))
    by_status = dict(CategoryProposal.objects.order_by().values_list("status").annotate(n=Count("id")))
    context = {
        "nav": "tasks",
        "status": status,
        "statuses": _status_tabs(by_status),
        "page": page,
        "categories": list(BenchmarkCategory.objects.all()),
        "pending": by_status.get(CategoryProposal.Status.PENDING, 0),
        "uncategorized": Task.objects.filter(benchmark_category__isnull=True).count(),
        "awaiting": awaiting_proposal().count(),
        "categorize_job": _running(CATEGORIZE_JOB),
        "accept_job": _running(ACCEPT_JOB),
        "page_url": request.get_full_path(),
    }
    # The table refreshes itself (htmx) when a job on the page finishes.
    return render_page(request, "tasks/category_proposals.html", context, partial="proposals")


def _decide(request):
    action = request.POST.get("action", "")
    handlers = {
        "start": _start,
        "accept_selected": _accept_selected,
        "accept_all": _accept_all,
        "edit": _edit,
        "reject": _reject,
    }
    if action not in handlers:
        messages.error(request, f"Unknown action {action!r}.")
        return redirect(_page_url(request))
    return handlers[action](request)


def _start(request):
    """Queue a categorization of the tasks awaiting one: htmx gets the job's progress, a plain form the job page."""
    error, run = "", None
    try:
        run = start_categorization(user=request.user)
    except (CategorizingError, JobEngineError) as exc:
        error = f"Categorization could not be started: {exc}"
    if request.htmx:
        # htmx swaps 2xx responses only: the reason must still reach the panel.
        return TemplateResponse(
            request, "tasks/category_proposals.html#job-panel", {"categorize_job": run, "job_error": error}
        )
    if run is None:
        messages.error(request, error)
        return redirect(_page_url(request))
    return redirect("jobs:detail", run.pk)


def _accept_selected(request):
    ids = [pk for pk in map(parse_id, request.POST.getlist("ids")) if pk is not None]
    if not ids:
        messages.error(request, "Select the proposals to accept first.")
        return redirect(_page_url(request))
    chosen = CategoryProposal.objects.filter(pk__in=ids[: PAGE_SIZE * 4]).order_by("pk")
    decisions = accept_proposals(list(chosen), user=request.user)
    _report(request, decisions)
    return redirect(_page_url(request))


def _report(request, decisions) -> None:
    n = len(decisions.accepted)
    if n:
        messages.success(request, f"Accepted {n} proposal{'' if n == 1 else 's'}: each task has a new revision.")
    for proposal in decisions.rejected:
        messages.warning(request, f"{proposal.task.external_id}: not applied, {proposal.decision_note}.")
    if decisions.skipped:
        messages.info(request, f"{len(decisions.skipped)} proposal(s) had been decided already (or failed): skipped.")
    for proposal, error in decisions.errors:
        messages.error(request, f"{proposal.task.external_id}: the revision could not be made: {error}")


def _accept_all(request):
    try:
        run = start_accept_all(user=request.user)
    except JobEngineError as exc:
        messages.error(request, f"The acceptance could not be started: {exc}")
        return redirect(_page_url(request))
    if run is None:
        messages.info(request, "No proposal is pending.")
        return redirect(_page_url(request))
    return redirect("jobs:detail", run.pk)


def _one(request) -> CategoryProposal:
    pk = parse_id(request.POST.get("proposal", ""))
    return get_object_or_404(CategoryProposal.objects.select_related("task"), pk=pk or 0)


def _edit(request):
    proposal = _one(request)
    category = BenchmarkCategory.objects.filter(slug=request.POST.get("category", "")).first()
    if category is None:
        messages.error(request, f"{proposal.task.external_id}: choose one of the categories.")
        return redirect(_page_url(request))
    try:
        edit_proposal(proposal, category, user=request.user)
    except ProposalError as exc:
        messages.error(request, f"{proposal.task.external_id}: {exc}")
    else:
        messages.success(request, f"{proposal.task.external_id}: category set to {category.name} (a new revision).")
    return redirect(_page_url(request))


def _reject(request):
    proposal = _one(request)
    try:
        reject_proposal(proposal, user=request.user, note=f"rejected by {request.user.get_username()}")
    except ProposalError as exc:
        messages.error(request, f"{proposal.task.external_id}: {exc}")
    else:
        messages.success(request, f"{proposal.task.external_id}: proposal rejected; the task keeps its category.")
    return redirect(_page_url(request))
