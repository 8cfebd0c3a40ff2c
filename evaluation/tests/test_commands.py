"""The `rollout` and `rollout_files` commands (builtin harness, --here: in this process, explicitly)."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import Rollout
from evaluation.testing import FRUIT_CSV, RIGHT_SUMMARY, needs_bwrap
from llm.testing import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def run_command(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@needs_bwrap
def test_rollout_here_prints_one_json_object_per_rollout_and_files_writes_the_final_workspace(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint, tmp_path
):
    scripted_upstream.push(
        Reply.tool_call("write", {"path": "out/summary.txt", "content": RIGHT_SUMMARY}),
        Reply.text("Done."),
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}),
        Reply.tool_call("exec", {"command": "rm fruit.csv; ln -s summary.txt latest.txt"}),
        Reply.text("Done."),
    )
    out, err = run_command(
        "rollout",
        "--task",
        "fruit-summary",
        "--endpoint",
        "scripted",
        "--harness",
        "builtin",
        "--repeats",
        "2",
        "--here",
        "--json",
    )

    rows = json.loads(out.strip().splitlines()[-1])
    assert [(r["task"], r["status"], r["repeat"]) for r in rows] == [
        ("fruit-summary", "scored", 0),
        ("fruit-summary", "scored", 1),
    ]
    first, second = rows
    assert set(first) >= {
        "id",
        "task",
        "status",
        "score",
        "sub_scores",
        "turns",
        "tool_calls",
        "final_message",
        "workspace_changes",
    }
    assert first["score"] == 0.5 and first["sub_scores"]["summary_written"] == 0.0
    assert (first["turns"], first["tool_calls"], first["final_message"]) == (2, 1, "Done.")
    assert first["cost"] == "0.00000000"  # as the API writes a cost; str() of a zero Decimal gave "0E-8"
    # Folders are part of the stored diff (rollout_files recreates them) but not listed as changes.
    assert first["workspace_changes"] == [{"path": "out/summary.txt", "change": "added", "size": 18, "kind": "file"}]
    assert second["score"] == 0.75 and second["sub_scores"]["input_kept"] == 0.0
    assert {(c["path"], c["change"]) for c in second["workspace_changes"]} == {
        ("summary.txt", "added"),
        ("latest.txt", "added"),
        ("fruit.csv", "deleted"),
    }
    assert "2 of 2 rollouts scored; mean score 0.625" in out and "running here" in err

    run_command("rollout_files", str(first["id"]), str(tmp_path / "first"))
    assert (tmp_path / "first" / "fruit.csv").read_bytes() == FRUIT_CSV
    assert (tmp_path / "first" / "out" / "summary.txt").read_text() == RIGHT_SUMMARY
    run_command("rollout_files", str(second["id"]), str(tmp_path / "second"))
    written = sorted(p.name for p in (tmp_path / "second").iterdir())
    assert written == ["latest.txt", "summary.txt"]
    assert (tmp_path / "second" / "latest.txt").is_symlink()
    assert (tmp_path / "second" / "latest.txt").read_text() == RIGHT_SUMMARY


def test_rollout_names_what_is_missing(fruit_task, agent_endpoint):
    with pytest.raises(CommandError, match="no such task: nope"):
        run_command("rollout", "--task", "nope", "--endpoint", "scripted")
    with pytest.raises(CommandError, match=r"no model endpoint named 'gpt' \(known: scripted\)"):
        run_command("rollout", "--task", "fruit-summary", "--endpoint", "gpt")
    with pytest.raises(CommandError, match="--endpoint NAME is required"):
        run_command("rollout", "--task", "fruit-summary")
    with pytest.raises(CommandError, match="repeats must be between 1 and 64"):
        run_command("rollout", "--task", "fruit-summary", "--endpoint", "scripted", "--repeats", "0")
    with pytest.raises(CommandError, match="--option takes KEY=VALUE"):
        run_command("rollout", "--task", "fruit-summary", "--endpoint", "scripted", "--option", "oops")
    with pytest.raises(
        CommandError, match="the builtin harness takes no option max_turn; its options: few_shot, max_turns,"
    ):
        run_command(
            "rollout",
            "--task",
            "fruit-summary",
            "--endpoint",
            "scripted",
            "--harness",
            "builtin",
            "--option",
            "max_turn=2",
        )
    assert Rollout.objects.count() == 0


def test_rollout_without_workers_gives_up_and_cancels_instead_of_running_inline(fruit_task, agent_endpoint, use_engine):
    use_engine("django_q")  # nothing runs the ORM queue in this test
    with pytest.raises(CommandError, match="no job worker took the rollout jobs within 1 s"):
        run_command("rollout", "--task", "fruit-summary", "--endpoint", "scripted", "--start-timeout", "1")
    rollout = Rollout.objects.get()
    assert rollout.status == Rollout.Status.CANCELLED and rollout.attempt == 0
    assert rollout.job_run.status == "cancelled"


def test_rollout_files_refuses_unscored_rollouts_and_non_empty_folders(fruit_task, agent_endpoint, tmp_path):
    rollout = Rollout.objects.create(revision=fruit_task, endpoint=agent_endpoint, harness="builtin")
    with pytest.raises(CommandError, match=f"rollout #{rollout.pk} is queued"):
        run_command("rollout_files", str(rollout.pk), str(tmp_path / "x"))
    Rollout.objects.filter(pk=rollout.pk).update(status=Rollout.Status.SCORED)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    with pytest.raises(CommandError, match="exists and is not an empty folder"):
        run_command("rollout_files", str(rollout.pk), str(tmp_path / "full"))
    with pytest.raises(CommandError, match="no rollout #999"):
        run_command("rollout_files", "999", str(tmp_path / "y"))
