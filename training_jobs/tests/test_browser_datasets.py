"""An admin builds a training dataset from the dashboard in a real browser and watches its page follow the build.

The build is a real job on a real django-q worker (a subprocess on the test database). The worker starts only once
the dataset's page is open, so the page is certainly showing the dataset while it builds: no timing involved.
"""

import re

import pytest
from django.urls import reverse

from jobs.testing import start_django_q_worker, use_engine
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from training_jobs.models import TrainingDataset
from training_jobs.testing.corpus import EXCLUDED, KEPT, make_corpus

pytestmark = [
    pytest.mark.browser,
    pytest.mark.workers,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("taxonomy"),
]

BUILD_TIMEOUT = 120_000  # ms the page may take to see the build through (the worker starts first): bounded


def chart_drawn(page, name: str) -> None:
    page.wait_for_selector(f"canvas[data-chart='{name}'][data-drawn='true']", state="attached")
    assert page.evaluate(f"Boolean(Chart.getChart(document.querySelector(\"canvas[data-chart='{name}']\")))")


def test_an_admin_builds_a_dataset_from_the_dashboard_and_its_page_follows_the_build(page, live_server, admin_user):
    corpus = make_corpus()
    problems = watch(page)
    log_in(page, live_server, admin_user)

    with use_engine("django_q"):
        # The dashboard's Training data panel: choose the run and the group, a token limit, a name; build.
        panel = page.locator("#training-data-panel")
        assert panel.locator("#datasets-recent").inner_text().strip() == "No training dataset yet."
        form = panel.locator("#dataset-build-form")
        form.locator("select[name=eval_runs]").select_option(str(corpus.run.pk))
        form.locator("select[name=groups]").select_option(corpus.group)
        form.locator("input[name=max_tokens]").fill("65536")
        form.locator("input[name=name]").fill("sales sft v1")
        form.locator("button[type=submit]").click()
        page.wait_for_url(re.compile(r"/training/datasets/\d+/$"))
        dataset = TrainingDataset.objects.get(name="sales sft v1")
        assert page.url.endswith(reverse("training:dataset", args=[dataset.pk]))
        assert page.inner_text("#dataset-status") == "Building"
        assert page.locator("#dataset-building").count() == 1
        assert page.locator("#per-trajectory").count() == 0  # no figures before the build
        mark_document(page)
        screenshot(page, "dataset-building")

        # Only now a worker: it takes the queued build, and the open page follows it to Ready by itself.
        worker = start_django_q_worker(workers=1)
        try:
            page.wait_for_function(
                "document.querySelector('#dataset-status').innerText === 'Ready'", timeout=BUILD_TIMEOUT
            )
        finally:
            worker.stop()
            worker.cleanup()
    assert_no_reload(page)
    dataset.refresh_from_db()
    assert dataset.status == TrainingDataset.Status.READY and dataset.excluded == EXCLUDED
    assert page.inner_text("#count-trajectories") == str(len(KEPT))
    assert page.inner_text("#dataset-sha256") == dataset.sha256
    assert page.locator("#dataset-building").count() == 0
    assert page.inner_text("#paper-table tr[data-metric='turns'] td.paper") == "13.00"
    assert page.inner_text("#paper-table tr[data-metric='tokens'] td.mean") == "1500.00"
    near = page.inner_text("#exclusions-table tr[data-reason='near_duplicate'] td.num")
    assert near == "1"
    for name in ("chart-turns", "chart-tokens", "chart-tool_calls", "chart-tool_types", "chart-reward"):
        chart_drawn(page, name)
    screenshot(page, "dataset-ready")
    # The polling has stopped: the ready partial carries no hx-trigger.
    assert page.get_attribute("#dataset-live", "hx-trigger") is None

    # The dashboard lists it.
    page.goto(live_server.url + reverse("dashboard"))
    row = f"#datasets-recent tr[data-dataset='{dataset.pk}']"
    assert page.inner_text(f"{row} .badge") == "Ready"
    assert not problems.console_errors and not problems.failed_responses, (
        problems.console_errors,
        problems.failed_responses,
    )
