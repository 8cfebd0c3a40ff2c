"""Fixtures of the tasks app that other apps' tests use, and the checkers in ClawGym-Bench's shapes that tests and
benches check against (below)."""

import importlib

import pytest
from django.apps import apps


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
