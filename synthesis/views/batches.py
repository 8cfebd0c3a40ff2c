"""Pages of synthesis batches: the list, starting one (or a preview of it), one batch (progress, the funnel with
its reasons and example items, cost per stage, distributions), and one item (its seed, every stage's result, the
draft, the task it became).

Every figure comes from synthesis.batch_report (funnel, stage_costs, distributions, batch_json); starting, resuming and
cancelling call synthesis.services. A page whose batch is still going polls its own partial (htmx gets the partial, plain
requests the page) until the batch is finished or paused; the finished partial has no polling attributes.
"""

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import QueryDict
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import admin_required, viewer_required
from jobs.engine import JobEngineError
from lib.htmx import render_page
from lib.listing import render_list
from lib.polled_figures import polled_figures
from llm.models import ModelCall

from .. import batch_plan, batch_report, services
from ..forms import StartBatchForm
from ..models import STAGE_ORDER, QAStage, Stage, SynthesisBatch, SynthesisItem

BATCHES_PAGE_SIZE = 30
ITEMS_PAGE_SIZE = 50
REASONS_SHOWN = 15  # per funnel step on the page: novelty reasons are one per item, and 1,000 rows tell nobody more
ITEM_MARK = 987654321  # placeholder of the item link, reversed once for every example
DISTRIBUTIONS = [
    ("subcategories", "Subcategories"),
    ("operations", "Operations"),
    ("skills", "Skills"),
    ("difficulty", "Difficulty as the generator rated its own task"),
    ("judge_difficulty", "Difficulty as the judge found it (quality assessment)"),
]
LEVELS = ("difficulty", "judge_difficulty")  # 1..5, charted in order
CHART_BARS = 20  # the most frequent values charted; the table beside lists them all


# --- shared by the pages and the dashboard panel -----------------------------------------------------------------


def progress(batch: SynthesisBatch, counts: dict | None = None) -> dict:
    """Items per status, how many are finished and the percentage of the requested ones."""
    if counts is None:
        counts = dict(batch.items.order_by().values_list("status").annotate(n=Count("pk")))
    by_status = {status: counts.get(status, 0) for status in SynthesisItem.Status.values}
    finished = sum(by_status[s] for s in SynthesisItem.FINISHED)
    total = batch.requested or 1
    # A complete batch some of whose items failed, or that kept none, is no plain success: shown amber, saying so.
    label = ""
    if batch.status == SynthesisBatch.Status.COMPLETE and (by_status["failed"] or not by_status["kept"]):
        label = f"Complete · {by_status['failed']} failed" if by_status["failed"] else "Complete · none kept"
    return {
        **by_status,
        "finished": finished,
        "total": batch.requested,
        "percent": round(100 * finished / total),
        "partial_label": label,
    }


def with_progress(batch_list) -> list:
    """Each batch with its .progress, counted in one query for all of them."""
    batch_list = list(batch_list)
    counts: dict[int, dict] = {}
    rows = SynthesisItem.objects.filter(batch__in=batch_list).order_by().values_list("batch_id", "status")
    for batch_id, status, n in rows.annotate(n=Count("pk")):
        counts.setdefault(batch_id, {})[status] = n
    for batch in batch_list:
        batch.progress = progress(batch, counts.get(batch.pk, {}))
    return batch_list


def is_live(batch: SynthesisBatch) -> bool:
    """Whether a page showing the batch keeps polling: while it is queued or running."""
    return batch.status in (SynthesisBatch.Status.QUEUED, SynthesisBatch.Status.RUNNING)


def batch_rows(queryset):
    return queryset.select_related("generator", "judge", "created_by").defer("config", "prompt_versions")


def running_context() -> dict:
    """Batches queued or running, then the latest others: what the dashboard panel lists."""
    live = [SynthesisBatch.Status.QUEUED, SynthesisBatch.Status.RUNNING]
    running = list(batch_rows(SynthesisBatch.objects.filter(status__in=live)))
    others = list(batch_rows(SynthesisBatch.objects.exclude(status__in=live))[: max(0, 5 - len(running))])
    return {"recent": with_progress(running + others), "unfinished": bool(running)}


def count_chart(labels: list[str], datasets: list[dict], *, y_title: str) -> dict:
    """The data static/js/charts.js draws: a bar chart of counts."""
    return {"type": "bar", "labels": labels, "datasets": datasets, "y": {"min": 0, "title": y_title}, "integers": True}


def distribution_tables(found: dict) -> list[dict]:
    """batch_report.distributions as one table and chart per kind: every value with its count over all items and over
    the kept ones."""
    tables = []
    for key, title in DISTRIBUTIONS:
        everything, kept = found["all"].get(key) or {}, found["kept"].get(key) or {}
        if key in LEVELS:
            rows = [(level, everything[level], kept.get(level, 0)) for level in sorted(everything, key=str)]
        else:
            rows = [(value, n, kept.get(value, 0)) for value, n in everything.items()]  # most common first
        charted = rows[:CHART_BARS]
        chart = count_chart(
            [str(r[0]) for r in charted],
            [
                {"label": "all items", "data": [r[1] for r in charted]},
                {"label": "kept", "data": [r[2] for r in charted]},
            ],
            y_title="items",
        )
        tables.append(
            {
                "key": key,
                "title": title,
                "rows": rows,
                "chart": chart if rows else None,
                "chart_id": f"chart-{key}",
                "charted": len(charted),
                "more": len(rows) > len(charted),
            }
        )
    return tables


# --- the list ----------------------------------------------------------------------------------------------------


@viewer_required
@require_GET
def batch_list(request):
    return render_list(
        request,
        "synthesis/batch_list.html",
        batch_rows(SynthesisBatch.objects.all()),
        partial="batches",
        context={"nav": "synthesis"},
        per_page=BATCHES_PAGE_SIZE,
        statuses=SynthesisBatch.Status.choices,
        is_live=is_live,
        rows=with_progress,
    )


@viewer_required
@require_GET
def running_batches(request):
    """The dashboard panel's running and recent batches (it polls this while one of them runs)."""
    return render_page(request, "synthesis/_batch_recent.html", running_context())


# --- starting ----------------------------------------------------------------------------------------------------


def _start_page(request, form, status=200):
    return render_page(request, "synthesis/batch_start.html", {"nav": "synthesis", "form": form}, status=status)


@admin_required
@require_http_methods(["GET", "POST"])
def batch_start(request):
    """GET: the form (its fields may be given in the query string, e.g. by a preview's "start the full batch").
    POST: start the batch, or with the `preview` button a preview batch of 5 items first."""
    if request.method == "GET":
        initial = {k: v for k, v in request.GET.items() if k in StartBatchForm.base_fields}
        if "qa_stages" in request.GET:
            initial["qa_stages"] = request.GET.getlist("qa_stages")
        return _start_page(request, StartBatchForm(initial=initial))
    form = StartBatchForm(request.POST)
    if not form.is_valid():
        return _start_page(request, form, status=400)
    preview = "preview" in request.POST
    settings = form.batch_settings(preview=preview)
    earlier = set(SynthesisBatch.objects.values_list("pk", flat=True).order_by())
    try:
        batch = services.start_batch(user=request.user, **settings)
    except batch_plan.NoSynthesizableSkills:
        form.add_error(
            None,
            format_html(
                'The skill route needs synthesizable skills: import and annotate them on the <a href="{}">Skills page</a> '
                "(both are buttons there), or choose the persona route.",
                reverse("synthesis:skills"),
            ),
        )
        return _start_page(request, form, status=400)
    except batch_plan.BatchError as exc:
        form.add_error(None, str(exc))
        return _start_page(request, form, status=400)
    except JobEngineError as exc:
        messages.error(request, f"The batch was created but its job could not be queued: {exc}")
        return redirect("synthesis:list")
    what = "preview batch" if preview else "batch"
    if batch.pk in earlier:
        messages.info(
            request, f"An earlier {what} had these settings: #{batch.pk} goes on instead; its finished items are kept."
        )
    else:
        messages.success(
            request,
            f"Started {what} #{batch.pk}: {batch.requested} item{'s' * (batch.requested != 1)} "
            f"queued (seed {batch.seed}).",
            extra_tags=f"started:batch-{batch.pk}",  # goes once the batch has finished (static/js/started.js)
        )
    return redirect("synthesis:detail", pk=batch.pk)


# --- one batch ---------------------------------------------------------------------------------------------------


def _batch(pk: int) -> SynthesisBatch:
    return get_object_or_404(SynthesisBatch.objects.select_related("generator", "judge", "created_by"), pk=pk)


def full_batch_query(batch: SynthesisBatch) -> str:
    """The start form's query string with a preview's settings: its full batch, the same seed and options."""
    query = QueryDict(mutable=True)
    query.update(
        {"route": batch.route, "generator": batch.generator.name, "judge": batch.judge.name, "seed": batch.seed}
    )
    for key in ("operations", "supporting", "allow_network"):
        if key in batch.options:
            query[key] = batch.options[key]
    stages = batch.options.get("qa_stages", QAStage.values)
    query.setlist("qa_stages", stages)
    if not stages:
        query["qa_stages"] = ""  # present and empty: none ticked
    return query.urlencode()


def _stage_rows(costs: dict) -> list[dict]:
    rows = [
        {"purpose": purpose, **figures, "tokens": figures["input_tokens"] + figures["output_tokens"]}
        for purpose, figures in costs.items()
    ]
    order = {f"synthesis:{stage}": index for index, stage in enumerate(STAGE_ORDER)}
    return sorted(rows, key=lambda r: (order.get(r["purpose"], len(order)), r["purpose"]))


def stage_rows(batch: SynthesisBatch, found: dict | None = None) -> list[dict]:
    """Where the items are (batch_report.progress, or its "stages" when given): per stage, in pipeline order, how many
    wait, run or ended there."""
    found = batch_report.progress(batch)["stages"] if found is None else found
    labels = dict(Stage.choices)
    return [
        {
            "stage": stage,
            "label": labels[stage],
            "counts": [found[stage].get(s, 0) for s in SynthesisItem.Status.values],
        }
        for stage in STAGE_ORDER
        if stage in found
    ]


def option_rows(options: dict) -> list[tuple[str, str]]:
    """A batch's options as (name, text) for people: lists joined, an empty one "none"."""
    rows = []
    for key, value in sorted(options.items()):
        if isinstance(value, list):
            text = ", ".join(map(str, value))
        elif isinstance(value, bool):
            text = "yes" if value else "no"
        else:
            text = str(value)
        rows.append((key, text or "none"))
    return rows


def _batch_context(request, batch: SynthesisBatch) -> dict:
    items = batch.items.select_related("task").only(
        "batch",
        "index",
        "status",
        "stage",
        "reason",
        "input_tokens",
        "output_tokens",
        "cost",
        "task__external_id",
        "stage_results",
    )
    status = request.GET.get("items", "")
    if status in SynthesisItem.Status.values:
        items = items.filter(status=status)
    item_page = Paginator(items.order_by("index"), ITEMS_PAGE_SIZE).get_page(request.GET.get("page"))
    for item in item_page.object_list:
        item.ended_at = (
            batch_report.rejected_stage(item) if item.status == SynthesisItem.Status.REJECTED else item.stage
        )
    where = batch_report.progress(batch)["stages"]
    figures = batch_figures(batch, where)
    funnel = figures["funnel"]
    return {
        "nav": "synthesis",
        "batch": batch,
        "resumable": batch_plan.resumable(batch),
        "progress": progress(batch),
        "funnel": funnel,
        "reason_rows": reason_rows(funnel),
        "funnel_chart": count_chart(
            [row["label"] for row in funnel],
            [{"label": "items", "data": [row["count"] for row in funnel]}],
            y_title="items",
        ),
        "stage_rows": _stage_rows(figures["stage_costs"]),
        "distributions": distribution_tables(figures["distributions"]),
        "item_page": item_page,
        "item_status": status,
        "item_statuses": SynthesisItem.Status.choices,
        "option_rows": option_rows(batch.options or {}),
        "where": stage_rows(batch, where),
        "live": is_live(batch),
        "full_batch_query": full_batch_query(batch) if batch.preview else "",
    }


def reason_rows(funnel: list[dict]) -> list[dict]:
    """The "why items stopped" table: per step its REASONS_SHOWN most frequent reasons (each with its example items'
    links, reversed once), then one row for the rest (how many reasons, how many items); the API's funnel keeps all."""
    item_url = reverse("synthesis:item", args=[ITEM_MARK])
    rows = []
    for step in funnel:
        for reason in step["reasons"][:REASONS_SHOWN]:
            examples = [(pk, item_url.replace(str(ITEM_MARK), str(pk))) for pk in reason["examples"]]
            rows.append({"step": step["step"], "label": step["label"], **reason, "examples": examples})
        rest = step["reasons"][REASONS_SHOWN:]
        if rest:
            rows.append(
                {
                    "step": step["step"],
                    "label": step["label"],
                    "more": len(rest),
                    "count": sum(r["count"] for r in rest),
                }
            )
    return rows


def batch_figures(batch: SynthesisBatch, where: dict) -> dict:
    """The funnel, the cost per stage and the distributions: passes over every item (and its model calls), so a
    polled page gets them through lib.polled_figures, computed again when the items' places (`where`: stage ->
    status -> n) or the batch's usage have moved (at once for a batch of hundreds of items)."""
    stamp = (
        batch.status,
        batch.input_tokens,
        batch.output_tokens,
        str(batch.cost),
        sorted((stage, sorted(counts.items())) for stage, counts in where.items()),
    )

    def compute() -> dict:
        return {
            "funnel": batch_report.funnel(batch),
            "stage_costs": batch_report.stage_costs(batch),
            "distributions": batch_report.distributions(batch),
        }

    return polled_figures(f"synthesis-batch:{batch.pk}:{batch.created_at.timestamp()}", stamp, compute)


@viewer_required
@require_GET
def batch_detail(request, pk: int):
    return render_page(request, "synthesis/batch_detail.html", _batch_context(request, _batch(pk)), partial="live")


@admin_required
@require_POST
def batch_resume(request, pk: int):
    batch = _batch(pk)
    try:
        batch = services.resume_batch(batch, user=request.user)
    except (batch_plan.BatchError, JobEngineError) as exc:
        messages.error(request, f"The batch was not resumed: {exc}")
    else:
        if batch.status == SynthesisBatch.Status.COMPLETE:
            messages.info(request, f"Batch #{batch.pk} is complete: nothing is left to run or retry.")
        else:
            messages.success(
                request,
                f"Batch #{batch.pk} goes on: what it had not finished is queued again; finished items are kept.",
                extra_tags=f"started:batch-{batch.pk}",
            )
    return redirect("synthesis:detail", pk=pk)


@admin_required
@require_POST
def batch_cancel(request, pk: int):
    batch = _batch(pk)
    if batch.is_finished:
        messages.error(request, f"Batch #{batch.pk} has finished already ({batch.get_status_display()}).")
    else:
        services.cancel_batch(batch, user=request.user)
        messages.success(request, f"Batch #{batch.pk} is cancelled: no item starts another stage; it can be resumed.")
    return redirect("synthesis:detail", pk=pk)


# --- one item ----------------------------------------------------------------------------------------------------


def _stage_sections(item: SynthesisItem) -> list[dict]:
    labels = dict(Stage.choices)
    sections = []
    for stage in STAGE_ORDER:
        result = item.stage_results.get(stage)
        if result is None:
            state = "next" if stage == item.stage and not item.is_finished else "not reached"
            sections.append({"stage": stage, "label": labels[stage], "result": None, "state": state})
            continue
        extra = {k: v for k, v in result.items() if k not in ("verdict", "reason", "rounds", "verdicts")}
        sections.append(
            {
                "stage": stage,
                "label": labels[stage],
                "result": result,
                "state": result.get("verdict"),
                "rounds": result.get("rounds") or [],
                "verdicts": result.get("verdicts") or {},
                "extra": extra,
            }
        )
    return sections


@viewer_required
@require_GET
def item_detail(request, pk: int):
    item = get_object_or_404(SynthesisItem.objects.select_related("batch__generator", "batch__judge", "task"), pk=pk)
    draft = item.draft
    calls = (
        ModelCall.objects.filter(subject=item.subject)
        .only("purpose", "endpoint_name", "error", "input_tokens", "output_tokens", "cost", "latency_ms", "created_at")
        .order_by("pk")
    )
    context = {
        "nav": "synthesis",
        "item": item,
        "batch": item.batch,
        "ended_at": batch_report.rejected_stage(item) if item.status == SynthesisItem.Status.REJECTED else item.stage,
        "stages": _stage_sections(item),
        "files": sorted((draft.get("files") or {}).items()),
        "checker": sorted((draft.get("checker") or {}).items()),
        "solution": sorted((draft.get("solution") or {}).items()),
        "rubric": draft.get("rubric") or [],
        "calls": calls,
        "task_url": reverse("tasks:detail", args=[item.task.external_id]) if item.task_id else "",
        "live": not item.is_finished and is_live(item.batch),
    }
    return render_page(request, "synthesis/item_detail.html", context, partial="live")
