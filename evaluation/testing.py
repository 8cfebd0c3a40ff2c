"""Pytest plugin (registered in the root conftest.py) for rollout tests of every app: a small task with a real checker
(`fruit_task`, `fruit_package`), `harness_installed`, `needs_bwrap`, the network probe and `wait_rollout`; the model
endpoint they run on is llm.testing's `agent_endpoint`. The benchmarks under bench/ use the fruit package too.

The proxy is the real ASGI app under uvicorn (`live_server_asgi`), the model the scripted OpenAI-compatible server
(`scripted_upstream`), the sandbox bubblewrap: nothing is patched.
"""

import json
import socket
import time

import pytest

from evaluation.harnesses import HarnessUnavailable, get_harness
from evaluation.harnesses.base import BRIDGE_PORT
from evaluation.models import Rollout
from sandbox.testing import unavailable
from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package

FRUIT_CSV = b"fruit,count\napple,3\npear,2\n"
RIGHT_SUMMARY = "3 apples, 2 pears\n"
INSTRUCTION = "Count the fruit in fruit.csv and write the result to summary.txt as '3 apples, 2 pears'."

CHECK_PY = r"""
import json, os
from pathlib import Path

workspace = Path(__file__).resolve().parent.parent
summary = workspace / "summary.txt"
text = summary.read_text() if summary.exists() else ""
with open(os.environ["OPENCLAW_REWARD_PAYLOAD"]) as handle:
    payload = json.load(handle)
print(json.dumps({
    "summary_written": summary.exists(),
    "summary_right": text.strip() == "3 apples, 2 pears",
    "input_kept": (workspace / "fruit.csv").exists() and (workspace / "fruit.csv").read_text().startswith("fruit,"),
    "reported_done": "done" in payload["final_message"].lower() and len(payload["transcript"]) > 0,
}))
"""
REWARD_SH = """#!/usr/bin/env bash
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
scores="$(python3 "$here/check.py")"
printf '%s\\n' "$scores"
printf '%s' "$scores" | python3 -c 'import json, sys
v = [float(x) for x in json.load(sys.stdin).values()]
print(round(sum(v) / len(v), 6))'
"""

# Through sandbox.testing's `bwrap` fixture: where bubblewrap cannot run the test is skipped, but in CI it fails.
needs_bwrap = pytest.mark.usefixtures("bwrap")


def fruit_package(external_id: str = "fruit-summary") -> TaskPackage:
    return TaskPackage(
        external_id=external_id,
        instruction=INSTRUCTION,
        metadata={"category": "Testing", "grading_type": "automated"},
        files=[
            PackageFile("fruit.csv", FRUIT_CSV, "input"),
            PackageFile("check.py", CHECK_PY.encode(), "reward"),
            PackageFile("reward.sh", REWARD_SH.encode(), "reward"),
        ],
    )


@pytest.fixture
def fruit_task(db):
    """A task: summarise fruit.csv into summary.txt; its checker reads the workspace and the reward payload."""
    return save_package(fruit_package()).revision


def host_address() -> str:
    """An address of this machine other than loopback (the one its default route uses), or a public one."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: UDP connect only picks the route
        return probe.getsockname()[0]
    except OSError:
        return "192.0.2.1"
    finally:
        probe.close()


def network_probe(app_port: int) -> str:
    """A shell command for the agent's exec tool: tries every way out and prints one JSON line of outcomes."""
    script = f"""
import json, socket, urllib.request, urllib.error
out = {{}}
for name, host, port in [("web_app", "127.0.0.1", {app_port}), ("postgres", "127.0.0.1", 5432),
                         ("redis", "127.0.0.1", 6379), ("host_web_app", "{host_address()}", {app_port}),
                         ("outside", "1.1.1.1", 443)]:
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, port)); out[name] = "connected"
    except OSError as e:
        out[name] = "refused: " + type(e).__name__
    finally:
        s.close()
try:
    socket.getaddrinfo("example.com", 443); out["dns"] = "resolved"
except OSError as e:
    out["dns"] = "failed: " + type(e).__name__
for name, path in [("bridge_site_page", "/admin/"), ("bridge_api", "/api/")]:
    try:
        urllib.request.urlopen("http://127.0.0.1:{BRIDGE_PORT}" + path, timeout=5); out[name] = "200"
    except urllib.error.HTTPError as e:
        out[name] = "HTTP %d" % e.code
    except OSError as e:
        out[name] = "failed: " + type(e).__name__
print("PROBE " + json.dumps(out, sort_keys=True))
"""
    return "python3 - <<'EOF'\n" + script + "\nEOF"


def probe_result(text: str) -> dict:
    for line in text.splitlines():
        if line.startswith("PROBE "):
            return json.loads(line[len("PROBE ") :])
    raise AssertionError(f"no probe output in the tool result: {text[:2000]!r}")


@pytest.fixture
def harness_installed(settings):
    try:
        get_harness("openclaw").check_available()
    except HarnessUnavailable as exc:
        unavailable(f"the OpenClaw harness cannot run here: {exc}")


def wait_rollout(rollout: Rollout, statuses, timeout: float = 60.0) -> Rollout:
    deadline = time.monotonic() + timeout
    while True:
        rollout.refresh_from_db()
        if rollout.status in statuses:
            return rollout
        if time.monotonic() > deadline:
            raise AssertionError(f"rollout #{rollout.pk} is {rollout.status} after {timeout} s: {rollout.error}")
        time.sleep(0.1)
