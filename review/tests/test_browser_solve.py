"""The in-browser solve in a real browser (Debian's chromium through Playwright, a live server, a real worker that
runs the checker in the bubblewrap sandbox): a reviewer opens a scratch copy of the initial workspace, adds and
edits a file in the code editor, runs the checker with the `g` key, sees each check and the run's output, and saves
the workspace that scored full marks as the reference solution, a new revision, without leaving the page."""

import pytest

from jobs.models import JobRun
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from review.services import claim
from review.tests.test_browser_candidate import STRICT_CHECK, blur, candidate_url, make_candidate
from review.tests.test_browser_editor import htmx_ready, set_text
from sandbox.testing import require_bwrap

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


@pytest.mark.workers
def test_open_edit_run_see_the_checks_and_save_as_the_solution(
    page, live_server, benchmark, admin_user, reviewer, django_q_worker
):
    require_bwrap()
    candidate = make_candidate(benchmark, "count-orders", admin_user, check=STRICT_CHECK)
    claim(candidate, user=reviewer)
    problems = watch(page)
    log_in(page, live_server, reviewer)
    page.goto(candidate_url(live_server, candidate))
    mark_document(page)

    solve = page.locator("#solve-card")
    htmx_ready(page, "[data-testid=solve-open]")
    solve.locator("[data-testid=solve-open]").click()
    page.wait_for_selector("#solve [data-testid=solve-notice] >> text=Opened the initial workspace of r1: 1 files.")
    assert "Not yet: run the checker on the workspace first." in solve.inner_text()

    # Add a wrong count, run the checker (g): 0, with the check that failed and the run's output.
    solve.locator("summary", has_text="Add a file").click()
    solve.locator("[data-testid=solve-new-path]").fill("count.txt")
    solve.locator("textarea[name=content]").fill("2\n")
    htmx_ready(page, "#solve .solve-add form")
    solve.locator("button", has_text="Add to the workspace").click()
    page.wait_for_selector("#solve [data-testid=solve-notice] >> text=Added count.txt to your workspace.")
    htmx_ready(page, "[data-testid=solve-run]")
    blur(page)
    page.keyboard.press("g")
    page.wait_for_selector("#solve [data-testid=solve-score]", timeout=90_000)
    assert solve.locator("[data-testid=solve-score]").inner_text() == "Score 0.00"
    check = solve.locator("[data-testid=checks] tr[data-check=count_right]")
    assert "reward/check.py:6" in check.inner_text()
    solve.locator("[data-testid=solve-output] summary").click()
    assert '"count_right": false' in solve.locator("[data-testid=solve-output]").inner_text()
    assert solve.locator("[data-testid=solve-save]").is_disabled()
    screenshot(page, "solve-scored-0")

    # Fix it in the editor, run again: full marks; save it as the reference solution.
    htmx_ready(page, "#solve [data-testid=solve-file]")
    solve.locator("[data-testid=solve-file]", has_text="count.txt").click()
    editor = page.locator("#solve-editor [data-testid=code-editor]")
    editor.wait_for()
    set_text(page, editor, "3")  # the task's own solution holds "3\n": this one differs, so it is a change
    htmx_ready(page, "#solve-editor [data-testid=solve-file-save]")
    page.click("#solve-editor [data-testid=solve-file-save]")
    page.wait_for_selector("#solve-editor [data-testid=solve-file-saved]")
    page.wait_for_selector("#solve [data-testid=solve-save-why] >> text=the workspace changed since its last run")
    htmx_ready(page, "[data-testid=solve-run]")
    solve.locator("[data-testid=solve-run]").click()
    page.wait_for_selector("#solve [data-testid=solve-score] >> text=Score 1.00", timeout=90_000)
    assert "full marks" in solve.locator("[data-testid=solve-result]").inner_text()
    htmx_ready(page, "[data-testid=solve-save]")
    solve.locator("[data-testid=solve-save]").click()
    page.wait_for_selector("#saved >> text=What r2 changed")
    page.wait_for_selector("[data-testid=current-revision] >> text=r2")
    assert_no_reload(page)
    screenshot(page, "solve-saved")

    r2 = candidate.task.revisions.get(number=2)
    assert r2.files.get(role="solution", path="count.txt").blob.content == b"3"
    assert "in-browser solve" in r2.message
    runs = JobRun.objects.filter(kind="review.solve").order_by("id")
    assert [run.result["score"] for run in runs] == [0.0, 1.0]
    assert JobRun.objects.filter(kind="tasks.sanity_check", params__revision_id=r2.pk).exists()
    assert problems.console_errors == [] and problems.failed_responses == []
