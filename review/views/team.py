"""Review as a team (review.team): routing, a benchmark's team page, adjudication.

    POST next/                                  reviewers: claim the candidate the routing rule offers next, open it
    GET  benchmarks/<name>/team/                 the team, progress and agreement of a benchmark
    GET  benchmarks/<name>/team/part/<panel>/    htmx: the progress or agreement panel (they refresh themselves)
    POST benchmarks/<name>/team/settings/        admins: reviewers, decisions needed, overlap share
    GET  adjudication/                           leads: the candidates whose reviewers disagree
    GET  candidates/<pk>/adjudicate/             leads: both sides of one disagreement (403 while blind to them)
    POST candidates/<pk>/adjudicate/             leads: decide it

htmx forms get back their own panel (errors in place) or a redirect; without JS they post normally.
"""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import admin_required, lead_required, reviewer_required, viewer_required
from benchmarks.models import Benchmark
from lib.htmx import render_page

from .. import adjudication, services, team
from ..agreement import benchmark_agreement
from ..forms import AdjudicationForm, TeamForm
from ..models import BenchmarkCandidate, DiagnosisIssue, ReviewDecision

# --- routing ---------------------------------------------------------------------------------------------------


def _back(request) -> str:
    after = request.POST.get("next", "")
    if after and url_has_allowed_host_and_scheme(after, {request.get_host()}, require_https=request.is_secure()):
        return after
    return reverse("review:queue")


def _go(request, url: str):
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)


@reviewer_required
@require_POST
def next_candidate(request):
    """Claim and open the next candidate the routing rule offers; another reviewer claiming it first moves on."""
    name = request.POST.get("benchmark", "").strip()
    benchmark = Benchmark.objects.filter(name=name).first() if name else None
    if name and benchmark is None:
        messages.error(request, f"No benchmark called “{name}”.")
        return _go(request, _back(request))
    services.expire_claims()
    for _attempt in range(5):
        candidate = team.next_candidate(request.user, benchmark)
        if candidate is None:
            break
        try:
            services.claim(candidate, user=request.user)
        except services.ClaimConflict:
            continue
        except services.ReviewError as exc:
            messages.error(request, f"Could not claim {candidate.task.external_id}: {exc}.")
            return _go(request, _back(request))
        return _go(request, reverse("review:candidate", args=[candidate.pk]))
    where = f" in {benchmark.name}" if benchmark else ""
    messages.info(request, f"Nothing left for you to review{where}: every open candidate is decided or held.")
    return _go(request, _back(request))


# --- a benchmark's team page -----------------------------------------------------------------------------------


def _team_context(request, benchmark, form=None) -> dict:
    return {
        "nav": "review",
        "benchmark": benchmark,
        "settings": team.team_settings(benchmark),
        "team_form": form
        or TeamForm(
            initial={
                "reviewers": list(benchmark.reviewers.all()),
                "decisions_needed": benchmark.decisions_needed,
                "overlap_share": benchmark.overlap_share,
            }
        ),
        "progress": team.progress(benchmark),
        "agreement": benchmark_agreement(benchmark),
        "adjudications": list(team.adjudication_queue(benchmark)[:50]),
    }


@viewer_required
@require_GET
def team_page(request, name):
    benchmark = get_object_or_404(Benchmark, name=name)
    return render_page(request, "review/team_benchmark.html", _team_context(request, benchmark))


PANELS = {
    "progress": lambda benchmark: {"progress": team.progress(benchmark)},
    "agreement": lambda benchmark: {"agreement": benchmark_agreement(benchmark)},
}


@viewer_required
@require_GET
def team_part(request, name, panel):
    benchmark = get_object_or_404(Benchmark, name=name)
    if panel not in PANELS:
        raise Http404(f"no panel {panel!r}")
    if not request.htmx:
        return redirect(reverse("review:team", args=[benchmark.name]) + f"#{panel}")
    context = {"benchmark": benchmark} | PANELS[panel](benchmark)
    return TemplateResponse(request, f"review/team_benchmark.html#{panel}", context)


@admin_required
@require_POST
def team_settings(request, name):
    benchmark = get_object_or_404(Benchmark, name=name)
    form = TeamForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            team.set_team(
                benchmark,
                user=request.user,
                reviewers=[u.get_username() for u in data["reviewers"]],
                decisions_needed=data["decisions_needed"],
                overlap_share=data["overlap_share"],
            )
        except team.TeamError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(
                request,
                f"{benchmark.name}: {benchmark.decisions_needed} decision{'' if benchmark.decisions_needed == 1 else 's'}"
                f" a candidate, {benchmark.overlap_share:.0%} overlap.",
            )
            return _go(request, reverse("review:team", args=[benchmark.name]))
    context = _team_context(request, benchmark, form)
    status = 200 if request.htmx else 400
    return render_page(request, "review/team_benchmark.html", context, partial="settings", status=status)


# --- adjudication ----------------------------------------------------------------------------------------------


@lead_required
@require_GET
def adjudication_list(request):
    name = request.GET.get("benchmark", "").strip()
    benchmark = get_object_or_404(Benchmark, name=name) if name else None
    waiting = list(team.adjudication_queue(benchmark))
    for candidate in waiting:
        candidate.sides = team.sides(candidate, request.user)  # awaiting adjudication: blind to nobody
    context = {"nav": "review", "benchmark": benchmark, "waiting": waiting}
    return render_page(request, "review/team_adjudication_list.html", context)


def _adjudication_context(candidate, viewer, form=None, error="") -> dict:
    issues = {
        str(issue.pk): issue
        for issue in DiagnosisIssue.objects.filter(diagnosis__candidate=candidate).select_related("diagnosis")
    }
    sides = team.sides(candidate, viewer)
    for side in sides:
        side["verdict_list"] = [(issues.get(pk), pk, verdict) for pk, verdict in sorted(side["verdicts"].items())]
    decided = team.independent_decisions(candidate)
    adjudications = candidate.decisions.filter(adjudication=True).select_related("reviewer", "revision")
    return {
        "nav": "review",
        "candidate": candidate,
        "task": candidate.task,
        "sides": sides,
        "disagreement": team.disagreement(candidate, decided) if decided else [],
        "adjudications": list(adjudications),
        "form": form or AdjudicationForm(),
        "error": error,
        "is_waiting": candidate.status == BenchmarkCandidate.Status.AWAITING_ADJUDICATION,
    }


@lead_required
@require_http_methods(["GET", "POST"])
def adjudicate(request, pk):
    candidate = get_object_or_404(BenchmarkCandidate.objects.select_related("task", "benchmark"), pk=pk)
    if team.is_blind(candidate, request.user):
        # A lead who has not decided an open candidate reviews it blind, like anyone: its page hides the other
        # reviewers' decisions, so this page (both sides, reasons, verdicts) must not show them either.
        raise PermissionDenied(team.BLIND_SIDES)
    if request.method == "GET":
        return render_page(request, "review/_adjudication.html", _adjudication_context(candidate, request.user))
    form = AdjudicationForm(request.POST)
    error = ""
    if form.is_valid():
        data = form.cleaned_data
        try:
            row = adjudication.adjudicate(candidate, data["decision"], user=request.user, reason=data["reason"])
        except services.ReviewError as exc:
            error = str(exc)
            status = services.http_status(exc)
        else:
            outcome = "Accepted" if row.decision == ReviewDecision.Decision.ACCEPT else "Rejected"
            messages.success(request, f"{outcome} {candidate.task.external_id} on adjudication.")
            return _go(request, reverse("review:adjudication"))
    else:
        status = 400
    context = _adjudication_context(candidate, request.user, form, error)
    return render_page(
        request, "review/_adjudication.html", context, partial="verdict", status=200 if request.htmx else status
    )
