"""Category proposals (tasks.categorizing): the model is asked about each task, admins decide on the page and the API.

The model is the scripted OpenAI-compatible server on loopback; what it was shown is asserted on what it received.
"""

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from jobs import runner
from jobs.models import JobRun
from llm.models import ModelCall, ModelEndpoint
from llm.testing import Reply
from tasks.categorizing import (
    CATEGORIZE_PURPOSE,
    CategorizingError,
    ProposalError,
    accept_proposals,
    edit_proposal,
    propose_categories,
    reject_proposal,
    start_accept_all,
    start_categorization,
)
from tasks.models import BenchmarkCategory, CategoryProposal, Task
from tasks.package import PackageFile
from tasks.services import revise_task
from tasks.testing import make_task

HTMX = {"HTTP_HX_REQUEST": "true"}
SIX = {
    "productivity-collaboration",
    "systems-automation",
    "analysis-reasoning",
    "content-domain-support",
    "planning-knowledge-management",
    "software-development",
}


@pytest.fixture(autouse=True)
def fast_backoff(fast_llm_retries):
    """Every test here talks to a scripted upstream (llm.testing.fast_llm_retries)."""


@pytest.fixture
def generator(db, scripted_upstream):
    return ModelEndpoint.objects.create(
        name="gen",
        base_url=scripted_upstream.base_url,
        model="gen-model",
        roles=["generator"],
        timeout_seconds=5,
        max_retries=0,
        max_concurrent=1,  # one call at a time: the test's transaction is theirs
    )


def answer(category, reason="It fits."):
    return Reply.text(json.dumps({"category": category, "reason": reason}))


def by_content(body):
    """Answers by what the task asks: code goes to software development, the rest to analysis."""
    prompt = body["messages"][1]["content"]
    if "unit test" in prompt:
        return answer("software-development", "The task fixes a failing unit test in Python code.")
    return answer("analysis-reasoning", "The task computes totals from a CSV file.")


def user_prompt(received) -> str:
    messages = received.json["messages"]
    assert messages[0]["role"] == "system"
    return messages[1]["content"]


def category(slug):
    return BenchmarkCategory.objects.get(slug=slug)


def categorize(*args):
    out = StringIO()
    try:
        call_command("categorize_tasks", *args, stdout=out, stderr=StringIO())
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


# --- proposing ---------------------------------------------------------------------------------------------


def test_each_task_is_one_call_showing_instruction_files_and_categories_and_the_answer_is_stored(
    generator, scripted_upstream
):
    code = make_task(
        "fix-test",
        "Make the failing unit test in test_app.py pass.",
        files=[PackageFile("app.py", b"x = 1\n"), PackageFile("tests/test_app.py", b"assert 0\n")],
    )
    sales = make_task("sum-sales")
    scripted_upstream.responder = by_content

    proposals = propose_categories(Task.objects.filter(pk__in=[code.pk, sales.pk]).order_by("external_id"))

    assert [(p.task.external_id, p.category.slug, p.status) for p in proposals] == [
        ("fix-test", "software-development", "pending"),
        ("sum-sales", "analysis-reasoning", "pending"),
    ]
    stored = CategoryProposal.objects.get(task=code)
    assert stored.reason == "The task fixes a failing unit test in Python code."
    assert stored.revision == code.current_revision and stored.endpoint_name == "gen" and stored.error == ""
    assert stored.model_call.purpose == CATEGORIZE_PURPOSE and stored.model_call.subject == "task:fix-test"
    assert ModelCall.objects.count() == 2

    prompt = user_prompt(scripted_upstream.requests[0])
    assert "Make the failing unit test in test_app.py pass." in prompt
    assert "- app.py" in prompt and "- tests/test_app.py" in prompt
    for c in BenchmarkCategory.objects.all():
        assert f"`{c.slug}` ({c.name}): {c.description}" in prompt
    assert {c.slug for c in BenchmarkCategory.objects.all()} == SIX
    # Proposing changes no task: that is the admin's decision.
    code.refresh_from_db()
    assert code.benchmark_category is None and code.revisions.count() == 1


@pytest.mark.django_db(transaction=True)
def test_calls_run_side_by_side_up_to_the_endpoints_concurrency_and_come_back_in_task_order(
    taxonomy, scripted_upstream
):
    # Transactional: the calling threads must see the tasks; `taxonomy` loads the categories a flush removed.
    ModelEndpoint.objects.create(
        name="wide",
        base_url=scripted_upstream.base_url,
        model="m",
        roles=["generator"],
        max_retries=0,
        max_concurrent=3,
    )
    for n in range(7):
        make_task(f"t{n}", "Fix the unit test." if n % 2 else "Sum the totals.")
    scripted_upstream.responder = by_content
    heard = []

    proposals = propose_categories(Task.objects.order_by("external_id"), on_proposal=heard.append)

    assert [p.task.external_id for p in proposals] == [f"t{n}" for n in range(7)]
    assert [p.category.slug for p in proposals] == [
        "software-development" if n % 2 else "analysis-reasoning" for n in range(7)
    ]
    assert sorted(p.pk for p in heard) == sorted(p.pk for p in proposals)
    assert scripted_upstream.max_in_flight <= 3 and ModelCall.objects.count() == 7


def test_a_long_instruction_is_cut_and_says_so(generator, scripted_upstream):
    make_task("long", "Sum the totals. " + "x" * 20_000)
    scripted_upstream.push(answer("analysis-reasoning"))
    propose_categories(Task.objects.all())
    prompt = user_prompt(scripted_upstream.requests[0])
    assert "x" * 5_000 in prompt and "x" * 7_000 not in prompt
    assert "cut: the instruction has 20,016 characters" in prompt


@pytest.mark.parametrize(
    "bad, problem",
    [
        (Reply.text(json.dumps({"category": "cooking", "reason": "It is about food."})), "cooking"),
        (Reply.text("I think it is analysis."), "JSON"),
        (Reply.text(json.dumps({"category": "analysis-reasoning"})), "reason"),
        (Reply.text(json.dumps({"category": "analysis-reasoning", "reason": "  "})), "reason"),
    ],
)
def test_an_answer_naming_no_category_is_repaired_once_then_stored_as_failed(
    generator, scripted_upstream, bad, problem
):
    task = make_task("sum-sales")
    scripted_upstream.push(bad, bad)

    (proposal,) = propose_categories([task])

    assert proposal.status == CategoryProposal.Status.FAILED and proposal.category is None
    assert "gave no valid JSON answer in 2 tries" in proposal.error and problem in proposal.error
    assert proposal.model_call is not None and len(scripted_upstream.requests) == 2
    # The repair turn showed the model its answer and the problem.
    assert "could not be used" in scripted_upstream.requests[1].json["messages"][-1]["content"]


def test_a_repaired_answer_and_a_category_named_by_name_are_kept(generator, scripted_upstream):
    task = make_task("sum-sales")
    scripted_upstream.push(answer("cooking"), answer("Analysis & Reasoning", "Totals from a CSV."))
    (proposal,) = propose_categories([task])
    assert proposal.status == "pending" and proposal.category.slug == "analysis-reasoning"
    assert proposal.reason == "Totals from a CSV."


def test_a_failed_call_is_a_failed_proposal_with_the_error(generator, scripted_upstream):
    task = make_task("sum-sales")
    scripted_upstream.push(Reply.error(500, "model crashed"))
    (proposal,) = propose_categories([task])
    assert proposal.status == "failed" and "HTTP 500" in proposal.error and "model crashed" in proposal.error
    assert proposal.model_call.error and proposal.model_call.status_code == 500


def test_the_generator_is_preferred_then_the_judge_and_without_either_it_says_what_to_add(db, scripted_upstream):
    task = make_task("sum-sales")
    with pytest.raises(CategorizingError, match=re.escape("endpoints add … --role generator")):
        propose_categories([task])
    ModelEndpoint.objects.create(
        name="a-judge", base_url=scripted_upstream.base_url, model="judge-model", roles=["judge"], max_retries=0
    )
    scripted_upstream.push(answer("analysis-reasoning"), answer("analysis-reasoning"))
    assert propose_categories([task])[0].endpoint_name == "a-judge"
    ModelEndpoint.objects.create(
        name="z-gen", base_url=scripted_upstream.base_url, model="gen-model", roles=["generator"], max_retries=0
    )
    assert propose_categories([task])[0].endpoint_name == "z-gen"


def test_a_missing_api_key_is_said_once_before_any_call(generator, scripted_upstream):
    generator.api_key_env = "CLAWGYM_KEY_NOT_SET_FOR_THIS_TEST"
    generator.save()
    with pytest.raises(CategorizingError, match="CLAWGYM_KEY_NOT_SET_FOR_THIS_TEST"):
        propose_categories([make_task("sum-sales")])
    assert not scripted_upstream.requests and not CategoryProposal.objects.exists()


def test_a_new_proposal_supersedes_the_pending_one(generator, scripted_upstream, admin_user):
    task = make_task("sum-sales")
    scripted_upstream.push(answer("analysis-reasoning"), answer("systems-automation"))
    (first,) = propose_categories([task])
    (second,) = propose_categories([task], user=admin_user)
    first.refresh_from_db()
    assert first.status == "rejected" and first.decision_note == f"superseded by proposal #{second.pk}"
    assert second.status == "pending"


# --- deciding ----------------------------------------------------------------------------------------------


def propose(scripted_upstream, *tasks, slug="analysis-reasoning", reason="Totals from a CSV."):
    scripted_upstream.push(*[answer(slug, reason) for _ in tasks])
    return propose_categories(list(tasks))


def test_bulk_accept_makes_a_revision_per_task_that_sets_the_category_and_names_the_proposal(
    generator, scripted_upstream, admin_user
):
    a = make_task("a-sales", metadata={"grading_type": "code", "difficulty": "easy"})
    b = make_task("b-sales")
    proposals = propose(scripted_upstream, a, b)

    decisions = accept_proposals(proposals, user=admin_user)

    assert [p.pk for p in decisions.accepted] == [p.pk for p in proposals] and not decisions.rejected
    for task, proposal in zip([a, b], proposals):
        task.refresh_from_db()
        proposal.refresh_from_db()
        revision = task.current_revision
        assert revision.number == 2 and revision.parent.number == 1
        assert revision.metadata["category"] == "analysis-reasoning"
        assert (
            revision.message == f"category: Analysis & Reasoning (accepted proposal #{proposal.pk}: Totals from a CSV.)"
        )
        assert revision.author_user == admin_user
        assert task.benchmark_category.slug == "analysis-reasoning"
        assert proposal.status == "accepted" and proposal.decided_by == admin_user and proposal.decided_at
        assert proposal.decided_revision == revision and proposal.decided_category.slug == "analysis-reasoning"
    assert a.current_revision.metadata["difficulty"] == "easy"  # the rest of the metadata is kept
    # Accepting again does nothing: the proposals were decided.
    again = accept_proposals(proposals, user=admin_user)
    assert not again.accepted and len(again.skipped) == 2 and a.revisions.count() == 2


def test_a_proposal_whose_task_got_a_category_since_is_rejected_as_stale(generator, scripted_upstream, admin_user):
    task = make_task("sum-sales")
    (proposal,) = propose(scripted_upstream, task)
    revise_task(task, user=admin_user, message="set by hand", metadata={"category": "systems-automation"})

    decisions = accept_proposals([proposal], user=admin_user)

    proposal.refresh_from_db()
    task.refresh_from_db()
    assert decisions.rejected == [proposal] and proposal.status == "rejected"
    assert proposal.decision_note.startswith("stale: the task's category changed since the proposal")
    assert "to Systems & Automation" in proposal.decision_note
    assert task.benchmark_category.slug == "systems-automation" and task.revisions.count() == 2


def test_reproposing_a_categorized_task_and_accepting_it_changes_the_category(generator, scripted_upstream, admin_user):
    task = make_task("sum-sales", metadata={"category": "systems-automation"})
    (proposal,) = propose(scripted_upstream, task)
    assert proposal.category_before.slug == "systems-automation"
    accept_proposals([proposal], user=admin_user)
    task.refresh_from_db()
    assert task.benchmark_category.slug == "analysis-reasoning"


def test_edit_sets_another_category_as_a_revision_and_a_decided_proposal_refuses_more(
    generator, scripted_upstream, admin_user
):
    task = make_task("sum-sales")
    (proposal,) = propose(scripted_upstream, task)

    edited = edit_proposal(proposal, category("content-domain-support"), user=admin_user)

    task.refresh_from_db()
    assert edited.status == "edited" and edited.decided_category.slug == "content-domain-support"
    assert edited.category.slug == "analysis-reasoning"  # what the model said stays on record
    assert task.benchmark_category.slug == "content-domain-support"
    assert task.current_revision.metadata["category"] == "content-domain-support"
    assert task.current_revision.message.startswith(
        f"category: Content & Domain Support (edited proposal #{proposal.pk}, which proposed Analysis & Reasoning"
    )
    with pytest.raises(ProposalError, match="edited"):
        edit_proposal(proposal, category("software-development"), user=admin_user)
    with pytest.raises(ProposalError):
        reject_proposal(proposal, user=admin_user)


def test_choosing_the_proposed_category_is_accepting_it(generator, scripted_upstream, admin_user):
    task = make_task("sum-sales")
    (proposal,) = propose(scripted_upstream, task)
    done = edit_proposal(proposal, category("analysis-reasoning"), user=admin_user)
    task.refresh_from_db()
    assert done.status == "accepted" and task.benchmark_category.slug == "analysis-reasoning"
    assert task.current_revision.message.startswith(f"category: Analysis & Reasoning (accepted proposal #{proposal.pk}")


def test_a_failed_proposal_can_be_given_a_category_by_hand_and_a_pending_one_rejected(
    generator, scripted_upstream, admin_user
):
    failing, other = make_task("a-failing"), make_task("b-other")
    scripted_upstream.push(Reply.error(400, "bad request"), answer("analysis-reasoning"))
    failed, pending = propose_categories([failing, other])
    assert failed.status == "failed"

    edit_proposal(failed, category("software-development"), user=admin_user)
    reject_proposal(pending, user=admin_user, note="not analysis")

    failing.refresh_from_db()
    other.refresh_from_db()
    assert failing.benchmark_category.slug == "software-development"
    assert "set by hand for failed proposal" in failing.current_revision.message
    assert pending.status == "rejected" and pending.decision_note == "not analysis"
    assert other.benchmark_category is None and other.revisions.count() == 1


# --- the command -------------------------------------------------------------------------------------------


def test_command_json_is_one_object_per_task_on_the_last_line_and_asks_only_about_uncategorized_tasks(
    generator, scripted_upstream
):
    make_task("fix-test", "Make the failing unit test pass.")
    make_task("sum-sales")
    make_task("done", metadata={"category": "systems-automation"})
    scripted_upstream.responder = by_content

    out, error = categorize("--json")

    assert error is None
    rows = json.loads(out.strip().splitlines()[-1])
    assert rows == [
        {
            "task": "fix-test",
            "category": "software-development",
            "status": "pending",
            "error": "",
            "reason": "The task fixes a failing unit test in Python code.",
        },
        {
            "task": "sum-sales",
            "category": "analysis-reasoning",
            "status": "pending",
            "error": "",
            "reason": "The task computes totals from a CSV file.",
        },
    ]
    # Asking again skips the tasks with a pending proposal; --all asks about every task.
    out, error = categorize("--json")
    assert error is None and json.loads(out.strip().splitlines()[-1]) == [] and len(scripted_upstream.requests) == 2
    out, error = categorize("--all", "--json")
    assert [row["task"] for row in json.loads(out.strip().splitlines()[-1])] == ["done", "fix-test", "sum-sales"]


def test_command_prints_a_line_per_task_and_fails_when_a_proposal_failed(generator, scripted_upstream):
    make_task("a-ok")
    make_task("b-broken")
    scripted_upstream.push(answer("analysis-reasoning", "Totals."), Reply.error(500, "boom"))

    out, error = categorize("--task", "a-ok", "b-broken")

    lines = out.strip().splitlines()
    assert lines[0] == "a-ok: analysis-reasoning (Totals.)"
    assert lines[1].startswith("b-broken: failed: model call to 'gen' failed") and "HTTP 500" in lines[1]
    assert "proposed a category for 1 of 2 tasks with gen; 1 failed" in lines[2]
    assert error is not None and "1 proposal(s) failed; first: b-broken" in str(error)
    assert CategoryProposal.objects.filter(status="failed").count() == 1  # recorded, not dropped


def test_command_failed_rows_are_in_the_json_too(generator, scripted_upstream):
    make_task("b-broken")
    scripted_upstream.push(Reply.text("no idea"), Reply.text("still no idea"))
    out, error = categorize("--json")
    (row,) = json.loads(out.strip().splitlines()[-1])
    assert row["task"] == "b-broken" and row["category"] is None and row["status"] == "failed" and row["error"]
    assert row["reason"] == "" and error is not None


@pytest.mark.parametrize(
    "args, message",
    [
        (["--task", "nope"], "no such task: nope"),
        (["--endpoint", "missing"], "no enabled model endpoint is named 'missing'"),
        (["--all", "--task", "x"], "--all goes alone"),
    ],
)
def test_command_refuses_what_it_cannot_do(generator, args, message):
    make_task("sum-sales")
    _, error = categorize(*args)
    assert error is not None and message in str(error)


def test_command_without_an_endpoint_names_how_to_add_one(db):
    make_task("sum-sales")
    _, error = categorize()
    assert error is not None and "endpoints add … --role generator" in str(error)


def test_command_uses_the_endpoint_it_is_given(generator, scripted_upstream):
    ModelEndpoint.objects.create(
        name="other", base_url=scripted_upstream.base_url, model="other-model", roles=[], max_retries=0
    )
    make_task("sum-sales")
    scripted_upstream.push(answer("analysis-reasoning"))
    out, error = categorize("--endpoint", "other", "--json")
    assert error is None and CategoryProposal.objects.get().endpoint_name == "other"
    assert scripted_upstream.requests[0].json["model"] == "other-model"


# --- the job -----------------------------------------------------------------------------------------------


def _queued(start, django_capture_on_commit_callbacks):
    # The engine hand-off waits for commit; it is captured and not run, and the job is executed in-process.
    with django_capture_on_commit_callbacks(execute=False):
        return start()


def test_the_job_proposes_for_the_uncategorized_tasks_and_a_second_delivery_asks_no_more(
    generator, scripted_upstream, admin_user, django_capture_on_commit_callbacks
):
    make_task("a-sales")
    make_task("b-sales")
    make_task("done", metadata={"category": "systems-automation"})
    scripted_upstream.push(answer("analysis-reasoning"), Reply.error(500, "boom"))
    run = _queued(lambda: start_categorization(user=admin_user), django_capture_on_commit_callbacks)

    assert runner.execute(run.pk) == JobRun.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.result["proposed"] == 1 and run.result["failed"] == 1
    assert run.result["failures"][0]["task"] == "b-sales" and run.outcome == "partial"
    assert set(CategoryProposal.objects.values_list("task__external_id", "job_run")) == {
        ("a-sales", run.pk),
        ("b-sales", run.pk),
    }
    assert run.progress_done == 2 and run.progress_total == 2
    assert run.subject == "the uncategorized tasks"


def test_starting_without_an_endpoint_or_without_work_says_so(db, admin_user, scripted_upstream):
    with pytest.raises(CategorizingError, match="--role generator"):
        start_categorization(user=admin_user)
    ModelEndpoint.objects.create(name="gen", base_url=scripted_upstream.base_url, model="m", roles=["generator"])
    with pytest.raises(CategorizingError, match="nothing to categorize"):
        start_categorization(user=admin_user)
    assert not JobRun.objects.exists()


def test_accept_all_runs_as_a_job_accepting_what_was_pending(
    generator, scripted_upstream, admin_user, django_capture_on_commit_callbacks
):
    tasks = [make_task(f"t{i}") for i in range(3)]
    proposals = propose(scripted_upstream, *tasks)
    run = _queued(lambda: start_accept_all(user=admin_user), django_capture_on_commit_callbacks)
    late = propose(scripted_upstream, make_task("late"))[0]  # came in after the click: not seen, not accepted

    assert runner.execute(run.pk) == JobRun.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.result["accepted"] == 3 and run.created_by == admin_user
    assert set(CategoryProposal.objects.filter(pk__in=[p.pk for p in proposals]).values_list("status", flat=True)) == {
        "accepted"
    }
    late.refresh_from_db()
    assert late.status == "pending"
    assert Task.objects.filter(benchmark_category__slug="analysis-reasoning").count() == 3


# --- the page ----------------------------------------------------------------------------------------------


def test_viewer_reads_the_page_without_the_admin_controls(generator, scripted_upstream, viewer_client):
    make_task("sum-sales")
    (proposal,) = propose(scripted_upstream, Task.objects.get())
    response = viewer_client.get(reverse("tasks:categories"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "sum-sales" in html and "Totals from a CSV." in html and "Analysis &amp; Reasoning" in html
    assert 'value="accept_selected"' not in html and f'form="edit-{proposal.pk}"' not in html


def test_viewer_cannot_decide(generator, scripted_upstream, viewer_client, reviewer_client):
    (proposal,) = propose(scripted_upstream, make_task("sum-sales"))
    for client in (viewer_client, reviewer_client):
        response = client.post(reverse("tasks:categories"), {"action": "accept_selected", "ids": [proposal.pk]})
        assert response.status_code == 403
    proposal.refresh_from_db()
    assert proposal.status == "pending"


def test_admin_accepts_selected_on_the_page_without_javascript(generator, scripted_upstream, admin_client, admin_user):
    a, b = make_task("a-sales"), make_task("b-sales")
    pa, pb = propose(scripted_upstream, a, b)
    page = admin_client.get(reverse("tasks:categories")).content.decode()
    assert f'name="ids" value="{pa.pk}"' in page and 'value="accept_all"' in page

    response = admin_client.post(
        reverse("tasks:categories"),
        {"action": "accept_selected", "ids": [pa.pk], "next": "/tasks/categories/"},
        follow=True,
    )

    assert response.redirect_chain == [("/tasks/categories/", 302)]
    assert "Accepted 1 proposal" in response.content.decode()
    a.refresh_from_db()
    b.refresh_from_db()
    assert a.benchmark_category.slug == "analysis-reasoning" and a.current_revision.author_user == admin_user
    assert b.benchmark_category is None
    pb.refresh_from_db()
    assert pb.status == "pending"


def test_admin_edits_and_rejects_one_on_the_page(generator, scripted_upstream, admin_client):
    a, b = make_task("a-sales"), make_task("b-sales")
    pa, pb = propose(scripted_upstream, a, b)
    url = reverse("tasks:categories")
    admin_client.post(url, {"action": "edit", "proposal": pa.pk, "category": "planning-knowledge-management"})
    admin_client.post(url, {"action": "reject", "proposal": pb.pk})
    a.refresh_from_db()
    pb.refresh_from_db()
    assert a.benchmark_category.slug == "planning-knowledge-management" and pb.status == "rejected"
    # A decided one is refused with the reason, not applied twice.
    response = admin_client.post(
        url, {"action": "edit", "proposal": pa.pk, "category": "software-development"}, follow=True
    )
    assert "can no longer be decided" in response.content.decode()
    a.refresh_from_db()
    assert a.benchmark_category.slug == "planning-knowledge-management"
    # Decided proposals leave the open list and show under their status.
    assert "a-sales" not in admin_client.get(url).content.decode()
    assert "a-sales" in admin_client.get(url + "?status=edited").content.decode()


def test_admin_starts_categorization_from_the_page(
    generator, scripted_upstream, admin_client, django_capture_on_commit_callbacks
):
    make_task("sum-sales")
    url = reverse("tasks:categories")
    with django_capture_on_commit_callbacks(execute=False):
        response = admin_client.post(url, {"action": "start"})
    run = JobRun.objects.get(kind="tasks.categorize")
    assert response.status_code == 302 and response["Location"] == reverse("jobs:detail", args=[run.pk])
    # The page shows the job under way, and a second start is refused while it is.
    assert f'id="job-progress-{run.pk}"' in admin_client.get(url).content.decode()
    response = admin_client.post(url, {"action": "start"}, follow=True)
    assert f"categorization job #{run.pk} is already under way" in response.content.decode()
    run.status = JobRun.Status.SUCCEEDED
    run.save()
    # With htmx the progress comes back in place.
    with django_capture_on_commit_callbacks(execute=False):
        response = admin_client.post(url, {"action": "start"}, **HTMX)
    second = JobRun.objects.exclude(pk=run.pk).get(kind="tasks.categorize")
    assert response.status_code == 200 and f'id="job-progress-{second.pk}"' in response.content.decode()


def test_start_without_an_endpoint_shows_why(db, admin_client):
    make_task("sum-sales")
    response = admin_client.post(reverse("tasks:categories"), {"action": "start"}, **HTMX)
    assert response.status_code == 200 and "--role generator" in response.content.decode()
    assert not JobRun.objects.exists()


def test_dashboard_links_to_the_proposals(viewer_client, outsider_client):
    assert reverse("tasks:categories") in viewer_client.get(reverse("dashboard")).content.decode()
    assert outsider_client.get(reverse("tasks:categories")).status_code == 403  # a role is needed to read


def test_the_django_admin_shows_proposals_read_only(generator, scripted_upstream, admin_client):
    (proposal,) = propose(scripted_upstream, make_task("sum-sales"))
    listing = admin_client.get(reverse("admin:tasks_categoryproposal_changelist"))
    assert listing.status_code == 200 and "sum-sales" in listing.content.decode()
    page = admin_client.get(reverse("admin:tasks_categoryproposal_change", args=[proposal.pk]))
    assert page.status_code == 200 and "Totals from a CSV." in page.content.decode()
    assert admin_client.post(reverse("admin:tasks_categoryproposal_change", args=[proposal.pk]), {}).status_code == 403


# --- the API -----------------------------------------------------------------------------------------------


def test_api_lists_filters_accepts_and_edits(generator, scripted_upstream, admin_user, viewer, api_as):
    a, b, c = make_task("a-sales"), make_task("b-sales"), make_task("c-broken")
    scripted_upstream.push(
        answer("analysis-reasoning", "Totals."), answer("analysis-reasoning", "Totals."), Reply.error(500, "boom")
    )
    pa, pb, pc = propose_categories([a, b, c])
    url = "/api/category-proposals/"

    listed = api_as(viewer).get(url, {"status": "pending"})
    assert listed.status_code == 200
    rows = listed.json()["results"]
    assert {r["task"] for r in rows} == {"a-sales", "b-sales"}
    assert rows[0].keys() >= {"id", "task", "revision", "category", "reason", "status", "error", "endpoint_name"}
    assert api_as(viewer).get(url, {"status": "failed"}).json()["results"][0]["error"]
    assert api_as(viewer).get(url, {"staus": "x"}).status_code == 400

    assert api_as(viewer).post(url + "accept/", {"ids": [pa.pk]}, format="json").status_code == 403
    assert (
        api_as(viewer).post(url + f"{pb.pk}/edit/", {"category": "systems-automation"}, format="json").status_code
        == 403
    )

    accepted = api_as(admin_user).post(url + "accept/", {"ids": [pa.pk, pc.pk]}, format="json")
    assert accepted.status_code == 200
    assert accepted.json() == {
        "accepted": [pa.pk],
        "rejected": [],
        "skipped": [{"id": pc.pk, "status": "failed"}],
        "errors": [],
    }
    assert api_as(admin_user).post(url + "accept/", {"ids": [999999]}, format="json").status_code == 400

    edited = api_as(admin_user).post(url + f"{pb.pk}/edit/", {"category": "systems-automation"}, format="json")
    assert edited.status_code == 200
    assert edited.json()["status"] == "edited" and edited.json()["decided_category"] == "systems-automation"
    assert edited.json()["decided_revision"] == 2
    again = api_as(admin_user).post(url + f"{pb.pk}/edit/", {"category": "systems-automation"}, format="json")
    assert again.status_code == 409
    assert api_as(admin_user).post(url + f"{pc.pk}/edit/", {"category": "cooking"}, format="json").status_code == 400

    a.refresh_from_db()
    b.refresh_from_db()
    assert a.benchmark_category.slug == "analysis-reasoning" and b.benchmark_category.slug == "systems-automation"


def test_api_starts_categorization(generator, admin_user, viewer, api_as, django_capture_on_commit_callbacks):
    make_task("sum-sales")
    assert api_as(viewer).post("/api/category-proposals/categorize/", {}, format="json").status_code == 403
    with django_capture_on_commit_callbacks(execute=False):
        response = api_as(admin_user).post(
            "/api/category-proposals/categorize/", {"tasks": ["sum-sales"]}, format="json"
        )
    assert response.status_code == 202
    run = JobRun.objects.get(kind="tasks.categorize")
    assert run.params == {"task_ids": [Task.objects.get().pk], "endpoint": None}
    bad = api_as(admin_user).post("/api/category-proposals/categorize/", {"tasks": ["nope"]}, format="json")
    assert bad.status_code == 400
