"""The checker protocol (tasks.verification): payload, parsing, the published ClawGym shapes, and a hostile battery
at the protocol level.

Every misbehaving checker must give score 0 with its reason recorded, and never raise; a checker that writes into
the workspace it judges keeps its score, with the writes recorded. The sandbox itself has its own tests
(sandbox/tests); here checkers run through the default bubblewrap backend as they do in production.
"""

import json
import socket
import threading

import pytest

from sandbox import Limits, Workspace, get_backend, runtime_version
from tasks.testing import (
    AVERAGING_REWARD_SH,
    FAST,
    HOSTILE,
    PLANIFY_CHECK_PY,
    PLANIFY_INPUTS,
    PLANIFY_SOLUTION,
    run,
    shell,
    spec,
)
from tasks.verification import (
    CAPTURE_BYTES,
    CAPTURE_HOOK,
    PAYLOAD_ENV,
    BadOutput,
    CheckStatus,
    WorkspaceWrite,
    parse_output,
    run_checker,
)

# --- parsing ---------------------------------------------------------------------------------------------------


def test_parse_takes_the_last_line_as_score_and_the_json_line_as_subscores():
    score, subscores, note = parse_output('checking...\n{"a": 1, "b": 0.5, "c": false}\n0.5\n')
    assert score == 0.5 and subscores == {"a": 1.0, "b": 0.5, "c": 0.0} and note == ""


def test_parse_reads_pretty_printed_subscores_and_notes_a_disagreeing_mean():
    score, subscores, note = parse_output('{\n  "a": 1,\n  "b": 1\n}\n0.25\n')
    assert score == 0.25 and subscores == {"a": 1.0, "b": 1.0}
    assert "differs from the mean of the sub-scores 1" in note and "the last line is the score" in note


def test_parse_accepts_a_bare_score_and_says_when_no_subscores_were_found_anywhere():
    """A bare score is ClawGym's own reward.sh output: the sub-scores then come from what check.py printed
    (`captured`); only when that is missing too (no check.py ran) or holds no JSON object does the note say so."""
    assert parse_output("1\n") == (1.0, {}, "no sub-scores printed")
    note = "reward/check.py printed no JSON object of sub-scores"
    assert parse_output("1\n", captured="all good\n") == (1.0, {}, note)


def test_parse_takes_the_subscores_check_py_printed_when_reward_sh_printed_only_the_score():
    score, subscores, note = parse_output("0.5\n", captured='checking\n{"a": 1, "b": false}\n')
    assert (score, subscores, note) == (0.5, {"a": 1.0, "b": 0.0}, "")


def test_parse_notes_a_garbled_capture_but_keeps_the_score():
    score, subscores, note = parse_output("0.5\n", captured='{"a": "yes"}\n')
    assert score == 0.5 and subscores == {}
    assert "reward/check.py printed no valid sub-scores" in note and "not a number" in note


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
    checker = spec("print('{\"only\": 1}')\nprint(0.75)\n", entry="python3 reward/check.py")
    result, _ = run(checker, backend=bwrap)
    assert result.ok and result.score == 0.75 and "differs from the mean" in result.reason


def test_a_reward_folder_left_by_the_agent_is_replaced_without_following_links(bwrap, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    with Workspace.create({"data.csv": b"x"}) as workspace:
        (workspace.root / "reward").symlink_to(outside)
        result = run_checker(spec("print('{\"a\": 1}')"), workspace, backend=bwrap, limits=FAST)
        assert not (workspace.root / "reward").is_symlink()
    assert result.ok and result.score == 1.0
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"] and (outside / "keep.txt").read_text() == "mine"


# --- the published ClawGym shapes ----------------------------------------------------------------------------

CLAWGYM_CHECK = """import json, os
root = "/root/.openclaw/workspace"
print(json.dumps({"has_data": os.path.exists(f"{root}/data.csv"), "has_out": os.path.exists(f"{root}/out.json"),
                  "half": 0.5}))
"""


def test_the_averaging_reward_sh_scores_its_last_line_and_keeps_check_py_subscores(bwrap):
    result, _ = run(spec(CLAWGYM_CHECK, reward_sh=AVERAGING_REWARD_SH), backend=bwrap)
    assert result.ok, result
    assert result.score == pytest.approx(0.5) and result.subscores == {"has_data": 1.0, "has_out": 0.0, "half": 0.5}
    assert result.reason == "" and result.workspace_writes == ()
    assert result.runtime == runtime_version() and result.as_dict()["runtime"] == runtime_version()


@pytest.mark.parametrize(
    "call",
    [
        'python3 -u reward/check.py | python3 -c "import sys,json; d=json.load(sys.stdin); print(sum(d.values())/len(d))"',
        'python reward/check.py | python -c "import sys,json; d=json.load(sys.stdin); print(sum(d.values())/len(d))"',
        'cd reward && out="$(python3 check.py)" && echo "$out" | python3 -c '
        '"import sys,json; d=json.load(sys.stdin); print(sum(d.values())/len(d))"',
        'here="$(cd "$(dirname "$0")" && pwd)"; /usr/bin/env python3 "$here/check.py" > /tmp/s.json; '
        "python3 -c \"import json; d=json.load(open('/tmp/s.json')); print(float(min(d.values())))\"",
    ],
    ids=["unbuffered", "python-not-python3", "from-the-reward-folder", "absolute-path-through-a-file"],
)
def test_check_py_subscores_are_kept_however_reward_sh_calls_it(bwrap, call):
    result, _ = run(spec(CLAWGYM_CHECK, reward_sh="#!/bin/bash\nset -e\n" + call + "\n"), backend=bwrap)
    assert result.ok, result
    assert result.subscores == {"has_data": 1.0, "has_out": 0.0, "half": 0.5}


def test_a_disagreeing_averager_keeps_its_score_and_says_so(bwrap):
    """A reward.sh that does not print the mean of check.py's checks: its last line counts, the reason says so."""
    reward_sh = "#!/bin/bash\npython3 reward/check.py > /dev/null\necho 1.0\n"
    result, _ = run(spec(CLAWGYM_CHECK, reward_sh=reward_sh), backend=bwrap)
    assert result.ok and result.score == 1.0 and result.subscores["has_out"] == 0.0
    assert "differs from the mean of the sub-scores 0.5" in result.reason


def test_a_checker_running_the_agents_script_keeps_its_score_and_records_the_writes(bwrap):
    checker = spec(PLANIFY_CHECK_PY, reward_sh=AVERAGING_REWARD_SH)
    with Workspace.create({**PLANIFY_INPUTS, **PLANIFY_SOLUTION}) as workspace:
        result = run_checker(checker, workspace, backend=bwrap, limits=FAST)
        rewritten = (workspace.root / "plan" / "plan.csv").read_text()
    assert result.status is CheckStatus.OK and result.score == 1.0, result
    assert result.subscores == {"script_runs": 1.0, "plan_written": 1.0, "plan_in_priority_order": 1.0}
    assert rewritten.splitlines() == ["day,task", "1,review", "2,send", "3,draft"]
    assert result.workspace_writes == (WorkspaceWrite("plan/plan.csv", "modified"),)
    assert "wrote to the workspace while judging (modified plan/plan.csv); the score stands" in result.reason
    stored = result.as_dict()
    assert stored["workspace_writes"] == [{"path": "plan/plan.csv", "change": "modified"}]
    assert stored["workspace_writes_count"] == 1


def test_the_capture_hook_leaves_no_trace_among_the_writes_and_runs_the_sitecustomize_it_hides(bwrap):
    """The hook is a sitecustomize on the PYTHONPATH, so it hides the interpreter's own (Debian's installs an
    exception hook): it must still run the next one on the path, so that a checker sees the same Python either way.
    Here a second sitecustomize after it on the PYTHONPATH of a child process stands for the interpreter's."""
    check = """import json, os, subprocess, sys
os.makedirs("/tmp/other", exist_ok=True)
open("/tmp/other/sitecustomize.py", "w").write("import sys\\nsys.stderr.write('chained')\\n")
child = subprocess.run([sys.executable, "-c", "pass"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.environ["PYTHONPATH"] + ":/tmp/other"})
print(json.dumps({
    "hook_on_path": any(p.endswith("/reward/.clawgym") for p in sys.path),
    "stdout_is_copied": type(sys.stdout).__name__ == "_TextCopy",
    "hidden_sitecustomize_runs": child.stderr == "chained",
    "children_not_told_where": "CLAWGYM_CHECK_CAPTURE" not in os.environ,
}))
"""
    result, _ = run(spec(check, reward_sh=AVERAGING_REWARD_SH), backend=bwrap)
    assert result.ok and result.subscores == dict.fromkeys(
        ("hook_on_path", "stdout_is_copied", "hidden_sitecustomize_runs", "children_not_told_where"), 1.0
    ), result
    assert result.workspace_writes == ()


def test_the_hook_caps_its_capture_where_the_reader_stops():
    assert f"\nCAPTURE_BYTES = {CAPTURE_BYTES // 1024} * 1024\n" in CAPTURE_HOOK


def test_an_agents_module_named_like_one_of_the_runtimes_cannot_choose_the_score(bwrap):
    """ClawGym's averager is `python3 -c "import sys,json; ..."` run from the workspace, where `-c` puts the
    working folder first on sys.path: a `json.py` left by the agent would print the score it likes. The runtime's
    modules win in every Python of the checker run; the agent's own modules stay importable by their names."""
    spoof = b"import sys\nprint(1.0)\nsys.exit(0)\n"
    averager = 'python3 -c "import solution, sys, json; d=json.load(sys.stdin); print(sum(d.values())/len(d))"'
    reward_sh = f'#!/bin/bash\ncd "$(dirname "$0")/.."\npython3 reward/check.py | {averager}\n'
    files = {"data.csv": b"a,b\n1,2\n", "json.py": spoof, "yaml.py": spoof, "solution.py": b"ANSWER = 42\n"}
    result, _ = run(spec(CLAWGYM_CHECK, reward_sh=reward_sh), files=files, backend=bwrap)
    assert result.ok, result
    assert result.score == pytest.approx(0.5) and result.subscores["has_out"] == 0.0
    assert result.reason == ""


# --- the hostile battery: score 0, a reason, no exception ------------------------------------------------------


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


# --- writes into the judged workspace: a warning, the score stands -------------------------------------------

WRITES = {
    "deletes_input": ("rm data.csv", [("data.csv", "deleted")]),
    "rewrites_input": ("echo forged > data.csv", [("data.csv", "modified")]),
    "rewrites_itself": ("echo '# changed' >> reward/reward.sh", [("reward/reward.sh", "modified")]),
    "wipes_workspace": (
        "rm -rf /root/.openclaw/workspace/*",
        [("data.csv", "deleted"), ("notes.md", "deleted"), ("reward/reward.sh", "deleted")],
    ),
    "adds_a_cache": ("mkdir -p .cache && echo x > .cache/tmp", [(".cache/tmp", "added")]),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_checker_writing_to_its_workspace_keeps_its_score_with_the_writes_recorded(bwrap, name):
    script, writes = WRITES[name]
    files = {"data.csv": b"a,b\n1,2\n", "notes.md": b"# notes\n"}
    result, _ = run(shell(script + "; echo '{\"a\": 1}'; echo 1.0"), files=files, backend=bwrap)
    assert result.status is CheckStatus.OK and result.score == 1.0 and result.subscores == {"a": 1.0}, result
    assert sorted(result.workspace_writes) == sorted(WorkspaceWrite(p, c) for p, c in writes)
    assert "while judging" in result.reason and writes[0][0] in result.reason and "the score stands" in result.reason


def test_writes_are_recorded_on_a_failed_run_too(bwrap):
    result, _ = run(shell("echo forged > data.csv; exit 2"), backend=bwrap)
    assert result.status is CheckStatus.ERROR and result.score == 0.0
    assert result.workspace_writes == (WorkspaceWrite("data.csv", "modified"),)
    assert result.reason.startswith("exit code 2") and "modified data.csv" in result.reason
    assert "the score stands" not in result.reason  # there is none: no score could be read


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
