"""Synthesis in a real browser, with real work behind it: an admin launches a preview batch from the dashboard's panel,
lands on the batch page and watches its progress move by itself (htmx polling, no reload) until it is complete, then
reads its funnel: the kept and rejected counts are the batch's, and a rejection's example opens its item page.

The items run on a real django-q worker (a subprocess on the test database) with the bubblewrap sandbox for the
checkers, against the scripted generator of tests/scripted.py on loopback, which takes its time answering
(Reply.delay) so that the page is open while the batch goes on. No QA stage is ticked: the preview shows the
pipeline's own stages (QA has tests of its own).
"""

import dataclasses
import importlib
import re

import pytest
from django.apps import apps
from django.urls import reverse

from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from synthesis.batch_report import batch_json, rejected_stage
from synthesis.models import SynthesisBatch, SynthesisItem
from synthesis.testing import ScriptedPipeline, make_endpoints

pytestmark = [
    pytest.mark.usefixtures("bwrap", "taxonomy", "shipped_seeds"),
    pytest.mark.browser,
    pytest.mark.workers,
    pytest.mark.django_db(transaction=True),
]

MODEL_DELAY = 0.8  # seconds each model answer takes: an item lasts a few seconds, the preview a dozen or more
BATCH_TIMEOUT = 180_000  # ms the page may take to see the batch through: a bound, not a timing
CASES = ["good", "network", "lenient", "broken", "good"]  # 3 kept; rejected at generate and at verify


@pytest.fixture
def shipped_seeds(transactional_db):
    """The personas and operations the seed migration loads: a transactional test's flush empties them."""
    importlib.import_module("synthesis.migrations.0003_shipped_seeds").load(apps, None)


class SlowPipeline(ScriptedPipeline):
    def __call__(self, body, purpose=""):
        return dataclasses.replace(super().__call__(body, purpose), delay=MODEL_DELAY)


def test_an_admin_launches_a_preview_from_the_dashboard_and_reads_its_funnel(
    page, live_server, django_q_worker, scripted_upstream, admin_user
):
    scripted_upstream.responder = SlowPipeline(CASES)
    make_endpoints(scripted_upstream)
    problems = watch(page)

    # The dashboard's synthesis panel: a small launch form, preview first.
    log_in(page, live_server, admin_user)
    panel = page.locator("#synthesis-panel")
    assert panel.locator("#synthesis-recent").inner_text().strip() == "No synthesis batch yet."
    form = panel.locator("#synthesis-launch-form")
    form.locator("select[name=route]").select_option("persona")
    form.locator("select[name=generator]").select_option("gen")
    form.locator("select[name=judge]").select_option("judge")
    form.locator("input[name=seed]").fill("23")
    for box in form.locator("input[name=qa_stages]").all():
        box.uncheck()
    screenshot(page, "synthesis-dashboard-launch")
    form.locator("button[name=preview]").click()

    page.wait_for_url(re.compile(r"/synthesis/\d+/$"))
    batch = SynthesisBatch.objects.get()
    assert page.url.endswith(reverse("synthesis:detail", args=[batch.pk]))
    assert (batch.preview, batch.requested, batch.seed, batch.options) == (True, 5, 23, {"qa_stages": []})
    assert f"Started preview batch #{batch.pk}: 5 items queued" in page.inner_text(".messages")
    mark_document(page)

    # The page follows the batch by itself: its progress moves while it runs, then it is complete.
    page.wait_for_function(
        "Number(document.querySelector('#batch-progress [role=progressbar]').getAttribute('aria-valuenow')) > 0"
        " && document.querySelector('#batch-status').innerText === 'Running'",
        timeout=BATCH_TIMEOUT,
    )
    screenshot(page, "synthesis-batch-running")
    page.wait_for_function("document.querySelector('#batch-status').innerText === 'Complete'", timeout=BATCH_TIMEOUT)
    assert_no_reload(page)
    assert page.locator("[hx-trigger^=every]").count() == 0  # the finished page polls no more

    # The funnel: kept and rejected as the batch counts them.
    figures = batch_json(batch)
    assert (figures["kept"], figures["rejected"], figures["failed"]) == (3, {"generate": 1, "verify": 1}, {}), (
        list(batch.items.values_list("status", "stage", "reason")),
        django_q_worker.log_tail(),
    )
    funnel = page.locator("#funnel")
    funnel.scroll_into_view_if_needed()
    assert page.inner_text("#count-kept") == "3" and page.inner_text("#count-rejected") == "2"
    assert funnel.locator("#funnel-table tr[data-step=kept] td.passed").inner_text() == "3"
    assert funnel.locator("#funnel-table tr[data-step=generated] td.rejected").inner_text() == "1"
    assert funnel.locator("#funnel-table tr[data-step=solvable] td.rejected").inner_text() == "1"
    assert page.inner_text("#batch-progress .run-count") == "5/5 items · 3 kept"
    page.wait_for_selector("canvas[data-chart='chart-funnel'][data-drawn='true']", state="attached")
    screenshot(page, "synthesis-batch-complete")

    # A rejection's example opens its item, with the stage and reason that rejected it.
    broken = next(i for i in batch.items.filter(status=SynthesisItem.Status.REJECTED) if rejected_stage(i) == "verify")
    funnel.locator(f"#funnel-reasons a[href='{reverse('synthesis:item', args=[broken.pk])}']").click()
    page.wait_for_url(re.compile(rf"/synthesis/items/{broken.pk}/$"))
    assert page.inner_text("#item-status") == "Rejected"
    assert page.locator("[data-round^=verify-]").count() == 3
    assert "no sane, solvable checker after 3 rounds" in page.inner_text("#item-reason")
    screenshot(page, "synthesis-item-rejected")

    # Back on the dashboard, the batch is listed with what it kept.
    page.goto(live_server.url + reverse("dashboard"))
    row = page.locator(f"#synthesis-recent tr[data-batch='{batch.pk}']")
    assert row.locator("td.kept").inner_text() == "3"
    assert not problems.console_errors and not problems.failed_responses, (
        problems.console_errors,
        problems.failed_responses,
    )
