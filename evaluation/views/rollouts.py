"""Pages of rollouts: the list (with a start form), one rollout (conversation, diff, scores, model calls) and the
trajectory corpus statistics. htmx requests get the page's named partial, plain requests the whole page."""

import json

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import reviewer_required, viewer_required
from jobs.engine import JobEngineError
from lib.htmx import render_page
from llm.models import ModelCall, ModelEndpoint

from ..forms import RolloutFilterForm, StartRolloutsForm, TrajectoryFilterForm
from ..models import Rollout, Trajectory
from ..presenting import conversation, workspace_diff
from ..services.rollouts import RolloutError, rejudge_rollout, retry_rollout, start_rollouts
from ..trajectories import TrajectoryData, TrajectoryStats, chain_roles
from ..trajectory_stats import corpus_stats

PAGE_SIZE = 50
METRIC_LABELS = {
    "turns": "turns",
    "tool_calls": "tool calls",
    "tool_types": "distinct tools",
    "prompt_tokens": "prompt tokens",
    "completion_tokens": "completion tokens",
    "total_tokens": "total tokens",
}


def _list_context(request, start_form) -> dict:
    form = RolloutFilterForm(request.GET)
    rollouts = form.filter(Rollout.objects.select_related("revision__task", "endpoint"))
    page = Paginator(rollouts, PAGE_SIZE).get_page(request.GET.get("page"))
    return {
        "nav": "rollouts",
        "form": form,
        "start_form": start_form,
        "page": page,
        # The results poll while a rollout on show is unfinished.
        "unfinished": any(not r.is_finished for r in page.object_list),
        "endpoint_names": ModelEndpoint.objects.values_list("name", flat=True),
        "status_counts": dict(rollouts.order_by().values_list("status").annotate(n=Count("id"))),
    }


@viewer_required
@require_GET
def rollout_list(request):
    start_form = StartRolloutsForm(initial={"harness": settings.CLAWGYM_DEFAULT_HARNESS, "repeats": 1})
    return render_page(request, "evaluation/rollout_list.html", _list_context(request, start_form), partial="results")


@reviewer_required
@require_http_methods(["GET", "POST"])
def rollout_start(request):
    """GET: the start form (?task= fills in the task; htmx gets the form alone, for the task page). POST: start."""
    if request.method == "GET":
        task = request.GET.get("task", "").strip()
        initial = {"harness": settings.CLAWGYM_DEFAULT_HARNESS, "repeats": 1, "task": task}
        form = StartRolloutsForm(initial=initial)
        context = {"nav": "rollouts", "start_form": form, "has_endpoints": form.fields["endpoint"].queryset.exists()}
        return render_page(request, "evaluation/rollout_start.html", context, partial="form")
    form = StartRolloutsForm(request.POST)
    if not form.is_valid():
        return render_page(request, "evaluation/rollout_list.html", _list_context(request, form), status=400)
    data = form.cleaned_data
    try:
        rollouts = start_rollouts(
            data["task"].current_revision,
            data["endpoint"],
            harness=data["harness"],
            repeats=data["repeats"],
            user=request.user,
        )
    except (RolloutError, JobEngineError) as exc:
        messages.error(request, f"The rollouts were not started: {exc}")
        return redirect("evaluation:list")
    messages.success(request, f"Started {len(rollouts)} rollout{'s' if len(rollouts) != 1 else ''}.")
    return redirect(f"{reverse('evaluation:list')}?group={rollouts[0].group}")


@viewer_required
@require_GET
def rollout_detail(request, pk: int):
    rollout = get_object_or_404(
        Rollout.objects.select_related("revision__task", "endpoint", "proxy_session", "job_run", "created_by"), pk=pk
    )
    calls = list(
        ModelCall.objects.filter(session_id=rollout.proxy_session_id).order_by("created_at", "id").with_requests()
    )
    # Which calls continue the agent's main conversation and which are side calls (never trained as RL samples).
    roles = chain_roles([{"request": c.request, "response": c.response, "error": c.error} for c in calls])
    for call, role in zip(calls, roles, strict=True):
        call.chain_role = role
    context = {
        "nav": "rollouts",
        "rollout": rollout,
        "entries": conversation(rollout.transcript),
        # What the agent said about itself, shown apart from the proxy's record above (harnesses.base.AgentAccount).
        "account": rollout.agent_account,
        "account_entries": conversation(rollout.agent_account.get("transcript") or []),
        "files": workspace_diff(rollout),
        "calls": calls,
        "earlier_calls": ModelCall.objects.filter(subject=rollout.subject, purpose="proxy")
        .exclude(session_id=rollout.proxy_session_id)
        .count(),
        "trajectories": rollout.trajectories.all(),
        "sub_scores": sorted(rollout.sub_scores.items()),
    }
    return render_page(request, "evaluation/rollout_detail.html", context, partial="rollout")


@reviewer_required
@require_POST
def rollout_retry(request, pk: int):
    rollout = get_object_or_404(Rollout, pk=pk)
    try:
        retry_rollout(rollout, user=request.user)
    except (RolloutError, JobEngineError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Rollout #{rollout.pk} is queued for attempt {rollout.attempt + 1}.")
    return redirect("evaluation:detail", pk=pk)


@reviewer_required
@require_POST
def rollout_rejudge(request, pk: int):
    rollout = get_object_or_404(Rollout, pk=pk)
    try:
        rollout = rejudge_rollout(rollout, user=request.user)
    except RolloutError as exc:
        messages.error(request, str(exc))
    else:
        if rollout.score is not None:
            outcome = f"score {rollout.score:.3f}"
        else:
            outcome = f"still incomplete: {rollout.score_reason}"
        messages.success(request, f"Rollout #{rollout.pk} judged again: {outcome}.")
    return redirect("evaluation:detail", pk=pk)


@viewer_required
@require_GET
def rollout_trajectories(request, pk: int):
    """The rollout's trajectories as JSON lines (one OpenAI-format conversation with its tools and reward a line)."""
    rollout = get_object_or_404(Rollout, pk=pk)
    lines = [
        json.dumps(
            {
                "rollout": rollout.pk,
                "index": t.index,
                "messages": t.messages,
                "tools": t.tools,
                "reward": t.reward,
                "stats": t.stats,
                "excluded": t.excluded,
                "exclusion_reason": t.exclusion_reason,
                "unverified_turns": t.unverified_turns,
            },
            ensure_ascii=False,
        )
        for t in rollout.trajectories.all()
    ]
    response = HttpResponse("".join(line + "\n" for line in lines), content_type="application/x-ndjson")
    response["Content-Disposition"] = content_disposition_header(True, f"rollout-{rollout.pk}-trajectories.jsonl")
    return response


@viewer_required
@require_GET
def trajectory_stats(request):
    form = TrajectoryFilterForm(request.GET)
    rows = form.filter(Trajectory.objects.all()).values_list("stats", "excluded", "exclusion_reason")
    corpus = [
        TrajectoryData(
            messages=[], tools=[], call_indices=[], stats=_stats(stats), excluded=excluded, exclusion_reason=reason
        )
        for stats, excluded, reason in rows.iterator()
    ]
    include = form.is_valid() and form.cleaned_data["include_excluded"]
    stats = corpus_stats(corpus, include_excluded=include)
    for buckets in stats["histograms"].values():
        top = max((b["count"] for b in buckets), default=0) or 1
        for bucket in buckets:
            bucket["percent"] = round(100 * bucket["count"] / top)
    context = {
        "nav": "rollouts",
        "form": form,
        "stats": stats,
        "metric_rows": [(METRIC_LABELS.get(name, name), m) for name, m in stats["metrics"].items()],
        "histograms": [(METRIC_LABELS.get(name, name), buckets) for name, buckets in stats["histograms"].items()],
        "endpoint_names": ModelEndpoint.objects.values_list("name", flat=True),
    }
    return render_page(request, "evaluation/trajectory_stats.html", context, partial="results")


def _stats(stored: dict) -> TrajectoryStats:
    known = TrajectoryStats.__dataclass_fields__
    return TrajectoryStats(**{k: v for k, v in (stored or {}).items() if k in known})
