"""The docker backend. Tests that need an engine run where one answers and are skipped elsewhere."""

from __future__ import annotations

import json

import pytest

from sandbox import Limits, SandboxUnavailable, Status, get_backend
from sandbox.backends.docker import container_options


@pytest.fixture(scope="module")
def docker_backend():
    backend = get_backend("docker")
    try:
        backend.check_available()
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    image = backend.image
    try:
        backend.client.images.get(image)
    except Exception:
        pytest.skip(f"Docker image {image} is not present (docker pull {image})")
    return backend


def test_unavailable_engine_is_reported_with_its_address(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailable, match=r"no Docker engine answers at unix:///nonexistent/docker.sock"):
        get_backend("docker").check_available()


def test_container_is_configured_as_a_sandbox(workspace):
    limits = Limits(memory_bytes=512 << 20, max_processes=64, cpu_seconds=30, tmpfs_bytes=8 << 20)
    options = container_options(
        ["python3", "check.py"],
        workspace,
        env={"A": "1"},
        limits=limits,
        cwd="/workspace",
        ro_binds=[("/opt/node", "/opt/node")],
        extra_binds=[],
        user="65534:65534",
    )
    assert options["network_mode"] == "none"
    assert options["read_only"] is True and options["cap_drop"] == ["ALL"]
    assert options["security_opt"] == ["no-new-privileges"]
    assert options["mem_limit"] == options["memswap_limit"] == 512 << 20
    assert options["pids_limit"] == 64
    assert {u["Name"]: (u["Soft"], u["Hard"]) for u in options["ulimits"]}["cpu"] == (30, 31)
    assert options["tmpfs"]["/tmp"] == f"size={8 << 20},mode=1777"
    mounts = {m["Target"]: (m["Source"], m["ReadOnly"]) for m in options["mounts"]}
    assert mounts == {
        "/workspace": (str(workspace.root), False),
        "/root/.openclaw/workspace": (str(workspace.root), False),
        "/opt/node": ("/opt/node", True),
    }
    assert options["user"] == "65534:65534"
    # The SDK's own translation accepts every option (a typo would raise TypeError here, not only on an engine).
    from docker.models.containers import _create_container_args

    host_config = _create_container_args(dict(options, image="img", version="1.45"))["host_config"]
    assert host_config["NetworkMode"] == "none" and host_config["PidsLimit"] == 64


def test_runs_python_in_the_workspace(docker_backend, workspace):
    result = docker_backend.run(
        ["python3", "-c", "import os, json; print(json.dumps([os.getcwd(), open('input.txt').read()]))"],
        workspace,
        limits=Limits(wall_seconds=120),
    )
    assert result.status is Status.OK, result
    assert json.loads(result.stdout) == ["/workspace", "hello\n"]
    assert result.isolated and result.backend == "docker"


def test_no_network(docker_backend, workspace):
    script = "import socket; socket.create_connection(('1.1.1.1', 443), timeout=3)"
    result = docker_backend.run(["python3", "-c", script], workspace, limits=Limits(wall_seconds=120))
    assert result.status is Status.ERROR, result


def test_limits(docker_backend, workspace):
    loop = docker_backend.run(["python3", "-c", "while True: pass"], workspace, limits=Limits(wall_seconds=3))
    assert loop.status is Status.TIMEOUT, loop
    flood = docker_backend.run(["yes"], workspace, limits=Limits(wall_seconds=120, max_output_bytes=10_000))
    assert flood.status is Status.OUTPUT_LIMIT and len(flood.stdout) == 10_000, flood
    script = "x = bytearray(2 << 30); x[::4096] = b'x' * len(range(0, 2 << 30, 4096))"
    oom = docker_backend.run(
        ["python3", "-c", script], workspace, limits=Limits(wall_seconds=120, memory_bytes=256 << 20)
    )
    assert oom.status is Status.OOM, oom


def test_writes_come_back_to_the_workspace(docker_backend, workspace):
    result = docker_backend.run(
        "echo done > /root/.openclaw/workspace/out.txt", workspace, limits=Limits(wall_seconds=120)
    )
    assert result.ok, result
    assert workspace.diff().added["out.txt"].content == b"done\n"
