"""The review queue in a real browser: filters, keyboard triage, claims, decisions in the dialog, diagnose all.

Screenshots go to $CLAWGYM_SCREENSHOT_DIR (default /tmp/clawgym-screens) for a look by eye.
"""

import pytest
from django.urls import reverse

from jobs.models import JobRun
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot
from review.job_kinds import DIAGNOSE_BATCH_JOB
from review.models import BenchmarkCandidate, ReviewDecision
from review.tests.helpers import add_diagnosis, make_candidate, row, sanity, settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


def selected_task(page) -> str:
    return page.locator(".queue-table tr.selected [data-shortcut-open]").inner_text()


def test_reviewer_triages_the_queue_with_the_keyboard(page, live_server, reviewer, benchmark):
    alpha = make_candidate(benchmark, "alpha-report", category="analysis-reasoning", issues=["minor"])
    sanity(alpha.task.current_revision)  # its checker passes: accepting is allowed
    beta = make_candidate(benchmark, "beta-build", category="software-development", issues=["major", "minor"])
    gamma = make_candidate(benchmark, "gamma-plan", category="analysis-reasoning", issues=[])
    log_in(page, live_server, reviewer)
    page.goto(f"{live_server.url}{reverse('review:queue')}?sort=task")
    assert page.locator(".queue-table tbody tr").count() == 3
    screenshot(page, "review-queue")
    mark_document(page)

    page.select_option("select[name=severity]", "major")
    page.wait_for_function("document.querySelectorAll('.queue-table tbody tr').length === 1")
    settled(page)
    assert "severity=major" in page.url  # the URL follows the filters
    assert page.inner_text("[data-testid=status-all]") == "All 1"
    page.select_option("select[name=severity]", "")
    page.wait_for_function("document.querySelectorAll('.queue-table tbody tr').length === 3")
    settled(page)
    page.locator("input[name=q]").press_sequentially("gamma", delay=20)
    page.wait_for_function("document.querySelectorAll('.queue-table tbody tr').length === 1")
    settled(page)
    page.fill("input[name=q]", "")
    page.wait_for_function("document.querySelectorAll('.queue-table tbody tr').length === 3")
    settled(page)
    page.locator("body").click(position={"x": 5, "y": 5})  # focus leaves the search field: shortcuts work again

    page.keyboard.press("j")
    assert selected_task(page) == "alpha-report"
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert selected_task(page) == "gamma-plan"
    page.keyboard.press("k")
    assert selected_task(page) == "beta-build"
    assert row(page, beta).get_attribute("aria-selected") == "true"

    page.keyboard.press("?")
    assert page.locator("#shortcut-help").is_visible()
    assert "Reject the selected candidate" in page.inner_text("#shortcut-help")
    screenshot(page, "review-queue-help")
    page.keyboard.press("Escape")
    assert not page.locator("#shortcut-help").is_visible()

    row(page, gamma).locator("button", has_text="Claim").click()
    row(page, gamma).locator("[data-testid=claim] strong", has_text="you").wait_for()
    settled(page)
    assert BenchmarkCandidate.objects.get(pk=gamma.pk).claimed_by == reviewer
    assert selected_task(page) == "gamma-plan"  # clicking in a row selects it; its swap keeps the selection

    page.keyboard.press("k")
    page.keyboard.press("r")  # reject the selected row: the dialog asks for a reason
    dialog = page.locator("#queue-dialog")
    dialog.locator("textarea[name=reason]").wait_for()
    assert dialog.is_visible() and "Reject beta-build" in dialog.inner_text()
    page.keyboard.type("The checker cannot be satisfied: it wants a file the task never names.")
    screenshot(page, "review-queue-reject")
    dialog.locator("button", has_text="Reject").click()
    row(page, beta).locator("[data-testid=status]", has_text="Rejected").wait_for()
    settled(page)
    assert not dialog.is_visible()
    page.locator("[data-testid=status-rejected]", has_text="Rejected 1").wait_for()  # the counts follow
    decision = ReviewDecision.objects.get(candidate=beta)
    assert (decision.decision, decision.reviewer) == ("reject", reviewer) and "cannot be satisfied" in decision.reason
    assert selected_task(page) == "beta-build"

    page.keyboard.press("k")
    assert selected_task(page) == "alpha-report"
    page.keyboard.press("a")
    dialog.locator("button", has_text="Accept").wait_for()
    assert "Accept alpha-report" in dialog.inner_text()
    page.keyboard.press("Enter")  # the Accept button has the focus
    row(page, alpha).locator("[data-testid=status]", has_text="Accepted").wait_for()
    settled(page)
    assert not dialog.is_visible()
    assert BenchmarkCandidate.objects.get(pk=alpha.pk).status == BenchmarkCandidate.Status.ACCEPTED
    assert_no_reload(page)
    screenshot(page, "review-queue-decided")

    page.click("[data-testid=status-rejected]")  # a status tab filters, and the form's status follows it
    page.wait_for_function("document.querySelectorAll('.queue-table tbody tr').length === 1")
    settled(page)
    assert page.locator("select[name=status]").input_value() == "rejected" and "status=rejected" in page.url
    page.select_option("select[name=sort]", "updated")  # another filter keeps the status
    page.wait_for_url("**sort=updated**")
    settled(page)
    assert page.locator(".queue-table tbody tr").count() == 1 and "status=rejected" in page.url
    page.click("[data-testid=status-all]")
    page.wait_for_function("document.querySelectorAll('.queue-table tbody tr').length === 3")
    settled(page)
    page.select_option("select[name=sort]", "task")
    page.wait_for_url("**sort=task**")
    settled(page)
    assert_no_reload(page)
    assert selected_task(page) == "alpha-report"  # still selected after the results were swapped

    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("o")  # opens the selected candidate
    page.wait_for_url(f"**{reverse('review:candidate', args=[gamma.pk])}")


def test_a_blocked_accept_keeps_the_dialog_open_with_the_reason(page, live_server, reviewer, benchmark):
    blocked = make_candidate(benchmark, "crashy-checker", issues=["blocker"])
    sanity(blocked.task.current_revision, crashed=True)
    log_in(page, live_server, reviewer)
    page.goto(f"{live_server.url}{reverse('review:queue')}")
    mark_document(page)
    page.keyboard.press("j")
    page.keyboard.press("a")
    dialog = page.locator("#queue-dialog")
    dialog.locator("textarea[name=reason]").fill("Looks right to me")
    dialog.locator("button", has_text="Accept").click()
    dialog.locator("[role=alert]", has_text="cannot accept").wait_for()
    assert dialog.is_visible() and dialog.locator("textarea[name=reason]").input_value() == "Looks right to me"
    assert "override_reason" not in dialog.inner_html()  # reviewers cannot override
    assert row(page, blocked).locator("[data-testid=claim] strong").count() == 0  # a refused decision claims nothing
    screenshot(page, "review-queue-blocked")
    page.keyboard.press("Escape")
    assert not dialog.is_visible()
    assert not ReviewDecision.objects.exists()
    assert_no_reload(page)


def test_admin_diagnoses_all_and_the_results_refresh_when_the_batch_finishes(page, live_server, admin_user, benchmark):
    waiting = make_candidate(benchmark, "waiting-task")
    log_in(page, live_server, admin_user)
    page.goto(f"{live_server.url}{reverse('review:queue')}")
    mark_document(page)
    assert "Not diagnosed" in row(page, waiting).inner_text()
    page.click("button:text('Diagnose all awaiting diagnosis')")
    page.locator("#diagnose-panel .job-progress").wait_for()
    run = JobRun.objects.get(kind=DIAGNOSE_BATCH_JOB)
    assert run.params == {"candidate_ids": [waiting.pk]}
    screenshot(page, "review-queue-diagnose-all")

    # No worker runs here: play the batch's part, then see the rows refresh on its `batch-finished`.
    add_diagnosis(waiting, [{"severity": "blocker"}])
    JobRun.objects.filter(pk=run.pk).update(status=JobRun.Status.SUCCEEDED)
    row(page, waiting).locator(".badge.sev-blocker").wait_for()
    # The progress announced started work: it goes once the batch has finished (the rows show the diagnoses).
    page.locator("#diagnose-panel [data-started]").wait_for(state="detached")
    assert page.inner_text("#diagnose-panel").strip() == ""
    assert_no_reload(page)


def test_an_outsider_cannot_reach_the_queue(page, live_server, outsider):
    log_in(page, live_server, outsider)
    response = page.goto(f"{live_server.url}{reverse('review:queue')}")
    assert response.status == 403


@pytest.mark.parametrize("width", [1024, 1280])
def test_a_rows_actions_stay_in_view_in_a_narrower_window(page, live_server, reviewer, benchmark, width):
    long = make_candidate(benchmark, "a-task-with-a-rather-long-identifier-for-its-row", issues=["major", "minor"])
    page.set_viewport_size({"width": width, "height": 800})
    log_in(page, live_server, reviewer)
    page.goto(f"{live_server.url}{reverse('review:queue')}")
    reject = row(page, long).locator(".actions a.button", has_text="Reject")
    box = reject.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width, (width, box)
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # nothing to scroll sideways for
    screenshot(page, f"review-queue-{width}")
