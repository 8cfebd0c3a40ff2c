"""Held scratch folders (jobs.scratch): a live holder's folder survives every sweep; a dead holder's is removed by the
next one, however the holder died; the reaper sweeps before it records runs as lost."""

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from jobs import scratch
from jobs.models import JobRun
from jobs.runner import reap_stale, recover_lost
from jobs.scratch import ScratchError, ScratchFolder, scratch_folder, sweep

BASE_DIR = Path(__file__).resolve().parent.parent.parent

# A holder that dies as a worker does: kill -9, in the middle of its work, with a child still writing.
HOLDER = r"""
import os, subprocess, sys, time
from jobs.scratch import ScratchFolder
held = ScratchFolder.hold(sys.argv[1])
(held.path / "ws" / "deep").mkdir(parents=True)
(held.path / "ws" / "deep" / "file.txt").write_text("x")
os.mkdir(held.path / "ws" / "locked")
(held.path / "ws" / "locked" / "inside.txt").write_text("x")
os.chmod(held.path / "ws" / "locked", 0)
os.symlink(sys.argv[2], held.path / "ws" / "outside")  # a link out of the folder: removed, never followed
# A child that, once the holder died, goes on writing for a second, as a sandbox's processes may for a moment.
WRITER = '''
import os, sys, time
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.01)
deep, i, end = os.path.join(sys.argv[1], "ws", "deep"), 0, time.monotonic() + 1
while time.monotonic() < end:
    try:
        if not os.path.isdir(deep):
            os.mkdir(deep)  # only inside what is left: like a sandbox, it cannot bring back a removed parent
        open(os.path.join(deep, f"w{i}"), "w").close()
    except OSError:
        pass
    i += 1
'''
subprocess.Popen([sys.executable, "-c", WRITER, str(held.path)])
print(held.path, flush=True)
time.sleep(600)
"""


@pytest.fixture
def root(settings, tmp_path):
    settings.CLAWGYM_SCRATCH_DIR = tmp_path / "scratch"
    return settings.CLAWGYM_SCRATCH_DIR


@pytest.fixture
def holder(root, tmp_path):
    """Start a holder process; returns (process, its folder, a file outside the scratch root it links to)."""
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    started = []

    def start(label: str = "sanity"):
        env = {
            **os.environ,
            "CLAWGYM_SCRATCH_DIR": str(root),
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "clawgym_site.settings"),
        }
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, label, str(outside)],
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        started.append(proc)
        line = proc.stdout.readline().strip()
        assert line, f"the holder exited with {proc.wait()}"
        return proc, Path(line), outside

    yield start
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        proc.stdout.close()


def kill_holder(proc) -> None:
    os.kill(proc.pid, signal.SIGKILL)  # only the holder: its writing child lives on for a moment
    proc.wait(timeout=10)


def test_a_folder_is_removed_with_its_lock_when_released(root):
    with scratch_folder("sanity") as folder:
        (folder / "ws").mkdir()
        (folder / "ws" / "a.txt").write_text("a")
        assert folder.parent == root and folder.name.startswith("sanity-")
        assert (root / f"{folder.name}.lock").is_file()
        assert oct(folder.stat().st_mode & 0o777) == "0o711"  # a sandbox uid can reach the workspace inside
    assert list(root.iterdir()) == []


def test_a_sweep_leaves_folders_held_by_this_process_other_threads_included(root):
    held = ScratchFolder.hold("rollout-7")
    other: list[ScratchFolder] = []
    thread = threading.Thread(target=lambda: other.append(ScratchFolder.hold("rollout-8")))
    thread.start()
    thread.join()
    try:
        assert sweep() == []
        assert held.path.is_dir() and other[0].path.is_dir()
    finally:
        held.release()
        other[0].release()
    assert list(root.iterdir()) == []


def test_a_killed_holder_leaves_a_folder_that_the_next_sweep_removes(holder, root):
    proc, folder, outside = holder()
    assert sweep() == [] and folder.is_dir()  # alive: nobody takes its folder

    kill_holder(proc)
    assert folder.is_dir()  # nothing ran on the holder's way out
    assert sweep() == [folder]

    assert list(root.iterdir()) == []  # folder and lock, the chmod-000 folder and the child's late files included
    assert outside.read_text() == "keep me"


def test_a_sweep_takes_only_the_prefix_it_is_given(holder, root):
    proc_7, folder_7, _ = holder("rollout-7")
    proc_71, folder_71, _ = holder("rollout-71")
    kill_holder(proc_7)
    kill_holder(proc_71)
    assert sweep("rollout-7-") == [folder_7]
    assert folder_71.is_dir()
    assert sweep("rollout-71-") == [folder_71]


def test_holding_and_sweeping_at_once_never_removes_a_held_folder(root):
    failures: list[str] = []
    stop = threading.Event()

    def hold_many():
        for _ in range(150):
            with scratch_folder("race") as folder:
                (folder / "f").write_text("x")  # fails if a sweep took the folder from under us
                if not (folder / "f").is_file():
                    failures.append(str(folder))

    def keep_sweeping():
        while not stop.is_set():
            sweep()

    sweepers = [threading.Thread(target=keep_sweeping) for _ in range(2)]
    holders = [threading.Thread(target=hold_many) for _ in range(3)]
    for thread in sweepers + holders:
        thread.start()
    for thread in holders:
        thread.join()
    stop.set()
    for thread in sweepers:
        thread.join()
    assert failures == [] and list(root.iterdir()) == []


def test_a_scratch_root_others_can_write_is_refused(root):
    root.mkdir(mode=0o777)
    os.chmod(root, 0o777)
    with pytest.raises(ScratchError, match="writable by it alone"):
        ScratchFolder.hold("sanity")
    os.chmod(root, 0o711)
    if os.geteuid() == 0:
        os.chown(root, 65534, 65534)
        with pytest.raises(ScratchError, match="must belong to uid 0"):
            sweep()


def test_a_label_is_a_plain_name(root):
    for label in ("../x", "a/b", "", "A", "x*"):
        with pytest.raises(ValueError):
            ScratchFolder.hold(label)


@pytest.mark.django_db
@pytest.mark.parametrize("reaper", [reap_stale, recover_lost])
def test_the_reaper_removes_the_folders_of_dead_workers_as_it_ends_their_runs(reaper, holder, root):
    proc, folder, _ = holder()
    run = JobRun.objects.create(
        kind="jobs.ping", status=JobRun.Status.RUNNING, worker=f"{socket.gethostname()}:{proc.pid}:"
    )
    kill_holder(proc)

    reaper()

    run.refresh_from_db()
    assert run.status != JobRun.Status.RUNNING and not folder.exists()
    assert scratch.folders() == []
