"""Every command that takes tasks says it one way (tasks.selection: --task A B C, repeated --task, --tasks-from) and
ends one way (jobs.cli: 1 failed, 2 refused, 3 not started; with --json the JSON last, on failure too)."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command, get_commands, load_command_class

from jobs.cli import FAILED, NOT_STARTED, REFUSED
from tasks.models import Task
from tasks.selection import tasks_of
from tasks.testing import make_task

# Each command that takes tasks, with what else its parser needs.
TASK_COMMANDS = {
    "evaluate": ["--endpoint", "e"],
    "rollout": ["--endpoint", "e"],
    "regrade": [],
    "sanity_check": [],
    "propose_candidates": ["--benchmark", "b"],
    "assess_tasks": [],
    "categorize_tasks": [],
    "export_tasks": ["out"],
    "train": ["--kind", "rl", "--base-model", "/models/x"],
}


def parse(name: str, *args: str) -> dict:
    command = load_command_class(get_commands()[name], name)
    return vars(command.create_parser("manage.py", name).parse_args(list(args)))


def run(*args) -> tuple[str, CommandError | None]:
    out = StringIO()
    try:
        call_command(*args, stdout=out, stderr=StringIO())
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


@pytest.mark.parametrize("name", TASK_COMMANDS)
def test_task_ids_add_up_however_they_are_spelled(name):
    extra = TASK_COMMANDS[name]
    spaced = parse(name, *extra, "--task", "a", "b", "c")["task_ids"]
    assert spaced == parse(name, *extra, "--task", "a", "--task", "b", "--task", "c")["task_ids"] == ["a", "b", "c"]
    assert parse(name, *extra, "--task", "a", "b", "--task", "c")["task_ids"] == ["a", "b", "c"]
    selection = parse(name, *extra, "--tasks-from", "status=ready,limit=2")
    assert selection["tasks_from"] == "status=ready,limit=2" and selection["task_ids"] is None


def test_difficulty_filter_candidates_add_up_the_same_way():
    extra = ["--benchmark", "b", "--strong", "s", "--small", "w"]
    assert parse("difficulty_filter", *extra, "--candidate", "a", "b", "--candidate", "c")["candidate"] == [
        "a",
        "b",
        "c",
    ]


def test_both_spellings_resolve_to_the_same_tasks_in_every_command(db):
    from training_jobs.kinds.rl import resolve_tasks

    for external_id in ("t-a", "t-b", "t-c"):
        make_task(external_id)
    Task.objects.filter(external_id="t-c").update(source=Task.Source.SKILL)
    for name, extra in TASK_COMMANDS.items():
        spaced = parse(name, *extra, "--task", "t-b", "t-a")
        repeated = parse(name, *extra, "--task", "t-b", "--task", "t-a")
        if name == "train":  # its ids may be revision ids too, and benchmark tasks are refused (training_jobs.kinds.rl)
            assert resolve_tasks(spaced["task_ids"]) == resolve_tasks(repeated["task_ids"])
            continue
        assert (
            [t.external_id for t in tasks_of(spaced)] == [t.external_id for t in tasks_of(repeated)] == ["t-b", "t-a"]
        )
        # Ids first, then the selection's tasks (newest first), each once.
        both = tasks_of(parse(name, *extra, "--task", "t-b", "--tasks-from", "prefix=t-"))
        assert [t.external_id for t in both] == ["t-b", "t-c", "t-a"]
        assert [t.external_id for t in tasks_of(parse(name, *extra, "--tasks-from", "source=skill"))] == ["t-c"]


def test_what_cannot_be_resolved_is_refused_with_exit_status_2(db):
    make_task("t-a")
    for args, message in (
        ({"task_ids": ["t-a", "nope", "nada"]}, "no such task: nope, nada"),
        ({"tasks_from": "colour=red"}, "unknown task selection filter 'colour=red'"),
        ({"tasks_from": "source=skill"}, "the selection 'source=skill' names no task"),
        ({"all_tasks": True, "task_ids": ["t-a"]}, "--all goes alone"),
    ):
        with pytest.raises(CommandError, match=message) as raised:
            tasks_of(args)
        assert raised.value.returncode == REFUSED


def test_refusals_exit_2(db):
    make_task("t-a")
    for args, message in (
        (["evaluate", "--task", "t-a", "--endpoint", "e", "--here"], "no model endpoint named 'e'"),
        (["rollout", "--task", "t-a", "nope", "--endpoint", "e"], "no such task: nope"),
        (["sanity_check", "--here"], "give --all, --task ID ... or --tasks-from SELECTION"),
        (["regrade", "--run", "1", "--task", "t-a"], "give --run RUN or --task ID"),
        (["rollout", "--tasks-from", "status=ready", "--retry", "3"], "one of them"),
        (["train", "--kind", "rl", "--base-model", "/models/x", "--tasks-from", "prefix=zz"], "names no task"),
    ):
        _out, error = run(*args)
        assert error is not None and message in str(error), (args, error)
        assert error.returncode == REFUSED, args


def test_on_the_command_line_refusals_and_argparse_errors_both_exit_2(capsys):
    command = load_command_class("evaluation", "rollout")
    with pytest.raises(SystemExit) as exited:
        command.run_from_argv(["manage.py", "rollout", "--no-such-flag"])
    assert exited.value.code == 2
    with pytest.raises(SystemExit) as exited:  # refused before it touches the database
        command.run_from_argv(["manage.py", "rollout", "--endpoint", "e", "--skip-checks"])
    assert exited.value.code == REFUSED
    assert "UsageError: give --task ID ..." in capsys.readouterr().err


def test_no_worker_exits_3_with_the_json_last(db):
    make_task("t-a")
    out, error = run("sanity_check", "--task", "t-a", "--json", "--start-timeout", "0.2")
    assert error is not None and error.returncode == NOT_STARTED and "no job worker took sanity check job" in str(error)
    (row,) = json.loads(out.strip().splitlines()[-1])
    assert row["task"] == "t-a" and "no job worker" in row["error"]

    out, error = run(
        "train", "--kind", "rl", "--base-model", "/models/x", "--task", "t-a", "--json", "--start-timeout", "0.2"
    )
    assert error is not None and error.returncode == NOT_STARTED and "gpu queue" in str(error)
    report = json.loads(out.strip().splitlines()[-1])
    assert report["status"] == "cancelled" and f"train --resume {report['run']}" in str(error)


def test_work_that_ran_and_failed_exits_1_with_the_json_last(db, settings, monkeypatch):
    monkeypatch.delenv("CLAWGYM_ALLOW_UNSANDBOXED", raising=False)
    settings.CLAWGYM_SANDBOX_BACKEND = "process"  # refuses to run a checker unsandboxed: the check cannot run
    make_task("t-a")
    out, error = run("sanity_check", "--tasks-from", "prefix=t-", "--here", "--json")
    assert error is not None and error.returncode == FAILED and "1 check(s) could not run" in str(error)
    (row,) = json.loads(out.strip().splitlines()[-1])
    assert row["task"] == "t-a" and "CLAWGYM_ALLOW_UNSANDBOXED" in row["error"]
