"""The review queue is dense enough for a day's work: on a 1280×900 screen a reviewer sees at least 15 candidates
at once, each on one line (the instruction clipped, in full on hover; the actions side by side), with the filters,
the status tabs and the bulk bar above them."""

import pytest
from django.urls import reverse

from lib.browser_testing import log_in, screenshot
from review.tests.helpers import claim_for, make_candidate, row

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]

LONG = (
    "Ruth from finance needs our team's Q1 expense reconciliation (her email is in finance_request.txt). Using "
    "expenses/2025-Q1_submitted.csv, fx_rates.json and the rules in policy.md, write reports/q1_summary.json with "
    "exactly these keys: period, total_submitted_usd, total_reimbursable_usd, by_employee and by_category."
)
CATEGORIES = ["analysis-reasoning", "software-development", "planning-knowledge-management"]


def test_fifteen_rows_fit_a_1280_by_900_screen(page, live_server, reviewer, benchmark):
    candidates = [
        make_candidate(
            benchmark,
            f"expense-reconciliation-{n:02d}",
            title=LONG,
            category=CATEGORIES[n % 3],
            issues=["major", "minor", "minor"][: n % 4],
        )
        for n in range(20)
    ]
    claim_for(candidates[1], reviewer)  # a claimed row shows its holder and Release: the widest actions
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in(page, live_server, reviewer)
    page.goto(f"{live_server.url}{reverse('review:queue')}?sort=task")
    assert page.locator(".queue-table tbody tr").count() == 20

    visible = page.evaluate(
        """() => [...document.querySelectorAll('.queue-table tbody tr')].filter((tr) => {
             const box = tr.getBoundingClientRect();
             return box.top >= 0 && box.bottom <= window.innerHeight;
           }).length"""
    )
    screenshot(page, "review-queue-density")
    assert visible >= 15, f"{visible} rows visible at 1280x900"
    # Nothing spills sideways: the last column (the actions) is on the screen too.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    right = row(page, candidates[1]).locator(".row-actions").evaluate("(el) => el.getBoundingClientRect().right")
    assert right <= 1280

    # The instruction (its first line, the task's title) is clipped to one line, and the whole of it is on hover.
    cell = row(page, candidates[0]).locator(".task-cell")
    assert cell.locator(".task-title").get_attribute("title") == candidates[0].task.title
    assert cell.evaluate("(el) => el.scrollWidth > el.clientWidth")
    # The actions sit on one line.
    actions = row(page, candidates[1]).locator(".row-actions")
    tops = actions.locator(":scope > *").evaluate_all("(items) => items.map((el) => el.getBoundingClientRect().top)")
    assert len(tops) >= 3 and max(tops) - min(tops) < 8, tops
