"""Hostile commands against the bubblewrap sandbox: the shared battery (hostile_cases) and what only bubblewrap
has (its own cgroup per run, the size-limited workspace, their clean-up).

Every case must end with a recorded status and reason, nothing changed outside the workspace, no process left
behind and this test process alive (see hostile_cases).
"""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import threading
import time

import pytest

from sandbox import Limits, Status, Workspace
from sandbox.backends import cgroups, volume
from sandbox.testing import processes_with, volumes_of

from .hostile_cases import *  # noqa: F403 - the shared battery, collected here against bubblewrap
from .hostile_cases import FORK_STORM, FOUR_PROCESSES_OF_800_MIB, TIGHT, SandboxView


@pytest.fixture
def sandbox_under_test(bwrap):
    return bwrap


@pytest.fixture
def sandbox_view(bwrap):
    runtime_dirs = [
        p for p in ("bin", "lib", "lib32", "lib64", "libx32", "sbin", "usr") if (bwrap.runtime / p).exists()
    ]
    return SandboxView(root_entries=runtime_dirs + ["dev", "etc", "proc", "root", "tmp", "workspace"])


# Totals: the run's cgroup and its size-limited workspace. Root on a host with cgroup v1 (this one, CI) must have
# both; the tests never skip there.


@pytest.fixture
def bounded():
    if os.geteuid() != 0:
        pytest.skip("cgroups and loop-mounted workspaces need root on this host")
    tree, why = cgroups.detect()
    assert tree is not None, f"root must get a cgroup for each run here: {why}"
    sized, why = volume.available()
    assert sized, f"root must get a size-limited workspace here: {why}"
    return tree


def leftovers(tree) -> list[str]:
    """Run cgroups and volumes of this process that are still there (every run must remove its own, or hand its
    volume to the pool; the pool is drained and this process's removal thread waited for first)."""
    volume.drain()
    volume.settle()
    mine = f"run-{os.getpid()}-"
    found = [str(p / n) for p in tree.parents for n in os.listdir(p) if n.startswith(mine)]
    return found + [str(volume.scratch_dir() / name) for name in volumes_of(os.getpid())]


def test_four_processes_of_800_mib_share_one_memory_limit(hostile, bounded):
    # Each process alone fits (no per-process limit stops it); together they need 3.2 GiB of a 1 GiB total.
    result = hostile(FOUR_PROCESSES_OF_800_MIB, limits=Limits(wall_seconds=60, memory_bytes=1 << 30, max_processes=32))
    assert result.status is Status.OOM, result
    assert result.reason == "killed by the kernel for going past the memory limit of 1073741824 bytes"
    assert -9 in json.loads(result.stdout), "the OOM killer ended at least one of them"
    assert result.unenforced == ()
    assert leftovers(bounded) == []


def test_fork_storm_is_bounded_in_total_by_the_cgroup(hostile, bounded):
    # No RLIMIT_NPROC is set where the cgroup counts: the refusals come from pids.max, for all processes together.
    result = hostile(FORK_STORM)
    assert result.status is Status.OK and "fork refused" in result.stderr, result
    processes, nproc_limit = map(int, result.stdout.split())
    assert nproc_limit == resource.getrlimit(resource.RLIMIT_NPROC)[0]  # the host's own, far above 32
    assert processes <= TIGHT.max_processes
    assert leftovers(bounded) == []


def test_the_command_runs_inside_its_cgroup_with_the_limits(bwrap, workspace, marker, bounded):
    limits = Limits(wall_seconds=60, memory_bytes=300 << 20, max_processes=40)
    done = {}
    thread = threading.Thread(
        target=lambda: done.update(result=bwrap.run(["sh", "-c", "sleep 4", marker], workspace, limits=limits))
    )
    thread.start()
    try:
        deadline = time.monotonic() + 30
        # The command itself, not bubblewrap (whose own command line holds the marker too, and stays outside).
        while not (found := [p for p in processes_with(marker) if _argv0(p) == b"sh"]):
            assert time.monotonic() < deadline, "the sandboxed command never showed up"
            time.sleep(0.05)
        with open(f"/proc/{found[0]}/cgroup") as handle:
            paths = dict(line.strip().split(":", 2)[1:] for line in handle)
        memory = bounded.memory_parent.parent / paths["memory"].lstrip("/")
        pids = bounded.pids_parent.parent / paths["pids"].lstrip("/")
        assert memory.parent == bounded.memory_parent and memory.name.startswith(f"run-{os.getpid()}-")
        assert int((memory / "memory.limit_in_bytes").read_text()) == 300 << 20
        assert int((memory / "memory.memsw.limit_in_bytes").read_text()) == 300 << 20
        assert (pids / "pids.max").read_text().strip() == "40"
    finally:
        thread.join()
    assert done["result"].status is Status.OK
    assert leftovers(bounded) == []


def _argv0(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().split(b"\0")[0]
    except OSError:
        return b""


def test_filling_the_workspace_ends_as_disk_full_and_stays_small_on_the_host(hostile, bounded, workspace):
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
    assert result.reason == f"the workspace is full: it may grow by {room} bytes in a run"
    word, errno_code, written = result.stdout.split()
    assert (word, int(errno_code)) == ("stopped", errno.ENOSPC)
    assert room <= int(written) < room + (16 << 20)
    # What came back to the host's folder is what fitted, no more; the image is gone.
    on_host = sum(p.stat().st_size for p in workspace.root.rglob("*") if p.is_file())
    assert room <= on_host < room + (16 << 20)
    assert leftovers(bounded) == []


def test_a_million_empty_files_end_as_disk_full(hostile, bounded, workspace):
    script = """
import os
os.mkdir("many")
made = 0
try:
    for n in range(1_000_000):
        open(f"many/{n}", "w").close()
        made += 1
except OSError as e:
    print(e.errno, made)
"""
    result = hostile(script, limits=Limits(wall_seconds=60, disk_bytes=16 << 20))
    assert result.status is Status.DISK_FULL, result
    errno_code, made = map(int, result.stdout.split())
    assert errno_code == errno.ENOSPC and made < 100_000
    assert len(os.listdir(workspace.root / "many")) == made


def test_a_run_that_fits_is_copied_back_exactly(bwrap, workspace, bounded):
    script = """
import os
os.makedirs("deep/er", exist_ok=True)
open("deep/er/file.txt", "w").write("kept")
os.symlink("/etc/passwd", "link")  # recorded as a link, never followed on the way back
os.mkfifo("pipe")
open("run.sh", "w").write("#!/bin/sh\\n")
os.chmod("run.sh", 0o755)
os.remove("input.txt")
"""
    result = bwrap.run(["python3", "-c", script], workspace, limits=Limits(wall_seconds=60, disk_bytes=8 << 20))
    assert result.status is Status.OK, result
    diff = workspace.diff()
    assert set(diff.deleted) == {"input.txt"}
    assert diff.added["deep/er/file.txt"].content == b"kept"
    assert diff.added["link"].kind == "symlink" and diff.added["link"].target == "/etc/passwd"
    assert diff.added["pipe"].detail == "fifo"
    assert diff.added["run.sh"].executable
    assert "lost+found" not in workspace.snapshot()
    assert leftovers(bounded) == []


LEAVE_TRACES = """
import os
os.makedirs("left/locked", exist_ok=True)
open("left/locked/secret.txt", "w").write("from the last run")
os.chmod("left/locked", 0)
open(".hidden", "w").write("x" * 100_000)
os.symlink("/etc/passwd", "link")
os.mkfifo("pipe")
os.setxattr(".", "user.mark", b"from the last run")
"""
WHAT_IS_THERE = """
import json, os
found = sorted(os.path.relpath(os.path.join(d, n), ".") for d, ds, fs in os.walk(".") for n in ds + fs)
print(json.dumps([found, os.listxattr("."), os.statvfs(".").f_bavail * os.statvfs(".").f_frsize]))
"""


def test_a_pooled_volume_comes_back_empty_with_the_same_room(bwrap, bounded, monkeypatch):
    monkeypatch.setenv(volume.POOL_ENV, "8")
    limits = Limits(wall_seconds=60, disk_bytes=32 << 20)
    volume.drain()
    with Workspace.create({"input.txt": b"hello\n"}) as first:
        assert bwrap.run(["python3", "-c", LEAVE_TRACES], first, limits=limits).ok
        assert (first.root / "left/locked").exists()  # copied back: the run's result is the caller's
    [kept] = volume.idle()
    with Workspace.create({"other.txt": b"world\n"}) as second:
        result = bwrap.run(["python3", "-c", WHAT_IS_THERE], second, limits=limits)
    assert result.ok, result
    assert volume.idle() == [kept]  # the same filesystem, emptied and filled again
    found, xattrs, room = json.loads(result.stdout)
    assert (found, xattrs) == (["other.txt"], [])
    with Workspace.create({"other.txt": b"world\n"}) as third:
        volume.drain()
        fresh = bwrap.run(["python3", "-c", WHAT_IS_THERE], third, limits=limits)
    # A new volume for the same workspace: the pooled one gave at most one size class (a MiB) more room.
    fresh_room = json.loads(fresh.stdout)[2]
    assert fresh_room <= room <= fresh_room + volume.POOL_GRANULE
    assert leftovers(bounded) == []


def test_a_volume_is_pooled_only_when_its_sandbox_was_seen_gone(bwrap, bounded, workspace, monkeypatch):
    volume.drain()
    monkeypatch.setenv(volume.POOL_ENV, "0")  # no pool: a new volume each run, as before there was one
    assert bwrap.run(["true"], workspace, limits=TIGHT).ok
    assert volume.idle() == []
    monkeypatch.setenv(volume.POOL_ENV, "8")
    vol = volume.take(workspace.root, 64 << 20, 65534, 65534)
    volume.release(vol, sandbox_gone=False)  # a process of the run might still write to it
    assert volume.idle() == []
    vol = volume.take(workspace.root, 64 << 20, 65534, 65534)
    assert sorted(os.listdir(vol.mount_point)) == sorted(os.listdir(workspace.root))
    (vol.mount_point / "many").mkdir()
    for n in range(2500):  # more than is worth emptying on the caller's time
        (vol.mount_point / "many" / str(n)).touch()
    volume.release(vol, sandbox_gone=True)
    assert volume.idle() == []
    assert leftovers(bounded) == []


def test_cgroups_and_volumes_of_dead_runs_are_removed(bwrap, workspace, bounded):
    # Named for this pid with another start time: a process that is gone (a worker killed mid-run).
    name = f"run-{os.getpid()}-1-deadbeef"
    for parent in bounded.parents:
        (parent / name).mkdir()
    stale = volume.scratch_dir() / name
    (stale / "workspace").mkdir(parents=True)
    subprocess.run(["truncate", "-s", "8M", str(stale / "disk.img")], check=True)
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", str(stale / "disk.img")], check=True)
    subprocess.run(["mount", "-o", "loop", str(stale / "disk.img"), str(stale / "workspace")], check=True)
    try:
        result = bwrap.run(["true"], workspace, limits=TIGHT)
        assert result.ok, result
        assert not any((parent / name).exists() for parent in bounded.parents)
        assert not os.path.ismount(stale / "workspace") and not stale.exists()
    finally:
        if os.path.ismount(stale / "workspace"):
            subprocess.run(["umount", str(stale / "workspace")])


def _run_once_and_report(bwrap, queue) -> None:
    with Workspace.create({"input.txt": b"hello\n"}) as workspace:
        result = bwrap.run(["true"], workspace, limits=TIGHT)
    queue.put((os.getpid(), result.ok, len(volume.idle())))


def test_a_multiprocessing_worker_that_ends_releases_its_pooled_volumes(bwrap, monkeypatch):
    # django-q's workers are multiprocessing children: they end with os._exit, where atexit does not run, so the
    # volumes they kept for their next run would stay mounted until another run on the host swept them.
    import multiprocessing

    monkeypatch.setenv(volume.POOL_ENV, "8")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_run_once_and_report, args=(bwrap, queue))
    child.start()
    pid, ok, kept = queue.get(timeout=60)
    child.join(timeout=30)
    assert (ok, kept, child.exitcode) == (True, 1, 0)
    assert volumes_of(pid) == []
    mounts = open("/proc/self/mountinfo").read()
    assert f"/run-{pid}-" not in mounts
