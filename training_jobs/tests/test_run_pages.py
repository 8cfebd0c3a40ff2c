"""The run pages: the list, the start form (admins), the run page with its config, curves, table, log and
checkpoints, the dashboard panel. Metrics and checkpoints are rows as the job writes them (the trainer itself is
test_sft_runs')."""

import json
from html import unescape

import pytest
from django.urls import reverse

from training_jobs.models import Checkpoint, TrainingMetric, TrainingRun
from training_jobs.services.runs import start_training_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(dataset, tiny_model_path):
    run = start_training_run(
        kind="sft",
        dataset=dataset,
        base_model_path=tiny_model_path,
        preset="tiny-cpu",
        cpu=True,
        enqueue=False,
        user=None,
    )
    # A server folder as a deployment has them (the path tests below look for it).
    TrainingRun.objects.filter(pk=run.pk).update(
        status="running", steps=2, total_steps=4, log_tail="step 2 done\n", base_model_path="/models/tiny"
    )
    for step, loss in [(1, 5.25), (2, 4.75)]:
        TrainingMetric.objects.create(run=run, step=step, epoch=step / 4, values={"loss": loss, "learning_rate": 1e-3})
    Checkpoint.objects.create(
        run=run, step=2, path="/tmp/run/checkpoint-2", sha256="ab" * 32, size_bytes=2048, metrics={"loss": 4.75}
    )
    run.refresh_from_db()
    return run


def test_the_run_page_shows_config_curves_table_log_and_checkpoints(viewer_client, run):
    page = viewer_client.get(reverse("training:run", args=[run.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert '"learning_rate": 0.001' in unescape(html) and '"max_length": 2048' in unescape(html)  # the whole config
    assert 'data-chart="chart-loss"' in html and 'data-chart="chart-lr"' in html
    loss = json.loads(html.split('id="chart-loss" type="application/json">')[1].split("</script>")[0])
    assert loss["labels"] == [1, 2] and loss["datasets"][0]["data"] == [5.25, 4.75]
    assert "4.7500" in html and "…/checkpoint-2" in html and "step 2 done" in html  # the path is admins' (below)
    assert 'hx-trigger="every 2s"' in html  # running: it refreshes itself
    partial = viewer_client.get(reverse("training:run", args=[run.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert partial.startswith('\n<div id="run-live"') or partial.lstrip().startswith('<div id="run-live"')
    assert 'id="run-config"' not in partial
    assert "Cancel" not in html  # not an admin


def test_the_list_and_the_admin_actions(admin_client, run):
    html = admin_client.get(reverse("training:runs")).content.decode()
    assert f"#{run.pk}" in html and 'value="2"' in html and 'hx-trigger="every 2s"' in html
    page = admin_client.get(reverse("training:run", args=[run.pk])).content.decode()
    assert "Cancel" in page and "Clone" in page and "Serve" in page
    response = admin_client.post(reverse("training:run-action", args=[run.pk, "cancel"]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_admins_start_a_run_from_the_form(admin_client, viewer_client, dataset, tiny_model_path):
    assert viewer_client.get(reverse("training:run-start")).status_code == 403
    refused = admin_client.post(
        reverse("training:run-start"),
        {"dataset": dataset.pk, "base_model_path": "/m", "preset": "paper", "overrides": "lora.rank=8"},
    )
    assert refused.status_code == 400 and "unknown config key" in refused.content.decode()
    response = admin_client.post(
        reverse("training:run-start"),
        {
            "dataset": dataset.pk,
            "base_model_path": tiny_model_path,
            "preset": "tiny-cpu",
            "cpu": "on",
            "overrides": "max_steps=3\nlearning_rate=0.002",
        },
    )
    run = TrainingRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("training:run", args=[run.pk])
    assert run.config["max_steps"] == 3 and run.config["learning_rate"] == 0.002 and run.cpu
    assert run.job_run.queue == "gpu"


def test_the_dashboard_panel(admin_client, run):
    html = admin_client.get("/").content.decode()
    assert 'id="training-runs-panel"' in html and "Start a training run" in html and f"#{run.pk}" in html


def test_the_api_starts_lists_and_shows_runs(api_as, dataset, viewer, tiny_model_path):
    from accounts.testing import make_user

    admin = api_as(make_user("api-admin", "admin"))
    refused = admin.post(
        "/api/training/runs/",
        {"dataset": dataset.pk, "base_model_path": "/m", "overrides": {"lora.rank": 8}},
        format="json",
    )
    assert refused.status_code == 400 and "unknown config key" in refused.json()["detail"]
    created = admin.post(
        "/api/training/runs/",
        {
            "dataset": dataset.pk,
            "base_model_path": tiny_model_path,
            "preset": "tiny-cpu",
            "overrides": {"max_steps": 3},
            "cpu": True,
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["config"]["max_steps"] == 3 and body["status"] == "queued" and body["warnings"] == []
    assert body["report"] == {
        "run": body["id"],
        "status": "queued",
        "steps": 0,
        "checkpoints": [],
        "metrics": {"loss": []},
    }
    reader = api_as(viewer)
    assert [row["id"] for row in reader.get("/api/training/runs/").json()["results"]] == [body["id"]]
    assert reader.post(f"/api/training/runs/{body['id']}/cancel/").status_code == 403
    cancelled = admin.post(f"/api/training/runs/{body['id']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


def test_server_paths_are_for_admins_only(api_as, admin_user, viewer, admin_client, viewer_client, run):
    from training_jobs.models import ModelServer

    TrainingRun.objects.filter(pk=run.pk).update(
        output_dir="/srv/clawgym/training/run-9/output",
        error="the trainer exited with 1: /srv/clawgym/training/run-9/x.json",
    )
    checkpoint = Checkpoint.objects.get(run=run)
    ModelServer.objects.create(checkpoint=checkpoint, status="failed", error="exited (log: /srv/clawgym/serve.log)")
    urls = [
        f"/api/training/runs/{run.pk}/",
        "/api/training/runs/",
        f"/api/training/checkpoints/{checkpoint.pk}/",
        "/api/training/checkpoints/",
        f"/api/training/servers/?checkpoint={checkpoint.pk}",
    ]
    secret = ("/srv/clawgym", "/tmp/run", "/models/tiny")
    for url in urls:
        seen = api_as(viewer).get(url)
        assert seen.status_code == 200 and not any(path in seen.content.decode() for path in secret), url
    detail = api_as(viewer).get(f"/api/training/runs/{run.pk}/").json()
    assert (detail["base_model_path"], detail["output_dir"]) == ("…/tiny", "…/output")
    assert detail["checkpoints"][0]["path"] == "…/checkpoint-2" == detail["report"]["checkpoints"][0]["path"]
    page = viewer_client.get(reverse("training:run", args=[run.pk])).content.decode()
    assert not any(path in page for path in secret) and "…/checkpoint-2" in page

    # Admins run the servers: they see every path in full, on the API and the page.
    full = api_as(admin_user).get(f"/api/training/runs/{run.pk}/").json()
    assert (full["base_model_path"], full["output_dir"]) == ("/models/tiny", "/srv/clawgym/training/run-9/output")
    assert full["checkpoints"][0]["path"] == "/tmp/run/checkpoint-2" == full["report"]["checkpoints"][0]["path"]
    assert "/srv/clawgym/serve.log" in api_as(admin_user).get(urls[-1]).content.decode()
    assert "/tmp/run/checkpoint-2" in admin_client.get(reverse("training:run", args=[run.pk])).content.decode()


def test_clone_opens_the_config_and_queues_the_changed_lines_as_edits(
    admin_client, viewer_client, run, tiny_model_path
):
    page = admin_client.get(reverse("training:run-clone", args=[run.pk]))
    html = unescape(page.content.decode())
    assert page.status_code == 200 and '<label for="id_overrides">Config (one key=value a line)</label>' in html
    assert "learning_rate=0.001\n" in html and "lr_scheduler_type=cosine\n" in html and "lora.r=64\n" in html
    assert viewer_client.get(reverse("training:run-clone", args=[run.pk])).status_code == 403
    lines = html.split('name="overrides"')[1].split(">", 1)[1].split("</textarea>")[0].strip().splitlines()
    edited = [("learning_rate=0.002" if line.startswith("learning_rate=") else line) for line in lines]
    refused = admin_client.post(reverse("training:run-clone", args=[run.pk]), {"overrides": "lora.rank=8"})
    assert refused.status_code == 400 and "unknown config key" in refused.content.decode()
    # The run's own checks: the fixture's base model path is no model folder here.
    refused = admin_client.post(reverse("training:run-clone", args=[run.pk]), {"overrides": "\n".join(edited)})
    assert refused.status_code == 400 and "the base model" in refused.content.decode()
    TrainingRun.objects.filter(pk=run.pk).update(base_model_path=tiny_model_path)
    response = admin_client.post(reverse("training:run-clone", args=[run.pk]), {"overrides": "\n".join(edited)})
    clone = TrainingRun.objects.get(cloned_from=run)
    assert response.status_code == 302 and response["Location"] == reverse("training:run", args=[clone.pk])
    assert clone.config == {**run.config, "learning_rate": 0.002} and clone.cpu and clone.job_run.queue == "gpu"


@pytest.mark.parametrize("body", ['"sft"', "[1, 2]", "null", "3"])
def test_the_api_refuses_a_start_that_is_not_an_object(api_as, admin_user, body):
    refused = api_as(admin_user).post("/api/training/runs/", body, content_type="application/json")
    assert refused.status_code == 400, refused.content
    assert not TrainingRun.objects.exists()
