"""bench/gpu_rl_check.sh with --cpu and a tiny model: the live policy server in place of vLLM, GRPO steps whose
rollout_func samples through the OpenAI API with token ids and logprobs (two samples a generation, the second an
extra row of the trainer's), one JSON object on its last line with the logprob mismatch after each sync ~0."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

# A trainer in a subprocess, no database; a timeout above the check's own 600 s (below), so that its error is the one.
pytestmark = [pytest.mark.once, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_rl_check_runs_on_cpu():
    result = subprocess.run(
        [
            "bash",
            str(ROOT / "bench" / "gpu_rl_check.sh"),
            "--cpu",
            "--hidden",
            "32",
            "--layers",
            "1",
            "--heads",
            "2",
            "--kv-heads",
            "1",
            "--intermediate",
            "64",
            "--steps",
            "2",
            "--generations",
            "2",
            "--prompts",
            "2",
            "--samples-per-generation",
            "2",
            "--max-tokens",
            "16",
            "--lr",
            "1e-3",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert (report["device"], report["policy"], report["steps"]) == ("cpu", "live", 2)
    assert report["samples_per_generation"] == 2
    assert report["model"]["architecture"] == "Qwen3ForCausalLM" and report["steps_per_second"] > 0
    assert len(report["logprob_mismatch"]) == 2 and all(m < 1e-3 for m in report["logprob_mismatch"])
    assert report["synced"] is True and len(report["loss"]) == 2
