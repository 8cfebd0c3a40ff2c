"""bench/proxy_bench.py runs end to end (tiny sizes) and ends with its JSON report."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def test_proxy_bench_smoke():
    done = subprocess.run(
        [
            sys.executable,
            "bench/proxy_bench.py",
            "--streams",
            "3",
            "--rounds",
            "2",
            "--chunks",
            "5",
            "--chunk-delay",
            "0.005",
            "--think",
            "0",
        ],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["direct"]["requests"] == report["proxy"]["requests"] == 6
    assert report["recorded_calls"] == 7  # the 6 measured and one warm-up, each recorded by the proxy
    assert report["throughput_ratio"] > 0 and set(report["added_latency_ms"]) == {
        "ttft_p50",
        "ttft_p99",
        "total_p50",
        "total_p99",
    }
    # A burst queues every first token on the proxy's process by design: it is judged on throughput alone.
    assert report["aim"] == {"p50_added_ms_max": None, "throughput_ratio_min": 0.92}
    assert isinstance(report["aim_met"], bool)


@pytest.mark.once
def test_proxy_bench_mixed_measures_both_sides_in_one_load():
    done = subprocess.run(
        [
            sys.executable,
            "bench/proxy_bench.py",
            "--mixed",
            "--proxy-workers",
            "2",
            "--streams",
            "3",
            "--rounds",
            "2",
            "--chunks",
            "5",
            "--chunk-delay",
            "0.005",
            "--think",
            "0.05",
            "--first-token-delay",
            "0.04",
        ],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # The upstream waits 40 ms before each answer (a model's prefill), whichever way the request came.
    assert report["first_token_delay_s"] == 0.04
    assert report["direct"]["ttft_ms"]["p50"] >= 40 and report["proxy"]["ttft_ms"]["p50"] >= 40
    assert report["aim_met"] is None  # the aim is judged against an upstream that answers at once
    # Client n's request k goes direct when (n + k) is even: 3 of the 6 each way, in the same load (the same wall).
    assert (report["mixed"], report["proxy_workers"]) == (True, 2)
    assert report["direct"]["requests"] == report["proxy"]["requests"] == 3
    assert report["direct"]["wall_s"] == report["proxy"]["wall_s"]
    assert report["recorded_calls"] == 4  # the 3 proxied and the proxy's warm-up
    assert report["throughput_ratio"] > 0 and set(report["ttft_ratio"]) == {"p50", "p99"}
    assert report["aim"] == {"p50_added_ms_max": 4.6, "throughput_ratio_min": 0.92}
