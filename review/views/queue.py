"""The candidate queue: filters, per-status counts, claims, keyboard triage (accept and reject in a dialog), bulk
accept and reject of the ticked rows, and starting LLM diagnoses.

Rows are one partial (review/_queue_row.html) that every action answers htmx with, so a claim, a decision or a
finished diagnosis updates its row in place; plain forms redirect back to a safe `next` with a message instead.
"""

from collections import defaultdict

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Exists, OuterRef, Q, Subquery
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget, trigger_client_event

from accounts.decorators import admin_required, reviewer_required, viewer_required
from benchmarks.models import Benchmark
from jobs.engine import JobEngineError
from jobs.models import JobRun
from lib.htmx import render_page
from tasks.models import SanityReport

from .. import bulk, planting, precision, services, solvability
from ..forms import DIAGNOSIS_FAILED, QUEUE_STATUSES, SORTS, BulkDecisionForm, DecisionForm, QueueFilterForm
from ..job_kinds import DIAGNOSE_BATCH_JOB, DIAGNOSE_JOB
from ..models import BenchmarkCandidate, DiagnosisIssue, LLMDiagnosis, ReviewDecision, Severity

PAGE_SIZE = 50
Status = BenchmarkCandidate.Status
Decision = ReviewDecision.Decision
# Fixing needs the candidate's files in front of the reviewer: the queue's `f` opens the candidate page instead.
QUEUE_DECISIONS = (Decision.ACCEPT, Decision.REJECT)


def decorate(candidates: list) -> list:
    """Attach what a row shows beyond the candidate's own columns, in four queries for any number of rows:
    the issue counts per severity of the latest diagnosis (`issue_counts`, worst first), `worst_severity`,
    `diagnosed`, the diagnosis job started for this row alone that is still under way (`diagnose_run`), and for a
    rejected candidate the decision that rejected it (`rejection`, with its reason).
    """
    ids = [c.pk for c in candidates]
    latest = {}  # candidate id -> its latest diagnosis id (latest: the newest created_at, then id)
    diagnoses = LLMDiagnosis.objects.filter(candidate_id__in=ids).order_by("candidate_id", "-created_at", "-id")
    for candidate_id, diagnosis_id in diagnoses.values_list("candidate_id", "id"):
        latest.setdefault(candidate_id, diagnosis_id)
    counts = defaultdict(dict)
    issues = DiagnosisIssue.objects.filter(diagnosis_id__in=latest.values()).order_by()
    for diagnosis_id, severity, n in issues.values_list("diagnosis_id", "severity").annotate(n=Count("id")):
        counts[diagnosis_id][severity] = n
    # Children of a batch are left out: the batch's own progress bar shows them, and 50 rows polling would not do.
    runs = JobRun.objects.filter(
        kind=DIAGNOSE_JOB, parent__isnull=True, status__in=JobRun.ACTIVE, params__candidate_id__in=ids
    ).order_by("created_at")
    running = {run.params["candidate_id"]: run for run in runs}
    # candidate id -> its latest reject (whose reason a rejected candidate's row shows) and accept decision (an
    # accept by an admin's override is marked on its row).
    final = {ReviewDecision.Decision.REJECT: {}, ReviewDecision.Decision.ACCEPT: {}}
    # Over all rows, not the decided ones only: a page costs the same number of queries whatever it holds.
    decisions = ReviewDecision.objects.filter(candidate_id__in=ids, decision__in=list(final))
    for decision in decisions.select_related("reviewer").order_by("candidate_id", "-created_at", "-id"):
        final[decision.decision].setdefault(decision.candidate_id, decision)
    for c in candidates:
        rejected, accepted = (
            c.status == BenchmarkCandidate.Status.REJECTED,
            c.status == BenchmarkCandidate.Status.ACCEPTED,
        )
        c.rejection = final[ReviewDecision.Decision.REJECT].get(c.pk) if rejected else None
        c.acceptance = final[ReviewDecision.Decision.ACCEPT].get(c.pk) if accepted else None
        found = counts.get(latest.get(c.pk), {})
        c.issue_counts = [(severity, found[severity]) for severity in Severity.values if severity in found]
        c.worst_severity = c.issue_counts[0][0] if c.issue_counts else None
        c.diagnosed = c.pk in latest
        c.diagnose_run = running.get(c.pk)
        c.sanity_block = _sanity_block(c) if c.diagnosed and not c.issue_counts else None
        c.is_open = c.status in BenchmarkCandidate.OPEN
    return candidates


def _sanity_block(c) -> str | None:
    """Why the row's latest sanity report blocks accepting (from what _rows annotates: no query a row), or None.

    "No issues" beside a checker that pays a lazy agent, crashes, or fails its own reference solution misleads, and
    so does it beside a sanity-checked revision that nothing has proven solvable (no reference solution, and no
    rollout of it scored full marks: review.solvability): such a row shows this instead."""
    reasons = []
    if getattr(c, "sanity_crashed", None):
        reasons.append("the checker crashed in its sanity check")
    lazy, tolerance = getattr(c, "lazy_score", None), c.benchmark.lazy_tolerance
    if lazy is not None and lazy > tolerance:
        reasons.append(f"a lazy agent earns {lazy:g} with this checker, above the tolerance {tolerance:g}")
    solvable = getattr(c, "sanity_solvable", None)
    if solvable is False:
        reasons.append("unsolvable: the reference solution does not score 1")
    elif lazy is not None and solvable is None and not getattr(c, "solved_by_rollout", False):
        reasons.append("solvability not proven: no reference solution, and no rollout of this revision scored 1")
    return "; ".join(reasons) or None


def _rows(candidates):
    """Only the columns the rows show, with everything they reach through in the same query; `lazy_score` is what a
    lazy agent earns with the checker of the task's current revision (None: never sanity-checked)."""
    revision = OuterRef("task__current_revision")
    latest = SanityReport.latest_for(revision)
    rows = candidates.annotate(
        lazy_score=SanityReport.latest_lazy_score(revision),
        sanity_crashed=Subquery(latest.values("crashed")[:1]),
        sanity_solvable=Subquery(latest.values("solvable")[:1]),
        solved_by_rollout=Exists(solvability.solving_rollouts(revision)),
    ).select_related("task__benchmark_category", "benchmark", "claimed_by")
    return rows.only(
        "status",
        "strong_mean",
        "small_mean",
        "difficulty_verdict",
        "diagnosis_error",
        "claimed_at",
        "claim_expires_at",
        "updated_at",
        "task__external_id",
        "task__title",
        "task__benchmark_category__name",
        "task__benchmark_category__slug",
        "benchmark__name",
        "benchmark__lazy_tolerance",
        "claimed_by__username",
    )


def _running_batch():
    """The latest "diagnose all" batch that has not finished: its parent or any of its children still active."""
    active_child = JobRun.objects.filter(parent=OuterRef("pk"), status__in=JobRun.ACTIVE)
    batches = JobRun.objects.filter(kind=DIAGNOSE_BATCH_JOB).filter(Q(status__in=JobRun.ACTIVE) | Exists(active_child))
    return batches.order_by("-created_at", "-id").first()


@viewer_required
@require_GET
def queue(request):
    services.expire_claims()
    form = QueueFilterForm(request.GET)
    matching = form.candidates(request, with_status=False)
    by_status = dict(matching.values_list("status").annotate(n=Count("id")))
    total = sum(by_status.values())
    if by_status.get(Status.AWAITING_DIAGNOSIS):  # those whose diagnosis failed have a tab of their own
        failed = matching.filter(status=Status.AWAITING_DIAGNOSIS).exclude(diagnosis_error="").count()
        by_status[Status.AWAITING_DIAGNOSIS] -= failed
        by_status[DIAGNOSIS_FAILED] = failed
    status = form.cleaned_data.get("status")
    rows = _rows(form.candidates(request))
    if form.sort_name == "likely":
        rows = precision.annotate_likely_valid(rows)
    paginator = Paginator(rows.order_by(*SORTS[form.sort_name][1]), PAGE_SIZE)
    # The per-status counts already hold the number of matches: no second COUNT over the same filters.
    paginator.count = by_status.get(status, 0) if status else total
    page = paginator.get_page(request.GET.get("page"))
    page.object_list = decorate(list(page.object_list))
    context = {
        "nav": "review",
        "form": form,
        "page": page,
        "total": total,
        "status": status,
        "status_counts": [(value, label, by_status.get(value, 0)) for value, label in QUEUE_STATUSES],
        "queue_url": request.get_full_path(),
        # Called only by the whole page (a callable in the context): the results partial has no use for it.
        "batch_run": _running_batch,
    }
    return render_page(request, "review/queue.html", context, partial="results")


# --- rows and claims -----------------------------------------------------------------------------------------------


def _next_url(request) -> str:
    """Where a plain form goes back to: its `next` when it is a URL of this site, else the queue."""
    wanted = request.POST.get("next") or request.GET.get("next")
    if wanted and url_has_allowed_host_and_scheme(wanted, {request.get_host()}, require_https=request.is_secure()):
        return wanted
    return reverse("review:queue")


def _row(pk: int) -> BenchmarkCandidate:
    (candidate,) = decorate(list(_rows(BenchmarkCandidate.objects.filter(pk=pk))))
    return candidate


def _row_response(request, pk: int, *, error: str = "") -> TemplateResponse:
    """The row, and unless refused a `queue-changed` event: the page then refreshes its status counts."""
    context = {"c": _row(pk), "row_error": error, "queue_url": _next_url(request)}
    response = TemplateResponse(request, "review/_queue_row.html", context)
    if not error:
        trigger_client_event(response, "queue-changed", {"id": pk})
    return response


@viewer_required
@require_GET
def queue_row(request, pk: int):
    """One row, fresh: a row whose diagnosis job finished asks for itself again."""
    candidate = get_object_or_404(BenchmarkCandidate.objects.select_related("task"), pk=pk)
    if not request.htmx:
        return redirect(reverse("review:queue") + f"?q={candidate.task.external_id}")
    return _row_response(request, pk)


def _claim_action(request, pk: int, action, done: str):
    candidate = get_object_or_404(BenchmarkCandidate.objects.select_related("task"), pk=pk)
    error = ""
    try:
        candidate = action(candidate, user=request.user)
    except services.ReviewError as exc:
        error = str(exc)
    if request.htmx and request.POST.get("target") == "row":
        return _row_response(request, pk, error=error)
    if request.htmx and request.POST.get("target") == "page":
        # The candidate page: its panels refresh themselves on "review-changed"; an open editor keeps its text.
        response = TemplateResponse(request, "review/_claim_feedback.html", {"error": error})
        trigger_client_event(response, "review-changed", {"claim": pk})
        return response
    if error:
        messages.error(request, error)
    else:
        messages.success(request, done.format(task=candidate.task.external_id, until=candidate.claim_expires_at))
    return redirect(_next_url(request))


@reviewer_required
@require_POST
def claim(request, pk: int):
    return _claim_action(request, pk, services.claim, "You hold {task} until {until:%H:%M} UTC.")


@reviewer_required
@require_POST
def release(request, pk: int):
    return _claim_action(request, pk, services.release, "Released {task}.")


# --- decisions -----------------------------------------------------------------------------------------------------


@reviewer_required
@require_http_methods(["GET", "POST"])
def queue_decide(request, pk: int):
    """Accept or reject from the queue. GET: the form (htmx: into the page's dialog; plain: a page of its own).

    POST claims the candidate when nobody holds it, then decides. htmx gets the updated row and a `queue-decided`
    event that closes the dialog; a refusal re-renders the form in the dialog with the reason and what was typed.
    """
    candidate = get_object_or_404(BenchmarkCandidate.objects.select_related("task", "benchmark"), pk=pk)
    fresh_row = None
    blocked = False
    status = 200
    if request.method == "GET":
        decision = request.GET.get("decision")
        form = DecisionForm(initial={"decision": decision if decision in QUEUE_DECISIONS else Decision.ACCEPT})
    else:
        form = DecisionForm(request.POST)
        status = 400
        if form.is_valid() and form.cleaned_data["decision"] not in QUEUE_DECISIONS:
            form.add_error("decision", "Fixing happens on the candidate page.")
        if form.is_valid():
            data = form.cleaned_data
            try:
                # decide() claims a free candidate on the way, in its transaction: a refused decision claims nothing.
                services.decide(
                    candidate,
                    data["decision"],
                    user=request.user,
                    reason=data["reason"],
                    override_reason=data["override_reason"],
                )
            except services.ReviewError as exc:
                form.add_error(None, str(exc))
                status = services.http_status(exc)
                blocked = isinstance(exc, services.AcceptBlocked)  # the dialog links where to unblock it
                fresh_row = _row(pk)  # a claim taken on the way shows in the row behind the dialog
            else:
                reveal = planting.revelation(candidate, request.user)
                if request.htmx:
                    response = _row_response(request, pk)
                    if reveal:  # a planted flaw: what it was shows under its row (review.planting)
                        response.template_name = "review/_queue_row_revealed.html"
                        response.context_data["reveal"] = reveal
                    trigger_client_event(response, "queue-decided", {"id": pk, "decision": data["decision"]})
                    return response
                done = "Accepted" if data["decision"] == Decision.ACCEPT else "Rejected"
                messages.success(request, f"{done} {candidate.task.external_id}.")
                if reveal:
                    messages.warning(request, reveal["message"])
                return redirect(_next_url(request))
    decision = form["decision"].value() if form["decision"].value() in QUEUE_DECISIONS else Decision.ACCEPT
    context = {
        "nav": "review",
        "candidate": candidate,
        "form": form,
        "decision": decision,
        "c": fresh_row,
        "blocked": blocked,
        "queue_url": _next_url(request),
    }
    if request.htmx:
        # htmx swaps 2xx answers only; the form (with its errors) replaces the dialog's content, not the row.
        response = TemplateResponse(request, "review/_queue_decide.html#form", context)
        if request.method == "POST":
            reswap(retarget(response, "#queue-dialog"), "innerHTML settle:0ms")
        return response
    return TemplateResponse(request, "review/_queue_decide.html", context, status=status)


@reviewer_required
@require_POST
def bulk_decide(request):
    """Accept or reject the ticked candidates, each through services.decide (review.bulk.decide_many): the same
    accept gate, claims and decision row as one at a time. htmx gets the report (what was decided, what was refused
    and why) with the rows acted on, out of band, and a `queue-changed` event that refreshes the counts; a plain form
    returns to the queue with the report as messages."""
    form = BulkDecisionForm(request.POST)
    result, error = None, ""
    if form.is_valid():
        data = form.cleaned_data
        try:
            result = bulk.decide_many(data["ids"], data["decision"], user=request.user, reason=data["reason"])
        except services.ReviewError as exc:
            error = str(exc)
    else:
        error = " ".join(text for field_errors in form.errors.values() for text in field_errors)
    if not request.htmx:
        if error:
            messages.error(request, f"Nothing was decided: {error}")
        else:
            (messages.success if result.decided else messages.warning)(request, result.summary())
            for item in result.refused:
                messages.warning(request, f"Refused {item.task or f'#{item.candidate_id}'}: {item.refused}")
            for item in result.decided:
                if item.planted:
                    messages.warning(request, item.planted["message"])
        return redirect(_next_url(request))
    acted = [item.candidate_id for item in result.items if item.task] if result else []
    rows = decorate(list(_rows(BenchmarkCandidate.objects.filter(pk__in=acted)))) if acted else []
    context = {"result": result, "error": error, "rows": rows, "queue_url": _next_url(request)}
    response = TemplateResponse(request, "review/_queue_bulk.html", context)
    if result and result.decided:
        trigger_client_event(response, "queue-changed", {"ids": [item.candidate_id for item in result.decided]})
    return response


# --- diagnoses -----------------------------------------------------------------------------------------------------


@admin_required
@require_POST
def diagnose_all(request):
    """Queue a diagnosis of every candidate awaiting one (of the filtered benchmark, or of all)."""
    name = request.POST.get("benchmark", "").strip()
    benchmark = Benchmark.objects.filter(name=name).first() if name else None
    run = None
    error = ""
    if name and benchmark is None:
        error = f"There is no benchmark called “{name}”."
    else:
        try:
            run = services.start_diagnosis_batch(benchmark, user=request.user)
        except JobEngineError as exc:
            error = f"The diagnoses could not be started: {exc}"
    if not request.htmx:
        if run is not None:
            return redirect("jobs:detail", run.pk)
        if error:
            messages.error(request, error)
        else:
            messages.info(request, "Nothing awaits diagnosis.")
        return redirect(_next_url(request))
    context = {"run": run, "error": error, "benchmark": benchmark}
    return TemplateResponse(request, "review/_queue_diagnose.html", context)


@admin_required
@require_POST
def diagnose_one(request, pk: int):
    """Queue a diagnosis of one candidate; its row shows the job's progress and refreshes when it finishes."""
    candidate = get_object_or_404(BenchmarkCandidate, pk=pk)
    error = ""
    run = None
    try:
        (run,) = services.start_diagnosis([candidate], user=request.user)
    except JobEngineError as exc:
        error = f"The diagnosis could not be started: {exc}"
    if request.htmx:
        return _row_response(request, pk, error=error)
    if run is not None:
        return redirect("jobs:detail", run.pk)
    messages.error(request, error)
    return redirect(_next_url(request))
