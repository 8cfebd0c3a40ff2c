"""A run's samples, searched and filtered (by task, outcome, status, score and text), and the same task's rollouts of
two runs side by side, each with its checks' results beside its transcript (evaluation.samples holds the queries).

Both are reads for viewers. The samples page's results are a named partial that its filters swap in with htmx (a
plain GET without JS), as on the review queue.
"""

from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from accounts.decorators import viewer_required
from lib.bounds import parse_id
from lib.htmx import render_page

from ..forms import SampleFilterForm
from ..models import EvalRun, EvalRunTask, Outcome
from ..presenting import conversation
from ..samples import check_rows, pick, run_rollouts, snippet

PAGE_SIZE = 50
# What a samples row shows; the transcript only when a text is searched for (its snippet), never for the list alone.
ROW_FIELDS = (
    "revision__task__external_id",
    "revision__number",
    "repeat_index",
    "attempt",
    "status",
    "outcome",
    "exit_reason",
    "score",
    "sub_scores",
    "turns",
    "input_tokens",
    "output_tokens",
    "agent_seconds",
    "final_message",
    "error",
    "score_reason",
    "check_reason",
    "eval_run",
)


def _runs():
    return EvalRun.objects.select_related("endpoint", "benchmark_version__benchmark")


def other_runs(run: EvalRun | None = None):
    """The runs to set beside another: the newest 100 (a run with rollouts is what matters, not that it finished)."""
    runs = _runs().only(
        "name", "status", "endpoint__name", "benchmark_version__number", "benchmark_version__benchmark__name"
    )
    return runs.exclude(pk=run.pk)[:100] if run is not None else runs[:100]


@viewer_required
@require_GET
def run_samples(request, pk: int):
    run = get_object_or_404(_runs(), pk=pk)
    form = SampleFilterForm(request.GET)
    text = form.cleaned_data.get("q", "").strip()
    fields = ROW_FIELDS + (("transcript",) if text else ())
    matching = form.samples(run.rollouts.select_related("revision__task").only(*fields))
    page = Paginator(matching, PAGE_SIZE).get_page(request.GET.get("page"))
    labels = dict(Outcome.choices)
    for rollout in page.object_list:
        rollout.outcome_label = labels.get(rollout.outcome, "")
        checks = [v for v in (rollout.sub_scores or {}).values() if isinstance(v, int | float)]
        rollout.checks_full, rollout.checks_total = sum(1 for v in checks if v >= 1), len(checks)
        rollout.match = snippet(rollout, text) if text else None
    beside = parse_id(request.GET.get("b", ""))
    context = {
        "nav": "evaluations",
        "run": run,
        "form": form,
        "page": page,
        "total": run.rollouts.count(),
        "outcome_counts": [
            (labels.get(o, o or "unfinished"), n)
            for o, n in matching.order_by("outcome").values_list("outcome").annotate(n=Count("id"))
        ],
        "beside": _runs().filter(pk=beside).first() if beside else None,
        "other_runs": other_runs(run),
    }
    return render_page(request, "evaluation/run_samples.html", context, partial="results")


@viewer_required
@require_GET
def rollout_pair(request):
    """?a=RUN&b=RUN&task=ID (&ra=, &rb=: which repeat of each; the first by default): the task's rollout in each run
    side by side: outcome and score, every check's result (the checker's sub-scores and the rubric's rules, the same
    rows in both columns, those that differ marked), the final message and the transcript."""
    a, b = (_runs().filter(pk=pk).first() if (pk := parse_id(request.GET.get(key, ""))) else None for key in ("a", "b"))
    tasks = sorted(
        set(
            EvalRunTask.objects.filter(run__in=[r for r in (a, b) if r is not None]).values_list(
                "task__external_id", flat=True
            )
        )
    )
    task = request.GET.get("task", "")
    task = task if task in tasks else (tasks[0] if tasks else "")
    context = {
        "nav": "evaluations",
        "a": a,
        "b": b,
        "tasks": tasks,
        "task": task,
        "choices": other_runs(),
        "sides": [],
        "checks": [],
    }
    if a is not None and b is not None and task:
        index = tasks.index(task)
        context["previous"] = tasks[index - 1] if index > 0 else None
        context["next"] = tasks[index + 1] if index + 1 < len(tasks) else None
        chosen = {}
        for key, run in (("a", a), ("b", b)):
            rollouts = run_rollouts(run, task)
            chosen[key] = pick(rollouts, request.GET.get(f"r{key}"))
            context["sides"].append(
                {
                    "key": key,
                    "run": run,
                    "rollouts": rollouts,
                    "rollout": chosen[key],
                    "entries": conversation(chosen[key].transcript) if chosen[key] else [],
                }
            )
        context["checks"] = check_rows(chosen["a"], chosen["b"])
        for side in context["sides"]:
            side["checks"] = [(row, getattr(row, side["key"])) for row in context["checks"]]
    return render_page(request, "evaluation/rollout_pair.html", context)
