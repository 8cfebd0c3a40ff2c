"""One reviewer's walk through a lazy-paying candidate, from opening its page to accepting it, without leaving the
page (Debian's chromium through Playwright, a live server, a real worker running checkers in the bubblewrap sandbox).

The candidate is what the published benchmarks ship: a checker that pays a lazy agent (an empty count.txt earns
0.5) and no reference solution. The reviewer finds the paying check on the sanity card and follows its link into the
checker, fixes the check in the editor, proves a correct answer still scores 1 by solving the task in the browser,
saves that as the reference solution, and accepts once its sanity check passes. The test counts page loads, the
reviewer's actions and the waits for background work, asserts the page was loaded once and never left, and prints
the counts (the review guide quotes them as what a reviewer should expect).
"""

import pytest

from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from review.models import ReviewDecision
from review.tests.test_browser_candidate import blur, candidate_url, make_candidate
from review.tests.test_browser_editor import htmx_ready, set_text
from sandbox.testing import require_bwrap
from tasks.sanity import check_revision
from tasks.services import revise_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


class Walk:
    """Counts what the reviewer does (clicks, keys, typing) and how often they wait for background work."""

    def __init__(self, page):
        self.page = page
        self.actions = 0
        self.waits = 0
        self.loads = 0
        self.documents = []  # the URL of every document the main frame loaded
        page.on("load", lambda _page: self.count_load())

    def count_load(self):
        self.loads += 1
        self.documents.append(self.page.url)

    def act(self, locator_or_key, *, key: bool = False, live: str = ""):
        """One action: a key, or a click on a locator (`live`: its CSS selector, to wait until htmx made it live)."""
        self.actions += 1
        if live:
            htmx_ready(self.page, live)
        if key:
            blur(self.page)
            self.page.keyboard.press(locator_or_key)
        else:
            locator_or_key.click()

    def wait(self, selector: str, timeout: float = 90_000):
        """A wait for the server's background work (a sanity check, a checker run) to show on the page."""
        self.waits += 1
        self.page.wait_for_selector(selector, timeout=timeout)


@pytest.mark.workers
def test_a_lazy_paying_candidate_from_open_to_accept_without_leaving_the_page(
    page, live_server, benchmark, admin_user, reviewer, django_q_worker
):
    backend = require_bwrap()
    candidate = make_candidate(benchmark, "count-orders", admin_user)
    # As imported: no reference solution.
    revise_task(candidate.task, user=admin_user, message="as published", file_changes={("solution", "count.txt"): None})
    candidate.task.refresh_from_db()
    report = check_revision(candidate.task.current_revision, backend=backend)
    assert report.over_lenient and report.paying_checks == {"count_written": 1.0}
    problems = watch(page)
    log_in(page, live_server, reviewer)

    walk = Walk(page)
    page.goto(candidate_url(live_server, candidate))
    mark_document(page)
    url = page.url
    assert "Accept is blocked" in page.inner_text("[data-testid=accept-state]")

    walk.act(page.locator("[data-testid=claim]"))
    page.wait_for_selector("[data-testid=claim-state] >> text=you")

    # 1. The paying check, on the sanity card, links to the line of the checker that sets it.
    walk.act(
        page.locator("#sanity [data-testid=check-link]", has_text="reward/check.py:6"),
        live="#sanity [data-testid=check-link]",
    )
    unit = page.locator(".unit[data-unit='reward:check.py']")
    unit.locator(".cm-check-line").wait_for()
    assert "count_written" in unit.locator(".cm-check-line").inner_text()
    screenshot(page, "walk-paying-check")

    # 2. Fix it: drop the check that pays for an empty file; saving starts the sanity check of r3.
    editor = unit.locator("[data-testid=code-editor]")
    fixed = unit.locator("textarea").input_value().replace('"count_written": count is not None, ', "")
    set_text(page, editor, fixed)
    walk.actions += 1  # the edit itself
    walk.act(unit.locator("[data-testid=save]"), live=".unit[data-unit='reward:check.py'] [data-testid=save]")
    unit.locator("[data-testid=saved]").wait_for()
    walk.wait("[data-testid=history] >> text=sanity of r3")

    # 3. Solve it: the initial workspace plus the right count.txt; run the checker (g): full marks.
    solve = page.locator("#solve-card")
    walk.act(solve.locator("[data-testid=solve-open]"), live="[data-testid=solve-open]")
    page.wait_for_selector("#solve [data-testid=solve-notice]")
    walk.act(solve.locator("summary", has_text="Add a file"))
    solve.locator("[data-testid=solve-new-path]").fill("count.txt")
    solve.locator("textarea[name=content]").fill("3\n")
    walk.actions += 2  # typing the path and the content
    htmx_ready(page, "#solve .solve-add form")
    walk.act(solve.locator("button", has_text="Add to the workspace"))
    page.wait_for_selector("#solve [data-testid=solve-notice] >> text=Added count.txt")
    walk.act("g", key=True, live="[data-testid=solve-run]")
    walk.wait("#solve [data-testid=solve-score] >> text=Score 1.00")

    # 4. Save it as the reference solution (r4, its sanity check runs), then accept with `a`.
    walk.act(solve.locator("[data-testid=solve-save]"), live="[data-testid=solve-save]")
    page.wait_for_selector("[data-testid=current-revision] >> text=r4")
    walk.wait("[data-testid=accept-state] >> text=ready to accept")
    screenshot(page, "walk-ready")
    walk.act("a", key=True, live="[data-key=a]")
    page.wait_for_selector("[data-testid=outcome]")
    assert page.inner_text("[data-testid=candidate-status]") == "Accepted"
    screenshot(page, "walk-accepted")

    assert walk.loads == 1 and walk.documents == [url], walk.documents  # one page load: the first
    assert_no_reload(page)
    assert page.url.split("?")[0].split("#")[0] == url.split("?")[0].split("#")[0]  # never left the candidate
    candidate.refresh_from_db()
    accepted = candidate.decisions.get(decision=ReviewDecision.Decision.ACCEPT)
    assert candidate.status == "accepted" and accepted.revision.number == 4 and not accepted.override_reason
    assert problems.console_errors == [] and problems.failed_responses == []
    print(f"\nreview walk: {walk.loads} page load, {walk.actions} actions, {walk.waits} waits for background work")
