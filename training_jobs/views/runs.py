"""Pages of training runs: the list (running ones with progress, refreshing themselves), the start forms (admins:
SFT on a dataset, RL on tasks), one run's page (its whole config, live curves with a table beside — loss, validation
loss and learning rate for SFT; reward mean ± std, loss, groups dropped, inexact samples and rollout times per step and
each step's rollouts for RL —, logs, checkpoints with their evaluation scores, the score-per-checkpoint chart against
the base model, actions), several runs' curves overlaid, and the dashboard panel.

State changes are training_jobs.services.runs' and training_jobs.serving's; these views validate and call them.
"""

import json
import shlex

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import admin_required, viewer_required
from accounts.roles import ADMIN, has_role
from benchmarks.models import BenchmarkVersion
from jobs.engine import JobEngineError
from jobs.workers import queue_wait
from lib.bounds import parse_id
from lib.htmx import render_page
from lib.listing import render_list

from ..evaluations import (
    EvaluationError,
    checkpoint_eval_runs,
    evaluation_job,
    expectations,
    latest_score,
    request_evaluation,
)
from ..folders import tensorboard_dir
from ..forms import StartRLRunForm, StartRunForm
from ..kinds import TrainingRunError, get_kind, rl_pages
from ..models import Checkpoint, TrainingRun
from ..overlay import MAX_RUNS, overlay
from ..services import runs
from ..serving import current_server, request_serving

RUNS_SHOWN = 50


def progress(run: TrainingRun) -> dict:
    total = run.total_steps or 0
    return {"done": run.steps, "total": total, "percent": round(100 * run.steps / total) if total else None}


def run_rows(queryset) -> list[dict]:
    return [
        {
            "run": run,
            "progress": progress(run),
            "score": latest_score(run),
            "reward": rl_pages.latest_reward(run) if run.kind == TrainingRun.Kind.RL else None,
        }
        for run in queryset
    ]


@viewer_required
@require_GET
def run_list(request):
    return render_list(
        request,
        "training_jobs/runs.html",
        TrainingRun.objects.select_related("dataset", "base_model"),
        partial="runs",
        context={"nav": "training", "is_admin": has_role(request.user, ADMIN)},
        per_page=RUNS_SHOWN,
        statuses=TrainingRun.Status.choices,
        is_live=lambda run: not run.is_finished,
        rows=run_rows,
    )


@viewer_required
@require_GET
def run_overlay(request):
    """?run=ID&run=ID…: those runs' curves on one chart each (training loss, validation loss, mean reward, learning
    rate; training_jobs.overlay), with each run's last and best values beside; the recent runs to pick from."""
    asked = list(dict.fromkeys(pk for pk in map(parse_id, request.GET.getlist("run")) if pk is not None))
    # Oldest first, whatever order they were ticked in: the same runs get the same colours every time.
    picked = list(TrainingRun.objects.filter(pk__in=asked[:MAX_RUNS]).order_by("pk"))
    context = {
        "nav": "training",
        "picked": picked,
        "picked_ids": {run.pk for run in picked},
        "overlay": overlay(picked) if picked else None,
        "left_out": len(asked) - len(asked[:MAX_RUNS]),
        "max_runs": MAX_RUNS,
        "choices": TrainingRun.objects.select_related("dataset")[:RUNS_SHOWN],
        "live": any(not run.is_finished for run in picked),  # the curves refresh themselves while one trains
    }
    return render_page(request, "training_jobs/runs_overlay.html", context, partial="curves")


@admin_required
@require_http_methods(["GET", "POST"])
def run_start(request):
    def start(data):
        return runs.start_training_run(
            kind="sft",
            dataset=data["dataset"],
            base_model=data["base_model"],
            base_model_path=data["base_model_path"],
            preset=data["preset"],
            overrides=data["edits"],
            cpu=data["cpu"],
            report_to=data["report_to"],
            user=request.user,
        )

    return _start_page(request, StartRunForm, start, "training_jobs/runs_start.html", get_kind("sft").title)


@admin_required
@require_http_methods(["GET", "POST"])
def rl_run_start(request):
    def start(data):
        return runs.start_training_run(
            kind="rl",
            tasks=data["revisions"],
            mix_tasks=data["mix_revisions"],
            harness=data["harness"],
            base_model=data["base_model"],
            base_model_path=data["base_model_path"],
            preset=data["preset"],
            overrides=data["edits"],
            cpu=data["cpu"],
            report_to=data["report_to"],
            user=request.user,
        )

    return _start_page(request, StartRLRunForm, start, "training_jobs/runs_start_rl.html", get_kind("rl").title)


def _start_page(request, form_class, start, template: str, what: str):
    """A start form: on a valid POST `start(cleaned_data)` queues the run and the run's page follows; refusals
    (the run's own rules, a job engine that did not take it) are the form's errors."""
    form = form_class(request.POST or None, initial=request.GET or None)
    if request.method == "POST" and form.is_valid():
        try:
            run = start(form.cleaned_data)
        except TrainingRunError as exc:
            form.add_error(None, str(exc))
        except JobEngineError as exc:
            form.add_error(None, f"The job engine did not take the run: {exc}")
        else:
            messages.success(request, f"{what} #{run.pk} queued on the gpu queue.")
            _warn(request, run)
            return redirect("training:run", pk=run.pk)
    return render_page(request, template, {"nav": "training", "form": form}, status=400 if form.errors else 200)


def _warn(request, run: TrainingRun) -> None:
    """What the run's checks found it trains on less than asked (runs.start_training_run's warnings)."""
    for warning in getattr(run, "warnings", []):
        messages.warning(request, f"Run #{run.pk}: {warning}.")


def checkpoint_scores(run: TrainingRun) -> tuple[list[dict], dict | None]:
    """Each checkpoint with its evaluations' scores, and the score-per-checkpoint chart (overall and per category)
    against the base model's evaluation."""
    rows, labels, overall, categories = [], [], [], {}
    for checkpoint in run.checkpoints.order_by("step").prefetch_related("servers__endpoint"):
        rows.append(checkpoint_row(checkpoint))
        scored = [e for e in rows[-1]["evaluations"] if e.overall_mean is not None]
        if scored:
            labels.append(f"step {checkpoint.step}")
            overall.append(scored[0].overall_mean)
            for name, score in _category_scores(scored[0]).items():
                categories.setdefault(name, {})[len(labels) - 1] = score
    if not labels:
        return rows, None
    datasets = [{"label": "checkpoint", "data": overall}]
    base = run.base_eval_run
    if base is not None and base.overall_mean is not None:
        datasets.append({"label": "base model", "data": [base.overall_mean] * len(labels)})
    for name, by_index in sorted(categories.items()):
        datasets.append({"label": name, "data": [by_index.get(i) for i in range(len(labels))]})
    chart = {
        "type": "line",
        "labels": labels,
        "datasets": datasets,
        "y": {"min": 0, "max": 1, "title": "score"},
        "x": {"title": "checkpoint"},
    }
    return rows, chart


def checkpoint_row(checkpoint: Checkpoint) -> dict:
    """A checkpoint's row: its evaluations, and its latest server (starting, ready, failed or stopped)."""
    evaluations = list(checkpoint_eval_runs(checkpoint))
    server = next(iter(checkpoint.servers.all()), None)  # newest first (the model's ordering)
    return {"checkpoint": checkpoint, "evaluations": evaluations, "server": server}


def _category_scores(eval_run) -> dict:
    scores = getattr(eval_run, "category_scores", None) or (getattr(eval_run, "summary", None) or {}).get("categories")
    if isinstance(scores, dict):
        return {
            str(k): (v.get("mean") if isinstance(v, dict) else v)
            for k, v in scores.items()
            if isinstance(v, int | float) or (isinstance(v, dict) and isinstance(v.get("mean"), int | float))
        }
    return {}


def _run_context(request, run: TrainingRun) -> dict:
    kind = get_kind(run.kind)
    checkpoints, score_chart = checkpoint_scores(run)
    context = {
        "nav": "training",
        "run": run,
        "progress": progress(run),
        "checkpoints": checkpoints,
        "score_chart": score_chart,
        "config_json": json.dumps(run.config, indent=2, sort_keys=True),
        "is_admin": has_role(request.user, ADMIN),
        "live": not run.is_finished or _evaluating(run),
        "versions": BenchmarkVersion.objects.select_related("benchmark")[:50],
    }
    if run.report_to == "tensorboard":
        # The command that opens it, run where the training folder is (a path only admins see, as elsewhere).
        context["tensorboard_command"] = f"tensorboard --logdir {shlex.quote(str(tensorboard_dir(run)))}"
    if context["is_admin"] and checkpoints:
        context["expect"] = expectations(run)  # what each harness is expected to do against the run's servers
    if run.status == TrainingRun.Status.QUEUED:
        context["wait"] = queue_wait(run.job_run)  # no worker on the gpu queue, or the runs before it
    context["kind_part"] = kind.page_template  # the kind's sections: SFT's curves, RL's rewards and rollouts
    context.update(kind.page_context(run, request.GET))
    return context


def _evaluating(run: TrainingRun) -> bool:
    return evaluation_job(run) is not None


@viewer_required
@require_GET
def run_detail(request, pk: int):
    run = get_object_or_404(TrainingRun.objects.select_related("dataset", "base_model", "job_run"), pk=pk)
    return render_page(request, "training_jobs/runs_detail.html", _run_context(request, run), partial="live")


@admin_required
@require_POST
def run_action(request, pk: int, action: str):
    run = get_object_or_404(TrainingRun, pk=pk)
    try:
        if action == "cancel":
            runs.cancel_training_run(run, user=request.user)
            messages.success(request, f"Run #{run.pk} cancelled.")
        elif action == "resume":
            run = runs.resume_training_run(run, user=request.user)
            where = (
                f"checkpoint step {run.resumed_from.step}" if run.resumed_from else "the start (it has no checkpoint)"
            )
            messages.success(request, f"Run #{run.pk} queued again from {where}.")
        elif action == "serve":
            return _serve(request, run)
        elif action == "evaluate":
            return _evaluate(request, run)
        else:
            messages.error(request, f"Unknown action {action!r}.")
    except TrainingRunError as exc:
        messages.error(request, str(exc))
    except JobEngineError as exc:
        messages.error(request, f"The job engine did not take it: {exc}")
    return redirect("training:run", pk=run.pk)


def _evaluate(request, run: TrainingRun):
    """Queue the evaluate job on a gpu worker and answer at once with its link; the page polls while it runs and its
    checkpoint table fills as the evaluation runs start."""
    pk = parse_id(request.POST.get("version", ""))
    if pk is None:
        raise Http404("no such benchmark version")
    version = get_object_or_404(BenchmarkVersion, pk=pk)
    try:
        job_run = request_evaluation(run, version, user=request.user, harness=request.POST.get("harness") or None)
    except EvaluationError as exc:
        messages.error(request, str(exc))
    except JobEngineError as exc:
        messages.error(request, f"The job engine did not take it: {exc}")
    else:
        messages.success(
            request,
            format_html(
                'Evaluating every checkpoint on {} on a gpu worker: <a href="{}">job #{}</a>; the evaluation runs appear '
                "below as they start.",
                version,
                reverse("jobs:detail", args=[job_run.pk]),
                job_run.pk,
            ),
        )
    return redirect("training:run", pk=run.pk)


def _serve(request, run: TrainingRun):
    """Queue the checkpoint's server on a gpu worker (or find the one starting or up) and answer at once: htmx gets
    the checkpoint's row, which polls until the server is ready or failed; a plain form post the run page."""
    pk = parse_id(request.POST.get("checkpoint", ""))
    if pk is None:
        raise Http404("no such checkpoint")
    checkpoint = get_object_or_404(Checkpoint, pk=pk, run=run)
    error = ""
    try:
        server = request_serving(checkpoint, user=request.user)
    except JobEngineError as exc:
        error = f"The job engine did not take it: {exc}"
    if request.htmx:
        return _checkpoint_row_response(request, run, checkpoint, error=error)
    if error:
        messages.error(request, error)
    elif server.status == server.Status.READY:
        messages.success(request, f"Step {checkpoint.step} is served as {server.endpoint.name}.")
    else:
        messages.success(request, f"Step {checkpoint.step}: server #{server.pk} starting on a gpu worker.")
    return redirect("training:run", pk=run.pk)


@viewer_required
@require_GET
def checkpoint_server(request, pk: int, checkpoint: int):
    """A checkpoint's row (htmx polls it while its server starts); a plain request goes to the run page."""
    run = get_object_or_404(TrainingRun, pk=pk)
    found = get_object_or_404(Checkpoint, pk=checkpoint, run=run)
    if not request.htmx:
        return redirect("training:run", pk=run.pk)
    latest = found.servers.first()
    if latest is not None and latest.status == latest.Status.STARTING:
        current_server(found)  # a row whose job ended without it coming up is marked failed (the polling stops)
    return _checkpoint_row_response(request, run, found)


def _checkpoint_row_response(request, run: TrainingRun, checkpoint: Checkpoint, *, error: str = ""):
    checkpoint = Checkpoint.objects.prefetch_related("servers__endpoint").get(pk=checkpoint.pk)
    context = {
        "run": run,
        "row": checkpoint_row(checkpoint),
        "is_admin": has_role(request.user, ADMIN),
        "serve_error": error,
    }
    return TemplateResponse(request, "training_jobs/_checkpoint_row.html", context)


def dashboard_panel_context(request) -> dict | None:
    """The dashboard's "Training runs" panel: the start forms (SFT, RL) for admins, the latest runs with their
    progress (and an RL run's latest mean reward)."""
    if not request.user.is_authenticated:
        return None
    recent = TrainingRun.objects.select_related("dataset")[:5]
    rows = run_rows(recent)
    admin = has_role(request.user, ADMIN)
    return {
        "form": StartRunForm() if admin else None,
        "rl_form": StartRLRunForm() if admin else None,
        "rows": rows,
        "unfinished": any(not r["run"].is_finished for r in rows),
    }


@viewer_required
@require_GET
def runs_panel(request):
    """The panel's rows (it polls this while a run trains)."""
    context = dashboard_panel_context(request)
    return render_page(request, "training_jobs/_runs_panel_rows.html", {"panel": context})
