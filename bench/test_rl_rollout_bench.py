"""bench/rl_rollout_bench.py at a tiny size (2 prompts x 2 samples; the 8 x 8 batch takes minutes): the rollouts run
on the sandbox queue through real workers, every one scores and gives one exact sample, and the report is one JSON
object on the last line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent


@pytest.mark.usefixtures("bwrap")  # sandbox.testing: skipped where bubblewrap cannot run, a failure in CI
@pytest.mark.workers
@pytest.mark.once
@pytest.mark.timeout(900)  # an RL step's rollout batch on real workers; the bench has 600 s to end (its own bound)
def test_rl_rollout_bench_tiny():
    done = subprocess.run(
        [
            sys.executable,
            "bench/rl_rollout_bench.py",
            "--prompts",
            "2",
            "--samples",
            "2",
            "--slots",
            "2",
            "--overhead-calls",
            "2",
            "--overhead-prompt-tokens",
            "2000",
            "--overhead-answer-tokens",
            "64",
        ],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["prompts"], report["samples"], report["slots"], report["rollouts"]) == (2, 2, 2, 4)
    assert report["scored"] == 4 and report["mean_score"] == 1.0, report["errors"]
    assert report["queue"] == ["sandbox"]
    assert (report["samples_built"], report["inexact_samples"]) == (4, 0)
    assert report["tokens_sampled"] > 0
    assert 0 < report["slowest_rollout_s"] <= report["batch_wall_s"]
    # The ratio is of the unrounded seconds; the report rounds all three to 0.01.
    wall, slowest = report["batch_wall_s"], report["slowest_rollout_s"]
    low, high = (wall - 0.005) / (slowest + 0.005), (wall + 0.005) / (slowest - 0.005)
    assert low - 0.005 <= report["batch_over_slowest"] <= high + 0.005
    assert report["workers"] == 4  # slots + 2: the next agent starts while the checker scores the last one
    assert report["efficiency"] > 0 and report["slot_efficiency"] > 0
    assert report["agent_s"] > 0 and report["checker_s"] > 0
    assert report["slot_ideal_s"] <= report["ideal_s"]  # a slot is held for less than the whole rollout
    tokens = report["token_overhead"]
    assert (tokens["prompt_tokens"], tokens["answer_tokens"], tokens["calls"]) == (2000, 64, 2)
    for mode in ("stream", "whole"):
        assert set(tokens[mode]["p50_ms"]) == {"recording", "plain", "direct_recording", "direct_plain"}
        assert all(v > 0 for v in tokens[mode]["p50_ms"].values())
        assert isinstance(tokens[mode]["recording_overhead_ms_per_call"], float)
