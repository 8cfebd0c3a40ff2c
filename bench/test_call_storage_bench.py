"""bench/call_storage_bench.py: a real OpenClaw rollout at a small size stores its requests as differences, every one
of them rebuilds to the body the model server received, and the figures the report names add up."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent


@pytest.mark.harness
@pytest.mark.once
@pytest.mark.usefixtures("bwrap")
@pytest.mark.timeout(1200)  # a real OpenClaw rollout in the bench, which has 900 s to end (its own bound, below)
def test_call_storage_bench_small_openclaw_rollout(harness_installed):
    done = subprocess.run(
        [sys.executable, "bench/call_storage_bench.py", "--turns", "4"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["model_calls"], report["score"], report["rebuilt_equal"]) == (4, 1.0, True)
    assert report["with_a_base"] == 3  # every call after the first one
    before, after = report["before"], report["after"]
    assert before["per_rollout"] > after["per_rollout"] > before["rollout_rows_chars"]
    assert after["request_chars"]["first"] == before["request_chars"]["first"]  # the first is stored whole
    assert after["request_chars"]["last"] < before["request_chars"]["last"] / 4
    costs = report["costs"]  # the same requests written again both ways, and read back whole
    assert set(costs["write_ms_p50"]) == set(costs["read_all_ms"]) == {"whole", "difference"}
    assert all(value > 0 for value in [*costs["write_ms_p50"].values(), *costs["read_all_ms"].values()])
