"""bench/gpu_sft_check.sh with --cpu and a tiny model: one JSON object on its last line, a falling loss at each
length (the same batch repeated)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

# A trainer subprocess, no database; a timeout above the check's own 600 s (below), so that its error is the one.
pytestmark = [pytest.mark.once, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_sft_check_runs_on_cpu():
    result = subprocess.run(
        [
            "bash",
            str(ROOT / "bench" / "gpu_sft_check.sh"),
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
            "--vocab",
            "600",
            "--lengths",
            "128,256",
            "--steps",
            "3",
            "--yarn",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert (
        report["device"] == "cpu" and report["model"]["architecture"] == "Qwen3ForCausalLM" and report["model"]["yarn"]
    )
    assert [run["length"] for run in report["runs"]] == [128, 256]
    for run in report["runs"]:
        assert len(run["loss"]) == 3 and run["loss_trend"] == "falling" and run["tokens_per_second"] > 0
        assert run["peak_gpu_memory_bytes"] is None
