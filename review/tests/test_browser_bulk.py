"""Bulk decisions in a real browser: a reviewer ticks two candidates and accepts them; the accept gate refuses one,
and the report says which and why while the other's row turns accepted in place. A reason given for one decision is
not carried on to the next.

Screenshots go to $CLAWGYM_SCREENSHOT_DIR (default /tmp/clawgym-screens) for a look by eye.
"""

import pytest
from django.urls import reverse

from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from review.models import BenchmarkCandidate, ReviewDecision
from review.tests.helpers import make_candidate, row, sanity, settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


def test_bulk_accept_of_two_candidates_with_one_refused_by_the_gate(page, live_server, reviewer, benchmark):
    passing = make_candidate(benchmark, "alpha-passing", issues=[])
    sanity(passing.task.current_revision)
    crashing = make_candidate(benchmark, "beta-crashing", issues=["blocker"])
    sanity(crashing.task.current_revision, crashed=True)
    untouched = make_candidate(benchmark, "gamma-untouched", issues=[])
    sanity(untouched.task.current_revision)
    watched = watch(page)
    log_in(page, live_server, reviewer)
    page.goto(f"{live_server.url}{reverse('review:queue')}?sort=task")
    mark_document(page)

    row(page, passing).locator("input[name=ids]").check()  # a click in a row selects it, too
    page.keyboard.press("j")  # the keyboard ticks as well: j selects the next row, x ticks it
    page.keyboard.press("x")
    assert row(page, crashing).locator("input[name=ids]").is_checked()
    assert not row(page, untouched).locator("input[name=ids]").is_checked()
    page.fill("#bulk-form input[name=reason]", "checked against the sanity reports")
    page.keyboard.press("Enter")  # Enter in the reason decides nothing: a button says which decision
    page.wait_for_timeout(500)
    assert not ReviewDecision.objects.exists() and page.locator("[data-testid=bulk-report]").count() == 0
    page.click("#bulk-form button:text('Accept ticked')")

    report = page.locator("[data-testid=bulk-report]")
    report.wait_for()
    settled(page)
    assert report.locator("[data-testid=bulk-summary]").inner_text() == "Accepted 1, refused 1."
    refusal = report.locator("[data-testid=bulk-refused] li").inner_text()
    assert refusal.startswith("beta-crashing: cannot accept: the latest sanity check found the checker crashed")
    row(page, passing).locator("[data-testid=status]", has_text="Accepted").wait_for()
    assert "Accepted" not in row(page, crashing).locator("[data-testid=status]").inner_text()
    assert row(page, passing).locator("input[name=ids]").count() == 0  # decided: nothing left to tick
    page.locator("[data-testid=status-accepted]", has_text="Accepted 1").wait_for()  # the counts follow
    screenshot(page, "review-queue-bulk")
    # Decided: the reason is cleared, so that it is not recorded on the next decision too.
    assert page.input_value("#bulk-form input[name=reason]") == ""

    row(page, crashing).locator("input[name=ids]").check()
    page.fill("#bulk-form input[name=reason]", "the checker crashes on the empty workspace")
    page.click("#bulk-form button:text('Reject ticked')")
    report.locator("[data-testid=bulk-summary]", has_text="Rejected 1.").wait_for()
    row(page, untouched).locator("input[name=ids]").check()
    page.click("#bulk-form button:text('Accept ticked')")
    report.locator("[data-testid=bulk-summary]", has_text="Accepted 1.").wait_for()
    settled(page)
    assert_no_reload(page)

    assert BenchmarkCandidate.objects.get(pk=passing.pk).status == BenchmarkCandidate.Status.ACCEPTED
    assert BenchmarkCandidate.objects.get(pk=crashing.pk).status == BenchmarkCandidate.Status.REJECTED
    decisions = ReviewDecision.objects.order_by("pk")
    assert [(d.candidate_id, d.decision, d.reviewer_id, d.reason) for d in decisions] == [
        (passing.pk, "accept", reviewer.pk, "checked against the sanity reports"),
        (crashing.pk, "reject", reviewer.pk, "the checker crashes on the empty workspace"),
        (untouched.pk, "accept", reviewer.pk, ""),
    ]
    assert not watched.console_errors
