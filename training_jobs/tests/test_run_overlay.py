"""Several runs' curves overlaid (training loss, validation loss, mean reward, learning rate by step), the validation
loss on an SFT run's own page, the metrics API's filters, and the job keeping a step's validation loss on that step's
row. Metrics are rows as the job writes them; the trainer evaluating the validation split is test_validation_loss'."""

import json

import pytest
from django.conf import settings
from django.urls import reverse

from training_jobs.models import TrainingMetric, TrainingRun
from training_jobs.overlay import COLORS, MAX_RUNS
from training_jobs.run_jobs import _Stream
from training_jobs.testing.runs import make_run

pytestmark = pytest.mark.django_db

OVERLAY = reverse("training:runs-overlay")


@pytest.fixture
def three():
    """`plain` trained without a validation split; `split` with one (eval_loss at its checkpoints, steps 2 and 4);
    `rl` an RL run whose steps log two rows each (the rollouts' figures, then the optimizer's)."""
    plain = make_run(
        "plain",
        steps={
            1: {"loss": 2.0, "learning_rate": 1e-3},
            2: {"loss": 1.5, "learning_rate": 1e-3},
            3: {"loss": 1.25, "learning_rate": 5e-4},
        },
    )
    split = make_run(
        "split",
        steps={
            1: {"loss": 3.0, "learning_rate": 2e-5},
            2: {"loss": 2.5, "learning_rate": 2e-5, "eval_loss": 2.75},
            3: {"loss": 2.0, "learning_rate": 2e-5},
            4: {"loss": 1.75, "learning_rate": 2e-5, "eval_loss": 2.25},
        },
    )
    rl = make_run(
        "rl", kind="rl", steps={1: [{"reward_mean": 0.25}, {"loss": 0.5}], 2: [{"reward_mean": 0.5}, {"loss": 0.25}]}
    )
    return plain, split, rl


def charts(html: str) -> dict:
    found = {}
    for part in html.split('<script id="chart-')[1:]:
        name, rest = part.split('" type="application/json">', 1)
        found[name] = json.loads(rest.split("</script>", 1)[0])
    return found


def test_the_runs_curves_overlaid_with_validation_loss_where_a_split_exists(viewer_client, three):
    plain, split, rl = three
    response = viewer_client.get(OVERLAY, {"run": [plain.pk, split.pk, rl.pk]})
    assert response.status_code == 200
    drawn = charts(response.content.decode())
    assert list(drawn) == ["loss", "eval_loss", "reward_mean", "learning_rate"]
    loss = drawn["loss"]
    assert loss["labels"] == [1, 2, 3, 4] and loss["y"] == {"min": 0, "title": "training loss"}
    assert [(d["label"], d["data"]) for d in loss["datasets"]] == [
        (f"#{plain.pk} plain", [2.0, 1.5, 1.25, None]),
        (f"#{split.pk} split", [3.0, 2.5, 2.0, 1.75]),
        (f"#{rl.pk} rl", [0.5, 0.25, None, None]),
    ]
    assert all(d["spanGaps"] for d in loss["datasets"])  # a run that logged no point at a step is still one line
    # The validation loss: the run with a split only, at its checkpoints, in the colour it has on every chart.
    (validation,) = drawn["eval_loss"]["datasets"]
    assert drawn["eval_loss"]["labels"] == [2, 4] and validation["data"] == [2.75, 2.25]
    assert (
        validation["label"] == f"#{split.pk} split" and validation["color"] == COLORS[1] == loss["datasets"][1]["color"]
    )
    (reward,) = drawn["reward_mean"]["datasets"]
    assert reward["data"] == [0.25, 0.5] and drawn["reward_mean"]["y"]["max"] == 1 and reward["color"] == COLORS[2]
    # Beside each chart, each run's last and best value and its step.
    html = response.content.decode()
    section = html.split('id="overlay-eval_loss"')[1].split("</section>")[0]
    assert f'<tr data-run="{split.pk}">' in section and f'<tr data-run="{plain.pk}">' not in section
    assert '<td class="num" data-testid="last">2.25</td><td class="num">2.25</td><td class="num">4</td>' in section
    reward_table = html.split('id="overlay-reward_mean"')[1].split("</section>")[0]
    assert "Highest" in reward_table and '<td class="num">0.5</td><td class="num">2</td>' in reward_table
    # The picker: every recent run, the overlaid ones ticked.
    assert f'name="run" value="{plain.pk}" id="overlay-run-{plain.pk}" checked' in html


def test_the_curves_refresh_themselves_while_a_run_trains(viewer_client, three):
    plain, split, _ = three
    finished = viewer_client.get(OVERLAY, {"run": [plain.pk, split.pk]}).content.decode()
    assert 'id="overlay-curves">' in finished and "every 5s" not in finished
    TrainingRun.objects.filter(pk=split.pk).update(status="running")
    live = viewer_client.get(OVERLAY, {"run": [plain.pk, split.pk]}).content.decode()
    assert 'hx-trigger="every 5s"' in live
    partial = viewer_client.get(OVERLAY, {"run": [plain.pk, split.pk]}, HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="overlay-curves"') and 'id="overlay-picker"' not in partial
    assert set(charts(partial)) == {"loss", "eval_loss", "learning_rate"}


def test_the_picker_alone_and_too_many_runs(viewer_client, three):
    plain, _, _ = three
    alone = viewer_client.get(OVERLAY).content.decode()
    assert "chart-" not in alone and "Overlay the ticked runs" in alone and "chart.umd" not in alone
    many = [make_run(f"r{i}", steps={1: {"loss": 1.0}}).pk for i in range(MAX_RUNS)]
    response = viewer_client.get(OVERLAY, {"run": [plain.pk, *many, "x", 99999]})
    html = response.content.decode()
    assert f"2 more runs left out: at most {MAX_RUNS} on one chart." in html
    assert len(charts(html)["loss"]["datasets"]) == MAX_RUNS
    empty = make_run("empty")
    assert "None of these runs has logged a step yet." in viewer_client.get(OVERLAY, {"run": empty.pk}).content.decode()


def test_the_runs_list_ticks_runs_for_the_overlay_and_a_run_page_links_it(viewer_client, outsider_client, three):
    plain, split, _ = three
    html = viewer_client.get(reverse("training:runs")).content.decode()
    assert f'action="{OVERLAY}" id="overlay-form"' in html
    assert f'name="run" value="{plain.pk}" form="overlay-form" id="pick-run-{plain.pk}" hx-preserve="true"' in html
    dashboard = viewer_client.get("/").content.decode()
    assert 'form="overlay-form"' not in dashboard  # the dashboard's table of runs has no ticks
    page = viewer_client.get(reverse("training:run", args=[split.pk])).content.decode()
    assert f'href="{OVERLAY}?run={split.pk}"' in page
    # The run's own loss chart has its validation loss too, and its table a column of it.
    loss = charts(page)["loss"]
    assert [d["label"] for d in loss["datasets"]] == ["loss", "validation loss"]
    assert loss["datasets"][1]["data"] == [None, 2.75, None, 2.25] and loss["datasets"][1]["spanGaps"]
    assert "<td>2.7500</td>" in page and "<td>—</td>" in page
    without = charts(viewer_client.get(reverse("training:run", args=[plain.pk])).content.decode())["loss"]
    assert [d["label"] for d in without["datasets"]] == ["loss"]
    assert outsider_client.get(OVERLAY).status_code == 403


def test_the_metrics_api_filters_by_name_and_step(api_as, viewer, three):
    _, split, rl = three
    client = api_as(viewer)
    url = f"/api/training/runs/{split.pk}/metrics/"
    validation = client.get(url, {"names": "eval_loss"}).json()
    assert [(row["step"], row["values"]) for row in validation] == [(2, {"eval_loss": 2.75}), (4, {"eval_loss": 2.25})]
    both = client.get(url, {"names": "loss, eval_loss", "min_step": 2, "max_step": 3}).json()
    assert [(row["step"], row["values"]) for row in both] == [(2, {"loss": 2.5, "eval_loss": 2.75}), (3, {"loss": 2.0})]
    assert len(client.get(url).json()) == 4
    assert client.get(url, {"min_step": "soon"}).status_code == 400
    assert client.get(url, {"name": "loss"}).status_code == 400  # a misspelt filter is no silent "everything"
    rl_rows = client.get(f"/api/training/runs/{rl.pk}/metrics/", {"names": "reward_mean"}).json()
    assert [row["values"] for row in rl_rows] == [{"reward_mean": 0.25}, {"reward_mean": 0.5}]


def test_the_job_keeps_a_steps_validation_loss_on_that_steps_row(three):
    run = make_run("streamed")
    stream = _Stream(run)
    stream.line(json.dumps({"event": "metric", "step": 1, "epoch": 0.5, "loss": 2.0, "learning_rate": 1e-3}))
    stream.line(
        json.dumps({"event": "eval", "step": 1, "epoch": 0.5, "eval_loss": 2.5, "eval_mean_token_accuracy": 0.25})
    )
    stream.line(json.dumps({"event": "eval", "step": 3, "epoch": 1.5, "eval_loss": 1.5}))  # no row of its own yet
    rows = list(TrainingMetric.objects.filter(run=run).order_by("step").values_list("step", "epoch", "values"))
    assert rows == [
        (1, 0.5, {"loss": 2.0, "learning_rate": 1e-3, "eval_loss": 2.5, "eval_mean_token_accuracy": 0.25}),
        (3, 1.5, {"eval_loss": 1.5}),
    ]
    assert stream.last_metrics["eval_loss"] == 1.5  # what the next checkpoint's metrics hold


def test_a_runs_status_badge_has_the_colour_of_its_status_on_every_page(viewer_client, three):
    # The badges were `badge-<status>`, a class no stylesheet styles: a failed run looked like a succeeded one.
    failed = make_run("broke", status="failed")
    pages = [
        reverse("training:run", args=[failed.pk]),
        reverse("training:runs"),
        OVERLAY + f"?runs={failed.pk}",
    ]
    for url in pages:
        html = viewer_client.get(url).content.decode()
        assert 'class="badge s-failed"' in html, url
        assert "badge-failed" not in html, url
    styles = (settings.BASE_DIR / "static" / "css" / "app.css").read_text()
    assert ".badge.s-failed" in styles and ".badge.s-succeeded" in styles and ".badge.s-scored" in styles
