"""Sanity checks of checkers (tasks.sanity): the scaffold, the findings, the stored report, its page, API and filter."""

import json
import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobs.models import JobRun
from sandbox import get_backend, runtime_version
from sandbox.testing import require_bwrap
from tasks.importing import import_path
from tasks.models import SanityReport, Task
from tasks.package import PackageFile, TaskPackage
from tasks.sanity import SanityMaterial, SanityUnavailable, check_revision, evaluate, output_paths, placeholder
from tasks.services import save_package
from tasks.testing import (
    AVERAGING_REWARD_SH,
    EXAMPLES,
    LENIENT_JSONL_CHECK_PY,
    LENIENT_JSONL_INSTRUCTION,
    PLANIFY_CHECK_PY,
    PLANIFY_INPUTS,
    PLANIFY_INSTRUCTION,
    PLANIFY_SOLUTION,
    make_sanity_task,
)

BASE = list(SanityReport.LAZY_RUNS)


def base_scores(report) -> dict:
    """The lazy scores of the empty, initial and scaffold workspaces (the moves' are tested in test_sanity_lazy)."""
    return {kind: score for kind, score in report.lazy_scores.items() if kind in BASE}


def report_for(task, **flags):
    """A stored report without running anything (for the filter, page and API tests)."""
    run = {"score": 0.0, "status": "ok", "reason": "", "subscores": {"total_right": 0.0}, "duration": 0.1}
    fields = {"crashed": False, "over_lenient": False, "solvable": True, "isolated": True, "backend": "bwrap", **flags}
    return SanityReport.objects.create(
        revision=task.current_revision,
        runs=dict.fromkeys(("empty", "initial", "scaffold"), run),
        solution_run={**run, "score": 1.0},
        tolerance=0.0,
        **fields,
    )


# --- the scaffold ----------------------------------------------------------------------------------------------

EXPECTED_OUTPUTS = {
    "expense-reconciliation-q1": ["reports/q1_expense_summary.json"],
    "fix-proration-bug": [],  # the outputs are edits of input files
    "interview-loop-schedule": ["schedule/2025-05-15_onsite.csv"],
    "lease-terms-extraction": ["lease_summary.yaml", "notes_for_me.md"],
    "meeting-notes-action-items": ["actions/2025-03-11_launch-sync.csv", "actions/2025-03-11_followup-email.md"],
    "receipt-filing-manifest": ["receipts/manifest.csv"],
}


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUTS))
def test_output_paths_of_the_example_instructions(name):
    folder = EXAMPLES / name
    instruction = json.loads((folder / "data_entry.json").read_text())["user_query"]
    root = folder / "input_files"
    inputs = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    assert output_paths(instruction, inputs) == EXPECTED_OUTPUTS[name]


def test_output_paths_skip_what_is_not_a_workspace_output():
    instruction = (
        "Read notes.md (it is docs/notes.md), e.g. the v1.2 section, see https://example.com/a.json and "
        "/etc/passwd.txt, keep reward/x.py, ../up.csv and data.csv/x.csv alone. Write `Final Report.md`, "
        "./out/summary.json, /root/.openclaw/workspace/res.csv and out/summary.json again; email bob@corp.csv."
    )
    found = output_paths(instruction, ["docs/notes.md", "data.csv"])
    assert found == ["Final Report.md", "out/summary.json", "res.csv"]


def test_placeholders():
    instruction = "Write team/plan.csv with the columns id, owner ,due and later notes.csv."
    assert placeholder("a/b.json") == b"{}\n"
    assert placeholder("notes.md") == b"# placeholder\n"
    assert placeholder("x.yaml") == b"" and placeholder("script.py") == b""
    assert placeholder("team/plan.csv", instruction) == b"id,owner,due\n"
    # No columns named: those of a CSV beside it, else a generic header.
    assert placeholder("data/out.csv", "Write data/out.csv.", {"data/in.csv": b"a,b\n1,2\n"}) == b"a,b\n"
    assert placeholder("out.csv", "Write out.csv.") == b"column\n"


# --- findings --------------------------------------------------------------------------------------------------


def test_a_sound_checker_passes(db, bwrap):
    task = make_sanity_task("sound")
    report = check_revision(task.current_revision, backend=bwrap)
    assert (report.crashed, report.over_lenient, report.solvable) == (False, False, True)
    assert report.verdict == "passed" and report.problems == []
    assert list(report.runs) == [*BASE, "inputs_emptied", "stubs_list", "stubs_only", "inputs_copied", "claim"]
    assert report.scaffold_paths == ["out.json"] and report.lazy_best == "empty"
    assert report.moves_not_run == {
        "stubs": "the same workspace as scaffold",  # `{}` at out.json either way
        "llm": "no enabled model endpoint serves the role 'judge'",
    }
    for run in report.runs.values():
        assert run["status"] == "ok" and run["score"] == 0.0 and run["subscores"] == {"total_right": 0.0}
    assert report.solution_run["score"] == 1.0 and report.solution_run["subscores"] == {"total_right": 1.0}
    assert report.backend == "bwrap" and report.isolated and report.tolerance == 0.0
    assert report.lazy_score == 0.0 and report.paying_checks == {} and report.warnings == []
    assert report.runtime == runtime_version() and report.runs["empty"]["runtime"] == runtime_version()
    assert SanityReport.objects.get() == report


def test_a_checker_crediting_a_placeholder_is_over_lenient(db, bwrap):
    report = check_revision(make_sanity_task("lenient", lenient=True).current_revision, backend=bwrap)
    assert report.over_lenient and not report.crashed and report.solvable
    assert report.runs["initial"]["score"] == 0.0 and report.runs["scaffold"]["score"] == 0.5
    assert report.problems == [
        "over-lenient: a lazy agent earns 0.5 on the scaffold workspace (paying checks: out_exists=1)"
    ]
    assert report.lazy_score == 0.5 and base_scores(report) == {"empty": 0.0, "initial": 0.0, "scaffold": 0.5}
    assert report.paying_checks == {"out_exists": 1.0} and report.paying_on("initial") == {}


# --- the published ClawGym shapes ------------------------------------------------------------------------------


def clawgym_task(external_id, instruction, check_py, inputs, solution=None):
    files = [
        PackageFile("reward.sh", AVERAGING_REWARD_SH.encode(), "reward"),
        PackageFile("check.py", check_py.encode(), "reward"),
    ]
    files += [PackageFile(path, data, "input") for path, data in inputs.items()]
    files += [PackageFile(path, data, "solution") for path, data in (solution or {}).items()]
    return save_package(TaskPackage(external_id=external_id, instruction=instruction, files=files)).task


def test_an_averaging_reward_sh_shows_which_checks_pay_a_lazy_agent(db, bwrap):
    """Empty .jsonl and .txt placeholders make "every line is valid JSON" and "the text equals the concatenation"
    true of nothing: the report names those checks, from check.py's JSON, though reward.sh printed only the mean."""
    inputs = {"contacts.csv": b"id,name\na1,Ann\nb2,Bo\nc3,Cy\n"}
    task = clawgym_task("jsonl-lenient", LENIENT_JSONL_INSTRUCTION, LENIENT_JSONL_CHECK_PY, inputs)
    report = check_revision(task.current_revision, backend=bwrap)
    assert report.scaffold_paths == ["out/records.jsonl", "out/summary.txt"]
    assert report.verdict == "over-lenient" and not report.crashed
    assert base_scores(report) == {"empty": 0.0, "initial": 0.0, "scaffold": 0.75} and report.lazy_score == 0.75
    assert report.runs["scaffold"]["subscores"] == {
        "records_exist": 1.0,
        "every_line_is_json": 1.0,
        "summary_is_concatenation": 1.0,
        "has_three_records": 0.0,
    }
    assert report.paying_checks == {"every_line_is_json": 1.0, "records_exist": 1.0, "summary_is_concatenation": 1.0}
    assert "paying checks: records_exist=1, every_line_is_json=1, summary_is_concatenation=1" in report.problems[0]
    assert report.runs["initial"]["reason"] == ""  # the sub-scores were found: no "no sub-scores printed"


def test_a_checker_running_the_agents_script_is_a_warning_not_a_crash(db, bwrap):
    task = clawgym_task("planify", PLANIFY_INSTRUCTION, PLANIFY_CHECK_PY, PLANIFY_INPUTS, PLANIFY_SOLUTION)
    report = check_revision(task.current_revision, backend=bwrap)
    assert not report.crashed and report.solvable
    assert not any("crashed" in problem for problem in report.problems)
    for kind in ("initial", "scaffold", "solution"):
        run = report.solution_run if kind == "solution" else report.runs[kind]
        assert run["status"] == "ok" and run["workspace_writes"] == [{"path": "plan/plan.csv", "change": "modified"}]
        assert "the checker wrote to the workspace while judging (modified plan/plan.csv)" in run["reason"]
    assert report.solution_run["score"] == 1.0
    assert "the checker wrote to the initial workspace while judging: modified plan/plan.csv" in report.warnings
    # The broken script still runs and writes a plan: a lazy agent earns those two of the three checks.
    assert report.lazy_score == pytest.approx(2 / 3) and report.verdict == "over-lenient"
    assert report.paying_checks == {"plan_written": 1.0, "script_runs": 1.0}
    # The empty workspace has no script: it runs nothing and writes nothing.
    assert report.runs["empty"]["status"] == "ok" and "workspace_writes" not in report.runs["empty"]


def test_the_tolerance_is_a_setting(db, bwrap, settings):
    settings.CLAWGYM_SANITY_TOLERANCE = 0.5
    report = check_revision(make_sanity_task("lenient", lenient=True).current_revision, backend=bwrap)
    assert not report.over_lenient and report.tolerance == 0.5


def test_a_checker_that_crashes_on_the_empty_workspace_is_crashed(db, bwrap):
    report = check_revision(make_sanity_task("fragile", crash=True).current_revision, backend=bwrap)
    assert report.crashed and report.verdict == "crashed" and report.solvable
    empty = report.runs["empty"]
    assert empty["status"] == "error" and empty["score"] == 0.0 and "FileNotFoundError" in empty["reason"]
    assert "data.csv" in empty["stderr"]
    assert report.runs["initial"]["status"] == "ok"
    assert report.problems[0].startswith("crashed on the empty workspace: error: exit code 1")


def test_a_wrong_solution_is_unsolvable_and_no_solution_is_unknown(db, bwrap):
    wrong = check_revision(
        make_sanity_task("wrong", solution={"out.json": b'{"total": 4}'}).current_revision, backend=bwrap
    )
    assert wrong.solvable is False and wrong.verdict == "unsolvable"
    assert wrong.problems == ["the reference solution does not score 1: scored 0"]
    unknown = check_revision(make_sanity_task("no-solution", solution=None).current_revision, backend=bwrap)
    assert unknown.solvable is None and unknown.solution_run is None and unknown.verdict == "passed"


def test_the_runs_side_by_side_find_what_they_find_one_after_another(db, bwrap):
    # The four runs are independent: side by side they hold the same results in the same order; progress is
    # reported from the calling thread (a job writes it to the database), once per run and at the end.
    material = SanityMaterial.from_revision(make_sanity_task("sound").current_revision)
    seen = []
    side_by_side = evaluate(
        material,
        backend=bwrap,
        runs_at_once=4,
        progress=lambda done, total, _what: seen.append((done, total, threading.get_ident())),
    )
    one_by_one = evaluate(material, backend=bwrap, runs_at_once=1)
    kinds = [*BASE, "inputs_emptied", "stubs_list", "stubs_only", "inputs_copied", "claim", "solution"]
    assert list(side_by_side.runs) == list(one_by_one.runs) == kinds
    for fields in ("status", "score", "subscores", "runtime"):
        assert [getattr(r, fields) for r in side_by_side.runs.values()] == [
            getattr(r, fields) for r in one_by_one.runs.values()
        ], fields
    assert [(done, total) for done, total, _thread in seen] == [(n, len(kinds)) for n in range(len(kinds) + 1)]
    assert {thread for _done, _total, thread in seen} == {threading.get_ident()}


def test_a_sandbox_that_cannot_run_stores_no_report(db, monkeypatch):
    monkeypatch.delenv("CLAWGYM_ALLOW_UNSANDBOXED", raising=False)
    with pytest.raises(SanityUnavailable, match="CLAWGYM_ALLOW_UNSANDBOXED"):
        check_revision(make_sanity_task("t").current_revision, backend=get_backend("process"))
    assert not SanityReport.objects.exists()


def test_every_run_is_marked_when_no_sandbox_was_used(db, monkeypatch):
    monkeypatch.setenv("CLAWGYM_ALLOW_UNSANDBOXED", "1")
    report = check_revision(make_sanity_task("t").current_revision, backend=get_backend("process"))
    assert report.verdict == "passed" and report.isolated is False and report.backend == "process"


# The example checkers are held to the tolerance 0: an untouched or placeholder workspace earns no point at all.
@pytest.fixture(scope="module")
def example_reports(django_db_setup, django_db_blocker):
    """Every example task imported and sanity-checked once for the module (bubblewrap; a few seconds)."""
    backend = require_bwrap()
    # Rolled back at once: the reports stay in memory, and the other tests of the module see no example task.
    with django_db_blocker.unblock(), transaction.atomic():
        import_path(EXAMPLES)
        tasks = Task.objects.select_related("current_revision", "current_revision__task")
        reports = {t.external_id: check_revision(t.current_revision, backend=backend) for t in tasks}
        transaction.set_rollback(True)
    return reports


EXAMPLE_NAMES = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_checkers_run_cleanly_and_their_solutions_score_one(example_reports, name):
    report = example_reports[name]
    assert not report.crashed, report.problems
    assert report.solvable is True, report.problems


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_checkers_are_not_over_lenient(example_reports, name):
    report = example_reports[name]
    assert not report.over_lenient, report.problems


# --- the task list filter --------------------------------------------------------------------------------------


@pytest.fixture
def flagged(db):
    """One task per filter group. `stale` crashed, then passed; `moved-on` passed on a revision no longer current."""
    tasks = {
        name: make_sanity_task(name) for name in ("crashy", "lenient", "unsolvable", "fine", "stale", "moved-on", "new")
    }
    report_for(tasks["crashy"], crashed=True)
    report_for(tasks["lenient"], over_lenient=True)
    report_for(tasks["unsolvable"], solvable=False)
    report_for(tasks["fine"], solvable=None)
    report_for(tasks["stale"], crashed=True)
    report_for(tasks["stale"])
    report_for(tasks["moved-on"])
    moved = make_sanity_task("moved-on", lenient=True)  # a new revision of the same task: its report is not current
    assert moved.current_revision.number == 2
    return tasks


@pytest.mark.parametrize(
    ("which", "expected"),
    [
        ("crashed", ["crashy"]),
        ("over_lenient", ["lenient"]),
        ("unsolvable", ["unsolvable"]),
        ("passed", ["fine", "stale"]),
        ("unchecked", ["moved-on", "new"]),
    ],
)
def test_filter_by_the_current_revisions_latest_report(flagged, which, expected):
    found = SanityReport.filter_tasks(Task.objects.all(), which)
    assert sorted(found.values_list("external_id", flat=True)) == expected


def test_the_task_list_page_filters_by_sanity(flagged, viewer_client):
    page = viewer_client.get(reverse("tasks:list"), {"sanity": "crashed"})
    assert page.status_code == 200 and [t.external_id for t in page.context["page"].object_list] == ["crashy"]
    assert 'name="sanity"' in page.content.decode()
    # A bad value drops just that filter, as with the other filters.
    assert viewer_client.get(reverse("tasks:list"), {"sanity": "bogus"}).context["page"].paginator.count == 7


@pytest.fixture
def lazy_tasks(db):
    """Four tasks whose latest reports pay a lazy agent 0, 0.15, 0.78 and 1; one never checked; one whose high lazy
    score is of an earlier report."""
    tasks = {}
    for name, lazy in (("strict", 0.0), ("slight", 0.15), ("jsonl", 0.78), ("free", 1.0), ("unchecked", None)):
        tasks[name] = make_sanity_task(name)
        if lazy is not None:
            report_for(tasks[name], lazy_score=lazy, over_lenient=lazy > 0)
    tasks["fixed"] = make_sanity_task("fixed")
    report_for(tasks["fixed"], lazy_score=0.9, over_lenient=True)
    report_for(tasks["fixed"], lazy_score=0.0)
    return tasks


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        ("0", ["free", "jsonl", "slight"]),
        ("0.1", ["free", "jsonl", "slight"]),
        ("0.2", ["free", "jsonl"]),
        ("0.5", ["free", "jsonl"]),
        ("bogus", ["fixed", "free", "jsonl", "slight", "strict", "unchecked"]),
    ],
)
def test_the_task_list_filters_by_lazy_score(lazy_tasks, viewer_client, threshold, expected):
    page = viewer_client.get(reverse("tasks:list"), {"lazy": threshold}).context["page"]
    assert sorted(t.external_id for t in page.object_list) == expected


def test_the_task_api_filters_by_lazy_score(lazy_tasks, viewer_client):
    found = viewer_client.get("/api/tasks/", {"lazy_above": "0.2"}).json()
    assert sorted(t["external_id"] for t in found["results"]) == ["free", "jsonl"]
    assert viewer_client.get("/api/tasks/", {"lazy_above": "2"}).status_code == 400


def test_the_task_list_sorts_by_lazy_score_and_shows_verdict_and_lazy_score(lazy_tasks, viewer_client):
    response = viewer_client.get(reverse("tasks:list"), {"sort": "lazy"})
    rows = response.context["page"].object_list
    # Ties by the latest update ("fixed" was made after "strict"); never checked: last.
    assert [t.external_id for t in rows] == ["free", "jsonl", "slight", "fixed", "strict", "unchecked"]
    html = response.content.decode()
    row = html[html.index(">jsonl<") :]
    row = row[: row.index("</tr>")]
    assert 'data-testid="sanity-verdict">Over-lenient<' in row and 'data-testid="lazy-score">0.780<' in row
    unchecked = html[html.index(">unchecked<") :]
    assert "not checked" in unchecked[: unchecked.index("</tr>")]
    assert 'name="lazy"' in html and 'name="sort"' in html


def test_the_task_list_reads_the_verdicts_in_one_query(lazy_tasks, viewer_client):
    with CaptureQueriesContext(connection) as queries:
        viewer_client.get(reverse("tasks:list"), {"sort": "lazy"})
    reads = [q["sql"] for q in queries.captured_queries if "tasks_sanityreport" in q["sql"]]
    assert len(reads) == 2, reads  # the list (with its subqueries), then the page's reports


def test_the_api_list_filters_by_sanity(flagged, api_as, viewer):
    api = api_as(viewer)
    body = api.get("/api/tasks/", {"sanity": "over_lenient"}).json()
    assert [row["external_id"] for row in body["results"]] == ["lenient"]
    assert api.get("/api/tasks/", {"sanity": "bogus"}).status_code == 400


# --- the task page and the API ---------------------------------------------------------------------------------


def test_the_task_page_shows_the_latest_report(db, viewer_client):
    task = make_sanity_task("shown")
    report_for(task, crashed=True)
    report = report_for(task, over_lenient=True, lazy_score=0.5, runtime="clawgym-runtime 3")
    report.runs["scaffold"] = {
        **report.runs["scaffold"],
        "score": 0.5,
        "subscores": {"out_exists": 1.0, "total_right": 0.0},
        "workspace_writes": [{"path": "plan/plan.csv", "change": "modified"}],
        "workspace_writes_count": 1,
    }
    report.save()
    html = viewer_client.get(reverse("tasks:detail", args=["shown"])).content.decode()
    assert 'data-testid="sanity-verdict">Over-lenient<' in html
    assert "over-lenient: a lazy agent earns 0.5 on the scaffold workspace (paying checks: out_exists=1)" in html
    assert 'data-testid="sanity-lazy-score">0.500<' in html
    assert 'paying" title="pays a lazy agent">out_exists=1<' in html and 'nowrap">total_right=0<' in html
    assert "Warning: the checker wrote to the scaffold workspace while judging: modified plan/plan.csv" in html
    assert 'data-testid="sanity-runtime">clawgym-runtime 3<' in html
    assert "Ran without a sandbox" not in html
    assert "Run sanity check" not in html  # viewers cannot start one


def test_the_task_page_says_when_a_check_ran_without_a_sandbox(db, viewer_client):
    report_for(make_sanity_task("bare"), isolated=False, backend="process")
    html = viewer_client.get(reverse("tasks:detail", args=["bare"])).content.decode()
    assert 'data-testid="sanity-unsandboxed"' in html and "Ran without a sandbox" in html


def test_a_task_never_checked_says_so(db, viewer_client):
    make_sanity_task("fresh")
    html = viewer_client.get(reverse("tasks:detail", args=["fresh"])).content.decode()
    assert "has not been sanity-checked yet" in html


def test_reviewers_start_a_check_from_the_page(db, reviewer_client, reviewer):
    task = make_sanity_task("startable")
    url = reverse("tasks:sanity", args=["startable"])
    assert "Run sanity check" in reviewer_client.get(reverse("tasks:detail", args=["startable"])).content.decode()
    response = reviewer_client.post(url, HTTP_HX_REQUEST="true")
    run = JobRun.objects.get()
    assert response.status_code == 200 and f'id="job-progress-{run.pk}"' in response.content.decode()
    assert run.kind == "tasks.sanity_check" and run.queue == "sandbox" and run.created_by == reviewer
    assert run.params == {"revision_id": task.current_revision_id}
    # Until it ends, the page shows the job's progress.
    page = reviewer_client.get(reverse("tasks:detail", args=["startable"])).content.decode()
    assert f'id="job-progress-{run.pk}"' in page
    # Without htmx: the job's page.
    assert reviewer_client.post(url).url == reverse("jobs:detail", args=[JobRun.objects.first().pk])


def test_viewers_cannot_start_a_check(db, viewer_client):
    make_sanity_task("guarded")
    assert viewer_client.post(reverse("tasks:sanity", args=["guarded"])).status_code == 403
    assert viewer_client.get(reverse("tasks:sanity", args=["guarded"])).status_code in (403, 405)
    assert not JobRun.objects.exists()


def test_the_api_starts_a_check_and_shows_the_report_on_the_revision(db, api_as, reviewer, viewer):
    task = make_sanity_task("api-task")
    assert api_as(viewer).post("/api/tasks/api-task/sanity/").status_code == 403
    response = api_as(reviewer).post("/api/tasks/api-task/sanity/")
    assert response.status_code == 202
    body = response.json()
    assert body["kind"] == "tasks.sanity_check" and body["status"] == "queued" and response["Location"] == body["url"]

    revision = api_as(viewer).get("/api/tasks/api-task/revisions/1/").json()
    assert revision["sanity"] is None
    report_for(task, isolated=False, backend="process", solvable=False)
    sanity = api_as(viewer).get("/api/tasks/api-task/revisions/1/").json()["sanity"]
    assert sanity["verdict"] == "unsolvable" and sanity["solvable"] is False and sanity["crashed"] is False
    assert set(sanity["runs"]) == {"empty", "initial", "scaffold"}
    empty = {"score": 0.0, "status": "ok", "reason": "", "subscores": {"total_right": 0.0}, "duration": 0.1}
    assert sanity["runs"]["empty"] == empty
    assert sanity["isolated"] is False and sanity["sandbox_warning"] == "ran without a sandbox (the process backend)"
    assert len(sanity["problems"]) == 1 and sanity["problems"][0].startswith("the reference solution does not score 1")


def test_the_api_shows_the_lazy_score_paying_checks_writes_and_runtime(db, api_as, viewer, bwrap):
    task = clawgym_task("planify-api", PLANIFY_INSTRUCTION, PLANIFY_CHECK_PY, PLANIFY_INPUTS, PLANIFY_SOLUTION)
    check_revision(task.current_revision, backend=bwrap)
    sanity = api_as(viewer).get("/api/tasks/planify-api/revisions/1/").json()["sanity"]
    assert sanity["lazy_score"] == pytest.approx(2 / 3) and sanity["paying_checks"] == {
        "plan_written": 1.0,
        "script_runs": 1.0,
    }
    assert sanity["lazy_scores"]["empty"] == 0.0 and sanity["runs"]["initial"]["subscores"]["script_runs"] == 1.0
    assert sanity["runs"]["initial"]["workspace_writes"] == [{"path": "plan/plan.csv", "change": "modified"}]
    assert sanity["runs"]["initial"]["workspace_writes_count"] == 1
    assert any("modified plan/plan.csv" in warning for warning in sanity["warnings"])
    assert "runtime" in sanity and "runtime" in sanity["runs"]["initial"]
