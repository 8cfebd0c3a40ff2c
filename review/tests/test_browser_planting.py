"""Planted flaws in a real browser: an admin plants them from the benchmark's page; a reviewer decides the copies in
the queue's dialog and on the candidate page, and learns right after each decision what the copy really was.

Screenshots go to $CLAWGYM_SCREENSHOT_DIR (default /tmp/clawgym-screens) for a look by eye.
"""

import pytest
from django.urls import reverse

from lib.browser_testing import log_in, screenshot
from review.models import BenchmarkCandidate, PlantedFlaw
from review.tests.helpers import accept_all, add_diagnosis, row, sanity, settled
from review.tests.test_planting import rich_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


def test_an_admin_plants_flaws_from_the_benchmark_page(page, live_server, admin_user, reviewer, benchmark):
    accept_all(benchmark, [rich_task()], admin_user=admin_user, reviewer=reviewer)
    log_in(page, live_server, admin_user)
    page.goto(f"{live_server.url}{reverse('review:benchmark', args=[benchmark.name])}")
    page.locator("[data-testid=planted-link]").click()
    page.locator("[data-testid=planted-none]").wait_for()

    page.locator("#plant-panel button", has_text="Plant").click()  # no kind chosen: refused in place
    page.locator("#plant-panel .field.invalid").first.wait_for()
    assert not PlantedFlaw.objects.exists()

    page.check("input[name=kinds][value=check_removed]")
    page.check("input[name=kinds][value=input_removed]")
    page.fill("input[name=count]", "2")
    screenshot(page, "review-plant-form")
    page.locator("#plant-panel button", has_text="Plant").click()
    page.locator("[data-testid=plants]").wait_for()
    assert "Planted 2 flaws" in page.inner_text(".messages")
    assert page.locator("[data-testid=plants] tbody tr").count() == 2
    assert "2 planted" in page.inner_text("[data-testid=planted-summary]")
    assert sorted(PlantedFlaw.objects.values_list("kind", flat=True)) == ["check_removed", "input_removed"]
    screenshot(page, "review-planted")


def test_the_reviewer_learns_what_a_planted_copy_was_right_after_deciding(
    page, live_server, admin_user, reviewer, benchmark
):
    from review import planting

    accept_all(benchmark, [rich_task()], admin_user=admin_user, reviewer=reviewer)
    rejected, accepted = planting.plant_flaws(benchmark, ["input_removed", "instruction_cut"], 2, user=admin_user)
    for plant in (rejected, accepted):
        sanity(plant.candidate.task.current_revision)
        add_diagnosis(plant.candidate, [{"component": "rubric", "severity": "minor"}])
    log_in(page, live_server, reviewer)

    # In the queue: nothing marks the copy; rejecting it in the dialog shows what it was under its row.
    page.goto(f"{live_server.url}{reverse('review:queue')}?q={rejected.candidate.task.external_id}")
    assert page.locator(".queue-table tbody tr").count() == 1
    assert "planted" not in page.inner_text("#results").lower()
    page.keyboard.press("j")
    page.keyboard.press("r")
    dialog = page.locator("#queue-dialog")
    dialog.locator("textarea[name=reason]").wait_for()
    page.keyboard.type("sales.csv is empty or missing: nothing to summarise.")
    dialog.locator("button", has_text="Reject").click()
    reveal = page.locator("[data-testid=planted-reveal]")
    reveal.wait_for()
    settled(page)
    assert "You caught it" in reveal.inner_text() and rejected.change in reveal.inner_text()
    assert "Rejected" in row(page, rejected.candidate).inner_text()
    screenshot(page, "review-planted-reveal-queue")

    # On the candidate page: accepting the other copy closes it as missed, and the page says so.
    page.goto(f"{live_server.url}{reverse('review:candidate', args=[accepted.candidate.pk])}")
    assert page.locator("[data-testid=planted-reveal]").count() == 0
    page.locator("#decide button[value=accept]").click()
    page.locator("[data-testid=planted-reveal]").wait_for()
    assert "You missed it" in page.inner_text("[data-testid=planted-reveal]")
    assert BenchmarkCandidate.objects.get(pk=accepted.candidate.pk).status == BenchmarkCandidate.Status.REJECTED
    screenshot(page, "review-planted-reveal-candidate")
