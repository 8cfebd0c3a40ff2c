"""bench/token_storage_bench.py at a small size (8 calls, 8K context, the first prompt a quarter of it): every prompt
read back equals the prompt recorded, in both shapes, and the chained rows hold only each prompt's new ids. The
timings are the bench's to report (this machine is shared), so only their presence is checked here."""

import json
import os
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent


def test_token_storage_bench_small():
    # On SQLite whatever this session runs on: on PostgreSQL the bench's throwaway database would be this session's
    # test database (test_<name>), and dropping it at the end would pull it from under these tests.
    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    done = subprocess.run(
        [
            sys.executable,
            "bench/token_storage_bench.py",
            "--turns",
            "8",
            "--context",
            "8192",
            "--first-prompt",
            "2048",
            "--completion",
            "64",
            "--context-message",
            "50",
        ],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["database"], report["turns"], report["agree"]) == ("sqlite", 8, True)
    grow = (8192 - 2048 - 8 * 64) // 7  # the environment's ids each turn
    chain, openclaw = report["chain"], report["openclaw"]
    assert chain["agree"] and openclaw["agree"]
    # Before: every prompt whole. After: the first prompt, then each turn's new ids only (the answers are in their
    # own column either way); OpenClaw's rows also repeat the internal-context message they replace.
    assert chain["prompt_ids"]["before"] == sum(2048 + n * (64 + grow) for n in range(8))
    assert chain["prompt_ids"]["after"] == 2048 + 7 * grow
    assert openclaw["prompt_ids"]["before"] == chain["prompt_ids"]["before"] + 8 * 50
    assert openclaw["prompt_ids"]["after"] == 2048 + 50 + 7 * (64 + grow + 50)
    assert chain["prompt_ids"]["ratio"] > 3 and chain["json_bytes"]["ratio"] > 3
    for shape in (chain, openclaw):
        for label in ("before", "after"):
            assert 0 < shape["record_ms"][label]["p50"] <= shape["record_ms"][label]["max"]
            assert shape["rebuild_all_ms"][label] > 0 and shape["rebuild_last_ms"][label] > 0
