"""Evaluation's test helpers, in one place (a pytest plugin registered in the root conftest.py).

- Rollout tests of every app: a small task with a real checker (`fruit_task`, `fruit_package`), `harness_installed`,
  `needs_bwrap`, the network probe and `wait_rollout`; the model endpoint they run on is llm.testing's
  `agent_endpoint`. The proxy is the real ASGI app under uvicorn (`live_server_asgi`), the model the scripted
  OpenAI-compatible server (`scripted_upstream`), the sandbox bubblewrap: nothing is patched. The benchmarks under
  bench/ use the fruit package too.
- Evaluation-run tests (and studies' and review's): four fruit tasks in two categories (`make_tasks`) and a scripted
  "strong" and "weak" model (`endpoints`, `respond`).
- Page tests (and clawgym_site's layout test): endpoints, a frozen benchmark version, finished runs with known scores
  (STRONG, WEAK, FLAKY), a dressed world of three runs, and URL and text helpers.
- Trajectory tests: the messages and recorded calls of one small tool-calling conversation.
"""

import copy
import dataclasses
import json
import re
import socket

import pytest
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.harnesses import HarnessUnavailable, get_harness
from evaluation.harnesses.base import BRIDGE_PORT, ExitReason
from evaluation.models import EvalRun, Rollout
from evaluation.services import run_progress, runs
from lib.testing import wait_until
from llm.models import ModelEndpoint
from llm.testing import Reply, scripted_endpoint
from sandbox.testing import unavailable
from tasks.models import BenchmarkCategory
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
    def reached():
        rollout.refresh_from_db()
        return rollout.status in statuses

    wait_until(
        reached,
        lambda: f"rollout #{rollout.pk} to be {statuses}: it is {rollout.status}: {rollout.error}",
        timeout=timeout,
    )
    return rollout


# Tasks in two categories and a scripted "strong" and "weak" model, for the evaluation-run tests. Both models are
# endpoints on one scripted OpenAI-compatible server (llm.testing); the responder reads the model name and the task
# named in the instruction and either writes the right summary (the checker gives 1.0) or a wrong one (0.75: see
# RIGHT, WRONG). Which model solves which task is SOLVES, so every figure can be computed by hand in the test.

TASKS = {  # task id -> benchmark category slug (None: uncategorized)
    "eval-a": "analysis-reasoning",
    "eval-b": "analysis-reasoning",
    "eval-c": "systems-automation",
    "eval-d": None,
}
# Which task each model solves (every other one it answers wrongly).
SOLVES = {"strong-model": {"eval-a", "eval-b", "eval-c"}, "weak-model": {"eval-a"}}
# The fruit checker's four checks: right summary + kept input + "done" reported = 1.0; a wrong summary file that
# is written, with the input kept and "done" said, scores 3 of 4.
RIGHT, WRONG = 1.0, 0.75
TASK_MARK = re.compile(r"\(task ([a-z0-9-]+)\)")


def make_tasks(db_ready=True) -> dict:
    """The tasks (current revisions), each with its category."""

    # A transactional test's flush removes the taxonomy the migrations loaded: put back what these tasks use.
    for slug in sorted({c for c in TASKS.values() if c}):
        BenchmarkCategory.objects.get_or_create(slug=slug, defaults={"name": slug.replace("-", " ").title()})
    revisions = {}
    for task_id, category in TASKS.items():
        package = fruit_package(task_id)
        package = dataclasses.replace(
            package,
            instruction=f"{package.instruction} (task {task_id})",
            metadata={**package.metadata, "category": category or ""},
        )
        revisions[task_id] = save_package(package).revision
        if category:
            assert revisions[task_id].task.benchmark_category == BenchmarkCategory.objects.get(slug=category)
    return revisions


def endpoints(upstream) -> tuple[ModelEndpoint, ModelEndpoint]:
    strong = scripted_endpoint(upstream, "strong", model="strong-model", timeout_seconds=30, max_retries=0)
    weak = scripted_endpoint(upstream, "weak", model="weak-model", timeout_seconds=30, max_retries=0)
    return strong, weak


def _text(content) -> str:
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def respond(body: dict) -> Reply:
    """The strong and the weak model: write summary.txt (right or wrong by SOLVES), then say done."""
    messages = body.get("messages") or body.get("input") or []
    if not isinstance(messages, list):
        messages = [{"role": "user", "content": str(messages)}]
    text = " ".join(_text(m.get("content")) for m in messages if isinstance(m, dict))
    mark = TASK_MARK.search(text)
    task = mark.group(1) if mark else ""
    acted = any(
        isinstance(m, dict) and (m.get("role") == "tool" or m.get("type") == "function_call_output") for m in messages
    )
    if acted:
        return Reply.text("Done: summary.txt is written.")
    content = RIGHT_SUMMARY if task in SOLVES.get(body.get("model"), ()) else "2 pears, 3 apples\n"
    return Reply.tool_call("write", {"path": "summary.txt", "content": content})


def expected_scores(model: str) -> dict:
    return {task: RIGHT if task in SOLVES[model] else WRONG for task in TASKS}


def dump(value) -> str:
    return json.dumps(value, indent=1, sort_keys=True, default=str)


# Finished runs with known scores, a dressed world of three runs, and URL and text helpers, for the page tests.

# Per task, the score of each of two repeats (None: the infrastructure failed it: no score).
STRONG = {"eval-a": [1.0, 1.0], "eval-b": [1.0, 0.5], "eval-c": [1.0, 1.0], "eval-d": [0.75, 0.75]}

WEAK = {"eval-a": [1.0, 1.0], "eval-b": [0.75, 0.75], "eval-c": [0.5, 0.75], "eval-d": [0.25, 0.25]}

FLAKY = {"eval-a": [1.0, 1.0], "eval-b": [1.0, 1.0], "eval-c": [1.0, 1.0], "eval-d": [None, 0.5]}

TOKENS = {"eval-a": 100, "eval-b": 200, "eval-c": 300, "eval-d": 400}  # input tokens of each rollout of a task

CHECKS = ("input_kept", "reported_done", "summary_right", "summary_written")


def endpoint(name: str) -> ModelEndpoint:
    return ModelEndpoint.objects.create(
        name=name, base_url="http://127.0.0.1:9/v1", model=f"{name}-model", roles=["agent"]
    )


def freeze(revisions, name="eval-bench") -> BenchmarkVersion:
    benchmark, _ = Benchmark.objects.get_or_create(name=name)
    number = benchmark.versions.count() + 1
    version = BenchmarkVersion.objects.create(benchmark=benchmark, number=number)
    PinnedRevision.objects.bulk_create(PinnedRevision(version=version, revision=r) for r in revisions)
    return version


def finished_run(model: ModelEndpoint, version, scores: dict, *, finish=True) -> EvalRun:
    """A run whose rollouts ended as `scores` says (scored, or an infra failure for None), its figures recomputed."""
    run, _ = runs.create_eval_run(
        endpoint=model, benchmark_version=version, harness="builtin", repeats=2, fresh=True, user=None
    )
    EvalRun.objects.filter(pk=run.pk).update(status=EvalRun.Status.RUNNING, started_at=timezone.now())
    for rollout in run.rollouts.select_related("revision__task"):
        task = rollout.revision.task.external_id
        if not finish and rollout.repeat_index == 1:
            continue  # still queued
        score = scores[task][rollout.repeat_index]
        common = {
            "attempt": 1,
            "finished_at": timezone.now(),
            "input_tokens": TOKENS[task],
            "output_tokens": 10,
            "cost": "0.01",
            "agent_seconds": 2.0,
        }
        if score is None:  # every attempt the run allows failed: it is not retried again
            common["attempt"] = run.max_attempts
            Rollout.objects.filter(pk=rollout.pk).update(
                status=Rollout.Status.FAILED, exit_reason=ExitReason.UPSTREAM_ERROR, **common
            )
        else:
            Rollout.objects.filter(pk=rollout.pk).update(
                status=Rollout.Status.SCORED, exit_reason=ExitReason.COMPLETED, score=score, **common
            )
    run_progress.recompute_run(run)
    # As the last rollout's worker would: the run finishes once nothing is left to run.
    run_progress.rollout_changed(run.rollouts.filter(status=Rollout.Status.SCORED).order_by("pk").last().pk)
    run.refresh_from_db()
    return run


def url(name, *args, **query):
    path = reverse(f"evaluations:{name}", args=args)
    return path + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode()).strip()


def build_world() -> dict:
    """Three finished runs of one benchmark version, dressed: {"strong", "weak", "flaky"} (test_eval_pages' scores)."""
    version = freeze(make_tasks().values())
    return {
        name: dress(finished_run(endpoint(name), version, scores))
        for name, scores in (("strong", STRONG), ("weak", WEAK), ("flaky", FLAKY))
    }


def dress(run):
    """Give the run's rollouts what a real one has: a transcript, a final message and the checker's sub-scores (all
    four at 1 for a full score, `summary_right` at 0 otherwise) and, for eval-b, a rubric judgement."""
    for rollout in run.rollouts.select_related("revision__task"):
        task, repeat = rollout.revision.task.external_id, rollout.repeat_index
        right = rollout.score == 1.0
        answer = "3 apples, 2 pears" if right else f"I miscounted the pears in {task}"
        sub = dict.fromkeys(CHECKS, 1.0) | ({} if right else {"summary_right": 0.0})
        judgements = (
            [{"rule": "tidy", "weight": 1, "score": 1.0 if right else 0.0, "reason": "ok"}] if task == "eval-b" else []
        )
        Rollout.objects.filter(pk=rollout.pk).update(
            final_message=f"Done with {task} (repeat {repeat}).",
            sub_scores=sub if rollout.score is not None else {},
            check_status="ok" if rollout.score is not None else "",
            rubric_judgements=judgements,
            transcript=[
                {"role": "user", "content": f"Count the fruit (task {task})."},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"id": "c1", "name": "write", "arguments": {"path": "summary.txt", "content": answer}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "written"},
                {"role": "assistant", "content": f"Done: {answer}."},
            ],
        )
    return run


# The messages and recorded calls of one small tool-calling conversation, for the trajectory tests.

# OpenClaw's real system prompt talks about heartbeats: it must never be taken for one.
SYSTEM = {
    "role": "system",
    "content": "You are a personal assistant.\nHeartbeats: if nothing needs attention, reply HEARTBEAT_OK.",
}


TASK = {"role": "user", "content": "Write hello.txt containing 'hi', then check it."}


HEARTBEAT = {
    "role": "user",
    "content": "Read HEARTBEAT.md if it exists. If nothing needs attention, reply HEARTBEAT_OK.",
}


TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("read", "write", "exec")
]


def tool_call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def assistant(content=None, *calls):
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def tool(call_id, content):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def chat_call(messages, reply, *, usage=(100, 10), tools=TOOLS, total=True):
    usage_body = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    if total:
        usage_body["total_tokens"] = usage[0] + usage[1]
    return {
        "request": {"model": "scripted", "messages": copy.deepcopy(messages), "tools": tools, "stream": True},
        "response": {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": copy.deepcopy(reply), "finish_reason": "stop"}],
            "usage": usage_body,
        },
    }


A1 = assistant("I'll write it.", tool_call("call_1", "write", {"path": "hello.txt", "content": "hi"}))


T1 = tool("call_1", "Wrote 2 bytes to hello.txt")


A2 = assistant(None, tool_call("call_2", "exec", {"command": "cat hello.txt"}))


T2 = tool("call_2", "hi")


A3 = assistant("Done: hello.txt contains 'hi'.")
