"""bench/study_bench.py at its smallest: one train and one held-out task of each kind, two thresholds, two SFT steps
a cell, the studies' periodic step ticked every 2 s. It is the test of `study start --kind reward_threshold` through
the workers: the command waits while a real django-q cluster builds each cell's dataset, trains the tiny model on
it, serves the checkpoint and evaluates it (studies/tests/test_threshold_training.py runs a cell's jobs in its own
process; studies/tests/test_study_workers.py takes a stability study through the workers). The tiny model's scores
are noise: what is checked is the report's shape, that every cell finished with a mean, and the chart."""

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent


@pytest.mark.usefixtures("bwrap")  # sandbox.testing: skipped where bubblewrap cannot run, a failure in CI
@pytest.mark.workers
@pytest.mark.once
# Two cells trained, served and evaluated on real workers: 112 s on a 2-core machine shared with other tests, 7 min
# 47 s beside another study bench (migrating the empty database alone took 2 minutes); the bench has 800 s to end.
@pytest.mark.timeout(900)
def test_study_bench_smallest(tmp_path):
    chart = tmp_path / "study.svg"
    sizes = "train=1,heldout=1,unseen_kind=1,heldout_lexical=1"
    done = subprocess.run(
        [sys.executable, "bench/study_bench.py", "--values", "0.5,1.0", "--sizes", sizes, "--max-steps", "2"]
        + ["--tick", "2", "--workers", "3", "--slots", "2", "--chart", str(chart)],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] == "complete" and report["missing"] == [], report
    assert [cell["threshold"] for cell in report["cells"]] == [0.5, 1.0]
    for cell in report["cells"]:
        assert cell["status"] == "complete" and cell["error"] == "", cell
        assert all(isinstance(cell[key], int) for key in ("dataset", "training_run", "eval_run"))
        assert 0.0 <= cell["mean"] <= 1.0 and len(cell["ci"]) == 2
    # The scripted agent's rollouts (one per train task, of mixed quality): the higher threshold keeps fewer.
    data = report["trajectories"]
    assert data["rollouts"] == sum(data["rewards"].values()) and "1" in data["rewards"] and "0" in data["rewards"]
    low, high = report["cells"]
    assert low["trajectories"] > high["trajectories"] > 0
    assert report["best"]["label"] in {"threshold 0.5", "threshold 1"} and len(report["comparisons"]) == 1
    assert report["model"] == "tiny" and report["minutes"] > 0
    svg = ElementTree.parse(chart).getroot()
    bars = svg.findall("{http://www.w3.org/2000/svg}rect")[1:]  # the first is the background
    assert len(bars) == 2
