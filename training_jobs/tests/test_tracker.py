"""A training run that reports to TensorBoard as well: `train --report-to tensorboard` trains the tiny model two steps
and the event files under the run's folder hold the losses ClawGym's own curves hold (read back with TensorBoard's
EventAccumulator); the run page gives the command that opens them; the API and the form take the choice; a run
without it writes none."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from training_jobs.folders import run_dir, tensorboard_dir
from training_jobs.models import TrainingMetric, TrainingRun

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("training_dir")]
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def train(dataset, tiny_model_path, *extra) -> TrainingRun:
    out = StringIO()
    args = ["--kind", "sft", "--dataset", str(dataset.pk), "--base-model", tiny_model_path, "--preset", "tiny-cpu"]
    call_command("train", *args, "--cpu", "--here", "--json", *extra, stdout=out, stderr=StringIO())
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    run = TrainingRun.objects.get(pk=report["run"])
    assert report["status"] == "succeeded" and report["steps"] == 2, run.log_tail
    return run


def test_two_steps_write_tensorboard_events_with_the_runs_losses(dataset, tiny_model_path, admin_client):
    run = train(dataset, tiny_model_path, "--report-to", "tensorboard")
    assert run.report_to == "tensorboard"
    folder = tensorboard_dir(run)
    events = list(folder.rglob("events.out.tfevents.*"))
    assert events and all(e.is_relative_to(run_dir(run)) for e in events)
    accumulator = event_accumulator.EventAccumulator(str(events[0].parent))
    accumulator.Reload()
    losses = [(e.step, e.value) for e in accumulator.Scalars("train/loss")]
    ours = [(m.step, m.values["loss"]) for m in TrainingMetric.objects.filter(run=run).order_by("step")]
    ours = [(step, loss) for step, loss in ours if loss is not None]
    assert [step for step, _ in losses] == [step for step, _ in ours] == [1, 2]
    assert [round(v, 4) for _, v in losses] == [round(v, 4) for _, v in ours]
    html = admin_client.get(reverse("training:run", args=[run.pk])).content.decode()
    assert 'id="run-tensorboard"' in html and f"tensorboard --logdir {folder}" in html


def test_a_run_reports_to_clawgym_only_unless_asked(dataset, tiny_model_path, admin_user, api_as, admin_client):
    run = train(dataset, tiny_model_path)
    assert run.report_to == "none" and not tensorboard_dir(run).exists()
    html = admin_client.get(reverse("training:run", args=[run.pk])).content.decode()
    assert 'id="run-tensorboard"' not in html
    body = {"dataset": dataset.pk, "base_model_path": tiny_model_path, "preset": "tiny-cpu", "cpu": True}
    api = api_as(admin_user)
    refused = api.post("/api/training/runs/", {**body, "report_to": "wandb"}, format="json")
    assert refused.status_code == 400 and "report_to" in refused.json()
    started = api.post("/api/training/runs/", {**body, "report_to": "tensorboard"}, format="json")
    assert started.status_code == 201, started.content
    assert TrainingRun.objects.get(pk=started.json()["id"]).report_to == "tensorboard"
    assert api.get(f"/api/training/runs/{started.json()['id']}/").json()["report_to"] == "tensorboard"
    form = {"dataset": dataset.pk, "base_model_path": tiny_model_path, "preset": "tiny-cpu", "cpu": "on"}
    response = admin_client.post(reverse("training:run-start"), {**form, "report_to": "tensorboard"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert TrainingRun.objects.order_by("-pk").first().report_to == "tensorboard"
