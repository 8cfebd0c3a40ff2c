"""The in-browser solve and the editors' helpers, through the pages (htmx and plain) and the services: a reviewer's
scratch workspace, the checker run on it (the job run here, in the sandbox), saving it as the reference solution,
several parts as one revision, the syntax check, a check traced to its lines, and a new diagnosis when the checker
changes. The queue's "No issues" never stands beside a blocked candidate."""

import pytest
from django.urls import reverse

from jobs.models import JobRun
from jobs.runner import execute
from jobs.scratch import remove_tree, scratch_root
from llm.models import ModelEndpoint
from review import edits, services, solving
from review.job_kinds import DIAGNOSE_JOB, SOLVE_JOB
from review.models import BenchmarkCandidate, ReviewDecision
from review.solvability import SOLUTION, SOLVE, proof_for
from review.tests.helpers import HTMX, add_diagnosis, sanity, text, url
from review.tests.test_solvability import rollout_of
from review.views.candidate_parts import Unit
from tasks.job_kinds import SANITY_JOB
from tasks.models import RevisionFile, TaskRevision
from tasks.package import STANDARD_REWARD_SH, PackageFile, TaskPackage
from tasks.sanity import check_revision
from tasks.services import revise_task, save_package
from tasks.testing import make_task

# Full marks only for a report.md that names the total: the initial workspace scores 0.
CHECK = """import json, os
text = open("report.md").read() if os.path.exists("report.md") else ""
print(json.dumps({
    "report_exists": bool(text),
    "total_named": "total 1" in text,
}))
"""


@pytest.fixture(autouse=True)
def no_workspaces():
    """Workspaces live on disk, keyed by ids the next test's database hands out again: start each test without."""
    remove_tree(scratch_root() / solving.FOLDER)


@pytest.fixture
def candidate(benchmark, admin_user):
    package = TaskPackage(
        external_id="t-solve",
        instruction="Summarise sales.csv into report.md, naming the total.",
        files=[
            PackageFile("sales.csv", b"item,amount\na,1\n"),
            PackageFile("reward.sh", STANDARD_REWARD_SH.encode(), role="reward"),
            PackageFile("check.py", CHECK.encode(), role="reward"),
        ],
    )
    task = save_package(package).task
    services.propose_candidates(benchmark, [task], user=admin_user)
    return BenchmarkCandidate.objects.get(task=task)


@pytest.fixture
def claimed(candidate, reviewer):
    services.claim(candidate, user=reviewer)
    return candidate


def current(candidate) -> TaskRevision:
    candidate.task.refresh_from_db()
    return candidate.task.current_revision


def run_latest(candidate, user) -> JobRun:
    """Run the reviewer's queued solve here, as a worker would (the sandbox runs the checker)."""
    run = solving.runs(candidate, user).first()
    assert execute(run.pk) == JobRun.Status.SUCCEEDED, JobRun.objects.get(pk=run.pk).error
    return JobRun.objects.get(pk=run.pk)


def post(client, name, candidate, data=None, htmx=True):
    return client.post(url(name, candidate), data or {}, **(HTMX if htmx else {}))


# --- the workspace ---------------------------------------------------------------------------------------------


def test_open_edit_run_see_checks_and_save_as_the_solution(reviewer_client, api_as, claimed, reviewer, bwrap):
    candidate = claimed
    page = text(reviewer_client.get(url("candidate", candidate)))
    assert 'data-testid="solve-open"' in page and 'id="solve-editor"' in page

    opened = post(reviewer_client, "solve_open", candidate)
    assert "Opened the initial workspace of r1: 1 files." in text(opened)
    assert "sales.csv" in text(opened) and "Not yet: run the checker on the workspace first." in text(opened)

    added = post(
        reviewer_client, "solve_file_save", candidate, {"action": "create", "path": "report.md", "content": "no"}
    )
    assert "Added report.md to your workspace." in text(added) and "ch-added" in text(added)
    editor = reviewer_client.get(url("solve_file", candidate) + "?path=report.md", **HTMX)
    assert 'data-path="report.md"' in text(editor) and "\nno</textarea>" in text(editor)

    post(reviewer_client, "solve_run", candidate)
    run = run_latest(candidate, reviewer)
    assert run.kind == SOLVE_JOB and run.result["score"] == 0.5 and not run.result["solved"]
    panel = text(reviewer_client.get(url("solve", candidate), **HTMX))
    assert 'data-testid="solve-score">Score 0.50' in panel
    # Each check links to the line of check.py that names it; the run's output is behind a disclosure.
    unit = Unit(current(candidate), "reward", "check.py")
    assert (
        f'hx-target="#{unit.dom_id}"' in panel and "reward/check.py:4</a>" in panel and "reward/check.py:5</a>" in panel
    )
    assert 'data-testid="solve-output"' in panel and "&quot;total_named&quot;: false" in panel
    assert "Not yet: the last run scored 0.50, not full marks." in panel
    refused = post(reviewer_client, "solve_save", candidate, {"base_revision": 1})
    assert "cannot save it as the solution: the last run scored 0.50" in text(refused)

    saved = post(
        reviewer_client, "solve_file_save", candidate, {"action": "save", "path": "report.md", "content": "total 1"}
    )
    assert "Saved report.md in your workspace." in text(saved) and "solve-changed" in saved.headers["HX-Trigger"]
    assert "the workspace changed since its last run" in text(reviewer_client.get(url("solve", candidate), **HTMX))
    post(reviewer_client, "solve_run", candidate)
    assert run_latest(candidate, reviewer).result["solved"]
    assert 'class="primary" data-testid="solve-save" >' in text(reviewer_client.get(url("solve", candidate), **HTMX))

    response = post(reviewer_client, "solve_save", candidate, {"base_revision": 1, "reason": "solved it by hand"})
    assert response.status_code == 200 and "?saved=2#saved" in response.headers["HX-Location"]
    revision = current(candidate)
    assert revision.number == 2 and "in-browser solve" in revision.message and "solved it by hand" in revision.message
    solution = dict(revision.files.filter(role="solution").values_list("path", "blob__data"))
    assert {path: bytes(data) for path, data in solution.items()} == {"report.md": b"total 1"}
    assert candidate.decisions.filter(decision=ReviewDecision.Decision.FIX, revision=revision).exists()
    assert JobRun.objects.filter(kind="tasks.sanity_check", params__revision_id=revision.pk).count() == 1

    # Its sanity check re-runs the solution on r2: the proof is the reviewer's solve, named as such.
    sanity(revision)
    shown = api_as(reviewer).get(f"/api/candidates/{candidate.pk}/").json()["solvability"]
    assert (shown["kind"], shown["reviewer"], shown["saved_as"]) == (SOLVE, reviewer.username, 2)
    panel = text(reviewer_client.get(url("candidate_part", candidate, "accept"), **HTMX))
    assert f"{reviewer.username}&#x27;s in-browser solve, saved as the reference solution in r2, scored 1" in panel
    # A later revision keeping that solution is still proven by the solve; one with another solution is not.
    edits.save_edit(candidate, user=reviewer, field="instruction", content="Other.", base_revision=revision)
    sanity(current(candidate))
    assert (proof_for(current(candidate)).kind, proof_for(current(candidate)).saved_as) == (SOLVE, 2)
    edits.save_edit(
        candidate,
        user=reviewer,
        field="solution",
        path="report.md",
        content="total: 1",
        base_revision=current(candidate),
    )
    sanity(current(candidate))
    assert proof_for(current(candidate)).kind == SOLUTION


def test_a_workspace_can_start_from_the_solution_and_deleting_an_input_cannot_be_saved(
    reviewer_client, claimed, reviewer, admin_user, bwrap
):
    candidate = claimed
    revise_task(
        candidate.task, user=admin_user, message="solution", file_changes={("solution", "report.md"): b"total 1"}
    )
    opened = post(reviewer_client, "solve_open", candidate, {"source": "solution"})
    assert "Opened the reference solution of r2: 2 files." in text(opened)
    post(reviewer_client, "solve_file_save", candidate, {"action": "delete", "path": "sales.csv"})
    post(reviewer_client, "solve_run", candidate)
    assert run_latest(candidate, reviewer).result["solved"]  # this checker never reads sales.csv
    refused = post(reviewer_client, "solve_save", candidate, {"base_revision": 2})
    assert "cannot delete any: restore sales.csv" in text(refused) and current(candidate).number == 2


def test_a_new_revision_since_the_run_asks_for_another_run(reviewer_client, claimed, reviewer, admin_user, bwrap):
    candidate = claimed
    post(reviewer_client, "solve_open", candidate)
    solving.write_file(candidate, user=reviewer, path="report.md", content="total 1")
    post(reviewer_client, "solve_run", candidate)
    run_latest(candidate, reviewer)
    revise_task(candidate.task, user=admin_user, message="other", instruction="Summarise it, naming the total.")
    panel = text(reviewer_client.get(url("solve", candidate), **HTMX))
    assert "the task has a new revision since the last run" in panel and "the task is at r2 now" in panel


def test_bad_paths_sizes_and_too_many_workspaces_are_refused_clearly(
    reviewer_client, claimed, reviewer, benchmark, admin_user, monkeypatch
):
    candidate = claimed
    assert "open a scratch workspace first" in text(post(reviewer_client, "solve_run", candidate))
    post(reviewer_client, "solve_open", candidate)
    bad = post(reviewer_client, "solve_file_save", candidate, {"action": "create", "path": "../etc/x", "content": "x"})
    assert "bad file path" in text(bad)
    clash = post(
        reviewer_client, "solve_file_save", candidate, {"action": "create", "path": "sales.csv/x", "content": "1"}
    )
    assert "sales.csv is a file in the workspace" in text(clash)
    exists = post(
        reviewer_client, "solve_file_save", candidate, {"action": "create", "path": "sales.csv", "content": "1"}
    )
    assert "sales.csv exists already: edit it instead" in text(exists)
    monkeypatch.setattr(solving, "MAX_BYTES", 1024 * 1024)
    big = post(
        reviewer_client,
        "solve_file_save",
        candidate,
        {"action": "create", "path": "big.txt", "content": "x" * 1_100_000},
    )
    assert "holds at most 1 MiB in all" in text(big)
    plain = post(reviewer_client, "solve_file_save", candidate, {"action": "bogus", "path": "a"}, htmx=False)
    assert plain.status_code == 400

    monkeypatch.setattr(solving, "MAX_WORKSPACES", 1)
    other = make_task("t-other")
    services.propose_candidates(benchmark, [other], user=admin_user)
    refused = post(reviewer_client, "solve_open", BenchmarkCandidate.objects.get(task=other))
    assert (
        f"you have 1 scratch workspaces open, the most one reviewer may keep: discard one first (candidate #{candidate.pk})"
        in text(refused)
    )
    assert "Your scratch workspace is discarded." in text(post(reviewer_client, "solve_discard", candidate))
    assert "Opened the initial workspace" in text(
        post(reviewer_client, "solve_open", BenchmarkCandidate.objects.get(task=other))
    )


def test_an_unusable_scratch_folder_is_explained_not_a_server_error(reviewer_client, claimed, settings, tmp_path):
    not_a_folder = tmp_path / "scratch"
    not_a_folder.write_text("a file where the scratch folder should be")
    settings.CLAWGYM_SCRATCH_DIR = not_a_folder
    assert reviewer_client.get(url("candidate", claimed)).status_code == 200
    refused = post(reviewer_client, "solve_open", claimed)
    assert "scratch workspaces are unavailable on this server" in text(refused) and "is not a folder" in text(refused)


def test_only_reviewers_solve_and_each_sees_only_their_own(
    viewer_client, reviewer_client, second_reviewer, candidate, reviewer
):
    assert viewer_client.post(url("solve_open", candidate), **HTMX).status_code == 403
    assert 'data-testid="solve-open"' not in text(viewer_client.get(url("candidate", candidate)))
    solving.open_workspace(candidate, user=reviewer)
    assert solving.workspace(candidate, second_reviewer) is None
    assert reviewer_client.get(url("solve_file", candidate) + "?path=nope.txt", **HTMX).status_code == 404
    plain = reviewer_client.post(url("solve_open", candidate))
    assert plain.status_code == 302 and plain.url.endswith("#solve")


# --- several parts as one revision; the syntax check --------------------------------------------------------------


def test_save_all_makes_one_revision_one_decision_and_one_sanity_check(reviewer_client, claimed):
    candidate = claimed
    data = {
        "field": ["instruction", "reward", "solution"],
        "path": ["", "check.py", "report.md"],
        "content": ["Summarise sales.csv, naming the total.", CHECK.replace("total 1", "total: 1"), "total: 1"],
        "base_revision": 1,
        "reason": "three at once",
    }
    response = reviewer_client.post(url("save_all", candidate), data, **HTMX)
    assert response.status_code == 200 and "?saved=2#saved" in response.headers["HX-Location"]
    revision = current(candidate)
    assert revision.number == 2 and revision.instruction == "Summarise sales.csv, naming the total."
    assert "three at once" in revision.message
    assert RevisionFile.objects.get(revision=revision, role="solution", path="report.md").blob.content == b"total: 1"
    assert candidate.decisions.filter(decision=ReviewDecision.Decision.FIX).count() == 1
    assert JobRun.objects.filter(kind="tasks.sanity_check").count() == 1


def test_save_all_refuses_a_checker_that_does_not_compile_and_saves_nothing(reviewer_client, claimed):
    data = {
        "field": ["reward", "instruction"],
        "path": ["check.py", ""],
        "content": ["def f(:\n", "New."],
        "base_revision": 1,
    }
    refused = reviewer_client.post(url("save_all", claimed), data, **HTMX)
    assert "reward/check.py does not compile: line 1" in text(refused) and current(claimed).number == 1
    uneven = reviewer_client.post(url("save_all", claimed), {"field": ["reward"], "path": [], "content": []}, **HTMX)
    assert uneven.status_code == 400


def test_a_single_save_of_a_checker_that_does_not_compile_is_refused_keeping_the_text(reviewer_client, claimed):
    data = {"field": "reward", "path": "check.py", "content": "def f(:\n", "base_revision": 1}
    refused = reviewer_client.post(url("candidate_edit", claimed), data, **HTMX)
    assert "reward/check.py does not compile: line 1" in text(refused) and "def f(:" in text(refused)
    assert current(claimed).number == 1
    data = {"field": "input", "path": "broken.py", "content": "def f(:\n", "base_revision": 1, "action": "create"}
    reviewer_client.post(url("candidate_edit", claimed), data, **HTMX)  # an input file may be broken on purpose
    assert current(claimed).number == 2


def test_the_syntax_check_names_the_line(reviewer_client, candidate):
    bad = reviewer_client.post(url("syntax", candidate), {"path": "reward/check.py", "content": "x = 1\nif x\n"}).json()
    assert bad["ok"] is False and bad["line"] == 2 and "expected ':'" in bad["message"]
    assert reviewer_client.post(url("syntax", candidate), {"path": "check.py", "content": "x = 1\n"}).json()["ok"]
    assert reviewer_client.post(url("syntax", candidate), {"path": "notes.md", "content": "if x"}).json() == {
        "ok": True,
        "checked": False,
    }


# --- a check traced to its lines ------------------------------------------------------------------------------


def test_a_check_opens_the_checker_at_the_lines_that_name_it(reviewer_client, viewer_client, candidate):
    assert solving.check_lines(current(candidate), "total_named") == [("check.py", [5])]
    assert solving.check_lines(current(candidate), "nowhere") == []
    response = reviewer_client.get(url("candidate_check", candidate) + "?name=total_named", **HTMX)
    assert 'data-highlight="5"' in text(response) and "name the check <code>total_named</code>" in text(response)
    viewed = viewer_client.get(url("candidate_check", candidate) + "?name=total_named", **HTMX)
    assert "<textarea" not in text(viewed) and 'data-testid="check-source"' in text(viewed)
    assert reviewer_client.get(url("candidate_check", candidate) + "?name=nowhere", **HTMX).status_code == 404
    assert reviewer_client.get(url("candidate_check", candidate), **HTMX).status_code == 400


def test_the_sanity_card_links_the_checks_that_pay_a_lazy_agent(reviewer_client, candidate):
    sanity(current(candidate), lazy=0.5, paying={"report_exists": 1.0})
    page = text(reviewer_client.get(url("candidate", candidate)))
    assert "Checks that pay a lazy agent" in page
    assert "?name=report_exists&amp;path=check.py" in page and "reward/check.py:4</a>" in page


def test_each_sanity_run_s_output_is_one_click_away(reviewer_client, candidate, bwrap):
    check_revision(current(candidate), backend=bwrap)
    page = text(reviewer_client.get(url("candidate", candidate)))
    assert 'data-testid="sanity-output"><summary>Output of the initial run</summary>' in page
    assert "&quot;report_exists&quot;: false" in page  # what check.py printed on the initial workspace


# --- diagnosing again -----------------------------------------------------------------------------------------


@pytest.fixture
def diagnosis_endpoint(db):
    return ModelEndpoint.objects.create(
        name="diag", base_url="http://127.0.0.1:9/v1", model="m", roles=["diagnosis"], enabled=True
    )


@pytest.fixture
def diagnosed(claimed):
    """The claimed candidate with a diagnosis of its current revision: a change of its checker calls for another."""
    add_diagnosis(claimed, [])
    return claimed


@pytest.fixture
def edit_checker(diagnosed, reviewer, django_capture_on_commit_callbacks):
    """Save the reviewer's edit of the diagnosed candidate's check.py, running the jobs it queues on commit."""

    def edit():
        with django_capture_on_commit_callbacks(execute=True):
            return edits.save_edit(
                diagnosed,
                user=reviewer,
                field="reward",
                path="check.py",
                content=CHECK + "\n",
                base_revision=current(diagnosed),
            )

    return edit


def test_reviewers_diagnose_again_and_hear_why_not_without_an_endpoint(reviewer_client, viewer_client, candidate):
    add_diagnosis(candidate, [])
    page = text(reviewer_client.get(url("candidate", candidate)))
    assert 'data-testid="diagnosis-unavailable"' in page and "no model endpoint serves the diagnosis role" in page
    refused = reviewer_client.post(url("candidate_diagnose", candidate), **HTMX)
    assert "Cannot diagnose: no model endpoint serves the diagnosis role" in text(refused)
    assert not JobRun.objects.filter(kind=DIAGNOSE_JOB).exists()
    assert viewer_client.post(url("candidate_diagnose", candidate), **HTMX).status_code == 403


def test_reviewers_diagnose_again_with_one_click(reviewer_client, candidate, diagnosis_endpoint):
    add_diagnosis(candidate, [])
    response = reviewer_client.post(url("candidate_diagnose", candidate), **HTMX)
    run = JobRun.objects.get(kind=DIAGNOSE_JOB)
    assert run.params == {"candidate_id": candidate.pk} and f'id="job-progress-{run.pk}"' in text(response)
    assert 'data-key="d"' in text(reviewer_client.get(url("candidate", candidate)))


def test_the_api_diagnoses_again_as_the_page_does(api_as, reviewer, viewer, admin_user, candidate, db):
    add_diagnosis(candidate, [])
    endpoint = f"/api/candidates/{candidate.pk}/diagnose/"
    refused = api_as(reviewer).post(endpoint)
    assert refused.status_code == 409 and "no model endpoint serves the diagnosis role" in refused.json()["detail"]
    assert api_as(viewer).post(endpoint).status_code == 403
    assert not JobRun.objects.filter(kind=DIAGNOSE_JOB).exists()
    ModelEndpoint.objects.create(name="diag", base_url="http://127.0.0.1:9/v1", model="m", roles=["diagnosis"])
    started = api_as(reviewer).post(endpoint)
    run = JobRun.objects.get(kind=DIAGNOSE_JOB)
    assert started.status_code == 202 and started.json()["id"] == run.pk
    assert run.params == {"candidate_id": candidate.pk} and run.created_by == reviewer
    assert api_as(admin_user).post(endpoint).json()["id"] == run.pk  # the one under way, not a second


def test_a_checker_change_starts_a_diagnosis_and_other_changes_do_not(
    reviewer_client, diagnosed, reviewer, edit_checker, diagnosis_endpoint, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        edits.save_edit(
            diagnosed, user=reviewer, field="instruction", content="Other.", base_revision=current(diagnosed)
        )
    assert not JobRun.objects.filter(kind=DIAGNOSE_JOB).exists()
    edit_checker()
    assert JobRun.objects.get(kind=DIAGNOSE_JOB).params == {"candidate_id": diagnosed.pk}


def test_a_checker_changed_outside_the_review_is_sanity_checked_and_diagnosed_again(
    api_as, reviewer, candidate, diagnosis_endpoint, django_capture_on_commit_callbacks
):
    add_diagnosis(candidate, [])
    api = api_as(reviewer)
    task_url = f"/api/tasks/{candidate.task.external_id}/"
    with django_capture_on_commit_callbacks(execute=True):
        assert api.patch(task_url, {"instruction": "Other.", "message": "m"}, format="json").status_code == 200
    assert not JobRun.objects.filter(kind__in=[SANITY_JOB, DIAGNOSE_JOB]).exists()  # the checker is the same
    with django_capture_on_commit_callbacks(execute=True):
        put = api.put(
            f"{task_url}revisions/2/files/content/?role=reward&path=check.py", {"content": CHECK + "\n"}, format="json"
        )
    assert put.status_code == 200 and current(candidate).number == 3
    (sanity_run,) = JobRun.objects.filter(kind=SANITY_JOB)
    assert sanity_run.params == {"revision_id": current(candidate).pk} and sanity_run.created_by == reviewer
    assert JobRun.objects.get(kind=DIAGNOSE_JOB).params == {"candidate_id": candidate.pk}
    JobRun.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):  # the task API's other path: the entry command
        assert (
            api.patch(task_url, {"checker_entry": "sh reward/reward.sh", "message": "m"}, format="json").status_code
            == 200
        )
    assert JobRun.objects.get(kind=SANITY_JOB).params == {"revision_id": current(candidate).pk}
    assert JobRun.objects.filter(kind=DIAGNOSE_JOB).count() == 1
    # A task that is no open candidate is left alone.
    other = make_task("t-alone")
    JobRun.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        revise_task(other, user=reviewer, message="m", file_changes={("reward", "check.py"): b"print(1)"})
    assert not JobRun.objects.exists()


def test_a_review_edit_of_the_checker_queues_one_sanity_check(edit_checker, diagnosis_endpoint):
    saved = edit_checker()
    assert list(JobRun.objects.filter(kind=SANITY_JOB)) == [saved.sanity_run]
    assert JobRun.objects.filter(kind=DIAGNOSE_JOB).count() == 1


def test_a_checker_change_without_an_endpoint_says_so(reviewer_client, diagnosed, edit_checker):
    edit_checker()
    assert not JobRun.objects.filter(kind=DIAGNOSE_JOB).exists()
    page = text(reviewer_client.get(url("candidate", diagnosed)))
    assert "The checker changed since r1 was diagnosed, but it cannot be diagnosed again" in page


# --- the queue ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "findings, reason",
    [
        (
            {"lazy": 0.5, "paying": {"report_exists": 1.0}},
            "a lazy agent earns 0.5 with this checker, above the tolerance 0",
        ),
        ({"crashed": True}, "the checker crashed in its sanity check"),
        ({"solution": 0.5}, "unsolvable: the reference solution does not score 1"),
        ({"solution": None}, "solvability not proven: no reference solution, and no rollout of this revision scored"),
    ],
)
def test_the_queue_shows_the_block_instead_of_no_issues(reviewer_client, candidate, findings, reason):
    add_diagnosis(candidate, [])
    sanity(current(candidate), **findings)
    issues = text(reviewer_client.get(reverse("review:queue"))).split('data-testid="issues"')[1][:800]
    assert 'data-testid="sanity-blocked"' in issues and reason in issues and "No issues" not in issues
    assert services.sanity_block(current(candidate), candidate.benchmark)  # the accept gate agrees


def test_a_rollout_that_scored_full_marks_proves_it_in_the_queue_too(reviewer_client, candidate):
    add_diagnosis(candidate, [])
    sanity(current(candidate), solution=None)
    rollout_of(current(candidate), 1.0)
    issues = text(reviewer_client.get(reverse("review:queue"))).split('data-testid="issues"')[1][:800]
    assert "No issues" in issues and "sanity-blocked" not in issues
    assert services.sanity_block(current(candidate), candidate.benchmark) is None


def test_the_queue_says_no_issues_when_nothing_blocks(reviewer_client, candidate):
    add_diagnosis(candidate, [])
    sanity(current(candidate))
    issues = text(reviewer_client.get(reverse("review:queue"))).split('data-testid="issues"')[1][:800]
    assert "No issues" in issues and "sanity-blocked" not in issues
