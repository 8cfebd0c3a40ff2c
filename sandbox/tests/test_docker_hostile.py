"""Hostile commands against the Docker sandbox, on a real engine: the shared battery (hostile_cases) and the totals
the container's cgroup and the size-limited workspace hold (memory, processes, CPU, disk).

Every case must end with a recorded status and reason, nothing changed outside the workspace, no process left
behind (see hostile_cases), and no container, volume or mount of the run left either.
"""

from __future__ import annotations

import errno
import json
import os

import pytest

from sandbox import Limits, Status
from sandbox.backends import docker_pool, volume
from sandbox.backends.docker import OWNER_LABEL, DockerBackend, owner
from sandbox.testing import volumes_of

from .hostile_cases import *  # noqa: F403 - the shared battery, collected here against Docker
from .hostile_cases import FORK_STORM, FOUR_PROCESSES_OF_800_MIB, TIGHT, SandboxView

pytestmark = pytest.mark.docker


@pytest.fixture
def sandbox_under_test(docker_sandbox):
    yield docker_sandbox
    # Used containers are removed in the background, and ready ones wait for the next run: settle() (also run at
    # exit) removes both and waits.
    docker_pool.settle()
    assert sandbox_containers(docker_sandbox) == [], "containers left behind"
    assert volumes_of_this_process() == [], "workspace filesystems left behind"


@pytest.fixture
def sandbox_view():
    # The image is the runtime as bubblewrap shows it (bin, lib, lib64, sbin, usr here), the harness under /opt,
    # and what Docker adds to every container: /.dockerenv, /sys and the mount points /run, /workspace.
    return SandboxView(
        root_entries=[
            ".dockerenv",
            "bin",
            "dev",
            "etc",
            "lib",
            "lib64",
            "opt",
            "proc",
            "root",
            "run",
            "sbin",
            "sys",
            "tmp",
            "usr",
            "workspace",
        ],
        own_paths={"/opt": ["node", "openclaw"]},
    )


def sandbox_containers(backend: DockerBackend) -> list[str]:
    """This process's sandbox containers (other processes on this engine may be running theirs)."""
    return [
        c.name
        for c in backend.client.containers.list(
            all=True, filters={"label": f"{OWNER_LABEL}={owner()}"}, ignore_removed=True
        )
    ]


def volumes_of_this_process() -> list[str]:
    # The bubblewrap backend's idle volumes (its pool, from earlier tests in this process) are not this backend's.
    volume.drain()
    volume.settle()
    return volumes_of(os.getpid())


def test_four_processes_of_800_mib_share_one_memory_limit(hostile):
    # Each process alone fits (no per-process limit stops it); together they need 3.2 GiB of a 1 GiB total.
    result = hostile(FOUR_PROCESSES_OF_800_MIB, limits=Limits(wall_seconds=60, memory_bytes=1 << 30, max_processes=32))
    # Docker's OOMKilled (the cgroup's OOM event), not stderr: the children die silently and PID 2 exits 0.
    assert result.status is Status.OOM, result
    assert result.reason == "killed by the kernel for going past the memory limit of 1073741824 bytes"
    assert -9 in json.loads(result.stdout), "the OOM killer ended at least one of them"
    assert result.unenforced == ()


def test_fork_storm_is_bounded_in_total_by_the_pids_cgroup(hostile):
    # No RLIMIT_NPROC is set: the refusals come from pids.max, for all processes together.
    result = hostile(FORK_STORM)
    assert result.status is Status.OK and "fork refused" in result.stderr, result
    processes, nproc_limit = map(int, result.stdout.split())
    assert nproc_limit > TIGHT.max_processes
    assert processes <= TIGHT.max_processes


def test_the_command_runs_in_a_cgroup_with_the_limits(docker_sandbox, workspace):
    limits = Limits(wall_seconds=60, memory_bytes=300 << 20, max_processes=40)
    backend = DockerBackend(cpus=0.5)
    script = """
import json
def read(path):
    return open("/sys/fs/cgroup/" + path).read().strip()
print(json.dumps({"memory": read("memory/memory.limit_in_bytes"), "memsw": read("memory/memory.memsw.limit_in_bytes"),
                  "pids": read("pids/pids.max"), "quota": read("cpu/cpu.cfs_quota_us"),
                  "period": read("cpu/cpu.cfs_period_us")}))
"""
    result = backend.run(["python3", "-c", script], workspace, limits=limits)
    assert result.status is Status.OK, result
    seen = json.loads(result.stdout)
    assert int(seen["memory"]) == int(seen["memsw"]) == 300 << 20
    assert seen["pids"] == "40"
    assert int(seen["quota"]) / int(seen["period"]) == 0.5


def test_cpu_quota_slows_a_busy_loop_and_the_cpu_limit_ends_it(docker_sandbox, workspace):
    # Two busy threads under a quarter of a core: 1 s of CPU time takes about 4 s of wall clock, then RLIMIT_CPU
    # (SIGXCPU) ends the run as a timeout by CPU time, long before the wall clock.
    backend = DockerBackend(cpus=0.25)
    script = """
import threading
def spin():
    while True:
        pass
for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
spin()
"""
    result = backend.run(["python3", "-c", script], workspace, limits=Limits(wall_seconds=60, cpu_seconds=1))
    assert result.status is Status.TIMEOUT and "CPU-time limit of 1 s" in result.reason, result
    assert 3 < result.duration < 30, result.duration


def test_filling_the_workspace_ends_as_disk_full_and_stays_small_on_the_host(hostile, workspace):
    assert volume.available()[0], "root must get a size-limited workspace here"
    # 2 GiB in files of 32 MiB each, all under the file-size limit: only the workspace's room can stop it.
    script = """
block = b"x" * (1 << 20)
written = 0
try:
    for n in range(64):
        with open(f"fill-{n}.bin", "wb") as f:
            for _ in range(32):
                f.write(block)
                written += len(block)
except OSError as e:
    print("stopped", e.errno, written)
"""
    room = 64 << 20
    result = hostile(script, limits=Limits(wall_seconds=60, disk_bytes=room))
    assert result.status is Status.DISK_FULL, result
    word, errno_code, written = result.stdout.split()
    assert (word, int(errno_code)) == ("stopped", errno.ENOSPC)
    assert room <= int(written) < room + (16 << 20)
    on_host = sum(p.stat().st_size for p in workspace.root.rglob("*") if p.is_file())
    assert room <= on_host < room + (16 << 20)


def test_without_a_sized_workspace_disk_is_reported_unenforced(docker_sandbox, workspace):
    result = DockerBackend(sized_workspace=False).run("echo kept > out.txt", workspace, limits=TIGHT)
    assert result.ok and result.unenforced == ("disk_bytes",), result
    assert (workspace.root / "out.txt").read_text() == "kept\n"


def test_a_run_as_root_is_refused():
    with pytest.raises(Exception, match="never runs as root"):
        DockerBackend(uid=0)
