"""bench/proxy_bench.py runs end to end (tiny sizes) and ends with its JSON report."""

import json
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def test_proxy_bench_smoke():
    done = subprocess.run(
        [sys.executable, "bench/proxy_bench.py", "--streams", "3", "--rounds", "2", "--chunks", "5",
         "--chunk-delay", "0.005", "--think", "0.05"],
        cwd=BASE_DIR, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["direct"]["requests"] == report["proxy"]["requests"] == 6
    assert report["recorded_calls"] == 7  # the 6 measured and one warm-up, each recorded by the proxy
    assert report["throughput_ratio"] > 0 and set(report["added_latency_ms"]) == {
        "ttft_p50", "ttft_p99", "total_p50", "total_p99"}
