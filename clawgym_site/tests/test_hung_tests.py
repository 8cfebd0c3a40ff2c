"""A hung test fails on its own time limit (pytest-timeout, pytest.ini) and the session goes on, also in an xdist
worker as CI runs the suite: the limit is raised in the test (the signal method), so nothing kills the process."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HUNG = """
import time

import pytest


@pytest.mark.timeout(1)
def test_hangs():
    time.sleep(3600)


def test_after_it():
    pass
"""


def test_a_hung_test_fails_on_its_timeout_and_the_next_one_runs(tmp_path):
    (tmp_path / "test_hung.py").write_text(HUNG)
    done = subprocess.run(
        # The project's pytest.ini (its timeout settings, --strict-markers), one xdist worker, none of its conftest.
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pytest.ini"), "-p", "no:cacheprovider", "-n", "1"]
        + ["--rootdir", str(tmp_path), str(tmp_path / "test_hung.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "timeout: 600.0s" in out and "timeout method: signal" in out and "timeout func_only: False" in out
    assert "Failed: Timeout (>1.0s) from pytest-timeout." in out and "crashed" not in out
    assert "1 failed, 1 passed" in out
