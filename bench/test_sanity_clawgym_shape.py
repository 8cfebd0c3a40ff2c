"""bench/sanity_clawgym_shape.py runs end to end at a tiny size (a task of every shape, in every category) and ends
with its JSON report.

The figures themselves are the bench's to report; here only what every run must show: each shape is found for what
it is (the strict ones pay a lazy agent nothing, the lenient ones something, the fragile one crashes, the ones that
run the agent's script write into the workspace without crashing), and check.py's sub-scores reach every run though
the shared reward.sh prints only their mean.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.testing import require_bwrap

BASE_DIR = Path(__file__).resolve().parent.parent
# One task in each of the 11 categories; the bench deals the shapes round by round, so its first 8 hold every shape.
TASK_COUNT = 11


def test_sanity_clawgym_shape_bench_smoke():
    require_bwrap()
    # On SQLite whatever this session runs on: on PostgreSQL the bench's throwaway database would be this session's
    # test database, and dropping it at the end would pull it from under the other tests.
    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, "bench/sanity_clawgym_shape.py", "--tasks", str(TASK_COUNT), "--workers", "2"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["tasks"] == report["imported"] == TASK_COUNT and report["categories"] == 11
    assert report["errors"] == [] and report["import_failed"] == []
    # The three base workspaces of every task, and the lazy moves whose workspace differs from those before it.
    assert report["runs_without_subscores"] == 0 and 3 * TASK_COUNT < report["checker_runs"] <= 10 * TASK_COUNT
    shapes = report["by_shape"]
    assert shapes["strict"]["over_lenient"] == 0 and shapes["strict"]["lazy_mean"] == 0
    assert shapes["runs_script_strict"]["lazy_mean"] == 0
    for lenient in ("jsonl_txt", "markdown", "csv_header", "runs_script", "unittest"):
        assert shapes[lenient]["over_lenient"] == shapes[lenient]["tasks"], lenient
    assert shapes["fragile"]["crashed"] == shapes["fragile"]["tasks"] == report["crashed"]
    for writing in ("runs_script", "runs_script_strict"):
        assert shapes[writing]["with_workspace_writes"] == shapes[writing]["tasks"] and shapes[writing]["crashed"] == 0
    assert "every_line_is_json" in report["top_paying_checks"]
    distribution = report["lazy_score"]
    assert distribution["gt_0"] >= distribution["gt_0.1"] >= distribution["gt_0.2"] >= distribution["gt_0.5"] > 0
    assert report["seconds"] > 0 and report["database"] == "sqlite"
    # Two bare baselines, every run one after another and each task's runs side by side, both finding the same.
    assert report["bare_same_findings"] == TASK_COUNT
    for name in ("sequential", "side_by_side"):
        # Within the rounding of the figures it is taken from (two decimals each).
        ratio = report["seconds"] / report[f"bare_{name}_seconds"]
        assert report[f"ratio_to_bare_{name}"] == pytest.approx(ratio, rel=0.02, abs=0.011)
