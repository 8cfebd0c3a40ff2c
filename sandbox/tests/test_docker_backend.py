"""The Docker backend: how a container is made a sandbox, and plain runs on a real engine (the hostile battery is
test_docker_hostile.py). Tests marked docker start the engine (scripts/docker-engine.sh) and build the image
(scripts/images/sandbox.sh) where they are missing; in CI an engine that cannot start fails them."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from sandbox import Limits, SandboxUnavailable, Status, get_backend, runtime_version
from sandbox.backends.docker import DockerBackend, container_options, default_image


def test_unavailable_engine_is_reported_with_its_address(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailable, match=r"no Docker engine answers at unix:///nonexistent/docker.sock"):
        get_backend("docker").check_available()


def test_the_default_image_is_the_sandbox_image_of_this_runtime(monkeypatch):
    monkeypatch.delenv("CLAWGYM_SANDBOX_IMAGE", raising=False)
    assert default_image() == f"clawgym/sandbox:{runtime_version()}"
    monkeypatch.setenv("CLAWGYM_SANDBOX_IMAGE", "registry.example/sandbox:7")
    assert get_backend("docker").image == "registry.example/sandbox:7"


def test_container_is_configured_as_a_sandbox(workspace):
    limits = Limits(
        memory_bytes=512 << 20, max_processes=64, cpu_seconds=30, tmpfs_bytes=8 << 20, address_space_bytes=4 << 30
    )
    options = container_options(
        ["python3", "check.py"],
        workspace.root,
        env={"A": "1"},
        limits=limits,
        cwd="/workspace",
        ro_binds=[("/opt/node", "/opt/node")],
        extra_binds=[],
        user="65534:65534",
        cpus=1.5,
    )
    assert options["network_mode"] == "none"
    assert options["read_only"] is True and options["cap_drop"] == ["ALL"]
    assert options["security_opt"] == ["no-new-privileges"] and options["init"] is True
    assert options["mem_limit"] == options["memswap_limit"] == 512 << 20
    assert options["pids_limit"] == 64 and options["nano_cpus"] == 1_500_000_000
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in options["ulimits"]}
    assert ulimits["cpu"] == (30, 31) and ulimits["as"] == (4 << 30, 4 << 30) and ulimits["core"] == (0, 0)
    assert options["tmpfs"]["/tmp"] == f"size={8 << 20},mode=1777,exec"
    assert options["log_config"]["Type"] == "none"  # output is read from the attach stream, never stored
    mounts = {m["Target"]: (m["Source"], m["ReadOnly"]) for m in options["mounts"]}
    assert mounts == {
        "/workspace": (str(workspace.root), False),
        "/root/.openclaw/workspace": (str(workspace.root), False),
        "/opt/node": ("/opt/node", True),
    }
    assert options["user"] == "65534:65534"
    # The SDK's own translation accepts every option (a typo would raise TypeError here, not only on an engine).
    from docker.models.containers import _create_container_args

    host_config = _create_container_args(dict(options, image="img", version="1.41"))["host_config"]
    assert host_config["NetworkMode"] == "none" and host_config["PidsLimit"] == 64


@pytest.mark.docker
def test_runs_the_runtimes_python_in_the_workspace_as_nobody(docker_sandbox, workspace):
    script = (
        "import os, json, sys; print(json.dumps([os.getcwd(), os.getuid(), sys.executable, open('input.txt').read()]))"
    )
    result = docker_sandbox.run(["python3", "-c", script], workspace, limits=Limits(wall_seconds=120))
    assert result.status is Status.OK, result
    assert json.loads(result.stdout) == ["/workspace", 65534, "/usr/bin/python3", "hello\n"]
    assert result.isolated and result.backend == "docker"
    # The same runtime as bubblewrap's, by name and by content.
    assert result.runtime == runtime_version() == docker_sandbox.runtime
    assert docker_sandbox.run(["cat", "/etc/clawgym-runtime"], workspace).stdout.strip() == runtime_version()
    assert docker_sandbox.provided_paths == {"/opt/node", "/opt/openclaw"}


@pytest.mark.docker
def test_writes_come_back_to_the_workspace(docker_sandbox, workspace):
    result = docker_sandbox.run(
        "echo done > /root/.openclaw/workspace/out.txt && rm input.txt", workspace, limits=Limits(wall_seconds=120)
    )
    assert result.ok and result.unenforced == (), result
    diff = workspace.diff()
    assert diff.added["out.txt"].content == b"done\n" and set(diff.deleted) == {"input.txt"}


@pytest.mark.docker
def test_a_missing_command_is_exit_127_and_a_missing_image_is_unavailable(docker_sandbox, workspace):
    result = docker_sandbox.run(["no-such-command"], workspace)
    assert (result.status, result.returncode, result.reason) == (Status.ERROR, 127, "exit code 127: command not found")
    with pytest.raises(SandboxUnavailable, match=r"clawgym/sandbox:not-built is not built here: run `make images`"):
        DockerBackend(image="clawgym/sandbox:not-built").check_available()


@pytest.mark.docker
def test_a_script_written_to_tmp_can_run(docker_sandbox, workspace):
    # As in bubblewrap: agents write helper scripts to /tmp and run them (Docker mounts tmpfs noexec by default).
    result = docker_sandbox.run(
        "printf '#!/bin/sh\\necho ran\\n' > /tmp/x.sh && chmod +x /tmp/x.sh && /tmp/x.sh", workspace
    )
    assert result.ok and result.stdout == "ran\n", result


@pytest.mark.docker
def test_containers_of_a_worker_killed_mid_run_are_removed_by_the_next_backend(docker_sandbox):
    import socket

    from sandbox.backends.docker import DEADLINE_LABEL, OWNER_LABEL, owner, remove_stale

    client = docker_sandbox.client
    namespace = os.readlink("/proc/self/ns/pid")[5:-1]
    future, past = str(int(time.time()) + 600), str(int(time.time()) - 1)
    labels = [
        # This pid with another start time: a process of this host that is gone.
        {OWNER_LABEL: f"{socket.gethostname()}:{namespace}:{os.getpid()}:1", DEADLINE_LABEL: future},
        # A worker elsewhere, past its deadline: its worker would have killed it by now.
        {OWNER_LABEL: "another-worker-host:1:1:1", DEADLINE_LABEL: past},
        # A worker elsewhere, still in its time: left alone.
        {OWNER_LABEL: "another-worker-host:1:1:1", DEADLINE_LABEL: future},
        # Alive: this very process.
        {OWNER_LABEL: owner(), DEADLINE_LABEL: future},
    ]
    made = [
        client.containers.create(docker_sandbox.image, ["true"], labels={"clawgym.sandbox": "1", **lb}) for lb in labels
    ]
    try:
        removed = remove_stale(client)
        assert [c.name in removed for c in made] == [True, True, False, False]
        left = {c.name for c in client.containers.list(all=True, filters={"label": "clawgym.sandbox=1"})}
        assert [c.name in left for c in made] == [False, False, True, True]
    finally:
        for container in made[2:]:
            container.remove(force=True)


@pytest.mark.docker
def test_the_image_holds_the_runtime_bubblewrap_mounts(docker_sandbox, workspace):
    """One definition, two backends: every listed command and module, the same Debian packages to the version."""
    from sandbox.runtime import PACKAGES_FILE, read_manifest, runtime_root

    manifest = read_manifest()
    imports = "; ".join(f"import {module}" for module in manifest.modules)
    script = (
        f'for c in {" ".join(manifest.commands)}; do command -v "$c" >/dev/null || echo "missing command $c"; done; '
        f'python -c "{imports}" || echo "a module does not import"'
    )
    result = docker_sandbox.run(script, workspace, limits=Limits(wall_seconds=120))
    assert result.status is Status.OK and result.stdout == "" and result.stderr == "", result
    packages = docker_sandbox.run(["cat", f"/{PACKAGES_FILE}"], workspace)
    assert packages.ok and packages.stdout == (runtime_root() / PACKAGES_FILE).read_text()
    # The harness's node runs on it (address space as rollouts give it: V8 reserves a lot up front).
    node = docker_sandbox.run(
        ["/opt/node/bin/node", "-e", "console.log(process.version)"],
        workspace,
        limits=Limits(wall_seconds=120, address_space_bytes=8 << 30),
    )
    assert node.ok and node.stdout.startswith("v24."), node


@pytest.mark.docker
def test_the_engine_script_is_idempotent_and_reports_the_engine():
    from sandbox.testing import PROJECT_DIR

    script = str(PROJECT_DIR / "scripts/docker-engine.sh")
    started = subprocess.run([script, "start"], capture_output=True, text=True, timeout=120)
    assert started.returncode == 0 and "an engine answers at" in started.stdout, started
    status = subprocess.run([script, "status"], capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and "an engine answers at" in status.stdout, status
    wrong = subprocess.run([script, "restart"], capture_output=True, text=True, timeout=10)
    assert wrong.returncode == 2 and "usage:" in wrong.stderr
    elsewhere = subprocess.run(
        [script, "status"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )
    assert elsewhere.returncode == 1 and "no engine answers at unix:///nonexistent/docker.sock" in elsewhere.stdout
