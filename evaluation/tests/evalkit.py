"""Shared by the evaluation-run tests: tasks in two categories and a scripted "strong" and "weak" model.

Both models are endpoints on one scripted OpenAI-compatible server (llm.testing); the responder reads the model
name and the task named in the instruction and either writes the right summary (the checker gives 1.0) or a wrong
one (0.25: only input_kept... see SCORES). Which model solves which task is SOLVES, so every figure can be computed
by hand in the test.
"""

import dataclasses
import json
import re

from evaluation.testing import RIGHT_SUMMARY, fruit_package
from llm.models import ModelEndpoint
from llm.testing import Reply, scripted_endpoint
from tasks.models import BenchmarkCategory
from tasks.services import save_package

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
