"""bench/synthesis_bench.py runs end to end at a tiny size (the full sizes take minutes) and ends with its JSON
report: novelty against a small pool, the pool's embedding time scaled from a part, the encoder against the
numpy reference on a few texts, and one task through the pipeline (real bubblewrap, a scripted model)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent.parent


@pytest.mark.usefixtures("bwrap")
@pytest.mark.timeout(900)  # a whole batch through every stage and sandboxed checks; the bench has 600 s (its own bound)
def test_synthesis_bench_smoke():
    done = subprocess.run(
        [
            sys.executable,
            "bench/synthesis_bench.py",
            "--pool",
            "120",
            "--new",
            "12",
            "--measure",
            "8",
            "--compare",
            "8",
            "--pipeline-tasks",
            "1",
        ],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["novelty_12_vs_120_s"] > 0 and report["novelty_500_vs_13500_s"] is None
    assert report["novelty_breakdown"]["pool"] == 120 + 12 - report["novelty_breakdown"]["near_duplicates"]
    assert report["pool_embedding_measured_on"] == 8 and report["pool_embedding_scaled"] is True
    assert report["pool_vectors_random"] == 112 and report["pool_embedding_s"] > 0
    assert report["embedding_texts_per_s"] > 0 and report["instruction_words"]["min"] >= 30
    # The process's encoder against the numpy reference, side by side: a ratio, and the same vectors.
    assert report["embedding_encoder"] == "OnnxMiniLMEncoder" and report["embedding_compared_on"] == 8
    assert report["embedding_speedup"] > 0 and report["embedding_cosine_min"] >= 0.999
    assert report["nearest_neighbour_agreement"] == 1.0
    assert report["overhead_per_task_s"] is not None and "note" not in report
    assert (report["pipeline_tasks"], report["pipeline_kept"], report["pipeline_status"]) == (1, 1, "complete")
    # generate, files, verify, rubric, and the judged QA stages but rubric complementarity (the task has no rubric)
    assert report["pipeline_model_calls"] == 8
