"""The tasks app's test helpers, for its own tests and other apps': tasks saved through the service (`make_task`,
`make_sanity_task`), checker runs (`run`, `shell`, `spec`, `HOSTILE`), the `taxonomy` fixture, and the checkers in
ClawGym-Bench's shapes that tests and benches check against (below)."""

import importlib
from pathlib import Path

import pytest
from django.apps import apps

from sandbox import Limits, Workspace
from tasks.models import Task
from tasks.package import STANDARD_REWARD_SH, PackageFile, TaskPackage
from tasks.services import save_package
from tasks.verification import CheckerSpec, CheckStatus, run_checker

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tasks"

# Scores a summary of data.csv written to out.json; "out_exists" is the lenient kind of check the scaffold catches.
CHECK = """import json, os
def load():
    try:
        return json.load(open("out.json"))
    except (OSError, ValueError):
        return None
out = load()
scores = {"total_right": isinstance(out, dict) and out.get("total") == 3}
if LENIENT:
    scores["out_exists"] = os.path.exists("out.json")
if CRASH_WITHOUT_INPUT:
    open("data.csv").read()
print(json.dumps(scores))
"""

INPUTS = {"data.csv": b"n\n1\n2\n"}

SOLVED = {"out.json": b'{"total": 3}\n'}

FAST = Limits(wall_seconds=10, cpu_seconds=10, max_output_bytes=64 * 1024)

HOSTILE = {
    "bad_json": ("echo '{\"a\": 1,'; echo 1.0", CheckStatus.BAD_OUTPUT, "not valid JSON"),
    "nan_score": ("echo '{\"a\": 1}'; echo nan", CheckStatus.BAD_OUTPUT, "not a finite number"),
    "inf_subscore": ("echo '{\"a\": Infinity}'; echo 1", CheckStatus.BAD_OUTPUT, "sub-score 'a' is inf"),
    "score_above_one": ("echo '{\"a\": 1}'; echo 1.01", CheckStatus.BAD_OUTPUT, "outside [0, 1]"),
    "negative_score": ("echo -1", CheckStatus.BAD_OUTPUT, "outside [0, 1]"),
    "no_output": ("true", CheckStatus.BAD_OUTPUT, "printed nothing"),
    "words_not_score": ("echo 'all good!'", CheckStatus.BAD_OUTPUT, "not a number"),
    "non_zero_exit": ("echo '{\"a\": 1}'; echo 1.0; echo 'boom' >&2; exit 3", CheckStatus.ERROR, "exit code 3: boom"),
    "crash_in_check_py": (
        "set -e; python3 reward/check.py; echo 1.0",
        CheckStatus.ERROR,
        "exit code 1: SystemExit: check.py cannot parse out.json",
    ),
    "timeout": ("echo 1.0; sleep 30", CheckStatus.TIMEOUT, "wall-clock limit of 2 s"),
    "killed": ("echo 1.0; kill -9 $$", CheckStatus.KILLED, "SIGKILL"),
    "output_flood": ("yes 1.0", CheckStatus.OUTPUT_LIMIT, "output went past"),
}

RUBRIC = [
    {
        "name": "Report clarity",
        "target_file": "report.md",
        "scores": {
            "0": "missing",
            "0.25": "hard to read",
            "0.5": "readable",
            "0.75": "clear",
            "1": "crisp and complete",
        },
        "weight": 2,
    }
]


# Without `files`: an input and a checker that pays nothing (a sanity run of it scores 0 everywhere).
PLAIN_FILES = [
    PackageFile("sales.csv", b"item,amount\na,1\n"),
    PackageFile("reward.sh", b"python3 reward/check.py\n", role="reward"),
    PackageFile("check.py", b"import json\nprint(json.dumps({'report_exists': 0}))\n", role="reward"),
]

# A task with a file of every kind the pages show (CSV, Markdown, JSON, binary) and a rubric, for the catalog's pages.
SAMPLE_FILES = [
    PackageFile("data/sales.csv", b"region,total\nnorth,10\nsouth,20\n"),
    PackageFile("README.md", b"# Notes\n\nSome *notes*.\n"),
    PackageFile("config.json", b'{"currency":"EUR","regions":["north","south"]}'),
    PackageFile("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00binary"),
    PackageFile("check.py", b"import json\nprint(json.dumps({'exists': 1.0}))\n", role="reward"),
    PackageFile("reward.sh", b"#!/usr/bin/env bash\npython3 reward/check.py\n", role="reward"),
    PackageFile("report.md", b"# Report\nnorth 10, south 20\n", role="solution"),
]


def make_task(
    external_id="t-1",
    instruction="Summarise sales.csv into report.md.",
    *,
    files=None,
    metadata=None,
    rubric=None,
    **save,
) -> Task:
    """A task saved through the real service (`save_package`, which takes `save`: source, status, stage, user,
    message). Without `files`, PLAIN_FILES."""
    package = TaskPackage(
        external_id=external_id,
        instruction=instruction,
        metadata=metadata or {},
        files=PLAIN_FILES if files is None else files,
        rubric=rubric or [],
    )
    return save_package(package, **save).task


def make_sanity_task(
    external_id,
    check_py=None,
    *,
    lenient=False,
    crash=False,
    instruction="Sum the numbers in data.csv into out.json as {total}.",
    inputs=INPUTS,
    solution=SOLVED,
):
    """A task for the sanity scaffold: `check_py` (by default CHECK, lenient or crashing as asked) run by the standard
    reward.sh, with input and reference solution files."""
    check = check_py if check_py is not None else f"LENIENT = {lenient}\nCRASH_WITHOUT_INPUT = {crash}\n" + CHECK
    files = [
        PackageFile("reward.sh", STANDARD_REWARD_SH.encode(), "reward"),
        PackageFile("check.py", check.encode(), "reward"),
    ]
    files += [PackageFile(path, data, "input") for path, data in inputs.items()]
    files += [PackageFile(path, data, "solution") for path, data in (solution or {}).items()]
    return make_task(external_id, instruction, files=files)


def spec(check_py: str = "", reward_sh: str = STANDARD_REWARD_SH, entry: str = "bash reward/reward.sh"):
    files = {"reward.sh": reward_sh.encode()}
    if check_py:
        files["check.py"] = check_py.encode()
    return CheckerSpec(
        task_id="t-1",
        instruction="Write out.json",
        metadata={"category": "Analysis"},
        entry=entry,
        reward_files=files,
    )


def run(checker, files=None, backend=None, limits=FAST, **kwargs):
    with Workspace.create(files or {"data.csv": b"a,b\n1,2\n"}) as workspace:
        return run_checker(checker, workspace, backend=backend, limits=limits, **kwargs), workspace


def shell(script: str, check_py: str = "") -> CheckerSpec:
    return spec(check_py, reward_sh="#!/usr/bin/env bash\n" + script + "\n")


@pytest.fixture
def taxonomy(transactional_db):
    """Load the taxonomy the data migration loads: a transactional test's flush empties it.

    (serialized_rollback cannot do it here: once Playwright's event loop runs in this thread, Django's
    connection handler hands out a fresh connection object that lacks the serialized test data.)
    """
    importlib.import_module("tasks.migrations.0002_taxonomy").load(apps, None)


# --- checkers in the published tasks' shapes ------------------------------------------------------------------------
# Checkers in the shapes the published ClawGym tasks have (written here, not copied from the release).
#
# - AVERAGING_REWARD_SH: the one reward.sh every released task shares. It pipes check.py's JSON object into a one-line
#   averager and prints only the float, so nothing but the score reaches its stdout.
# - PLANIFY_*: a task whose checker runs the workspace's own `scripts/planify.py` to see that it works; the script
#   rewrites `plan/plan.csv`, so the checker writes into the workspace it judges.
# - LENIENT_JSONL_CHECK_PY: checks that are true of an empty output ("every line is valid JSON", "the text equals the
#   concatenation of the lines"): an empty placeholder earns most of the score.

AVERAGING_REWARD_SH = """#!/bin/bash
cd "$(dirname "$0")/.."
python3 reward/check.py | python3 -c "import sys,json; d=json.load(sys.stdin); print(sum(d.values())/len(d))"
"""

PLANIFY_SCRIPT = '''"""Turn tasks.csv into a dated plan (the agent's script, under test)."""
import csv
import os

os.makedirs("plan", exist_ok=True)
with open("tasks.csv", newline="") as source:
    rows = list(csv.DictReader(source))
with open("plan/plan.csv", "w", newline="") as out:
    writer = csv.writer(out)
    writer.writerow(["day", "task"])
    for day, row in enumerate(sorted(rows, key=lambda r: ORDER), start=1):
        writer.writerow([day, row["task"]])
'''
# The script as given sorts by name (the bug the task asks to fix); the reference solution sorts by priority.
PLANIFY_BROKEN = PLANIFY_SCRIPT.replace("ORDER", 'r["task"]')
PLANIFY_FIXED = PLANIFY_SCRIPT.replace("ORDER", 'int(r["priority"])')
PLANIFY_INSTRUCTION = "Fix scripts/planify.py: plan/plan.csv must list the tasks of tasks.csv in priority order."

PLANIFY_CHECK_PY = """import csv, json, os, subprocess

def plan_rows():
    try:
        with open("plan/plan.csv", newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return None

ran = subprocess.run(["python3", "scripts/planify.py"], capture_output=True).returncode == 0
rows = plan_rows()
print(json.dumps({
    "script_runs": ran,
    "plan_written": rows is not None,
    "plan_in_priority_order": bool(rows) and [r["task"] for r in rows] == ["review", "send", "draft"],
}))
"""

PLANIFY_INPUTS = {
    "tasks.csv": b"task,priority\ndraft,3\nreview,1\nsend,2\n",
    "scripts/planify.py": PLANIFY_BROKEN.encode(),
    "plan/plan.csv": b"day,task\n1,draft\n",  # a stale plan; the script rewrites it
}
PLANIFY_SOLUTION = {"scripts/planify.py": PLANIFY_FIXED.encode()}

LENIENT_JSONL_CHECK_PY = """import json

def lines(path):
    try:
        with open(path) as f:
            return [line for line in f.read().splitlines() if line.strip()]
    except OSError:
        return None

records = lines("out/records.jsonl")
summary = None
try:
    summary = open("out/summary.txt").read().strip()
except OSError:
    pass

def valid(line):
    try:
        json.loads(line)
        return True
    except ValueError:
        return False

print(json.dumps({
    "records_exist": records is not None,
    "every_line_is_json": records is not None and all(valid(r) for r in records),
    "summary_is_concatenation": summary is not None and records is not None
        and summary == "".join(json.loads(r).get("id", "") for r in records if valid(r)),
    "has_three_records": records is not None and len(records) == 3,
}))
"""
LENIENT_JSONL_INSTRUCTION = (
    "Convert contacts.csv into out/records.jsonl (one JSON object per contact with its id) and write the ids, "
    "concatenated, into out/summary.txt."
)
