"""A reference solution as an agent's tool calls: read every input file, then write every file the solution adds or
changes. No Django here: the learning bench's scripted expert (bench/learning_bench.py) plans from task folders with
it, the demo agents (demo.agent) from the catalog's revisions.

    plan = reference_plan(inputs, solution)      # [("read", {"path"}), …, ("write", {"path", "content"}), …]
    plan = expert_plan(Path("examples/tasks/fix-proration-bug"))

The tool names and arguments are the builtin harness's (evaluation/harnesses/inside/builtin_agent.py), which
OpenClaw's read and write tools share. A ClawGym solution/ folder is laid over input_files/, as the sanity check
applies it, so a solution file equal to its input is no change and is not written.
"""

from __future__ import annotations

import json
from pathlib import Path


def reference_plan(inputs: dict[str, bytes], solution: dict[str, bytes]) -> list[tuple[str, dict]]:
    """The tool calls, in path order as given. Solution files must be UTF-8 text (UnicodeDecodeError otherwise)."""
    plan = [("read", {"path": path}) for path in inputs]
    for path, content in solution.items():
        if inputs.get(path) != content:
            plan.append(("write", {"path": path, "content": content.decode("utf-8")}))
    return plan


def folder_files(root: Path) -> dict[str, bytes]:
    """Every file under `root` by its relative path, sorted ({} when there is no such folder)."""
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def expert_plan(task_dir: Path) -> list[tuple[str, dict]]:
    """The plan of a task folder in the ClawGym layout (input_files/, solution/)."""
    return reference_plan(folder_files(task_dir / "input_files"), folder_files(task_dir / "solution"))


def instruction_of(task_dir: Path) -> str:
    entry = json.loads((task_dir / "data_entry.json").read_text())
    return str(entry.get("user_query") or entry.get("instruction") or "").strip()
