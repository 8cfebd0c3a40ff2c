"""The candidate page in a real browser (Debian's chromium through Playwright, against a live server).

The issue's proof: a reviewer claims a candidate whose checker is over-lenient, marks the LLM's issue valid, applies
its fix (a strict checker), sees the sanity rerun finish on a real worker in the bubblewrap sandbox without a reload,
and accepts with the `a` key; another reviewer rejects another candidate with a reason and the `r` key. Also: an edit
that meets someone else's save gets the conflict panel with the reviewer's own text, and saves on top.
"""

import pytest
from django.urls import reverse

from jobs.models import JobRun
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot
from review.models import SEVERITY_RANK, BenchmarkCandidate, DiagnosisIssue, LLMDiagnosis, ReviewDecision
from review.services import claim, propose_candidates
from sandbox.testing import require_bwrap
from tasks.package import STANDARD_REWARD_SH, PackageFile, TaskPackage
from tasks.sanity import check_revision
from tasks.services import revise_task, save_package

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]

INSTRUCTION = "Count the orders in `orders.csv` and write the number, alone, to count.txt."
# Credits a count.txt that merely exists: the scaffold (an empty count.txt) scores 0.5, so it is over-lenient.
LENIENT_CHECK = """import json
try:
    count = open("count.txt").read().strip()
except OSError:
    count = None
print(json.dumps({"count_written": count is not None, "count_right": count == "3"}))
"""
STRICT_CHECK = """import json
try:
    count = open("count.txt").read().strip()
except OSError:
    count = None
print(json.dumps({"count_right": count == "3"}))
"""


def make_candidate(benchmark, external_id, admin_user, *, check=LENIENT_CHECK, replacement=STRICT_CHECK):
    """A candidate whose checker really runs, with a diagnosis whose one issue suggests `replacement` for it."""
    package = TaskPackage(
        external_id=external_id,
        instruction=INSTRUCTION,
        metadata={"category": "analysis-reasoning"},
        files=[
            PackageFile("orders.csv", b"id,item\n1,apples\n2,pears\n3,plums\n"),
            PackageFile("reward.sh", STANDARD_REWARD_SH.encode(), "reward"),
            PackageFile("check.py", check.encode(), "reward"),
            PackageFile("count.txt", b"3\n", "solution"),
        ],
    )
    task = save_package(package).task
    propose_candidates(benchmark, [task], user=admin_user)
    candidate = BenchmarkCandidate.objects.get(task=task)
    diagnosis = LLMDiagnosis.objects.create(
        candidate=candidate,
        revision=task.current_revision,
        endpoint_name="frontier",
        prompt_version="v1",
        overall="The task is clear and feasible, but the **checker is over-lenient**: it credits an empty count.txt.",
    )
    DiagnosisIssue.objects.create(
        diagnosis=diagnosis,
        component="checker",
        path="check.py",
        severity="blocker",
        severity_rank=SEVERITY_RANK["blocker"],
        problem="The checker gives points for a count.txt that merely exists.",
        evidence="count_written is true for an empty file.",
        suggested_fix="Score only the right count.",
        replacement=replacement,
    )
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(status=BenchmarkCandidate.Status.AWAITING_REVIEW)
    return candidate


def candidate_url(live_server, candidate) -> str:
    return live_server.url + reverse("review:candidate", args=[candidate.pk])


def blur(page) -> None:
    """Leave the field being typed in: shortcut keys are ignored while a field has the focus."""
    page.evaluate("document.activeElement && document.activeElement.blur()")


@pytest.mark.workers
def test_claim_judge_apply_fix_watch_sanity_and_accept_then_another_rejects(
    browser, page, live_server, benchmark, admin_user, reviewer, second_reviewer, django_q_worker
):
    candidate = make_candidate(benchmark, "count-orders", admin_user)
    other = make_candidate(benchmark, "count-orders-too", admin_user)
    first = check_revision(candidate.task.current_revision, backend=require_bwrap())
    assert first.over_lenient and first.problems == [
        "over-lenient: a lazy agent earns 0.5 on the scaffold workspace (paying checks: count_written=1)"
    ]

    log_in(page, live_server, reviewer)
    page.goto(candidate_url(live_server, candidate))
    assert page.inner_text("[data-testid=sanity-verdict]") == "Over-lenient"
    assert "Accept is blocked" in page.inner_text("[data-testid=accept-state]")
    assert page.locator("#diagnosis .overall strong").inner_text() == "checker is over-lenient"
    # The issue sits beside the checker file it concerns.
    row = page.locator(".review-row", has=page.locator("h3", has_text="reward/check.py"))
    assert "gives points for a count.txt that merely exists" in row.locator(".row-issues").inner_text()
    screenshot(page, "candidate-before")

    page.click("[data-testid=claim]")
    page.wait_for_selector("[data-testid=claim-state] >> text=you")
    mark_document(page)
    blur(page)
    page.keyboard.press("a")  # refused: the checker pays a lazy agent
    page.wait_for_selector("[data-testid=decide-error] >> text=cannot accept: a lazy agent earns 0.5")

    issue = page.locator("[data-testid=issue]")
    issue.locator("[data-testid=verdict-valid]").click()
    page.wait_for_selector("[data-testid=issue] [data-testid=verdict-valid][aria-pressed=true]")
    issue.locator("[data-testid=apply-fix]").click()
    page.wait_for_selector("[data-testid=issue] [data-testid=saved]")
    assert "Saved as r2" in issue.inner_text()
    assert issue.locator(".d-del", has_text="count_written").count() >= 1  # the diff of what the fix changed
    assert "Fixed in r2" in issue.inner_text()
    # The checker file beside it now shows the new code; the head and sanity card follow the new revision.
    assert '"count_right": count == "3"' in row.locator(".row-content").inner_text()
    page.wait_for_selector("[data-testid=current-revision] >> text=r2")
    page.wait_for_function(
        "document.querySelector('[data-testid=sanity-verdict]')?.innerText === 'Passed'", timeout=90_000
    )
    # The accept state and the history refresh on the same event, each on its own.
    page.wait_for_selector("[data-testid=accept-state] >> text=ready to accept")
    assert page.locator("[data-testid=decide-error]").count() == 0  # the refusal was about r1: gone
    page.wait_for_selector("[data-testid=history] >> text=sanity of r2")
    assert "sanity of r2: passed" in page.inner_text("[data-testid=history]")
    assert_no_reload(page)
    screenshot(page, "candidate-fixed")
    run = JobRun.objects.get(kind="tasks.sanity_check")
    assert run.status == JobRun.Status.SUCCEEDED, run.error

    blur(page)
    page.keyboard.press("a")
    page.wait_for_selector("[data-testid=outcome]")
    assert page.inner_text("[data-testid=candidate-status]") == "Accepted"
    assert_no_reload(page)
    screenshot(page, "candidate-accepted")
    candidate.refresh_from_db()
    accepted = candidate.decisions.get(decision=ReviewDecision.Decision.ACCEPT)
    assert candidate.status == "accepted" and accepted.revision.number == 2 and accepted.reviewer == reviewer
    assert candidate.decisions.filter(decision="verdict", verdicts__has_key=str(issue_pk(candidate))).exists()

    # Another reviewer, in another browser session, rejects the other candidate with a reason.
    other_page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
    log_in(other_page, live_server, second_reviewer)
    claim(other, user=second_reviewer)
    other_page.goto(candidate_url(live_server, other))
    other_page.keyboard.press("r")  # without a reason: refused in place, the reason field gets the focus
    other_page.wait_for_selector("[data-testid=reason-error]")
    assert other_page.inner_text("[data-testid=reason-error]") == "Rejecting needs a reason."
    assert other_page.evaluate("document.activeElement.name") == "reason"
    other_page.keyboard.type("The count is trivially guessable from the file name.")
    blur(other_page)
    other_page.keyboard.press("r")
    other_page.wait_for_selector("[data-testid=outcome]")
    assert "Rejected" in other_page.inner_text("[data-testid=outcome]")
    assert "trivially guessable" in other_page.inner_text("#decide")
    screenshot(other_page, "candidate-rejected")
    other.refresh_from_db()
    assert other.status == "rejected"
    assert other.decisions.get(decision="reject").reason == "The count is trivially guessable from the file name."
    other_page.context.close()


def issue_pk(candidate) -> int:
    return DiagnosisIssue.objects.get(diagnosis__candidate=candidate).pk


def start_editing_the_instruction(page, live_server, candidate, reviewer, text: str):
    """The reviewer holds the candidate, has its page open (marked, to catch reloads) and has typed `text` into the
    instruction's editor; returns the editor."""
    claim(candidate, user=reviewer)
    log_in(page, live_server, reviewer)
    page.goto(candidate_url(live_server, candidate))
    mark_document(page)
    page.click("[data-testid=edit-instruction]")
    page.wait_for_selector("#unit-instruction [data-testid=code-editor]")  # the editor has taken the textarea
    editor = page.locator("#unit-instruction textarea")
    editor.fill(text)
    return editor


def test_an_edit_meeting_someone_elses_save_shows_the_conflict_and_keeps_the_text(
    page, live_server, benchmark, admin_user, reviewer
):
    candidate = make_candidate(benchmark, "count-orders", admin_user)
    editor = start_editing_the_instruction(
        page, live_server, candidate, reviewer, "Count the orders in `orders.csv`; write only the number to count.txt."
    )
    # Meanwhile an admin changes the instruction on the task page.
    revise_task(candidate.task, user=admin_user, message="clearer", instruction="Count the rows of `orders.csv`.")
    editor.press("Control+Enter")  # saves, like the Save button
    page.wait_for_selector("#unit-instruction [data-testid=conflict]")
    conflict = page.inner_text("#unit-instruction [data-testid=conflict]")
    assert "ada_admin saved r2" in conflict and "+Count the rows of `orders.csv`." in conflict
    assert editor.input_value() == "Count the orders in `orders.csv`; write only the number to count.txt."
    assert candidate.task.revisions.count() == 2  # nothing of the reviewer's was written
    screenshot(page, "candidate-conflict")

    page.click("#unit-instruction [data-testid=save]")  # "Save mine on top of r2"
    page.wait_for_selector("#unit-instruction [data-testid=saved]")
    assert "Saved as r3" in page.inner_text("#unit-instruction")
    assert "write only the number" in page.inner_text("#unit-instruction [data-testid=instruction]")
    page.wait_for_selector("[data-testid=current-revision] >> text=r3")

    # The rubric as JSON: a mistake is shown in place and the typed text stays.
    page.click("[data-testid=edit-rubric]")
    page.wait_for_selector("#unit-rubric [data-testid=code-editor]")
    page.fill("#unit-rubric textarea", '[{"name": "tone"}]')
    page.click("#unit-rubric [data-testid=save]")
    page.wait_for_selector("#unit-rubric [data-testid=editor-error]")
    assert "needs 'scores'" in page.inner_text("#unit-rubric [data-testid=editor-error]")
    assert page.input_value("#unit-rubric textarea") == '[{"name": "tone"}]'
    assert_no_reload(page)
    screenshot(page, "candidate-rubric-error")

    page.click("#unit-rubric a:text('Cancel')")
    page.wait_for_selector("#unit-rubric [data-testid=edit-rubric]")

    # An editor with unsaved text survives a fix applied to the same file; saving it then shows the conflict.
    check_py = page.locator(".unit[data-unit='reward:check.py']")
    check_py.locator("[data-testid='edit-reward:check.py']").click()
    check_py.locator("[data-testid=code-editor]").wait_for()
    check_py.locator("textarea").fill("print('{\"count_right\": 0}')\n")
    page.click("[data-testid=apply-fix]")
    page.wait_for_selector("[data-testid=issue] [data-testid=saved]")
    assert "Saved as r4" in page.inner_text("[data-testid=issue]")
    assert check_py.locator("textarea").input_value() == "print('{\"count_right\": 0}')\n"
    check_py.locator("[data-testid=save]").click()
    page.wait_for_selector(".unit[data-unit='reward:check.py'] [data-testid=conflict]")
    assert "rita_reviewer saved r4" in check_py.inner_text()
    assert_no_reload(page)

    blur(page)
    page.keyboard.press("?")
    assert page.is_visible("#shortcut-help")
    page.keyboard.press("Escape")
    assert not page.is_visible("#shortcut-help")
    page.keyboard.press("j")
    assert page.get_attribute("[data-testid=issue]", "aria-selected") == "true"


def test_a_claim_that_ran_out_mid_edit_is_taken_again_from_the_head_and_the_text_is_saved(
    page, live_server, benchmark, admin_user, reviewer
):
    candidate = make_candidate(benchmark, "count-orders", admin_user)
    editor = start_editing_the_instruction(
        page, live_server, candidate, reviewer, "Count the orders; write the number alone to count.txt."
    )
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(claimed_by=None, claim_expires_at=None)  # ran out
    page.click("#unit-instruction [data-testid=save]")
    page.wait_for_selector("#unit-instruction [data-testid=claim-needed]")

    page.click("#candidate-head [data-testid=claim]")  # htmx: the head refreshes, the editor stays as it is
    page.wait_for_selector("#candidate-head [data-testid=claim-state] >> text=you")
    assert editor.input_value() == "Count the orders; write the number alone to count.txt."
    page.click("#unit-instruction [data-testid=save]")
    page.wait_for_selector("#unit-instruction [data-testid=saved]")
    assert (
        candidate.task.revisions.get(number=2).instruction == "Count the orders; write the number alone to count.txt."
    )
    assert_no_reload(page)


@pytest.mark.parametrize("width", [1280, 1440])
def test_the_rubric_is_read_without_scrolling_sideways(page, live_server, benchmark, admin_user, reviewer, width):
    candidate = make_candidate(benchmark, "count-orders", admin_user)
    levels = {
        "0": "The reply names no count at all, or a number that is not the count of orders in the file.",
        "0.5": "The right count, but buried in prose the user would have to read through to find it.",
        "1": "The right count, stated first and plainly, with the file it was counted from.",
    }
    rubric = [
        {"name": "states-the-count-plainly", "target_file": "count.txt", "scores": levels, "weight": 1},
        {"name": "tone", "target_file": "", "scores": {"0": "Curt.", "1": "Courteous."}, "weight": 0.5},
    ]
    revise_task(candidate.task, user=admin_user, message="a rubric", rubric=rubric)
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server, reviewer)
    page.goto(candidate_url(live_server, candidate))

    table = page.locator("#unit-rubric [data-testid=rubric]")
    table.wait_for()
    frame = page.locator("#unit-rubric .table-scroll")
    assert frame.evaluate("f => f.scrollWidth <= f.clientWidth"), frame.evaluate("f => [f.scrollWidth, f.clientWidth]")
    last = table.locator("dd", has_text="stated first and plainly")
    box, shown = last.bounding_box(), frame.bounding_box()
    assert box["x"] + box["width"] <= shown["x"] + shown["width"] + 1, (box, shown)  # the score levels in view
    screenshot(page, f"candidate-rubric-{width}")
