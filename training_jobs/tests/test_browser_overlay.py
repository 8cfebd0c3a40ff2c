"""Training curves overlaid in a real browser: a viewer ticks two runs on the runs list (one still training, whose
list refreshes itself while the ticks stay) and opens their curves: the training loss of both on one chart, each in
its own colour, the validation loss of the one whose dataset has a split, and a table of their figures beside; the
curves follow the run that trains without a reload.

Screenshots go to $CLAWGYM_SCREENSHOT_DIR (default /tmp/clawgym-screens) for a look by eye.
"""

import pytest
from django.urls import reverse

from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from training_jobs.models import TrainingMetric, TrainingRun
from training_jobs.testing.runs import make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


def drawn_datasets(page, series: str) -> list[dict]:
    """The datasets Chart.js drew on the series' canvas (once it is drawn)."""
    canvas = f"canvas[data-chart='chart-{series}']"
    page.wait_for_selector(f"{canvas}[data-drawn='true']", state="attached")
    return page.evaluate(f"""() => Chart.getChart(document.querySelector("{canvas}")).data.datasets
        .map((d) => ({{label: d.label, data: d.data, color: d.borderColor}}))""")


def test_two_runs_loss_curves_on_one_chart_with_the_validation_loss(page, live_server, viewer):
    steps = {step: {"loss": 3.0 - step / 2, "learning_rate": 2e-5} for step in range(1, 5)}
    for step in (2, 4):
        steps[step]["eval_loss"] = 3.25 - step / 2
    split = make_run("with a split", steps=steps)
    growing = make_run("still training", steps={1: {"loss": 2.75, "learning_rate": 1e-3}}, status="running")
    unticked = make_run("not ticked", steps={1: {"loss": 9.0}})
    watched = watch(page)
    log_in(page, live_server, viewer)
    page.goto(f"{live_server.url}{reverse('training:runs')}")
    page.check(f"#pick-run-{split.pk}")
    page.check(f"#pick-run-{growing.pk}")
    # The list refreshes itself while a run trains: a new step comes in, the ticks stay.
    TrainingMetric.objects.create(run=growing, step=2, values={"loss": 2.25, "learning_rate": 1e-3})
    TrainingRun.objects.filter(pk=growing.pk).update(steps=2)
    page.locator("#runs", has_text="step 2").wait_for()
    assert page.is_checked(f"#pick-run-{split.pk}") and page.is_checked(f"#pick-run-{growing.pk}")
    page.click('button:text("Overlay the ticked runs\' curves")')
    page.wait_for_url("**/training/runs/overlay/?run=**")

    loss = drawn_datasets(page, "loss")
    assert [d["label"] for d in loss] == [f"#{split.pk} with a split", f"#{growing.pk} still training"]
    assert loss[0]["data"] == [2.5, 2.0, 1.5, 1.0] and loss[1]["data"] == [2.75, 2.25, None, None]
    assert loss[0]["color"] != loss[1]["color"]
    (validation,) = drawn_datasets(page, "eval_loss")
    assert validation["label"] == f"#{split.pk} with a split" and validation["data"] == [2.25, 1.25]
    assert validation["color"] == loss[0]["color"]  # a run keeps its colour from chart to chart
    table = page.locator("#overlay-loss table")
    assert table.locator(f"tr[data-run='{split.pk}'] [data-testid=last]").inner_text() == "1"
    assert table.locator(f"tr[data-run='{growing.pk}'] [data-testid=last]").inner_text() == "2.25"
    # While a run trains, the curves follow it without a reload.
    mark_document(page)
    TrainingMetric.objects.create(run=growing, step=3, values={"loss": 1.75, "learning_rate": 1e-3})
    table.locator(f"tr[data-run='{growing.pk}'] [data-testid=last]", has_text="1.75").wait_for(timeout=20_000)
    # Between htmx's swap and charts.js drawing the new canvas, it has no chart yet: wait through that window.
    page.wait_for_function("""() => Chart.getChart(document.querySelector("canvas[data-chart='chart-loss']"))
        ?.data.datasets[1]?.data[2] === 1.75""")
    assert_no_reload(page)
    assert page.locator("#overlay-reward_mean").count() == 0  # neither is an RL run
    assert page.is_checked(f"#overlay-run-{split.pk}") and not page.is_checked(f"#overlay-run-{unticked.pk}")
    screenshot(page, "training-overlay")
    assert not watched.console_errors and not watched.failed_responses
