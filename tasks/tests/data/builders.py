"""Builders for import/export tests: task folders, JSONL lines and archives made in tmp_path."""

import json
from pathlib import Path

from tasks.package import STANDARD_REWARD_SH

CHECK_PY = 'import json\nprint(json.dumps({"report_exists": 1.0}))\n'

RULE = {
    "name": "clear summary",
    "target_file": "report.md",
    "scores": {
        "0": "No summary.",
        "0.25": "A summary that misses most points.",
        "0.5": "Covers half of the points.",
        "0.75": "Covers most points.",
        "1": "Covers every point clearly.",
    },
    "weight": 1.0,
}


def write_task(root: Path, task_id: str = "task_a", *, entry: dict | None = None, files: dict | None = None) -> Path:
    """A ClawGym task folder under `root`. `files` maps paths like 'input_files/a.md' to str/bytes."""
    folder = root / task_id
    folder.mkdir(parents=True)
    data = {
        "task_id": task_id,
        "user_query": f"Summarise notes.md into report.md ({task_id}).",
        "metadata": {"category": "Office", "grading_type": "code"},
    }
    data.update(entry or {})
    (folder / "data_entry.json").write_text(json.dumps(data, indent=2))
    default_files = {
        "input_files/notes.md": "# Notes\n- one\n- two\n",
        "reward/reward.sh": STANDARD_REWARD_SH,
        "reward/check.py": CHECK_PY,
        "solution/report.md": "one, two\n",
    }
    for rel, content in (default_files if files is None else files).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return folder


def tree(root: Path) -> dict[str, bytes]:
    """Every file below `root` by relative path, for byte-for-byte comparisons."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def jsonl_line(**overrides) -> dict:
    line = {
        "prompt": "Count the rows of data.csv and write the number to count.txt.",
        "hook_code": CHECK_PY,
        "input_files": [{"file_path": "data.csv", "content": "a,b\n1,2\n3,4\n"}],
        "rule": None,
        "origin_template": "count-rows",
    }
    line.update(overrides)
    return line


def write_jsonl(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path
