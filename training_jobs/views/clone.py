"""The clone page of a training run (admins): the run's whole config as key=value lines to edit, then a new run with
the lines that changed as its edits (training_jobs.services.runs.clone_training_run: the same dataset or tasks, base model,
preset and CPU choice), refused with the reason when the edits or the run's checks say no, as a new run is."""

import json

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_http_methods

from accounts.decorators import admin_required
from jobs.engine import JobEngineError
from lib.htmx import render_page

from ..forms import CloneRunForm, config_value
from ..kinds import TrainingRunError, known_keys
from ..models import TrainingRun
from ..services import runs


def config_lines(config: dict) -> str:
    """The config's keys as `key=value` lines, each value as the edits read it back (JSON; a plain string bare). An
    RL run's tasks and mix tasks are given apart from the config: they are not among the lines."""
    lines = []
    for key in known_keys({k: v for k, v in config.items() if k not in ("tasks", "mix_tasks")}):
        value = config_value(config, key)
        lines.append(f"{key}={value if isinstance(value, str) and not _reads_as_json(value) else json.dumps(value)}")
    return "\n".join(lines)


def _reads_as_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@admin_required
@require_http_methods(["GET", "POST"])
def run_clone(request, pk: int):
    run = get_object_or_404(TrainingRun.objects.select_related("dataset", "base_model"), pk=pk)
    if request.method == "GET":
        form = CloneRunForm(run, initial={"overrides": config_lines(run.config)})
    else:
        form = CloneRunForm(run, request.POST)
        if form.is_valid():
            try:
                clone = runs.clone_training_run(run, form.cleaned_data["overrides"], user=request.user)
            except TrainingRunError as exc:
                form.add_error(None, str(exc))
            except JobEngineError as exc:
                form.add_error(None, f"The job engine did not take the run: {exc}")
            else:
                edits = form.cleaned_data["overrides"]
                messages.success(
                    request,
                    f"Run #{clone.pk} queued: a clone of #{run.pk}"
                    f"{' with ' + ', '.join(edits) + ' edited' if edits else ', unchanged'}.",
                )
                for warning in getattr(clone, "warnings", []):  # what its checks found it trains on less than asked
                    messages.warning(request, f"Run #{clone.pk}: {warning}.")
                return redirect("training:run", pk=clone.pk)
    context = {"nav": "training", "run": run, "form": form}
    return render_page(request, "training_jobs/runs_clone.html", context, status=400 if form.errors else 200)
