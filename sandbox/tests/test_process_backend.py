"""The unisolated `process` backend: refused unless allowed, and then limited as far as rlimits go."""

from __future__ import annotations

import json

import pytest

from sandbox import Limits, SandboxError, Status, UnsandboxedRefused, get_backend
from sandbox.testing import processes_with


@pytest.fixture
def process(monkeypatch):
    monkeypatch.setenv("CLAWGYM_ALLOW_UNSANDBOXED", "1")
    return get_backend("process")


@pytest.mark.parametrize("value", [None, "0", "yes", ""])
def test_refused_without_the_setting(monkeypatch, workspace, value):
    if value is None:
        monkeypatch.delenv("CLAWGYM_ALLOW_UNSANDBOXED", raising=False)
    else:
        monkeypatch.setenv("CLAWGYM_ALLOW_UNSANDBOXED", value)
    with pytest.raises(UnsandboxedRefused, match="CLAWGYM_ALLOW_UNSANDBOXED=1"):
        get_backend("process").run(["true"], workspace)


def test_runs_in_the_workspace_and_says_it_is_not_isolated(process, workspace, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    script = "import os, sys, json; print(json.dumps([os.getcwd(), sys.executable, sorted(os.environ)]))"
    result = process.run(["python3", "-c", script], workspace, env={"TASK_ID": "t"}, limits=Limits(wall_seconds=60))
    assert result.status is Status.OK, result
    assert result.isolated is False and result.backend == "process"
    cwd, executable, env_names = json.loads(result.stdout)
    assert cwd == str(workspace.root)
    assert executable == "/usr/bin/python3"
    assert "OPENAI_API_KEY" not in env_names and "TASK_ID" in env_names
    assert result.cpu_seconds is not None and result.cpu_seconds > 0


def test_cwd_maps_both_sandbox_paths(process, workspace):
    for cwd in ("data", "/workspace/data", "/root/.openclaw/workspace/data"):
        assert process.run(["pwd"], workspace, cwd=cwd).stdout == f"{workspace.root}/data\n"
    with pytest.raises(SandboxError, match="outside the workspace"):
        process.run(["pwd"], workspace, cwd="/etc")


def test_binds_are_refused(process, workspace, tmp_path):
    with pytest.raises(SandboxError, match="cannot bind"):
        process.run(["true"], workspace, ro_binds=[(tmp_path, "/opt/x")])


def test_timeout_kills_the_process_group(process, workspace, marker):
    script = f"import subprocess, time; subprocess.Popen(['sleep', '600', '{marker}']); time.sleep(600)"
    result = process.run(["python3", "-c", script], workspace, limits=Limits(wall_seconds=1))
    assert result.status is Status.TIMEOUT, result
    assert processes_with(marker) == []


def test_children_left_running_are_killed_at_exit(process, workspace, marker):
    script = f"import subprocess; subprocess.Popen(['sleep', '600', '{marker}'], stdout=subprocess.DEVNULL)"
    result = process.run(["python3", "-c", script], workspace, limits=Limits(wall_seconds=60))
    assert result.status is Status.OK, result
    assert processes_with(marker) == []


def test_limits_apply(process, workspace):
    flood = process.run(["yes"], workspace, limits=Limits(max_output_bytes=10_000))
    assert flood.status is Status.OUTPUT_LIMIT and len(flood.stdout) == 10_000
    oom = process.run(["python3", "-c", "x = bytearray(1 << 30)"], workspace, limits=Limits(memory_bytes=256 << 20))
    assert oom.status is Status.OOM, oom
    failed = process.run("exit 4", workspace)
    assert (failed.status, failed.returncode) == (Status.ERROR, 4)
    killed = process.run(["python3", "-c", "import os; os.kill(os.getpid(), 9)"], workspace)
    assert killed.status is Status.KILLED and killed.returncode == 137
