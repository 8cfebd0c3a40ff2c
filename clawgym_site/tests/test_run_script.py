"""scripts/run.sh stops the web server, the worker cluster and everything they started, on SIGTERM (systemd, Docker)
as on Ctrl-C, also while a job is running.

The script runs for real against the test database, in a session of its own, so that every process it started,
however deep, is found by its session id in /proc.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from jobs import enqueue
from jobs.models import JobRun
from jobs.testing import BASE_DIR, database_url, use_engine, wait_for_job_run

pytestmark = [pytest.mark.workers, pytest.mark.django_db(transaction=True)]

START_TIMEOUT = 90  # a cold start of Django, uvicorn and the cluster on a busy CI machine
STOP_BOUND = 30  # the issue: the cluster was still running after 30 s; the script's own grace is 8 s


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def session_processes(sid: int) -> list[str]:
    """'pid command' of every live process in session `sid` (zombies are gone already, as far as we care)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if fields[0] not in ("Z", "X") and int(fields[3]) == sid:
            found.append(f"{entry.name} {cmdline}")
    return found


def as_from_a_terminal():
    """The script's signals as a shell in a terminal starts it: a process of the suite may run with SIGINT ignored
    (something it ran in-process set it so), and a non-interactive bash cannot trap a signal ignored on entry: its
    Ctrl-C would never stop anything."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def serving(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_the_run_script_stops_everything_while_a_job_runs(how, tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "clawgym_site.settings",
        "DATABASE_URL": database_url(),
        "PY": sys.executable,
        "PORT": str(port),
        "CLAWGYM_JOB_ENGINE": "django_q",
        "CLAWGYM_Q_WORKERS": "1",
    }
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        script = subprocess.Popen(
            ["bash", "scripts/run.sh"],
            cwd=BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=as_from_a_terminal,
        )
    try:
        with use_engine("django_q"):
            run = enqueue("jobs.ping", steps=1200, sleep=0.1)  # two minutes of work, unless stopped
        deadline = time.monotonic() + START_TIMEOUT
        while not serving(port) and time.monotonic() < deadline:
            assert script.poll() is None, log.read_text()
            time.sleep(0.2)
        assert serving(port), log.read_text()
        wait_for_job_run(run, statuses=[JobRun.Status.RUNNING], timeout=START_TIMEOUT)
        started = session_processes(script.pid)
        assert any("qcluster" in p for p in started) and any("uvicorn" in p for p in started), started

        if how == "SIGTERM":
            script.send_signal(signal.SIGTERM)  # systemd and `docker stop` signal the main process
        else:
            os.killpg(script.pid, signal.SIGINT)  # a terminal sends Ctrl-C to its foreground process group

        deadline = time.monotonic() + STOP_BOUND
        while session_processes(script.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert session_processes(script.pid) == [], f"still running after {STOP_BOUND} s:\n{log.read_text()}"
        assert script.wait(timeout=5) == (143 if how == "SIGTERM" else 130)
        assert not serving(port)
        # The job cut short is left to the next worker on this machine (recover_lost); it is not marked done.
        run.refresh_from_db()
        assert run.status == JobRun.Status.RUNNING and run.progress_done < 1200
    finally:
        if script.poll() is None or session_processes(script.pid):
            os.killpg(script.pid, signal.SIGKILL)
            for line in session_processes(script.pid):
                os.kill(int(line.split()[0]), signal.SIGKILL)
        script.wait(timeout=10)
