"""kill -9 of the worker in the middle of a sanity check (a real django-q2 cluster): the workspace it was judging is
removed by the next worker before the run is taken up again; a cancelled retry leaves nothing behind either."""

import os
import signal
import uuid
from pathlib import Path

import pytest

from jobs import scratch
from jobs.models import JobRun
from jobs.services import cancel_job
from jobs.testing import wait_for_job_run
from lib.testing import wait_until
from tasks.package import STANDARD_REWARD_SH, PackageFile, TaskPackage
from tasks.sanity import start_sanity_check
from tasks.services import save_package

pytestmark = [pytest.mark.usefixtures("bwrap"), pytest.mark.workers, pytest.mark.django_db(transaction=True)]

# Takes its time on every workspace, so that the worker is killed while a checker runs in its sandbox. TOKEN tells
# this test's workspaces from those of other test sessions on the machine.
SLOW_CHECK = """import json, time
# TOKEN
time.sleep(8)
print(json.dumps({"done": False}))
"""


def slow_task(token: str):
    files = [
        PackageFile("reward.sh", STANDARD_REWARD_SH.encode(), "reward"),
        PackageFile("check.py", SLOW_CHECK.replace("TOKEN", token).encode(), "reward"),
        PackageFile("notes.txt", b"some notes\n", "input"),
    ]
    package = TaskPackage(external_id=f"slow-{token}", instruction="Write done.txt next to notes.txt.", files=files)
    return save_package(package).task


def checking(token: str) -> list[Path]:
    """The sanity scratch folders on this machine whose workspace holds this test's checker."""
    found = []
    for folder in scratch.folders("sanity-"):
        for check in folder.glob("*/reward/check.py"):
            try:
                if token in check.read_text():
                    found.append(folder)
            except OSError:
                pass  # released meanwhile
    return found


def in_sandbox(pid: int) -> bool:
    """Whether the worker process `pid` has a child process (bubblewrap) right now."""
    try:
        return any(
            Path(f"/proc/{pid}/task/{tid}/children").read_text().split() for tid in os.listdir(f"/proc/{pid}/task")
        )
    except OSError:
        return False


def test_a_worker_killed_mid_check_leaves_no_workspace(django_q_worker, reviewer):
    token = uuid.uuid4().hex
    run = start_sanity_check(slow_task(token), user=reviewer)
    wait_for_job_run(run, statuses=[JobRun.Status.RUNNING], timeout=60)
    pid = int(run.worker.split(":")[1])
    wait_until(lambda: checking(token) and in_sandbox(pid), "a checker of the run in its sandbox", timeout=90)

    os.kill(pid, signal.SIGKILL)  # the pool process, while its checker runs
    left = checking(token)  # what the dead worker left: it makes no more
    assert left and all(folder.is_dir() for folder in left)

    # The cluster starts a new worker process; it removes the dead one's folders before it takes the run up again.
    wait_until(lambda: JobRun.objects.get(pk=run.pk).attempts == 2, "the run to be taken up again", timeout=90)
    assert not any(folder.exists() for folder in left)
    assert not any(Path(f"{folder}.lock").exists() for folder in left)

    # The retry, cancelled while it checks, removes its own workspaces on the way out.
    cancel_job(run, user=reviewer)
    run = wait_for_job_run(run, timeout=60)
    assert run.status == JobRun.Status.CANCELLED, run.error or run.log_tail
    assert "attempt 2 of 3: a previous worker was lost" in run.log_tail
    assert checking(token) == []
