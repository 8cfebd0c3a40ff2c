"""Hostile commands every isolating sandbox backend must survive: the cases shared by the bubblewrap and Docker
batteries (test_bwrap_hostile.py, test_docker_hostile.py), which import them.

Every case must end with a recorded status and reason, nothing changed outside the workspace, no process left
behind and this test process alive. Each command carries a unique marker on its command line (inherited by every
process it forks) so leftovers can be found on the host. Bombs are bounded by themselves, so that a broken sandbox
fails the test instead of taking the machine down, and limits are kept tight.

A module importing these defines two fixtures: `sandbox_under_test` (the backend) and `sandbox_view` (a SandboxView:
what its root folder lists, and which paths the sandbox legitimately holds itself).
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sandbox import ExecResult, Limits, Status
from sandbox.testing import processes_with

PROJECT_DIR = Path(__file__).resolve().parents[2]
TIGHT = Limits(wall_seconds=20, cpu_seconds=10, memory_bytes=256 << 20, max_processes=32, max_output_bytes=1 << 20)


@dataclass(frozen=True)
class SandboxView:
    root_entries: list[str]  # what `ls /` shows inside
    own_paths: dict[str, list[str]] = field(default_factory=dict)  # path -> its listing, where the host has one too


@pytest.fixture
def hostile(sandbox_under_test, workspace, marker):
    """Run a Python script in the sandbox, then check the invariants every hostile case shares."""

    def run(script: str, limits: Limits = TIGHT, **kwargs) -> ExecResult:
        result = sandbox_under_test.run(["python3", "-c", script, marker], workspace, limits=limits, **kwargs)
        assert isinstance(result.status, Status) and result.reason
        assert processes_with(marker) == [], f"processes left behind by {result}"
        return result

    return run


def test_no_network_to_host_services_or_outside(hostile):
    # A server on the host's loopback that the sandbox must not reach; it counts whatever connects.
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.settimeout(0.2)
    accepted = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    # Abstract Unix sockets bypass the filesystem; only the network namespace keeps them apart.
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract_name = f"\0clawgym-test-{uuid.uuid4().hex}"
    abstract.bind(abstract_name)
    abstract.listen()
    script = f"""
import json, socket
results = {{}}
for name, host, port in [("test server", "127.0.0.1", {port}), ("postgres", "127.0.0.1", 5432),
                         ("redis", "127.0.0.1", 6379), ("outside tcp", "1.1.1.1", 443),
                         ("outside dns tcp", "8.8.8.8", 53)]:
    try:
        socket.create_connection((host, port), timeout=3).close()
        results[name] = "connected"
    except OSError as e:
        results[name] = type(e).__name__
try:
    socket.socket(socket.AF_UNIX).connect({abstract_name!r})
    results["abstract unix socket"] = "connected"
except OSError as e:
    results["abstract unix socket"] = type(e).__name__
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("8.8.8.8", 53))
    results["outside udp"] = "sent"
except OSError as e:
    results["outside udp"] = type(e).__name__
try:
    results["dns"] = socket.getaddrinfo("example.com", 443)[0][4][0]
except OSError as e:
    results["dns"] = type(e).__name__
results["interfaces"] = sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:])
print(json.dumps(results))
"""
    try:
        result = hostile(script)
    finally:
        stop.set()
        thread.join()
        server.close()
        abstract.close()
    assert result.status is Status.OK, result
    results = json.loads(result.stdout)
    assert results.pop("interfaces") == ["lo"]
    assert all(outcome in ("ConnectionRefusedError", "OSError", "gaierror") for outcome in results.values()), results
    assert accepted == []


def test_files_outside_the_workspace_are_invisible(hostile, sandbox_view, workspace):
    paths = [
        str(PROJECT_DIR),
        str(PROJECT_DIR / "manage.py"),
        str(PROJECT_DIR / "var"),  # the embedded database and media
        "/run/postgresql",  # PostgreSQL's Unix socket
        "/var/run",
        str(workspace.root),
        "/etc/shadow",
        "/etc/passwd-",
        "/home",
        "/srv",
        "/var/lib",
        "/opt",
        "/mnt",
        "/work",
        "/root/.bashrc",
    ]
    script = f"""
import json, os
seen = {{}}
for path in {paths!r}:
    try:
        seen[path] = os.listdir(path) if os.path.isdir(path) else open(path, "rb").read(64).decode("latin-1")
    except OSError as e:
        seen[path] = type(e).__name__
seen["/root"] = sorted(os.listdir("/root"))
seen["/"] = sorted(os.listdir("/"))
seen["passwd"] = open("/etc/passwd").read()
print(json.dumps(seen))
"""
    result = hostile(script)
    seen = json.loads(result.stdout)
    assert seen.pop("/root") == [".openclaw"]
    # The runtime's system folders (not the host's), the sandbox's own mounts and the workspace.
    assert seen.pop("/") == sorted(sandbox_view.root_entries)
    # What the sandbox itself holds at a path the host has too (the Docker image's harness under /opt).
    for path, listing in sandbox_view.own_paths.items():
        assert seen.pop(path) == listing, path
    # A synthetic passwd, not the host's accounts.
    assert {line.split(":")[0] for line in seen.pop("passwd").splitlines()} <= {"root", "nobody", "sandbox"}
    assert all(outcome == "FileNotFoundError" for outcome in seen.values()), seen


def test_secrets_in_the_parent_environment_do_not_leak(hostile, monkeypatch):
    secrets = {
        "DATABASE_URL": "postgres://admin:hunter2@127.0.0.1:5432/clawgym",
        "OPENAI_API_KEY": "sk-test-" + uuid.uuid4().hex,
        "ANTHROPIC_API_KEY": "sk-ant-" + uuid.uuid4().hex,
        "DJANGO_SECRET_KEY": uuid.uuid4().hex,
    }
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    script = """
import os
dump = [repr(dict(os.environ))]
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        dump.append(open(f"/proc/{pid}/environ", "rb").read().decode("latin-1"))
    except OSError:
        pass
print("\\n".join(dump))
"""
    result = hostile(script)
    assert result.status is Status.OK, result
    for key, value in secrets.items():
        assert key not in result.stdout and value not in result.stdout


def test_writes_outside_the_workspace_fail_or_vanish(hostile, workspace):
    tag = uuid.uuid4().hex
    host_targets = [f"/tmp/clawgym-escape-{tag}", f"/root/clawgym-escape-{tag}", str(PROJECT_DIR / f"escape-{tag}")]
    sandbox_targets = ["/usr/escape", "/etc/escape", "/escape", "/proc/escape", "/dev/escape", "/bin/escape"]
    script = f"""
import json, os
outcome = {{}}
for path in {host_targets + sandbox_targets!r}:
    try:
        with open(path, "w") as f:
            f.write("escaped")
        outcome[path] = "written"
    except OSError as e:
        outcome[path] = type(e).__name__
print(json.dumps(outcome))
"""
    result = hostile(script)
    outcome = json.loads(result.stdout)
    # /tmp and /root are the sandbox's own tmpfs: writing there works and disappears with the sandbox.
    assert outcome.pop(f"/tmp/clawgym-escape-{tag}") == "written"
    assert outcome.pop(f"/root/clawgym-escape-{tag}") == "written"
    assert all(value in ("OSError", "FileNotFoundError", "PermissionError") for value in outcome.values()), outcome
    for path in host_targets + sandbox_targets:
        assert not os.path.exists(path), path
    assert workspace.diff().empty


# Every process keeps forking: at most 2**11 = 2048 processes if the limit failed. The command itself (the first
# process, right under the sandbox's init) prints how many processes it sees and the RLIMIT_NPROC in force.
# Each process alone fits (no per-process limit stops it); together they need 3.2 GiB of a 1 GiB total.
FOUR_PROCESSES_OF_800_MIB = """
import os, time
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(800 << 20)
        block[::4096] = b"x" * len(range(0, 800 << 20, 4096))
        time.sleep(2)
        os._exit(0)
    children.append(pid)
print([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children])
"""

FORK_STORM = """
import errno, os, resource, sys, time
first = os.getpid()
failures = 0
for _ in range(11):
    try:
        os.fork()
    except OSError as e:
        failures += e.errno == errno.EAGAIN
if failures:
    sys.stderr.write("fork refused\\n")
time.sleep(2)
if os.getpid() == first:
    print(len([p for p in os.listdir("/proc") if p.isdigit()]), resource.getrlimit(resource.RLIMIT_NPROC)[0])
    sys.exit(0)
time.sleep(60)
"""


def test_fork_bomb_is_bounded_by_the_process_limit(hostile):
    result = hostile(FORK_STORM)
    assert result.status is Status.OK, result
    assert "fork refused" in result.stderr
    assert int(result.stdout.split()[0]) <= TIGHT.max_processes


def test_memory_bomb_ends_as_oom(hostile):
    # Bounded at 4 GiB, every page written.
    script = """
blocks = []
for _ in range(64):
    block = bytearray(64 << 20)
    block[::4096] = b"x" * len(range(0, 64 << 20, 4096))
    blocks.append(block)
"""
    result = hostile(script)
    assert result.status is Status.OOM, result
    assert "memory limit" in result.reason


def test_endless_loop_times_out(hostile):
    result = hostile("while True: pass", limits=Limits(wall_seconds=1, cpu_seconds=30))
    assert result.status is Status.TIMEOUT and "wall-clock" in result.reason, result


def test_detached_daemon_is_gone_when_run_returns(hostile, workspace, marker):
    # setsid + double fork; the grandchild becomes a shell loop writing a heartbeat into the workspace.
    script = f"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sh", ["sh", "-c", "while :; do date +%s%N >> /workspace/heartbeat; sleep 0.05; done",
                             {marker!r}])
    os._exit(0)
while not os.path.exists("/workspace/heartbeat"):
    time.sleep(0.01)
print("daemon started")
"""
    result = hostile(script)
    assert result.status is Status.OK and result.stdout == "daemon started\n", result
    beats = (workspace.root / "heartbeat").read_bytes()
    time.sleep(0.5)
    assert (workspace.root / "heartbeat").read_bytes() == beats


def test_daemon_of_a_timed_out_command_is_gone_too(hostile, workspace, marker):
    script = f"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "600", {marker!r}])
    os._exit(0)
time.sleep(600)
"""
    result = hostile(script, limits=Limits(wall_seconds=1))
    assert result.status is Status.TIMEOUT, result


def test_flood_of_300_mb_on_stdout_is_capped_without_buffering_it(hostile):
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    script = """
import sys
block = b"x" * (1 << 20)
for _ in range(300):
    sys.stdout.buffer.write(block)
"""
    result = hostile(script, limits=Limits(wall_seconds=60, max_output_bytes=1 << 20))
    assert result.status is Status.OUTPUT_LIMIT, result
    assert len(result.stdout) == 1 << 20 and result.stdout_truncated
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak_before < 100 << 20


def test_flood_on_stderr_is_capped_too(hostile):
    result = hostile("import sys\nwhile True: sys.stderr.write('e' * 65536)", limits=Limits(max_output_bytes=1000))
    assert result.status is Status.OUTPUT_LIMIT and result.stderr == "e" * 1000 and result.stderr_truncated


def test_kill_everything_stays_inside_the_sandbox(hostile, sandbox_under_test, workspace):
    host_pid_ns = os.readlink("/proc/self/ns/pid")
    probe = sandbox_under_test.run(["readlink", "/proc/self/ns/pid"], workspace, limits=TIGHT)
    assert probe.ok and probe.stdout.strip() not in ("", host_pid_ns), "the sandbox must have its own PID namespace"
    # A host process the sandbox could signal, were it not in its own PID namespace: same uid.
    canary_user = 65534 if os.geteuid() == 0 else None
    canary = subprocess.Popen(["sleep", "120"], user=canary_user)
    try:
        script = f"""
import os, signal, subprocess, sys
if os.readlink("/proc/self/ns/pid") == {host_pid_ns!r}:
    sys.exit("refusing: this is the host's PID namespace")
children = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
os.kill(-1, signal.SIGKILL)
print([child.wait() for child in children])
"""
        result = hostile(script)
        assert result.status is Status.OK, result
        assert result.stdout == "[-9, -9, -9]\n"
        assert canary.poll() is None
    finally:
        canary.kill()
        canary.wait()


def test_non_zero_exit_is_an_error(hostile):
    result = hostile("import sys; sys.exit(7)")
    assert (result.status, result.returncode, result.reason) == (Status.ERROR, 7, "exit code 7")
