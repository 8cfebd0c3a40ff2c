"""The checker protocol (tasks.verification): payload, parsing, and a hostile battery at the protocol level.

Every misbehaving checker must give score 0 with its reason recorded, and never raise. The sandbox itself has its
own tests (sandbox/tests); here checkers run through the default bubblewrap backend as they do in production.
"""

import json
import socket
import threading

import pytest

from sandbox import Limits, Workspace, get_backend
from tasks.package import STANDARD_REWARD_SH
from tasks.verification import (
    PAYLOAD_ENV,
    BadOutput,
    CheckerSpec,
    CheckStatus,
    parse_output,
    run_checker,
)

FAST = Limits(wall_seconds=10, cpu_seconds=10, max_output_bytes=64 * 1024)


def spec(check_py: str = "", reward_sh: str = STANDARD_REWARD_SH, entry: str = "bash reward/reward.sh"):
    files = {"reward.sh": reward_sh.encode()}
    if check_py:
        files["check.py"] = check_py.encode()
    return CheckerSpec(
        task_id="t-1", instruction="Write out.json", metadata={"category": "Analysis"}, entry=entry,
        reward_files=files,
    )  # fmt: skip


def run(checker, files=None, backend=None, limits=FAST, **kwargs):
    with Workspace.create(files or {"data.csv": b"a,b\n1,2\n"}) as workspace:
        return run_checker(checker, workspace, backend=backend, limits=limits, **kwargs), workspace


def shell(script: str, check_py: str = "") -> CheckerSpec:
    return spec(check_py, reward_sh="#!/usr/bin/env bash\n" + script + "\n")


# --- parsing ---------------------------------------------------------------------------------------------------


def test_parse_takes_the_last_line_as_score_and_the_json_line_as_subscores():
    score, subscores, note = parse_output('checking...\n{"a": 1, "b": 0.5, "c": false}\n0.5\n')
    assert score == 0.5 and subscores == {"a": 1.0, "b": 0.5, "c": 0.0} and note == ""


def test_parse_reads_pretty_printed_subscores_and_notes_a_disagreeing_mean():
    score, subscores, note = parse_output('{\n  "a": 1,\n  "b": 1\n}\n0.25\n')
    assert score == 0.25 and subscores == {"a": 1.0, "b": 1.0}
    assert "differs from the mean of the sub-scores 1" in note and "the last line is the score" in note


def test_parse_accepts_a_bare_score_and_says_there_were_no_subscores():
    assert parse_output("1\n") == (1.0, {}, "no sub-scores printed")


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", "printed nothing"),
        ('{"a": 1}\n', "last line is not a number"),
        ("done\n", "last line is not a number"),
        ("nan\n", "not a finite number"),
        ("inf\n", "not a finite number"),
        ("1e400\n", "not a finite number"),
        ("1.5\n", "outside [0, 1]"),
        ("-0.1\n", "outside [0, 1]"),
        ('{"a": 1,\n0.5\n', "not valid JSON"),
        ('{"a": NaN}\n0.5\n', "sub-score 'a' is nan"),
        ('{"a": 2}\n1\n', "sub-score 'a' 2 is outside"),
        ('{"a": "yes"}\n1\n', "sub-score 'a' is \"yes\", not a number"),
        ('{"a": null}\n1\n', "not a number"),
    ],
)
def test_parse_refuses_what_is_not_a_score(stdout, message):
    with pytest.raises(BadOutput) as caught:
        parse_output(stdout)
    assert message in str(caught.value)


# --- the protocol ----------------------------------------------------------------------------------------------


def test_standard_checker_scores_the_mean_of_its_subscores(bwrap):
    check = 'import json, os\nprint(json.dumps({"has_data": os.path.exists("data.csv"), "has_out": 0.0}))\n'
    result, _ = run(spec(check), backend=bwrap)
    assert result.status is CheckStatus.OK and result.ok
    assert result.score == 0.5 and result.subscores == {"has_data": 1.0, "has_out": 0.0}
    assert result.isolated and result.backend == "bwrap" and result.reason == ""


def test_payload_and_workspace_paths_follow_clawgym(bwrap):
    check = """import json, os
path = os.environ["OPENCLAW_REWARD_PAYLOAD"]
p = json.load(open(path))
print(json.dumps({
    "payload_in_workspace": path == "/root/.openclaw/workspace/reward/.payload.json",
    "fields": sorted(p) == ["final_message", "metadata", "task_id", "transcript", "user_query"],
    "task": p["task_id"] == "t-1" and p["user_query"] == "Write out.json" and p["metadata"]["category"] == "Analysis",
    "final_message": p["final_message"] == "Done: wrote out.json",
    "transcript": p["transcript"] == [{"role": "user", "content": "hi"}],
    "openclaw_path": os.path.exists("/root/.openclaw/workspace/data.csv"),
}))
"""
    transcript = [{"role": "user", "content": "hi"}]
    with Workspace.create({"data.csv": b"x"}) as workspace:
        result = run_checker(spec(check), workspace, "Done: wrote out.json", transcript, backend=bwrap, limits=FAST)
    assert result.ok, result
    assert result.subscores == dict.fromkeys(result.subscores, 1.0) and len(result.subscores) == 6


def test_the_revisions_entry_command_is_used(bwrap):
    checker = spec('print(\'{"only": 1}\')\nprint(0.75)\n', entry="python3 reward/check.py")
    result, _ = run(checker, backend=bwrap)
    assert result.ok and result.score == 0.75 and "differs from the mean" in result.reason


def test_a_reward_folder_left_by_the_agent_is_replaced_without_following_links(bwrap, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    with Workspace.create({"data.csv": b"x"}) as workspace:
        (workspace.root / "reward").symlink_to(outside)
        result = run_checker(spec('print(\'{"a": 1}\')'), workspace, backend=bwrap, limits=FAST)
        assert not (workspace.root / "reward").is_symlink()
    assert result.ok and result.score == 1.0
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"] and (outside / "keep.txt").read_text() == "mine"


# --- the hostile battery: score 0, a reason, no exception ------------------------------------------------------

HOSTILE = {
    "bad_json": ("echo '{\"a\": 1,'; echo 1.0", CheckStatus.BAD_OUTPUT, "not valid JSON"),
    "nan_score": ("echo '{\"a\": 1}'; echo nan", CheckStatus.BAD_OUTPUT, "not a finite number"),
    "inf_subscore": ("echo '{\"a\": Infinity}'; echo 1", CheckStatus.BAD_OUTPUT, "sub-score 'a' is inf"),
    "score_above_one": ("echo '{\"a\": 1}'; echo 1.01", CheckStatus.BAD_OUTPUT, "outside [0, 1]"),
    "negative_score": ("echo -1", CheckStatus.BAD_OUTPUT, "outside [0, 1]"),
    "no_output": ("true", CheckStatus.BAD_OUTPUT, "printed nothing"),
    "words_not_score": ("echo 'all good!'", CheckStatus.BAD_OUTPUT, "not a number"),
    "non_zero_exit": ("echo '{\"a\": 1}'; echo 1.0; echo 'boom' >&2; exit 3", CheckStatus.ERROR, "exit code 3: boom"),
    "crash_in_check_py": (
        "set -e; python3 reward/check.py; echo 1.0",
        CheckStatus.ERROR,
        "exit code 1: SystemExit: check.py cannot parse out.json",
    ),
    "timeout": ("echo 1.0; sleep 30", CheckStatus.TIMEOUT, "wall-clock limit of 2 s"),
    "killed": ("echo 1.0; kill -9 $$", CheckStatus.KILLED, "SIGKILL"),
    "output_flood": ("yes 1.0", CheckStatus.OUTPUT_LIMIT, "output went past"),
    "deletes_input": ("rm data.csv; echo 1.0", CheckStatus.TAMPERED, "deleted data.csv"),
    "rewrites_input": ("echo forged > data.csv; echo 1.0", CheckStatus.TAMPERED, "changed data.csv"),
    "rewrites_itself": ("echo 'print(1)' > reward/check.py; echo 1.0", CheckStatus.TAMPERED, "changed reward/check.py"),
    "wipes_workspace": ("rm -rf /root/.openclaw/workspace/*; echo 1.0", CheckStatus.TAMPERED, "deleted data.csv"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_checkers_score_zero_with_a_reason(bwrap, name):
    script, status, reason = HOSTILE[name]
    files = {"data.csv": b"a,b\n1,2\n", "notes.md": b"# notes\n"}
    checker = shell(script, check_py="import sys\nsys.exit('SystemExit: check.py cannot parse out.json')\n")
    limits = Limits(wall_seconds=2, cpu_seconds=2, max_output_bytes=64 * 1024)
    result, _ = run(checker, files=files, backend=bwrap, limits=limits)
    assert result.status is status, result
    assert result.score == 0.0 and result.subscores == {}
    assert reason in result.reason and result.reason


def test_a_checker_cannot_reach_the_network(bwrap):
    """A checker that only passes when it reaches a server on the host's loopback gets 0, and the server no call."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    connections = []
    server.settimeout(5)

    def accept():
        try:
            connections.append(server.accept())
        except OSError:
            pass

    listener = threading.Thread(target=accept, daemon=True)
    listener.start()
    check = f"""import json, socket
socket.create_connection(("127.0.0.1", {port}), timeout=3).sendall(b"score me")
print(json.dumps({{"reached_server": 1}}))
"""
    try:
        result, _ = run(spec(check), backend=bwrap)
    finally:
        server.close()
        listener.join(timeout=10)
    assert result.status is CheckStatus.ERROR and result.score == 0.0
    assert "Connection refused" in result.reason or "unreachable" in result.reason, result.reason
    assert connections == []


def test_a_checker_may_add_files(bwrap):
    result, _ = run(shell("mkdir -p .cache && echo x > .cache/tmp; echo '{\"a\": 1}'; echo 1"), backend=bwrap)
    assert result.ok and result.score == 1.0


# --- without a sandbox -----------------------------------------------------------------------------------------


def test_the_process_backend_is_refused_without_the_opt_in(monkeypatch):
    monkeypatch.delenv("CLAWGYM_ALLOW_UNSANDBOXED", raising=False)
    result, _ = run(shell("echo 1"), backend=get_backend("process"))
    assert result.status is CheckStatus.SANDBOX_ERROR and result.score == 0.0
    assert "UnsandboxedRefused" in result.reason and "CLAWGYM_ALLOW_UNSANDBOXED=1" in result.reason
    assert result.isolated is False


def test_the_process_backend_marks_results_unisolated_and_passes_a_host_payload_path(monkeypatch):
    monkeypatch.setenv("CLAWGYM_ALLOW_UNSANDBOXED", "1")
    check = 'import json, os\nprint(json.dumps({"payload": json.load(open(os.environ["%s"]))["task_id"] == "t-1"}))\n'
    with Workspace.create({"data.csv": b"x"}) as workspace:
        result = run_checker(spec(check % PAYLOAD_ENV), workspace, backend=get_backend("process"), limits=FAST)
        payload_path = workspace.root / "reward" / ".payload.json"
        assert json.loads(payload_path.read_text())["task_id"] == "t-1"
    assert result.ok and result.score == 1.0 and result.isolated is False and result.backend == "process"


def test_the_backend_comes_from_settings(settings, monkeypatch, bwrap):
    monkeypatch.delenv("CLAWGYM_ALLOW_UNSANDBOXED", raising=False)
    settings.CLAWGYM_SANDBOX_BACKEND = "process"
    result, _ = run(shell("echo 1"), backend=None)
    assert result.status is CheckStatus.SANDBOX_ERROR
    settings.CLAWGYM_SANDBOX_BACKEND = "bwrap"
    result, _ = run(shell("echo 1"), backend=None)
    assert result.ok and result.backend == "bwrap"
