"""The code editor of the candidate page in a real browser (Debian's chromium through Playwright, a live server):
CodeMirror with line numbers and find and replace over each editor, Python's syntax checked as one types (the
error's line shown, Save disabled until it is fixed), a check's name opening the checker at its lines, and
several editors saved as one revision, and `d` diagnosing the candidate again."""

import pytest

from jobs.models import JobRun
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from llm.models import ModelEndpoint
from review.services import claim
from review.tests.helpers import sanity
from review.tests.test_browser_candidate import candidate_url, make_candidate

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


def set_text(page, editor, text: str) -> None:
    """Replace the whole text of the CodeMirror editor `editor` (a locator of its .cm-editor) as one change."""
    editor.evaluate(
        "(dom, text) => { const view = dom.cmTextarea.cmView;"
        " view.dispatch({changes: {from: 0, to: view.state.doc.length, insert: text}}); }",
        text,
    )


def htmx_ready(page, selector: str) -> None:
    """Wait until htmx has processed the element (or, for a button, its form): content it swapped in becomes live only
    as it settles, and a click before that would submit the form the plain way."""
    page.wait_for_function(
        "s => { const e = document.querySelector(s); const t = e && (e.form || e);"
        " return !!(t && t['htmx-internal-data'] && t['htmx-internal-data'].initHash); }",
        arg=selector,
    )


def test_line_numbers_find_replace_and_a_syntax_error_blocks_save(page, live_server, benchmark, admin_user, reviewer):
    candidate = make_candidate(benchmark, "count-orders", admin_user)
    claim(candidate, user=reviewer)
    problems = watch(page)
    log_in(page, live_server, reviewer)
    page.goto(candidate_url(live_server, candidate))
    mark_document(page)

    unit = page.locator(".unit[data-unit='reward:check.py']")
    unit.locator("[data-testid='edit-reward:check.py']").click()
    editor = unit.locator("[data-testid=code-editor]")
    editor.wait_for()
    # Line numbers, one per line of the checker.
    gutter = unit.locator(".cm-lineNumbers .cm-gutterElement")
    assert gutter.filter(has_text="6").count() == 1 and "count_written" in editor.inner_text()

    # Find and replace (Ctrl+F in the editor): rename a check everywhere.
    unit.locator(".cm-content").click()
    page.keyboard.press("Control+f")
    search = unit.locator(".cm-search")
    search.wait_for()
    search.locator("input[name=search]").fill("count_written")
    search.locator("input[name=replace]").fill("count_file_present")
    search.locator("button[name=replaceAll]").click()
    assert "count_file_present" in editor.inner_text() and "count_written" not in editor.inner_text()
    assert "count_file_present" in unit.locator("textarea").input_value()  # the form posts what the editor shows

    # A syntax error: shown with its line, the line marked, Save disabled; fixed, Save comes back.
    good = unit.locator("textarea").input_value()
    set_text(page, editor, good.replace("except OSError:", "except OSError"))
    error = unit.locator("[data-testid=syntax-error]")
    error.wait_for()
    assert "line 4" in error.inner_text() and "fix it to save" in error.inner_text()
    assert unit.locator(".cm-syntax-line").count() == 1
    save = unit.locator("[data-testid=save]")
    assert save.is_disabled()
    screenshot(page, "editor-syntax-error")
    set_text(page, editor, good)
    page.wait_for_function(
        "!document.querySelector(\".unit[data-unit='reward:check.py'] [data-testid=save]\").disabled"
    )
    assert error.inner_text() == ""
    save.click()
    page.wait_for_selector(".unit[data-unit='reward:check.py'] [data-testid=saved]")
    assert candidate.task.revisions.count() == 2
    assert b"count_file_present" in candidate.task.revisions.get(number=2).files.get(path="check.py").blob.content
    assert_no_reload(page)
    assert problems.console_errors == [] and problems.failed_responses == []


def test_a_paying_check_opens_the_checker_at_its_line_and_two_editors_save_as_one_revision(
    page, live_server, benchmark, admin_user, reviewer
):
    candidate = make_candidate(benchmark, "count-orders", admin_user)
    revision = candidate.task.current_revision
    sanity(revision, lazy=0.5, paying={"count_written": 1.0})
    claim(candidate, user=reviewer)
    log_in(page, live_server, reviewer)
    page.goto(candidate_url(live_server, candidate))
    mark_document(page)

    link = page.locator("#sanity [data-testid=check-link]", has_text="reward/check.py:6")
    link.click()
    unit = page.locator(".unit[data-unit='reward:check.py']")
    unit.locator("[data-testid=check-source]").wait_for()
    assert "name the check count_written" in unit.inner_text()
    highlighted = unit.locator(".cm-check-line")
    highlighted.wait_for()  # the editor takes over the textarea as the swapped unit settles
    assert highlighted.count() == 1 and "count_written" in highlighted.inner_text()
    assert unit.locator(".cm-editor").evaluate("e => e.getBoundingClientRect().top < window.innerHeight")

    # A second editor open: "Save all" saves both as one revision with one sanity check.
    editor = unit.locator("[data-testid=code-editor]")
    text = unit.locator("textarea").input_value()
    set_text(page, editor, text.replace('"count_written": count is not None, ', ""))
    page.click("[data-testid=edit-instruction]")
    page.wait_for_selector("#unit-instruction [data-testid=code-editor]")
    page.locator("#unit-instruction textarea").fill("Count the orders in `orders.csv`; write the number to count.txt.")
    bar = page.locator("[data-testid=save-all-bar]")
    bar.wait_for()
    assert "2 editors open" in bar.inner_text()
    bar.locator("[data-testid=save-all]").click()
    page.wait_for_selector("#saved >> text=What r2 changed")
    assert candidate.task.revisions.count() == 2
    r2 = candidate.task.revisions.get(number=2)
    assert r2.instruction.endswith("write the number to count.txt.")
    assert b"count_written" not in r2.files.get(path="check.py").blob.content
    assert JobRun.objects.filter(kind="tasks.sanity_check", params__revision_id=r2.pk).count() == 1
    assert_no_reload(page)
    screenshot(page, "editor-save-all")


def test_d_diagnoses_the_candidate_again(page, live_server, benchmark, admin_user, reviewer):
    candidate = make_candidate(benchmark, "count-orders", admin_user)
    ModelEndpoint.objects.create(
        name="diag", base_url="http://127.0.0.1:9/v1", model="m", roles=["diagnosis"], enabled=True
    )
    log_in(page, live_server, reviewer)
    page.goto(candidate_url(live_server, candidate))
    mark_document(page)
    htmx_ready(page, "[data-testid=rediagnose]")
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("d")
    page.wait_for_selector("#diagnosis-job .job-progress")
    assert JobRun.objects.get(kind="review.diagnose").params == {"candidate_id": candidate.pk}
    assert_no_reload(page)
