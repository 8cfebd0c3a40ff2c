"""`manage.py sanity_check`: choosing tasks, --here, the JSON it prints, and refusing to run without workers.

Runs on real workers are in test_sanity_worker.py.
"""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from jobs.models import JobRun
from tasks.models import SanityReport
from tasks.testing import make_sanity_task

RUN_KEYS = {"score", "status", "reason", "subscores", "duration"}


pytestmark = pytest.mark.usefixtures("bwrap")  # every test here runs checkers in bubblewrap


def sanity_check(*args):
    out, err = StringIO(), StringIO()
    try:
        call_command("sanity_check", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), exc
    return out.getvalue(), err.getvalue(), None


def test_here_with_json_prints_one_object_per_task_on_the_last_line(db):
    make_sanity_task("b-lenient", lenient=True)
    make_sanity_task("a-sound")
    make_sanity_task("c-fragile", crash=True, solution=None)
    make_sanity_task("d-not-asked")
    out, _, error = sanity_check("--task", "c-fragile", "a-sound", "b-lenient", "--here", "--workers", "2", "--json")
    assert error is None
    lines = out.strip().splitlines()
    assert lines[-2] == "checked 3 of 3 tasks: 1 crashed, 1 over-lenient, 0 unsolvable, 0 could not run"
    rows = json.loads(lines[-1])
    assert [row["task"] for row in rows] == ["a-sound", "b-lenient", "c-fragile"]
    for row in rows:
        assert {"empty", "initial", "scaffold", "inputs_emptied", "claim"} <= set(row["runs"])
        assert set(row["runs"]) == set(row["lazy_workspaces"]) and "llm" in row["moves_not_run"]
        assert all(RUN_KEYS <= set(run) for run in row["runs"].values())
    sound, lenient, fragile = rows
    assert (sound["crashed"], sound["over_lenient"], sound["solvable"]) == (False, False, True)
    assert lenient["over_lenient"] is True and lenient["runs"]["scaffold"]["score"] == 0.5
    assert lenient["lazy_best"] == {
        "workspace": "scaffold",
        "score": 0.5,
        "paying_checks": {"out_exists": 1.0},
        "description": "the inputs and a placeholder at each output path the instruction names",
        "files": [{"path": "data.csv", "size": 6}, {"path": "out.json", "size": 3}],
        "final_message": "",
    }
    assert sound["solvability"]["proven"] is True and sound["solvability"]["kind"] == "solution"
    assert fragile["solvability"]["proven"] is False and fragile["solvability"]["kind"] is None
    assert "it has no reference solution, and no rollout of it scored 1" in fragile["solvability"]["missing"]
    assert fragile["crashed"] is True and fragile["solvable"] is None
    assert fragile["runs"]["empty"]["status"] == "error" and "FileNotFoundError" in fragile["runs"]["empty"]["reason"]
    # Run here: stored, without a job.
    assert SanityReport.objects.count() == 3 and not SanityReport.objects.filter(job_run__isnull=False).exists()
    assert not JobRun.objects.exists()


def test_here_without_json_prints_a_line_per_task(db):
    make_sanity_task("sound")
    make_sanity_task("lenient", lenient=True, solution={"out.json": b'{"total": 4}'})
    out, _, error = sanity_check("--all", "--here")
    assert error is None
    assert out.splitlines() == [
        "lenient r1: over-lenient (a lazy agent earns 0.5 on the scaffold workspace [data.csv, out.json]; empty 0, "
        "initial 0, scaffold 0.5, inputs_emptied 0, stubs_list 0.5, stubs_only 0.5, inputs_copied 0.5, claim 0.5; "
        "paying: out_exists=1); solution scores 0.5 (ok); solvability not proven",
        "sound r1: passed",
        "checked 2 of 2 tasks: 0 crashed, 1 over-lenient, 1 unsolvable, 0 could not run",
    ]


def test_without_workers_it_says_so_and_fails(db):
    make_sanity_task("waiting")
    out, _, error = sanity_check("--all", "--json", "--start-timeout", "0.3")
    assert error is not None and "no job worker took sanity check job" in str(error) and "--here" in str(error)
    assert error.returncode == 3  # jobs.cli: not started
    (row,) = json.loads(out.strip().splitlines()[-1])  # the JSON last, on failure too
    assert row["task"] == "waiting" and row["error"] == "no job worker took the check" and row["crashed"] is None
    batch = JobRun.objects.get()
    # Cancelled, so that a worker starting later does not run it; nothing ran inline.
    assert batch.kind == "tasks.sanity_check_batch" and batch.status == JobRun.Status.CANCELLED
    assert not SanityReport.objects.exists()


def test_a_sandbox_that_cannot_run_is_an_error_not_a_finding(db, settings, monkeypatch):
    monkeypatch.delenv("CLAWGYM_ALLOW_UNSANDBOXED", raising=False)
    settings.CLAWGYM_SANDBOX_BACKEND = "process"
    make_sanity_task("blocked")
    out, _, error = sanity_check("--task", "blocked", "--here", "--json")
    assert error is not None and "1 check(s) could not run" in str(error) and "CLAWGYM_ALLOW_UNSANDBOXED" in str(error)
    (row,) = json.loads(out.strip().splitlines()[-1])
    assert row["task"] == "blocked" and row["crashed"] is None and "CLAWGYM_ALLOW_UNSANDBOXED" in row["error"]
    assert not SanityReport.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "nope", "also-nope", "--here"], "no such task: nope, also-nope"),
        (["--here"], "give --all, --task ID ... or --tasks-from SELECTION"),
        (["--all", "--task", "x"], "--all goes alone"),
        (["--all", "--here"], "there are no tasks"),
    ],
)
def test_wrong_arguments(db, args, message):
    _, _, error = sanity_check(*args)
    assert error is not None and message in str(error)
