"""The candidate page: what each role sees and may do, verdicts, suggested fixes, inline edits, conflicts, decisions
and the history timeline. Jobs are only recorded here (no worker runs them: the test transaction never commits)."""

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import JobRun
from review import services
from review.models import BenchmarkCandidate, ReviewDecision
from review.tests.helpers import HTMX, add_diagnosis, sanity, save, text, url
from review.views.candidate_parts import Unit
from tasks.models import RevisionFile, TaskRevision
from tasks.services import revise_task
from tasks.testing import make_task

STRICT_CHECK = "import json, os\nprint(json.dumps({'report_exists': os.path.exists('report.md')}))\n"
RUBRIC = [
    {
        "name": "clear summary",
        "target_file": "report.md",
        "scores": {"0": "missing", "0.25": "vague", "0.5": "partial", "0.75": "mostly clear", "1": "clear"},
        "weight": 2,
    }
]
Status = BenchmarkCandidate.Status


def triggered(response) -> set:
    """The client events an htmx answer sends."""
    return set(json.loads(response.headers.get("HX-Trigger", "{}")))


def current(candidate) -> TaskRevision:
    candidate.task.refresh_from_db()
    return candidate.task.current_revision


def file_of(revision, role, path) -> bytes:
    return RevisionFile.objects.get(revision=revision, role=role, path=path).blob.content


@pytest.fixture
def issues(candidate):
    """A diagnosis of the candidate with one issue per kind of part, keyed by what it concerns."""
    diagnosis = add_diagnosis(
        candidate,
        [
            {
                "component": "checker",
                "path": "check.py",
                "severity": "blocker",
                "problem": "the checker is lenient",
                "evidence": "report_exists is always 0",
                "suggested_fix": "check the report",
                "replacement": STRICT_CHECK,
            },
            {
                "component": "instruction",
                "severity": "major",
                "problem": "the instruction is vague",
                "replacement": "Summarise sales.csv into report.md with a total per item.",
            },
            {"component": "input_file", "path": "sales.csv", "problem": "too few rows"},
            {"component": "input_file", "path": "regions.csv", "path_missing": True, "problem": "regions are missing"},
            {"component": "rubric", "problem": "no rubric", "replacement": json.dumps(RUBRIC)},
        ],
    )
    return {i.component + (":" + i.path if i.path else ""): i for i in diagnosis.issues.all()}


# --- who may see and do what -----------------------------------------------------------------------------------


def test_anonymous_users_are_sent_to_log_in(client, candidate):
    response = client.get(url("candidate", candidate))
    assert response.status_code == 302 and response.url.startswith("/login/")
    assert client.post(url("decide", candidate), {"decision": "reject", "reason": "x"}).status_code == 302
    assert candidate.decisions.count() == 0


def test_outsiders_are_refused_everywhere(outsider_client, candidate, issues):
    issue = issues["checker:check.py"]
    reads = [
        url("candidate", candidate),
        url("candidate_part", candidate, "head"),
        url("candidate_issue", candidate, issue.pk),
        url("candidate_unit", candidate) + "?field=instruction",
    ]
    for address in reads:
        assert outsider_client.get(address).status_code == 403, address
    posts = {
        "verdict": {"issue": issue.pk, "verdict": "valid"},
        "apply_fix": {"issue": issue.pk, "base_revision": 1},
        "candidate_edit": {"field": "instruction", "content": "x", "base_revision": 1},
        "decide": {"decision": "reject", "reason": "x"},
        "candidate_diagnose": {},
    }
    for name, data in posts.items():
        assert outsider_client.post(url(name, candidate), data).status_code == 403, name
    assert candidate.decisions.count() == 0 and candidate.task.revisions.count() == 1


def test_viewers_read_everything_but_get_no_controls_and_cannot_act(viewer_client, candidate, issues):
    page = text(viewer_client.get(url("candidate", candidate)))
    assert "the checker is lenient" in page and "Summarise sales.csv into report.md." in page
    for control in (
        url("decide", candidate),
        url("verdict", candidate),
        url("apply_fix", candidate),
        url("candidate_edit", candidate),
        'data-testid="edit-',
        'data-testid="claim"',
    ):
        assert control not in page, control
    assert "Reviewers decide" in page
    editor = text(viewer_client.get(url("candidate_unit", candidate) + "?field=instruction&mode=edit", **HTMX))
    assert "<textarea" not in editor  # a viewer asking for the editor gets the part to read
    issue = issues["checker:check.py"]
    assert viewer_client.post(url("verdict", candidate), {"issue": issue.pk, "verdict": "valid"}).status_code == 403
    assert viewer_client.post(url("apply_fix", candidate), {"issue": issue.pk, "base_revision": 1}).status_code == 403
    assert save(viewer_client, candidate, "instruction", "Mine.").status_code == 403
    assert viewer_client.post(url("decide", candidate), {"decision": "reject", "reason": "x"}).status_code == 403
    assert candidate.decisions.count() == 0 and candidate.task.revisions.count() == 1


# --- what the page shows ---------------------------------------------------------------------------------------


def test_the_page_shows_every_part_with_the_issues_beside_them(reviewer_client, candidate, reviewer):
    revise_task(candidate.task, user=reviewer, message="rubric", rubric=RUBRIC)
    add_diagnosis(
        candidate,
        [
            {
                "component": "checker",
                "path": "check.py",
                "severity": "blocker",
                "problem": "the checker is lenient",
                "replacement": STRICT_CHECK,
            },
            {"component": "instruction", "problem": "the instruction is vague"},
            {"component": "input_file", "path": "regions.csv", "path_missing": True, "problem": "regions are missing"},
            {"component": "rubric", "problem": "the rubric is thin"},
        ],
    )
    sanity(current(candidate), over_lenient=True)
    page = text(reviewer_client.get(url("candidate", candidate)))

    assert "Summarise sales.csv into report.md." in page  # the instruction
    assert "?field=input&amp;path=sales.csv" in page  # the file tree opens the file viewer
    assert "print(json.dumps({&#x27;report_exists&#x27;: 0}))" in page  # the checker's code
    assert "clear summary" in page and "mostly clear" in page  # the rubric as a table
    assert 'data-testid="sanity-verdict">Over-lenient' in page and "Accept is blocked" in page
    assert 'data-testid="path-missing"' in page and "regions are missing" in page
    assert "+import json, os" in page  # the suggested replacement as a diff from the current code
    assert page.count('data-testid="apply-fix"') == 1  # only the issue with a concrete replacement
    assert 'data-key="a"' in page and 'data-key="r"' in page and '<dialog id="shortcut-help"' in page
    assert "review/shortcuts.js" in page and "data-shortcut-list" in page

    def at(marker: str) -> int:
        assert marker in page, marker
        return page.index(marker)

    # Side by side: each issue comes after the part it concerns and before the next part.
    assert at('id="unit-instruction"') < at("the instruction is vague") < at('id="row-files"')
    assert at('id="row-files"') < at("regions are missing") < at('id="row-checker"')
    check_unit = Unit(current(candidate), "reward", "check.py").dom_id
    assert at(f'id="{check_unit}"') < at("the checker is lenient") < at('id="unit-rubric"') < at("the rubric is thin")


def test_a_diagnosis_of_an_older_revision_says_what_moved_on(reviewer_client, candidate, issues, reviewer):
    revise_task(candidate.task, user=reviewer, message="edit", instruction="Summarise sales.csv, with totals.")
    page = text(reviewer_client.get(url("candidate", candidate)))
    assert 'data-testid="diagnosis-moved-on"' in page and "Diagnosed at <strong>r1</strong>" in page
    assert page.count('data-testid="changed-since"') == 1  # the instruction changed; the checker did not
    assert page.index('data-testid="changed-since"') < page.index("the instruction is vague")


def test_a_binary_file_cannot_be_edited_inline(reviewer_client, candidate, reviewer):
    revise_task(candidate.task, user=reviewer, message="logo", file_changes={("input", "logo.png"): b"\x89PNG\x00\x01"})
    address = url("candidate_unit", candidate) + "?field=input&path=logo.png"
    unit = text(reviewer_client.get(address, **HTMX))
    assert "Binary files cannot be edited inline" in unit and 'data-testid="edit-' not in unit
    assert "<textarea" not in text(reviewer_client.get(address + "&mode=edit", **HTMX))
    assert reviewer_client.get(url("candidate_unit", candidate) + "?field=input&path=nope.csv").status_code == 404
    assert reviewer_client.get(url("candidate_unit", candidate) + "?field=input").status_code == 400


# --- verdicts --------------------------------------------------------------------------------------------------


def test_the_verdict_toggle_records_decisions_and_shows_the_latest(reviewer_client, candidate, issues):
    issue = issues["checker:check.py"]
    response = reviewer_client.post(url("verdict", candidate), {"issue": issue.pk, "verdict": "valid"}, **HTMX)
    assert response.status_code == 200 and triggered(response) == {"review-changed"}
    card = text(response)
    assert card.startswith("\n<article") or '<article class="issue' in card
    assert 'value="valid" class="t-valid" aria-pressed="true"' in card
    assert 'value="not_valid" class="t-not-valid" aria-pressed="false"' in card
    reviewer_client.post(url("verdict", candidate), {"issue": issue.pk, "verdict": "not_valid"}, **HTMX)
    assert services.current_verdicts(candidate) == {str(issue.pk): "not_valid"}
    assert list(candidate.decisions.values_list("decision", flat=True)) == ["verdict", "verdict"]
    page = text(reviewer_client.get(url("candidate", candidate)))
    assert 'value="not_valid" class="t-not-valid" aria-pressed="true"' in page
    assert "1 of 5 judged" in text(reviewer_client.get(url("candidate_part", candidate, "summary"), **HTMX))
    plain = reviewer_client.post(url("verdict", candidate), {"issue": issue.pk, "verdict": "valid"})
    assert plain.status_code == 302 and plain.url.endswith(f"#issue-{issue.pk}")


def test_a_verdict_on_a_candidate_someone_else_holds_is_refused_in_place(
    reviewer_client, candidate, issues, second_reviewer
):
    services.claim(candidate, user=second_reviewer)
    issue = issues["rubric"]
    response = reviewer_client.post(url("verdict", candidate), {"issue": issue.pk, "verdict": "valid"}, **HTMX)
    assert response.status_code == 200 and "rob_reviewer holds this candidate" in text(response)
    assert "HX-Trigger" not in response.headers
    assert reviewer_client.post(url("verdict", candidate), {"issue": issue.pk, "verdict": "valid"}).status_code == 409
    assert not candidate.decisions.exists()


def test_a_candidate_someone_else_holds_offers_no_decision_until_they_let_go(
    reviewer_client, candidate, second_reviewer
):
    services.claim(candidate, user=second_reviewer)
    page = text(reviewer_client.get(url("candidate", candidate)))
    held = re.search(r'<p class="notice" data-testid="held-by-other"[^>]*>(.*?)</p>', page, re.S)
    assert held and f"<strong>{second_reviewer.username}</strong> holds this candidate until" in held.group(1)
    assert 'name="decision" value="accept"' not in page  # no buttons that could only be refused
    # The notice refreshes the card; once the claim is let go, the decision form is there.
    services.release(candidate, user=second_reviewer)
    card = text(reviewer_client.get(url("candidate_part", candidate, "decide"), **HTMX))
    assert 'name="decision" value="accept"' in card and "held-by-other" not in card


def test_bad_verdicts_are_bad_requests(reviewer_client, candidate, issues, benchmark, admin_user):
    issue = issues["rubric"]
    assert reviewer_client.post(url("verdict", candidate), {"issue": issue.pk, "verdict": "maybe"}).status_code == 400
    assert reviewer_client.post(url("verdict", candidate), {"issue": "x", "verdict": "valid"}).status_code == 400
    other = make_task("t-other")
    services.propose_candidates(benchmark, [other], user=admin_user)
    stranger = BenchmarkCandidate.objects.get(task=other)
    response = reviewer_client.post(url("verdict", stranger), {"issue": issue.pk, "verdict": "valid"})
    assert response.status_code == 404  # an issue of another candidate
    assert not ReviewDecision.objects.exists()


# --- suggested fixes -------------------------------------------------------------------------------------------


def test_applying_a_fix_makes_a_revision_a_fix_decision_and_a_sanity_job(reviewer_client, candidate, issues, reviewer):
    issue = issues["checker:check.py"]
    response = reviewer_client.post(url("apply_fix", candidate), {"issue": issue.pk, "base_revision": 1}, **HTMX)
    assert response.status_code == 200 and triggered(response) == {"review-changed"}
    revision = current(candidate)
    assert revision.number == 2 and revision.author_user == reviewer
    assert file_of(revision, "reward", "check.py") == STRICT_CHECK.encode()
    fix = candidate.decisions.get(decision="fix")
    assert fix.revision == revision and fix.verdicts == {str(issue.pk): "fixed"}
    run = JobRun.objects.get(kind="tasks.sanity_check")
    assert run.params == {"revision_id": revision.pk} and run.created_by == reviewer
    body = text(response)
    assert "Saved as r2" in body and "Fixed in r2" in body and f'id="job-progress-{run.pk}"' in body
    assert "+import json, os" in body and "-import json" in body  # what the fix changed
    # The checker file beside the issue is swapped out of band with its new content.
    unit = Unit(revision, "reward", "check.py")
    assert f'id="{unit.dom_id}" data-unit="reward:check.py" hx-swap-oob="true"' in body
    assert "os.path.exists" in body.split(unit.dom_id, 1)[1]


def test_a_plain_fix_lands_on_the_page_showing_what_changed(reviewer_client, candidate, issues):
    issue = issues["instruction"]
    response = reviewer_client.post(url("apply_fix", candidate), {"issue": issue.pk, "base_revision": 1})
    assert response.status_code == 302 and response.url.endswith("?saved=2#saved")
    page = text(reviewer_client.get(response.url))
    assert "What r2 changed" in page and "+Summarise sales.csv into report.md with a total per item." in page


def test_a_fix_on_a_stale_view_shows_the_conflict_then_applies_on_top(reviewer_client, candidate, issues, admin_user):
    issue = issues["checker:check.py"]
    admins = "import json\nprint(json.dumps({'report_exists': 0.5}))\n"
    revise_task(
        candidate.task, user=admin_user, message="admin edit", file_changes={("reward", "check.py"): admins.encode()}
    )
    response = reviewer_client.post(url("apply_fix", candidate), {"issue": issue.pk, "base_revision": 1}, **HTMX)
    body = text(response)
    assert response.status_code == 200 and 'data-testid="conflict"' in body
    assert "ada_admin saved r2" in body and "+print(json.dumps({&#x27;report_exists&#x27;: 0.5}))" in body
    assert "Apply it on top of r2" in body and 'name="base_revision" value="2"' in body
    assert current(candidate).number == 2 and not candidate.decisions.exists()
    assert not JobRun.objects.exists()
    assert reviewer_client.post(url("apply_fix", candidate), {"issue": issue.pk, "base_revision": 1}).status_code == 409

    reviewer_client.post(url("apply_fix", candidate), {"issue": issue.pk, "base_revision": 2}, **HTMX)
    assert current(candidate).number == 3 and file_of(current(candidate), "reward", "check.py") == STRICT_CHECK.encode()


def test_a_fix_after_a_change_elsewhere_is_no_conflict(reviewer_client, candidate, issues, admin_user):
    revise_task(candidate.task, user=admin_user, message="other part", instruction="Summarise sales.csv, please.")
    issue = issues["checker:check.py"]
    response = reviewer_client.post(url("apply_fix", candidate), {"issue": issue.pk, "base_revision": 1}, **HTMX)
    assert "Saved as r3" in text(response)
    revision = current(candidate)
    assert (
        revision.instruction == "Summarise sales.csv, please."
        and file_of(revision, "reward", "check.py") == STRICT_CHECK.encode()
    )


def test_a_fix_already_in_place_is_refused(reviewer_client, candidate, issues):
    issue = issues["checker:check.py"]
    reviewer_client.post(url("apply_fix", candidate), {"issue": issue.pk, "base_revision": 1}, **HTMX)
    response = reviewer_client.post(url("apply_fix", candidate), {"issue": issue.pk, "base_revision": 2}, **HTMX)
    assert "already applied" in text(response) and current(candidate).number == 2
    page = text(reviewer_client.get(url("candidate", candidate)))
    assert "r2 holds it" in page


# --- inline edits ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, path, typed, stored",
    [
        (
            "instruction",
            "",
            "Summarise sales.csv\r\ninto report.md, by item.",
            "Summarise sales.csv\ninto report.md, by item.",
        ),
        ("input", "sales.csv", "item,amount\r\na,1\r\nb,2\r\n", b"item,amount\na,1\nb,2\n"),
        ("reward", "check.py", STRICT_CHECK, STRICT_CHECK.encode()),
        ("rubric", "", json.dumps(RUBRIC, indent=2), RUBRIC),
    ],
)
def test_each_part_is_edited_into_one_new_revision(reviewer_client, candidate, reviewer, field, path, typed, stored):
    services.claim(candidate, user=reviewer)
    editor = text(
        reviewer_client.get(url("candidate_unit", candidate) + f"?field={field}&path={path}&mode=edit", **HTMX)
    )
    assert "<textarea" in editor and 'name="base_revision" value="1"' in editor
    response = save(reviewer_client, candidate, field, typed, path=path)
    assert response.status_code == 200 and triggered(response) == {"review-changed"}
    assert "Saved as r2" in text(response) and 'class="d-add"' in text(response)
    revision = current(candidate)
    assert candidate.task.revisions.count() == 2 and revision.number == 2
    if field == "instruction":
        assert revision.instruction == stored
    elif field == "rubric":
        assert revision.rubric == stored
    else:
        assert file_of(revision, field, path) == stored
    fix = candidate.decisions.get()
    assert fix.decision == "fix" and fix.revision == revision and fix.reviewer == reviewer
    assert JobRun.objects.get().params == {"revision_id": revision.pk}


def test_a_bad_rubric_is_explained_in_place_keeping_the_text(reviewer_client, candidate, reviewer):
    services.claim(candidate, user=reviewer)
    response = save(reviewer_client, candidate, "rubric", '[{"name": "tone",]')
    body = text(response)
    assert response.status_code == 200 and "the rubric is not valid JSON" in body and "line 1" in body
    assert "[{&quot;name&quot;: &quot;tone&quot;,]</textarea>" in body
    response = save(reviewer_client, candidate, "rubric", '[{"name": "tone"}]', htmx=False)
    assert response.status_code == 400 and "needs &#x27;scores&#x27;" in text(response)
    assert "[{&quot;name&quot;: &quot;tone&quot;}]</textarea>" in text(response)
    assert candidate.task.revisions.count() == 1 and not candidate.decisions.exists() and not JobRun.objects.exists()


def test_editing_needs_the_claim(reviewer_client, candidate, reviewer, second_reviewer):
    editor = text(reviewer_client.get(url("candidate_unit", candidate) + "?field=instruction&mode=edit", **HTMX))
    assert 'data-testid="claim-needed"' in editor
    response = save(reviewer_client, candidate, "instruction", "My better instruction.")
    assert "claim this candidate to edit it" in text(response) and "My better instruction.</textarea>" in text(response)
    services.claim(candidate, user=second_reviewer)
    response = save(reviewer_client, candidate, "instruction", "My better instruction.", htmx=False)
    assert response.status_code == 409 and "rob_reviewer holds it" in text(response)
    assert candidate.task.revisions.count() == 1 and not candidate.decisions.exists()
    candidate.refresh_from_db()
    assert candidate.held_by() == second_reviewer  # an edit never takes the claim


def test_two_reviewers_saving_from_one_base_the_second_sees_the_conflict_and_loses_nothing(
    client, candidate, reviewer, second_reviewer
):
    client.force_login(reviewer)
    services.claim(candidate, user=reviewer)
    save(client, candidate, "instruction", "Rita's instruction.")
    # Rita's claim runs out; Rob takes over, still looking at r1.
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    services.claim(candidate, user=second_reviewer)
    client.force_login(second_reviewer)
    response = save(client, candidate, "instruction", "Rob's instruction.")
    body = text(response)
    assert response.status_code == 200 and triggered(response) == {"review-changed"}
    assert 'data-testid="conflict"' in body and "rita_reviewer saved r2" in body
    assert "+Rita&#x27;s instruction." in body  # what the other one changed
    assert "Rob&#x27;s instruction.</textarea>" in body  # his own text, kept
    assert "Save mine on top of r2" in body and 'name="base_revision" value="2"' in body
    assert candidate.task.revisions.count() == 2 and candidate.decisions.count() == 1
    assert save(client, candidate, "instruction", "Rob's instruction.", htmx=False).status_code == 409

    response = save(client, candidate, "instruction", "Rob's instruction.", base=2)
    assert "Saved as r3" in text(response) and current(candidate).instruction == "Rob's instruction."
    assert candidate.decisions.filter(reviewer=second_reviewer, revision__number=3).exists()


def test_edits_of_different_parts_from_one_base_both_save(reviewer_client, candidate, reviewer):
    services.claim(candidate, user=reviewer)
    save(reviewer_client, candidate, "instruction", "A new instruction.")
    response = save(reviewer_client, candidate, "reward", STRICT_CHECK, path="check.py")  # opened on r1 too
    assert "Saved as r3" in text(response)
    revision = current(candidate)
    assert (
        revision.instruction == "A new instruction."
        and file_of(revision, "reward", "check.py") == STRICT_CHECK.encode()
    )


def test_files_are_added_and_deleted(reviewer_client, candidate, reviewer):
    services.claim(candidate, user=reviewer)
    response = save(reviewer_client, candidate, "input", "# Notes\n", path="notes.md", action="create", slot="viewer")
    assert "Saved as r2" in text(response) and 'id="add-file" hx-swap-oob="true"' in text(response)
    assert f'id="{Unit(current(candidate), "input", "notes.md", slot="viewer").dom_id}"' in text(response)
    assert file_of(current(candidate), "input", "notes.md") == b"# Notes\n"
    again = save(reviewer_client, candidate, "input", "# Other\n", base=2, path="notes.md", action="create")
    assert again.headers["HX-Retarget"] == "#add-file" and "exists already" in text(again)
    assert "# Other\n</textarea>" in text(again)
    bad = save(reviewer_client, candidate, "input", "x", base=2, path="../escape.txt", action="create", htmx=False)
    assert bad.status_code == 400 and "bad file path" in text(bad)
    tree = text(reviewer_client.get(url("candidate_part", candidate, "tree"), **HTMX))
    assert "?field=input&amp;path=notes.md&amp;slot=viewer" in tree  # the tree opens it in the viewer
    viewed = text(
        reviewer_client.get(url("candidate_unit", candidate) + "?field=input&path=notes.md&slot=viewer", **HTMX)
    )
    assert 'id="viewer-unit-input-' in viewed and 'name="slot" value="viewer"' in viewed
    response = save(reviewer_client, candidate, "input", "", base=2, path="notes.md", action="delete")
    assert "Saved as r3" in text(response) and "r3 has no such file" in text(response)
    assert not current(candidate).files.filter(path="notes.md").exists()
    assert list(candidate.decisions.values_list("revision__number", flat=True)) == [3, 2]


def test_uploading_a_file_takes_its_name(reviewer_client, candidate, reviewer):
    from django.core.files.uploadedfile import SimpleUploadedFile

    services.claim(candidate, user=reviewer)
    upload = SimpleUploadedFile("prices.csv", b"item,price\na,3\n")
    data = {"field": "input", "path": "", "base_revision": 1, "action": "create", "upload": upload}
    reviewer_client.post(url("candidate_edit", candidate), data, **HTMX)
    assert file_of(current(candidate), "input", "prices.csv") == b"item,price\na,3\n"


def test_saving_the_same_content_is_refused(reviewer_client, candidate, reviewer):
    services.claim(candidate, user=reviewer)
    response = save(reviewer_client, candidate, "instruction", "Summarise sales.csv into report.md.")
    assert "nothing to save" in text(response) and candidate.task.revisions.count() == 1


def test_an_edit_can_mark_the_issues_it_fixes(reviewer_client, candidate, reviewer, issues):
    services.claim(candidate, user=reviewer)
    issue = issues["checker:check.py"]
    editor = text(
        reviewer_client.get(url("candidate_unit", candidate) + "?field=reward&path=check.py&mode=edit", **HTMX)
    )
    assert f'name="fixes" value="{issue.pk}"' in editor and "the instruction is vague" not in editor
    response = save(reviewer_client, candidate, "reward", STRICT_CHECK, path="check.py", fixes=[issue.pk])
    assert f'id="issue-{issue.pk}" data-shortcut-item data-id="{issue.pk}"' in text(response)
    assert "Fixed in r2" in text(response)
    assert services.current_verdicts(candidate) == {str(issue.pk): "fixed"}


# --- decisions -------------------------------------------------------------------------------------------------


def test_accepting_waits_for_a_passing_sanity_check(reviewer_client, candidate, reviewer):
    services.claim(candidate, user=reviewer)
    response = reviewer_client.post(url("decide", candidate), {"decision": "accept"}, **HTMX)
    assert response.status_code == 200 and "not been sanity-checked" in text(response)
    assert reviewer_client.post(url("decide", candidate), {"decision": "accept"}).status_code == 409
    sanity(current(candidate), over_lenient=True)
    response = reviewer_client.post(url("decide", candidate), {"decision": "accept"}, **HTMX)
    assert "a lazy agent earns 1 with this checker" in text(response) and 'data-testid="decide-error"' in text(response)
    assert "the checks that pay: out_exists=1" in text(response)
    assert not candidate.decisions.exists()

    sanity(current(candidate))
    assert "ready to accept" in text(reviewer_client.get(url("candidate_part", candidate, "accept"), **HTMX))
    response = reviewer_client.post(url("decide", candidate), {"decision": "accept", "reason": "solid"}, **HTMX)
    assert json.loads(response.headers["HX-Location"])["select"] == "#candidate-page"
    candidate.refresh_from_db()
    assert candidate.status == Status.ACCEPTED and candidate.decisions.get().revision.number == 1
    page = text(reviewer_client.get(url("candidate", candidate)))
    assert 'data-testid="outcome"' in page and "solid" in page
    assert url("decide", candidate) not in page and 'data-testid="edit-' not in page  # closed: read-only
    assert "already accepted" in text(save(reviewer_client, candidate, "instruction", "Late."))


def test_admins_may_override_a_failed_sanity_check_with_a_reason(admin_client, reviewer_client, candidate, reviewer):
    sanity(current(candidate), crashed=True)
    assert 'name="override_reason"' not in text(reviewer_client.get(url("candidate", candidate)))
    response = reviewer_client.post(url("decide", candidate), {"decision": "accept", "override_reason": "fine"})
    assert response.status_code == 403 and not candidate.decisions.exists()
    assert 'name="override_reason"' in text(admin_client.get(url("candidate", candidate)))
    data = {"decision": "accept", "override_reason": "the crash is a sandbox quirk"}
    response = admin_client.post(url("decide", candidate), data)
    assert response.status_code == 302
    row = candidate.decisions.get()
    assert row.decision == "accept" and row.override_reason == "the crash is a sandbox quirk"
    assert "Sanity check overridden" in text(admin_client.get(url("candidate", candidate)))


def test_rejecting_needs_a_reason(reviewer_client, candidate, reviewer):
    response = reviewer_client.post(url("decide", candidate), {"decision": "reject", "reason": "  "}, **HTMX)
    body = text(response)
    assert 'data-testid="reason-error"' in body and "Rejecting needs a reason." in body and "autofocus" in body
    assert reviewer_client.post(url("decide", candidate), {"decision": "reject"}).status_code == 400
    assert not candidate.decisions.exists()
    data = {"decision": "reject", "reason": "infeasible", "next": "/review/"}
    response = reviewer_client.post(url("decide", candidate), data)
    assert response.status_code == 302 and response.url == "/review/"
    candidate.refresh_from_db()
    assert candidate.status == Status.REJECTED and candidate.decisions.get().reason == "infeasible"


def test_a_fix_decision_keeps_the_candidate_open(reviewer_client, candidate, reviewer, issues):
    response = reviewer_client.post(url("decide", candidate), {"decision": "fix", "reason": "edited"}, **HTMX)
    assert "Recorded r1 as your fix" in text(response) and triggered(response) == {"review-changed"}
    candidate.refresh_from_db()
    assert candidate.status == Status.IN_REVIEW and candidate.decisions.get().decision == "fix"


# --- history, panels, diagnosis --------------------------------------------------------------------------------


def test_the_history_lists_who_did_what_when(reviewer_client, candidate, reviewer, issues):
    issue = issues["checker:check.py"]
    services.claim(candidate, user=reviewer)
    reviewer_client.post(url("verdict", candidate), {"issue": issue.pk, "verdict": "valid"}, **HTMX)
    reviewer_client.post(url("apply_fix", candidate), {"issue": issue.pk, "base_revision": 1}, **HTMX)
    sanity(current(candidate))
    reviewer_client.post(url("decide", candidate), {"decision": "reject", "reason": "still unclear"}, **HTMX)
    body = text(reviewer_client.get(url("candidate_part", candidate, "history"), **HTMX))
    assert body.count("rita_reviewer") >= 5
    for event in (
        "claimed the candidate",
        f"#{issue.pk} blocker checker check.py",
        "valid",
        "saved",
        "r2",
        "fixed → r2",
        "sanity of r2",
        "passed",
        "rejected",
        "still unclear",
        "diagnosed r1: 5 issues",
    ):
        assert event in body, event
    assert body.index("rejected") < body.index("claimed the candidate")  # newest first


def test_the_panels_refresh_themselves(reviewer_client, candidate, reviewer):
    head = reviewer_client.get(url("candidate_part", candidate, "head"), **HTMX)
    assert 'id="candidate-head"' in text(head) and "<html" not in text(head)
    revise_task(candidate.task, user=reviewer, message="x", instruction="Another.")
    assert 'data-testid="current-revision">r2' in text(
        reviewer_client.get(url("candidate_part", candidate, "head"), **HTMX)
    )
    assert "?field=input&amp;path=sales.csv" in text(
        reviewer_client.get(url("candidate_part", candidate, "tree"), **HTMX)
    )
    assert "sanity-checked yet" in text(reviewer_client.get(url("candidate_part", candidate, "sanity"), **HTMX))
    plain = reviewer_client.get(url("candidate_part", candidate, "sanity"))
    assert plain.status_code == 302 and plain.url.endswith("#sanity")
    assert reviewer_client.get(url("candidate_part", candidate, "nope"), **HTMX).status_code == 404


# --- found in the review audit ---------------------------------------------------------------------------------


def test_claiming_from_the_page_head_refreshes_the_panels_instead_of_the_page(
    reviewer_client, reviewer, second_reviewer, candidate
):
    add_diagnosis(candidate, [])
    page = text(reviewer_client.get(url("candidate", candidate)))
    assert f'hx-post="{url("claim", candidate)}"' in page and 'name="target" value="page"' in page

    response = reviewer_client.post(url("claim", candidate), {"target": "page"}, **HTMX)

    assert response.status_code == 200 and triggered(response) == {"review-changed"}
    assert 'role="alert"' not in text(response)  # an open editor is not touched: only the panels refresh
    candidate.refresh_from_db()
    assert candidate.held_by() == reviewer

    services.release(candidate, user=reviewer)
    services.claim(candidate, user=second_reviewer)
    refused = reviewer_client.post(url("claim", candidate), {"target": "page"}, **HTMX)
    assert "rob_reviewer holds this candidate until" in text(refused) and triggered(refused) == {"review-changed"}


def test_a_failed_re_diagnosis_shows_beside_the_earlier_diagnosis(viewer_client, candidate):
    add_diagnosis(candidate, [{"severity": "major"}])
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(diagnosis_error="no endpoint serves the role")

    page = text(viewer_client.get(url("candidate", candidate)))

    assert 'data-testid="diagnosis-error"' in page
    assert "The last re-diagnosis failed: no endpoint serves the role The diagnosis shown is the earlier one." in page


def test_deciding_on_a_closed_candidate_says_why_nothing_happened(reviewer_client, reviewer, candidate):
    add_diagnosis(candidate, [])
    services.claim(candidate, user=reviewer)
    services.decide(candidate, "reject", user=reviewer, reason="broken")

    response = reviewer_client.post(url("decide", candidate), {"decision": "reject", "reason": "again"}, **HTMX)

    assert 'data-testid="decide-error"' in text(response) and "already rejected" in text(response)
    assert ReviewDecision.objects.filter(decision="reject").count() == 1


def test_the_history_says_when_a_claim_ran_out(viewer_client, reviewer, candidate):
    add_diagnosis(candidate, [])
    services.claim(candidate, user=reviewer)
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))

    page = text(viewer_client.get(url("candidate", candidate)))  # the page hands the claim back before it reads

    assert re.search(r'<span class="ev-who">rita_reviewer</span>\s*<span class="what">\s*let the claim run out', page)
    assert 'data-testid="candidate-status">Awaiting review<' in page
