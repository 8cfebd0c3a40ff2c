"""Quality assessment (synthesis.qa_checks): each judged stage against a scripted judge on loopback (pass, fail, error),
the assess_tasks command and job, the stored rows and the task page's card.

The judge answers by the purpose each call names (the X-ClawGym-Purpose header, "qa:<stage>"); what it was shown is
asserted on what it received.
"""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from jobs import runner
from jobs.models import JobRun
from llm.models import ModelCall
from llm.testing import Reply
from llm.wire import PURPOSE_HEADER
from synthesis.models import QualityAssessment
from synthesis.qa_checks import STAGES, QATask, assess, messages_for, qa_task_from_revision
from synthesis.services import assess_revision, start_assessment
from tasks.package import PackageFile
from tasks.testing import make_task

HTMX = {"HTTP_HX_REQUEST": "true"}
CHECKER = b"import json\nscore = 1.0 if open('/workspace/totals.md').read().strip() == 'Total: 42' else 0.0\n"
RUBRIC = [
    {
        "name": "clear-summary",
        "target_file": "totals.md",
        "weight": 1.0,
        "scores": {"0": "unreadable", "0.25": "poor", "0.5": "fair", "0.75": "good", "1": "excellent"},
    }
]

GOOD = {
    "plausibility": {"plausible": True, "reason": "A real bookkeeping request; sales.csv holds the amounts."},
    "difficulty": {"level": 3, "reason": "Parse a CSV, sum a column, format the result."},
    "leak": {"leaks": False, "reason": "The total is not stated."},
    "alignment": {
        "requirements": [{"requirement": "totals.md holds the total", "covered": True, "by": "score"}],
        "over_strict": [],
        "reason": "The one requirement is checked.",
    },
    "rubric": {"complementary": True, "reason": "Clarity is for a judge, not code.", "redundant_rules": []},
}


@pytest.fixture(autouse=True)
def fast_backoff(fast_llm_retries):
    """Every test here talks to a scripted upstream (llm.testing.fast_llm_retries)."""


def stage_of(purpose: str) -> str:
    """The QA stage a call's purpose names (the X-ClawGym-Purpose header: "qa:<stage>")."""
    return purpose.removeprefix("qa:")


def purpose_of(request) -> str:
    return request.headers.get(PURPOSE_HEADER.lower(), "")


def answering(scripted_upstream, overrides=None):
    """The judge answers each stage with GOOD, or with `overrides[stage]` (a dict, or a Reply)."""
    overrides = overrides or {}

    def respond(body, purpose):
        stage = stage_of(purpose)
        answer = overrides.get(stage, GOOD[stage])
        return answer if isinstance(answer, Reply) else Reply.text(json.dumps(answer))

    respond.by_purpose = True
    scripted_upstream.responder = respond


def sent(scripted_upstream, stage) -> str:
    """The user message of the request made for `stage`."""
    (request,) = [r for r in scripted_upstream.requests if stage_of(purpose_of(r)) == stage]
    return request.json["messages"][1]["content"]


def qa_task(**changes):
    task = QATask(
        instruction="Sum the amounts in sales.csv and write 'Total: <sum>' to totals.md.",
        input_files={"sales.csv": b"item,amount\napples,40\npears,2\n", "logo.png": b"\x89PNG\x00\x00binary"},
        checker_files={"reward/check.py": CHECKER},
        rubric=RUBRIC,
        category="office-work",
        subcategory="spreadsheets",
        external_id="sales-total",
        expected_behavior="totals.md says Total: 42",
    )
    for key, value in changes.items():
        setattr(task, key, value)
    return task


# --- the judged stages ---------------------------------------------------------------------------------------------


def test_every_judged_stage_passes_with_one_recorded_call_each(judge, scripted_upstream):
    answering(scripted_upstream)
    verdicts = assess(qa_task(), STAGES[1:], judge=judge, subject="synthesis-item:7")
    assert list(verdicts) == ["plausibility", "difficulty", "leak", "alignment", "rubric"]
    assert {s: v.verdict for s, v in verdicts.items()} == dict.fromkeys(verdicts, "pass")
    assert verdicts["difficulty"].details == {"level": 3} and verdicts["difficulty"].reason.startswith("level 3:")
    assert verdicts["alignment"].details["coverage"] == 1.0
    calls = ModelCall.objects.order_by("pk")
    assert [c.purpose for c in calls] == [f"qa:{s}" for s in verdicts]
    assert {c.subject for c in calls} == {"synthesis-item:7"}
    for stage, verdict in verdicts.items():
        assert verdict.model_call_id == calls.get(purpose=f"qa:{stage}").pk
        assert verdict.endpoint_name == "judge" and verdict.prompt_version == f"qa-{stage}/2"


def test_what_each_stage_shows_the_judge(judge, scripted_upstream):
    answering(scripted_upstream)
    assess(qa_task(), STAGES[1:], judge=judge)
    plausibility = sent(scripted_upstream, "plausibility")
    assert "Sum the amounts in sales.csv" in plausibility and "apples,40" in plausibility
    assert "logo.png` (binary" in plausibility and "score = 1.0" not in plausibility  # no checker: files only
    leak = sent(scripted_upstream, "leak")
    assert "score = 1.0" in leak and "Total: 42" in leak  # the checker and the expected behaviour
    alignment = sent(scripted_upstream, "alignment")
    assert "score = 1.0" in alignment and "sales.csv" in alignment and "clear-summary" in alignment
    rubric = sent(scripted_upstream, "rubric")
    assert "clear-summary" in rubric and "score = 1.0" in rubric


def test_input_files_are_bounded(judge, scripted_upstream):
    answering(scripted_upstream)
    big = {f"data/part{i}.csv": b"a,b\n" + b"1,2\n" * 5000 for i in range(12)}
    assess(qa_task(input_files=big), ["plausibility"], judge=judge)
    shown = sent(scripted_upstream, "plausibility")
    assert len(shown) < 60_000 and "only its first 6,000 characters are shown" in shown
    assert "part9.csv` (20,004 bytes; not shown: the files' budget is spent)" in shown  # sorted: the last


@pytest.mark.parametrize(
    "stage, answer, reason_has, details",
    [
        (
            "plausibility",
            {
                "plausible": False,
                "reason": "The instruction names report.xlsx, which is not there.",
                "problems": ["report.xlsx is missing"],
            },
            "report.xlsx, which is not there",
            {"problems": ["report.xlsx is missing"]},
        ),
        (
            "difficulty",
            {"level": 1, "reason": "Copy one file."},
            "level 1 is outside 2..5: Copy one file.",
            {"level": 1},
        ),
        (
            "leak",
            {"leaks": True, "reason": "It states the sum.", "leaked": ["Total: 42"]},
            "gives away: Total: 42",
            {"leaked": ["Total: 42"]},
        ),
        (
            "alignment",
            {
                "requirements": [
                    {"requirement": "totals.md holds the total", "covered": True, "by": "score"},
                    {"requirement": "the total has two decimals", "covered": False},
                ],
                "over_strict": [{"check": "exact string match", "why": "white space is left open"}],
                "reason": "Half covered.",
            },
            "uncovered: the total has two decimals — over-strict: exact string match (white space is left open)",
            {
                "coverage": 0.5,
                "requirements": 2,
                "uncovered": ["the total has two decimals"],
                "over_strict": ["exact string match (white space is left open)"],
            },
        ),
        (
            "rubric",
            {"complementary": False, "reason": "It checks that the file exists.", "redundant_rules": ["clear-summary"]},
            "repeating the checker: clear-summary",
            {"redundant_rules": ["clear-summary"], "unknown_rules": []},
        ),
    ],
)
def test_each_judged_stage_fails_naming_why(judge, scripted_upstream, stage, answer, reason_has, details):
    answering(scripted_upstream, {stage: answer})
    verdict = assess(qa_task(), [stage], judge=judge)[stage]
    assert verdict.verdict == "fail" and reason_has in verdict.reason
    assert verdict.details == details


def test_difficulty_thresholds_are_the_callers(judge, scripted_upstream):
    answering(scripted_upstream, {"difficulty": {"level": 5, "reason": "Very long."}})
    assert assess(qa_task(), ["difficulty"], judge=judge)["difficulty"].verdict == "pass"
    verdict = assess(qa_task(), ["difficulty"], judge=judge, thresholds={"difficulty_max": 4})["difficulty"]
    assert verdict.verdict == "fail" and "outside 2..4" in verdict.reason


def test_a_task_without_a_rubric_passes_rubric_without_a_call(judge, scripted_upstream):
    verdict = assess(qa_task(rubric=[]), ["rubric"], judge=judge)["rubric"]
    assert (verdict.verdict, verdict.reason, verdict.model_call_id) == ("pass", "no rubric", None)
    assert not scripted_upstream.requests


def test_a_failed_call_is_an_error_verdict_with_the_error(judge, scripted_upstream):
    answering(scripted_upstream, {"leak": Reply.error(500, "judge down")})
    verdicts = assess(qa_task(), ["difficulty", "leak"], judge=judge)
    assert verdicts["difficulty"].verdict == "pass"  # one stage's failure leaves the others judged
    leak = verdicts["leak"]
    assert leak.verdict == "error" and "HTTP 500" in leak.reason and "'judge'" in leak.reason
    assert leak.model_call_id == ModelCall.objects.get(purpose="qa:leak").pk


def test_an_invalid_answer_is_repaired_once_then_an_error(judge, scripted_upstream):
    scripted_upstream.push(Reply.text("level three"), Reply.text(json.dumps({"level": 3, "reason": "Moderate."})))
    assert assess(qa_task(), ["difficulty"], judge=judge)["difficulty"].verdict == "pass"
    assert "Your answer could not be used" in scripted_upstream.requests[1].json["messages"][-1]["content"]
    scripted_upstream.push(Reply.text(json.dumps({"level": 9, "reason": "x"})), Reply.text("{}"))
    verdict = assess(qa_task(), ["difficulty"], judge=judge)["difficulty"]
    assert verdict.verdict == "error" and "no valid JSON answer in 2 tries" in verdict.reason


def test_reuse_answers_asks_no_question_answered_before_for_the_subject(judge, scripted_upstream):
    answering(scripted_upstream, {"difficulty": {"level": 4, "reason": "Many steps."}})
    first = assess(qa_task(), ["difficulty", "leak"], judge=judge, subject="synthesis-item:5", reuse_answers=True)
    assert len(scripted_upstream.requests) == 2
    # A resumed item: the same questions are answered from the recorded calls.
    again = assess(qa_task(), ["difficulty", "leak"], judge=judge, subject="synthesis-item:5", reuse_answers=True)
    assert len(scripted_upstream.requests) == 2
    assert {s: (v.verdict, v.reason, v.model_call_id) for s, v in again.items()} == {
        s: (v.verdict, v.reason, v.model_call_id) for s, v in first.items()
    }
    # Another question, another subject, or no reuse: asked.
    assess(
        qa_task(instruction="Another task."),
        ["difficulty"],
        judge=judge,
        subject="synthesis-item:5",
        reuse_answers=True,
    )
    assess(qa_task(), ["difficulty"], judge=judge, subject="synthesis-item:6", reuse_answers=True)
    assess(qa_task(), ["difficulty"], judge=judge, subject="synthesis-item:5")
    assert len(scripted_upstream.requests) == 5
    # A failed call is not an answer to reuse.
    answering(scripted_upstream, {"leak": Reply.error(500, "down")})
    assert (
        assess(qa_task(), ["leak"], judge=judge, subject="synthesis-item:7", reuse_answers=True)["leak"].verdict
        == "error"
    )
    answering(scripted_upstream)
    assert (
        assess(qa_task(), ["leak"], judge=judge, subject="synthesis-item:7", reuse_answers=True)["leak"].verdict
        == "pass"
    )
    assert len(scripted_upstream.requests) == 7


def test_no_judge_is_an_error_verdict_and_an_unknown_stage_is_refused(db):
    verdict = assess(qa_task(), ["plausibility"], judge=None)["plausibility"]
    assert verdict.verdict == "error" and "no judge endpoint" in verdict.reason
    with pytest.raises(ValueError, match="unknown QA stage"):
        assess(qa_task(), ["vibes"], judge=None)


def test_each_stage_says_what_it_is_by_its_purpose_not_its_prompt(scripted_upstream, judge):
    answering(scripted_upstream)
    assess(qa_task(), STAGES[1:], judge=judge)
    assert sorted(purpose_of(r) for r in scripted_upstream.requests) == sorted(f"qa:{stage}" for stage in STAGES[1:])
    for stage in STAGES[1:]:
        assert "[qa:" not in json.dumps(messages_for(stage, qa_task()))


# --- catalog tasks: stored rows, the command, the job ----------------------------------------------------------------


TOTAL = "Sum the amounts in sales.csv and write 'Total: <sum>' to totals.md."
SALES = {
    "metadata": {
        "grading_type": "automated",
        "scenario_category": "office-work",
        "scenario_subcategory": "spreadsheets",
        "expected_behavior": "Total: 42",
    },
    "files": [
        PackageFile("sales.csv", b"item,amount\napples,40\npears,2\n"),
        PackageFile("reward/check.py", CHECKER, "reward"),
    ],
}


def test_a_revision_becomes_a_qa_task(db):
    task = make_task("sales-total", TOTAL, **SALES, rubric=RUBRIC)
    found = qa_task_from_revision(task.current_revision)
    assert found.input_files == {"sales.csv": b"item,amount\napples,40\npears,2\n"}
    assert found.checker_files == {"reward/check.py": CHECKER} and found.rubric[0]["name"] == "clear-summary"
    assert (found.category, found.subcategory, found.external_id) == ("office-work", "spreadsheets", "sales-total")
    assert found.expected_behavior == "Total: 42"


def test_assess_revision_stores_a_row_per_stage(judge, scripted_upstream, admin_user):
    task = make_task("sales-total", TOTAL, **SALES)
    answering(scripted_upstream, {"leak": {"leaks": True, "reason": "States it.", "leaked": ["42"]}})
    rows = assess_revision(task.current_revision, ["novelty", "leak", "rubric"], judge=judge, user=admin_user)
    assert {s: r.verdict for s, r in rows.items()} == {"novelty": "pass", "leak": "fail", "rubric": "pass"}
    stored = QualityAssessment.objects.filter(revision=task.current_revision)
    assert stored.count() == 3 and set(stored.values_list("created_by", flat=True)) == {admin_user.pk}
    leak = stored.get(stage="leak")
    assert leak.model_call.purpose == "qa:leak" and leak.model_call.subject == "task:sales-total"
    assert leak.details == {"leaked": ["42"]} and leak.prompt_version == "qa-leak/2"
    assert stored.get(stage="novelty").details == {"nearest": None, "similarity": None}  # alone in the catalog


def assess_command(*args):
    out = StringIO()
    try:
        call_command("assess_tasks", *args, stdout=out, stderr=StringIO())
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


def test_command_json_is_the_verdicts_per_task_and_stage_on_the_last_line(judge, scripted_upstream):
    make_task("sales-total", TOTAL, **SALES)
    make_task("sales-sum", "Add up the amounts in sales.csv and write 'Total: <sum>' into totals.md.", **SALES)
    make_task("haiku", "Write a haiku about the pears in sales.csv to poem.md.", **SALES)
    answering(scripted_upstream, {"difficulty": {"level": 1, "reason": "Trivial."}})

    out, error = assess_command("--all", "--stages", "novelty,difficulty,rubric", "--json")

    assert error is None
    report = json.loads(out.strip().splitlines()[-1])
    assert set(report) == {"sales-total", "sales-sum", "haiku"}
    for stages in report.values():
        assert set(stages) == {"novelty", "difficulty", "rubric"}
        assert stages["difficulty"] == {"verdict": "fail", "reason": "level 1 is outside 2..5: Trivial.", "level": 1}
        assert stages["rubric"] == {"verdict": "pass", "reason": "no rubric"}
        assert set(stages["novelty"]) == {"verdict", "reason", "nearest", "similarity"}
    # The two paraphrases are each other's nearest, over the threshold; the haiku is nearest to one of them.
    assert (report["sales-total"]["novelty"]["verdict"], report["sales-total"]["novelty"]["nearest"]) == (
        "fail",
        "sales-sum",
    )
    assert (
        report["sales-sum"]["novelty"]["nearest"] == "sales-total"
        and report["sales-sum"]["novelty"]["similarity"] >= 0.9
    )
    assert report["haiku"]["novelty"]["verdict"] == "pass" and report["haiku"]["novelty"]["nearest"] != "haiku"
    assert QualityAssessment.objects.count() == 9
    assert ModelCall.objects.filter(purpose="qa:difficulty").count() == 3  # rubric: no rubric, no call


def test_command_prints_a_line_per_task_and_fails_when_a_stage_could_not_judge(judge, scripted_upstream):
    make_task("sales-total", TOTAL, **SALES)
    answering(scripted_upstream, {"plausibility": Reply.error(500, "down")})
    out, error = assess_command("--task", "sales-total", "--stages", "plausibility,leak")
    assert out.splitlines()[0].startswith("sales-total: plausibility error (model call to 'judge' failed")
    assert "leak pass (The total is not stated.)" in out.splitlines()[0]
    assert error is not None and "first: sales-total plausibility" in str(error)
    assert QualityAssessment.objects.filter(verdict="error").count() == 1  # stored, not dropped


@pytest.mark.parametrize(
    "args, message",
    [
        (["--task", "nope"], "no such task: nope"),
        (["--all", "--stages", "novelty,vibes"], "unknown QA stage(s): vibes"),
        (["--all", "--judge", "missing"], "no enabled model endpoint is named 'missing'"),
        (["--all", "--task", "x"], "--all goes alone"),
        ([], "give --all, --task ID ... or --tasks-from SELECTION"),
    ],
)
def test_command_refuses_what_it_cannot_do(judge, args, message):
    make_task("sales-total", TOTAL, **SALES)
    _, error = assess_command(*args)
    assert error is not None and message in str(error)


def test_command_without_a_judge_says_how_to_add_one_unless_only_novelty_is_asked(db):
    make_task("sales-total", TOTAL, **SALES)
    _, error = assess_command("--all")
    assert error is not None and "endpoints add … --role judge" in str(error)
    out, error = assess_command("--all", "--stages", "novelty", "--json")
    assert error is None and json.loads(out.strip().splitlines()[-1])["sales-total"]["novelty"]["verdict"] == "pass"


def test_the_job_assesses_and_a_second_delivery_asks_no_more(
    judge, scripted_upstream, admin_user, django_capture_on_commit_callbacks
):
    make_task("a-sales", TOTAL, **SALES)
    make_task("b-haiku", "Write a haiku about the pears in sales.csv to poem.md.", **SALES)
    answering(scripted_upstream, {"leak": Reply.error(500, "down")})
    with django_capture_on_commit_callbacks(execute=False):
        run = start_assessment(user=admin_user, stages=["difficulty", "leak"])

    assert runner.execute(run.pk) == JobRun.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.result["assessed"] == 2 and run.result["verdicts"] == {"pass": 2, "fail": 0, "error": 2}
    assert [e["task"] for e in run.result["errors"]] == ["a-sales", "b-haiku"] and run.outcome == "partial"
    assert run.progress_done == 2 and run.progress_total == 2 and run.subject == "every task"
    calls = ModelCall.objects.count()
    run.status = JobRun.Status.QUEUED  # delivered again
    run.save(update_fields=["status"])
    runner.execute(run.pk)
    run.refresh_from_db()
    assert run.result["assessed"] == 0 and run.result["done_before"] == 2 and ModelCall.objects.count() == calls


# --- the task page's card -------------------------------------------------------------------------------------------


def test_the_task_page_fetches_the_card_and_the_card_shows_the_latest_verdicts(judge, scripted_upstream, viewer_client):
    task = make_task("sales-total", TOTAL, **SALES)
    other = make_task("sales-sum", "Add up the amounts in sales.csv and write 'Total: <sum>' into totals.md.", **SALES)
    card_url = reverse("synthesis:qa", args=[task.current_revision.pk])

    page = viewer_client.get(reverse("tasks:detail", args=["sales-total"])).content.decode()
    assert f'hx-get="{card_url}"' in page and f'<a href="{card_url}">' in page
    assert "Not assessed yet" in viewer_client.get(card_url, **HTMX).content.decode()

    answering(scripted_upstream, {"difficulty": {"level": 1, "reason": "Trivial."}})
    assess_revision(task.current_revision, ["difficulty"], judge=judge, user=None)
    answering(scripted_upstream, {"difficulty": {"level": 4, "reason": "Many steps."}})
    assess_revision(task.current_revision, ["novelty", "difficulty"], judge=judge, user=None)
    card = viewer_client.get(card_url, **HTMX)
    html = card.content.decode()
    assert card.status_code == 200 and "<html" not in html and 'id="qa-card"' in html
    assert "level 4: Many steps." in html and "Trivial" not in html  # the latest verdict per stage
    assert 'id="qa-novelty"' in html and "near-duplicate of sales-sum" in html
    assert reverse("tasks:detail", args=[other.external_id]) in html  # the nearest task is linked
    # Without JS: a page of its own.
    page = viewer_client.get(card_url).content.decode()
    assert "<html" in page and "level 4: Many steps." in page


def test_the_card_needs_a_signed_in_viewer(client, db):
    task = make_task("sales-total", TOTAL, **SALES)
    response = client.get(reverse("synthesis:qa", args=[task.current_revision.pk]))
    assert response.status_code in (302, 403)
