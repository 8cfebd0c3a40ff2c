"""bench/scale_bench.py at a smoke size (200 items against 20, smaller than its --quick): every page and its poll
timed in both modes, and a run and a batch keep only the in-flight limit of jobs on the engine, the rest held back."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent


@pytest.mark.once
@pytest.mark.timeout(1200)  # pages timed in both modes; the bench has 900 s to end (its own bound, below)
def test_scale_bench_quick():
    # Smaller than --quick: the report's shape and the in-flight counts are the same at any size above the limit.
    sizes = ["--items", "200", "--baseline", "20", "--requests", "3", "--incremental", "10"]
    done = subprocess.run(
        [sys.executable, "bench/scale_bench.py", *sizes], cwd=BASE_DIR, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["items"], report["baseline"], report["requests"]) == (200, 20, 3)
    for page in ("run", "run_poll", "batch", "batch_poll"):
        for mode in ("static", "live"):
            row = report["pages"][page][mode]
            assert row["small"]["n"] == row["large"]["n"] == 3 and row["large"]["p95_ms"] > 0
    flight = report["in_flight"]
    assert flight["limit"] == 8  # no worker seen: CLAWGYM_IN_FLIGHT_MIN
    assert flight["run"] == {**flight["run"], "rollouts": 200, "jobs_on_engine": 8}
    batch = flight["batch"]
    assert batch["items"] > 8 and batch["jobs_on_engine"] == 8 and batch["held"] == batch["items"] - 8
