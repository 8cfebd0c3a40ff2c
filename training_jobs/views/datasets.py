"""Pages of training datasets: the list, the build form (admins), one dataset's statistics page (counts, per-trajectory
figures as charts with tables beside, rewards, categories and sources, the paper's figures beside ours, exclusions,
the split, export), its messages JSONL download, and the dashboard panel's context.

A dataset still building refreshes its own partial (htmx) until it is ready or failed; the finished partial has no
polling attributes. Building is training_jobs.services.datasets' (start_build); the figures are those stored at build time.
"""

import json

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods

from accounts.decorators import admin_required, viewer_required
from accounts.roles import ADMIN, VIEWER, has_role
from jobs.engine import JobEngineError
from lib.htmx import render_page
from lib.listing import render_list
from training.masks import chat_messages

from ..dataset_stats import METRICS
from ..forms import BuildDatasetForm, rollout_groups
from ..models import DatasetSample, TrainingDataset
from ..services import datasets

DATASETS_PAGE_SIZE = 30
SAMPLES_PAGE_SIZE = 50
RECENT_DATASETS = 5
REASON_LABELS = {
    "planted_flaw": "Task with a planted flaw (a test of the review, never trained on)",
    "benchmark_task": "Task of a benchmark version (contamination guard)",
    "benchmark_duplicate": "Same as, or a paraphrase of, a benchmark version's task (contamination guard)",
    "unverified_history": "An assistant turn no recorded call answered (history guard)",
    "excluded_by_rules": "Excluded when the trajectory was rebuilt",
    "incomplete": "Incomplete interaction",
    "no_reward": "No reward",
    "below_min_reward": "Reward below the threshold",
    "too_long": "Too many tokens",
    "near_duplicate": "Near-duplicate (same task, same conversation)",
}


def is_live(dataset: TrainingDataset) -> bool:
    return dataset.status == TrainingDataset.Status.BUILDING


# --- messages JSONL (the `messages` export, streamed) ------------------------------------------------------------


def iter_messages_jsonl(dataset: TrainingDataset, split: str | None = None):
    """One JSON line per sample, in order: {"messages": […], "tools": […]} (what TRL, OpenRLHF and LLaMA-Factory
    read), messages normalised as `export_dataset --format messages` writes them (masks.chat_messages). Read in
    chunks, so a large dataset streams without being held in memory."""
    samples = DatasetSample.objects.filter(dataset=dataset).order_by("position")
    if split:
        samples = samples.filter(split=split)
    rows = samples.values_list("trajectory__messages", "trajectory__tools")
    for messages_, tools in rows.iterator(chunk_size=200):
        yield json.dumps({"messages": chat_messages(messages_), "tools": tools or []}, ensure_ascii=False) + "\n"


@viewer_required
@require_GET
def dataset_messages(request, pk: int):
    dataset = get_object_or_404(TrainingDataset, pk=pk, status=TrainingDataset.Status.READY)
    split = request.GET.get("split") if request.GET.get("split") in DatasetSample.Split.values else None
    response = StreamingHttpResponse(iter_messages_jsonl(dataset, split), content_type="application/x-ndjson")
    name = f"dataset-{dataset.pk}{'-' + split if split else ''}-messages.jsonl"
    response["Content-Disposition"] = content_disposition_header(True, name)
    return response


# --- the list and the panel --------------------------------------------------------------------------------------


def dataset_rows(queryset):
    return queryset.select_related("created_by").defer("stats", "selection")


def with_totals(dataset_list) -> list:
    """Each dataset with its .left_out (trajectories excluded, all reasons) and .empty_reason (an empty one's)."""
    dataset_list = list(dataset_list)
    for dataset in dataset_list:
        dataset.left_out = sum((dataset.excluded or {}).values())
        dataset.empty_reason = datasets.empty_reason(dataset)
    return dataset_list


def recent_context() -> dict:
    recent = with_totals(dataset_rows(TrainingDataset.objects.all())[:RECENT_DATASETS])
    return {"recent": recent, "unfinished": any(is_live(d) for d in recent)}


def dashboard_panel_context(request) -> dict | None:
    """The dashboard's "Training data" panel: a small build form for admins and the recent datasets."""
    if not has_role(request.user, VIEWER):
        return None
    return {"form": BuildDatasetForm() if has_role(request.user, ADMIN) else None, **recent_context()}


@viewer_required
@require_GET
def dataset_list(request):
    return render_list(
        request,
        "training_jobs/datasets.html",
        dataset_rows(TrainingDataset.objects.all()),
        partial="datasets",
        context={"nav": "training"},
        per_page=DATASETS_PAGE_SIZE,
        statuses=TrainingDataset.Status.choices,
        is_live=is_live,
        rows=with_totals,
    )


@viewer_required
@require_GET
def recent_datasets(request):
    """The dashboard panel's recent datasets (it polls this while one of them builds)."""
    return render_page(request, "training_jobs/_datasets_recent.html", recent_context())


# --- building ----------------------------------------------------------------------------------------------------


def _build_page(request, form, status=200):
    return render_page(request, "training_jobs/datasets_build.html", {"nav": "training", "form": form}, status=status)


@admin_required
@require_http_methods(["GET", "POST"])
def dataset_build(request):
    if request.method == "GET":
        initial = {k: v for k, v in request.GET.items() if k in BuildDatasetForm.base_fields}
        for key in ("eval_runs", "groups"):
            if key in request.GET:
                initial[key] = request.GET.getlist(key)
        return _build_page(request, BuildDatasetForm(initial=initial))
    form = BuildDatasetForm(request.POST)
    if not form.is_valid():
        return _build_page(request, form, status=400)
    try:
        dataset = datasets.start_build(user=request.user, **form.build_settings())
    except datasets.DatasetError as exc:
        form.add_error(None, str(exc))
        return _build_page(request, form, status=400)
    except JobEngineError as exc:
        messages.error(request, f"The dataset was created but its build could not be queued: {exc}")
        return redirect("training:datasets")
    messages.success(request, f"Building dataset #{dataset.pk}: this page shows it once it is ready.")
    return redirect("training:dataset", pk=dataset.pk)


# --- one dataset -------------------------------------------------------------------------------------------------


def count_chart(buckets: list[dict], *, label: str, y_title: str, x_title: str) -> dict:
    """The data static/js/charts.js draws: a histogram as bars."""
    return {
        "type": "bar",
        "labels": [b["label"] for b in buckets],
        "datasets": [{"label": label, "data": [b["count"] for b in buckets]}],
        "y": {"min": 0, "title": y_title},
        "x": {"title": x_title},
        "integers": True,
    }


def _metric_rows(stats: dict) -> list[dict]:
    rows = []
    metrics = stats.get("metrics") or {}
    for key, _ in METRICS:  # in this order: PostgreSQL's jsonb keeps no key order
        if key not in metrics:
            continue
        figures = metrics[key]
        rows.append(
            {
                **figures,
                "key": key,
                "chart_id": f"chart-{key}",
                "chart": count_chart(
                    figures["histogram"], label="trajectories", y_title="trajectories", x_title=figures["label"].lower()
                ),
            }
        )
    return rows


def _exclusion_rows(dataset: TrainingDataset) -> list[dict]:
    rows = []
    for reason, count in (dataset.excluded or {}).items():
        kind = datasets.exclusion_kind(reason)
        detail = reason.split(":", 1)[1] if ":" in reason else ""
        rows.append(
            {"reason": reason, "kind": kind, "label": REASON_LABELS.get(kind, kind), "detail": detail, "count": count}
        )
    return sorted(rows, key=lambda r: (-r["count"], r["reason"]))  # jsonb keeps no key order


def _dataset_context(request, dataset: TrainingDataset) -> dict:
    stats = dataset.stats or {}
    samples = dataset.samples.select_related("trajectory__rollout").only(
        "position",
        "split",
        "task_external_id",
        "reward",
        "tokens",
        "trajectory__rollout__id",
        "trajectory__rollout__eval_run_id",
        "trajectory__stats",
    )
    split = request.GET.get("split", "")
    if split in DatasetSample.Split.values:
        samples = samples.filter(split=split)
    sample_page = Paginator(samples.order_by("position"), SAMPLES_PAGE_SIZE).get_page(request.GET.get("page"))
    reward = stats.get("reward") or {}
    assistant = (stats.get("assistant_tokens") or {}).get("histogram") or []
    assistant_chart = count_chart(assistant, label="trajectories", y_title="trajectories", x_title="assistant tokens")
    return {
        "nav": "training",
        "dataset": dataset,
        "stats": stats,
        "metric_rows": _metric_rows(stats),
        "reward_chart": count_chart(
            reward.get("histogram") or [], label="trajectories", y_title="trajectories", x_title="reward"
        ),
        "exclusions": _exclusion_rows(dataset),
        "excluded_total": sum((dataset.excluded or {}).values()),
        "sample_page": sample_page,
        "sample_split": split,
        "live": is_live(dataset),
        "selection": dataset.selection,
        "selection_groups": _named_groups(dataset.selection.get("groups") or []),
        "empty_reason": datasets.empty_reason(dataset),
        "is_admin": has_role(request.user, ADMIN),
        "built": dataset.status in (TrainingDataset.Status.READY, TrainingDataset.Status.EMPTY),
        "counted_with": _counted_with(dataset),
        "assistant_chart": assistant_chart,
    }


def _named_groups(groups: list[str]) -> list[tuple[str, str]]:
    """The selection's rollout groups with what made them (a group whose rollouts are gone keeps its id)."""
    if not groups:
        return []
    names = dict(rollout_groups(groups))
    return [(group, names.get(group, group)) for group in groups]


def _counted_with(dataset: TrainingDataset) -> str:
    """What counted the samples' tokens, as everyone may see it (a folder's last part only: paths are admins')."""
    if not dataset.tokenized:
        return ""
    if dataset.base_model_id:
        return f"the base model {dataset.base_model}"
    return f"the model folder …/{dataset.tokenizer_path.rstrip('/').rsplit('/', 1)[-1]}"


@viewer_required
@require_GET
def dataset_detail(request, pk: int):
    dataset = get_object_or_404(
        TrainingDataset.objects.select_related(
            "created_by", "override_by", "unverified_history_by", "job_run", "base_model"
        ),
        pk=pk,
    )
    return render_page(
        request, "training_jobs/datasets_detail.html", _dataset_context(request, dataset), partial="live"
    )
