"""bench/mask_bench.py at a small size (the full 1,000 long trajectories take minutes): both methods run over every
sample, agree, and the report is one JSON object on the last line. Measured on 1,000 (README, Training): every sample
agreed, 55 s one pass against 638 s re-rendering, 438 MB peak."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)  # tokenizes trajectories with the real tokenizer; the bench has 600 s (its own bound, below)
def test_mask_bench_small():
    done = subprocess.run(
        [sys.executable, "bench/mask_bench.py", "--n", "50", "--turns", "3", "--file-lines", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(report) == {
        "samples",
        "turns",
        "tokens_mean",
        "masked_share",
        "fast_s",
        "reference_s",
        "speedup",
        "agree",
        "disagreeing",
        "peak_rss_mb",
    }
    assert (report["samples"], report["turns"], report["agree"], report["disagreeing"]) == (50, 3, True, 0)
    assert report["tokens_mean"] > 300 and 0 < report["masked_share"] < 1
    assert report["fast_s"] > 0 and report["reference_s"] > 0 and report["speedup"] > 0
    assert 0 < report["peak_rss_mb"] < 4096
    assert "50/50 samples: one pass" in done.stderr  # progress, every 50 samples
