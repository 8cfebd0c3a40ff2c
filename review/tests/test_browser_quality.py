"""Quality sampling in a real browser: a reviewer rates two items through the htmx rating panel and sees the
sample's table count them."""

import pytest
from django.urls import reverse

from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot
from review.models import QualityRating
from review.quality import draw_sample
from tasks.testing import make_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


def rate(page, scores: dict) -> None:
    for field, score in scores.items():
        page.check(f"fieldset[data-dimension={field}] input[value='{score}']")
    page.click("button:has-text('Save and go to the next unrated item')")


def test_reviewer_rates_two_items_and_sees_the_table(page, live_server, reviewer, admin_user):
    make_task("t-alpha", instruction="Summarise **alpha.csv** into report.md.")
    make_task("t-beta", instruction="Summarise **beta.csv** into report.md.")
    sample = draw_sample(name="browser study", size=2, pool={}, seed=3, user=admin_user)
    first, second = sample.items.order_by("position")
    sample_url = f"{live_server.url}{reverse('review:quality_sample', args=[sample.pk])}"

    log_in(page, live_server, reviewer)
    page.goto(sample_url)
    assert page.inner_text("[data-testid=my-progress]") == "You have rated 0 of 2 items."
    assert page.inner_text("tr[data-dimension=reasonableness] [data-stat=mean]") == "—"
    page.click("[data-testid=rate-next]")
    page.wait_for_url(f"**{reverse('review:quality_rate', args=[sample.pk, first.pk])}")
    assert page.inner_text("[data-testid=position]") == "Item 1 of 2"
    assert first.revision.task.external_id in page.inner_text("h1")
    mark_document(page)

    # A missing score: the panel comes back with the error in place and nothing is saved.
    page.check("fieldset[data-dimension=reasonableness] input[value='5']")
    page.click("button:has-text('Save and go to the next unrated item')")
    page.wait_for_selector("fieldset[data-dimension=feasibility].invalid")
    assert "Give execution feasibility a score from 1 to 5." in page.inner_text("fieldset[data-dimension=feasibility]")
    assert page.is_checked("fieldset[data-dimension=reasonableness] input[value='5']")
    assert not QualityRating.objects.exists()
    screenshot(page, "quality-rate-errors")

    rate(page, {"reasonableness": 5, "feasibility": 4, "resource_consistency": 3, "verification": 2})
    page.wait_for_selector("text=Item 2 of 2")  # htmx swapped in the next unrated item
    assert page.url.endswith(reverse("review:quality_rate", args=[sample.pk, second.pk]))
    assert second.revision.task.external_id in page.inner_text("h1")
    assert page.title().startswith(f"{second.revision.task.external_id} · browser study")
    assert page.inner_text(".crumbs").endswith("item 2")
    assert "Saved your rating of" in page.inner_text("#rate-panel .messages")
    assert_no_reload(page)
    screenshot(page, "quality-rate")

    rate(page, {"reasonableness": 3, "feasibility": 4, "resource_consistency": 3, "verification": 4})
    page.wait_for_url(sample_url)  # the last one: back to the sample and its table
    assert page.inner_text("[data-testid=my-progress]") == "You have rated 2 of 2 items."
    row = "tr[data-dimension=reasonableness]"
    assert page.inner_text(f"{row} [data-stat=n]") == "2"
    assert page.inner_text(f"{row} [data-stat=mean]") == "4.00"
    assert page.inner_text(f"{row} [data-stat=std]") == "1.41"
    assert page.inner_text("tr[data-dimension=feasibility] [data-stat=std]") == "0.00"
    assert page.inner_text("[data-testid=stats-summary]").startswith("2 ratings by 1 reviewer;")
    screenshot(page, "quality-sample")
