"""bench/eval_bench.py runs end to end at tiny sizes (the issue's sizes take many minutes) and ends with its JSON
report; what is checked is the report's shape and what it counted, not the timings."""

import json
import subprocess
import sys
from pathlib import Path

from evaluation.testing import needs_bwrap

BASE_DIR = Path(__file__).resolve().parent.parent.parent


@needs_bwrap
def test_eval_bench_smoke():
    done = subprocess.run(
        [
            sys.executable,
            "bench/eval_bench.py",
            "--tasks",
            "2",
            "--repeats",
            "2",
            "--runs",
            "3",
            "--models",
            "2",
            "--run-tasks",
            "8",
            "--run-repeats",
            "2",
            "--requests",
            "4",
        ],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])

    assert report["database"] in ("sqlite", "postgresql")
    for key in ("overhead_ratio", "leaderboard_p95_ms", "run_p95_ms", "compare_p95_ms"):
        assert isinstance(report[key], float) and report[key] > 0, (key, report[key])
    part1 = report["throughput"]
    assert part1["rollouts"] == 4 and part1["run_status"] == "complete" and part1["all_scored_one"], part1
    assert part1["bare_scored_one"] == part1["eval_scored_one"] == 4 and part1["run_overall_mean"] == 1.0
    assert abs(part1["overhead_ratio"] - part1["eval_seconds"] / part1["bare_seconds"]) < 0.01
    # 4 run rollouts + 4 bare + 1 warm-up, two model calls each (write, then done).
    assert part1["model_requests"] == 18

    assert report["runs"] == 3 and report["run_rollouts"] == 3 * 8 * 2
    assert report["rollouts_in_database"] == 3 * 8 * 2 + 9
    timed = report["pages"] or report["services"]
    assert report["timed"] == ("pages" if report["pages"] else "services")
    assert set(timed) == {"leaderboard", "run", "compare"}
    for page, figures in timed.items():
        assert figures["n"] == 4 and 0 < figures["p50_ms"] <= figures["p95_ms"] <= figures["max_ms"], (page, figures)
        assert figures["queries"]["max"] >= 1 and 0 <= figures["cpu"]["p50_ms"] <= figures["cpu"]["p95_ms"]
    assert report["services"]["leaderboard"]["entries"] == 2  # the latest complete run of each of the two models
    assert [report[f"{page}_p95_ms"] for page in ("leaderboard", "run", "compare")] == [
        timed[page]["p95_ms"] for page in ("leaderboard", "run", "compare")
    ]
