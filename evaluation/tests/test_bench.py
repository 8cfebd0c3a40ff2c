"""bench/rollout_bench.py runs end to end (builtin harness, tiny sizes: the OpenClaw numbers take minutes) and ends
with its JSON report."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.testing import needs_bwrap

BASE_DIR = Path(__file__).resolve().parent.parent.parent


@needs_bwrap
@pytest.mark.workers
def test_rollout_bench_smoke():
    done = subprocess.run(
        [
            sys.executable,
            "bench/rollout_bench.py",
            "--harness",
            "builtin",
            "--rollouts",
            "2",
            "--concurrency",
            "1",
            "--rounds",
            "2",
        ],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["bare"]["ok"] == report["runner"]["ok"] == 4
    assert report["runner"]["mean_score"] == 1.0 and report["runner"]["model_calls"] == 8
    assert report["throughput_ratio"] > 0 and report["peak_rss_mb_per_rollout"]["runner"] > 0
    assert len(report["runner"]["rounds_seconds"]) == 2
