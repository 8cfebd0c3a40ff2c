"""bench/call_storage_bench.py: the prompt-as-difference figures rebuild every request exactly, and a real OpenClaw
rollout at a small size gives the figures the report names (the sizes are the bench's to report)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR / "bench"))

from call_storage_bench import difference  # noqa: E402

SYSTEM = {"role": "system", "content": "You are an agent. " * 50}
TOOLS = [{"type": "function", "function": {"name": "exec", "parameters": {"type": "object"}}}]


def context(n: int) -> dict:
    return {"role": "user", "content": f"<internal-context>turn {n}</internal-context>"}


def openclaw_calls(turns: int) -> list[dict]:
    """Requests shaped as OpenClaw's: each ends with an internal-context message the next one replaces."""
    history, calls = [SYSTEM, {"role": "user", "content": "go"}], []
    for n in range(turns):
        calls.append({"request": {"model": "m", "messages": [*history, context(n)], "tools": TOOLS, "stream": True}})
        answer = {"role": "assistant", "tool_calls": [{"id": f"c{n}", "function": {"name": "exec", "arguments": "{}"}}]}
        history = [*history, answer, {"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n}"}]
    return calls


def test_difference_keeps_only_what_is_new_and_rebuilds_every_request():
    calls = openclaw_calls(6)
    sizes, equal = difference(calls)
    assert equal
    whole = [len(json.dumps(call["request"])) for call in calls]
    assert sizes[0] == whole[0]  # the first call has no base
    assert all(size < len(json.dumps(SYSTEM)) for size in sizes[1:])  # neither the system prompt nor the tools again


def test_difference_stores_a_rewritten_history_whole_and_rebuilds_it():
    calls = openclaw_calls(3)
    calls[2]["request"]["messages"] = [{"role": "system", "content": "compacted"}, context(9)]  # nothing shared
    calls[2]["request"]["tools"] = []
    sizes, equal = difference(calls)
    assert equal and sizes[2] >= len(json.dumps(calls[2]["request"]))


@pytest.mark.harness
@pytest.mark.once
@pytest.mark.usefixtures("bwrap")
def test_call_storage_bench_small_openclaw_rollout(harness_installed):
    done = subprocess.run(
        [sys.executable, "bench/call_storage_bench.py", "--turns", "4"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["model_calls"], report["score"], report["rebuilt_equal"]) == (4, 1.0, True)
    before, after = report["before"], report["difference"]
    assert before["per_rollout"] > after["per_rollout"] > before["rollout_rows_chars"]
    assert after["request_chars"]["first"] == before["request_chars"]["first"]
    assert after["request_chars"]["last"] < before["request_chars"]["last"] / 4
