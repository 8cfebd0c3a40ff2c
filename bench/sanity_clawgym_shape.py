#!/usr/bin/env python
"""What the sanity check finds on tasks shaped like the published ClawGym-Bench (generated here, not copied).

The generator writes N ClawGym task folders (default 200) over 11 categories. Like the release, every task shares one
`reward/reward.sh` that pipes `check.py`'s JSON object of checks into a one-line averager and prints only the float.
The checkers come in the shapes the release has:
- strict: the checks need the right content (a lazy agent earns 0);
- jsonl_txt: "every line of the .jsonl is valid JSON" and "the .txt equals the concatenation", true of empty files;
- markdown: "the note exists" and "it has a heading", true of the scaffold's `# placeholder`;
- csv_header: "the header is right", true of the scaffold's header-only CSV;
- runs_script: runs the workspace's own script (which rewrites its output) and pays for it running at all;
- runs_script_strict: runs the workspace's script too, but pays only for the right output;
- unittest: "`python -m unittest` passes", true of a workspace without tests (Python 3.11 exits 0 on no tests);
- fragile: reads an input without guarding, so it prints nothing on the empty workspace.
They are imported through the ClawGym folder importer and sanity-checked in this process on all CPUs
(`sanity_check --here`), reports stored, on a throwaway test database.

The baseline, in the same process just before: the same checkers on the same workspaces run bare and one after
another (the process backend, no isolation, with the sandbox runtime's interpreter first on PATH so that `python`
and `python3` are the same Python), reports not stored. `ratio_to_bare_sequential` is the sandboxed check's time over
the baseline's; `bare_same_findings` counts the tasks whose crashed / over-lenient / lazy score the baseline found
alike. A second bare baseline, tasks one after another but each task's runs side by side as the sandboxed check runs
them (CLAWGYM_SANITY_RUNS_AT_ONCE), gives `ratio_to_bare_side_by_side`: until 2026-12-05 that was the baseline
`ratio_to_bare_sequential` named, though its runs were not one after another. `--no-bare` skips both. `--one-at-a-time` also times the sandboxed check with each task's runs one after
another (CLAWGYM_SANITY_RUNS_AT_ONCE=1, as before they ran side by side), in the same process, before the default.

    .venv/bin/python bench/sanity_clawgym_shape.py [--tasks 200] [--workers N] [--seed 7] [--no-bare]
                                                   [--one-at-a-time]

Prints one JSON object on its last line: time, crashed, over-lenient, the lazy-score distribution (> 0, > 0.1,
> 0.2, > 0.5), per shape, the checks that pay most often, and how many runs showed sub-scores (all of them should:
check.py's JSON is captured though reward.sh prints only the mean).
"""

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.test.utils import setup_databases, setup_test_environment, teardown_databases  # noqa: E402

from sandbox import ProcessBackend  # noqa: E402
from sandbox.runtime import runtime_root  # noqa: E402
from tasks.testing import AVERAGING_REWARD_SH  # noqa: E402

CATEGORIES = [
    "office-documents",
    "data-analysis",
    "software-development",
    "scheduling",
    "personal-finance",
    "communication",
    "research",
    "devops",
    "content-creation",
    "personal-organization",
    "education",
]
# Shape: how often it occurs (the release's mix is unknown here; every shape is well represented).
SHAPES = {
    "strict": 5,
    "jsonl_txt": 3,
    "markdown": 3,
    "csv_header": 2,
    "runs_script": 2,
    "runs_script_strict": 2,
    "unittest": 2,
    "fragile": 1,
}
THRESHOLDS = (0.0, 0.1, 0.2, 0.5)


# --- the generator -------------------------------------------------------------------------------------------------


def _extra(rng: random.Random, path: str, words: list[str], most: int) -> str:
    """Code adding up to `most` strict checks (each needs a word in the output at `path`) to `checks`: how many a
    task has varies, so what its lenient checks pay varies too."""
    chosen = rng.sample(words, rng.randint(0, min(most, len(words))))
    if not chosen:
        return ""
    read = f"try:\n    _text = open({path!r}).read()\nexcept OSError:\n    _text = ''\n"
    return read + "".join(f"checks[{f'mentions_{w}'!r}] = {w!r} in _text\n" for w in chosen)


def _rows(rng: random.Random, n: int) -> list[tuple[str, int]]:
    return [(f"item{i:02d}", rng.randint(1, 99)) for i in range(n)]


def _csv(rows) -> str:
    return "name,amount\n" + "".join(f"{name},{amount}\n" for name, amount in rows)


def strict(rng, n):
    rows = _rows(rng, rng.randint(4, 9))
    total = sum(a for _, a in rows)
    check = f"""import json
try:
    out = json.load(open("reports/summary.json"))
except (OSError, ValueError):
    out = None
ok = isinstance(out, dict)
print(json.dumps({{
    "total_right": ok and out.get("total") == {total},
    "count_right": ok and out.get("count") == {len(rows)},
    "largest_right": ok and out.get("largest") == "{max(rows, key=lambda r: r[1])[0]}",
}}))
"""
    instruction = "Summarise data/items.csv into reports/summary.json with the keys total, count and largest."
    return instruction, {"data/items.csv": _csv(rows)}, check


def jsonl_txt(rng, n):
    rows = _rows(rng, rng.randint(3, 6))
    check = f"""import json
def lines(path):
    try:
        return [line for line in open(path).read().splitlines() if line.strip()]
    except OSError:
        return None
def valid(line):
    try:
        json.loads(line)
        return True
    except ValueError:
        return False
records = lines("out/records.jsonl")
try:
    joined = open("out/names.txt").read().strip()
except OSError:
    joined = None
names = [json.loads(r).get("name", "") for r in records or [] if valid(r)]
checks = {{
    "records_file": records is not None,
    "every_line_is_json": records is not None and all(valid(r) for r in records),
    "names_concatenated": joined is not None and joined == "".join(names),
    "one_record_per_row": records is not None and len(records) == {len(rows)},
}}
{_extra(rng, "out/records.jsonl", [name for name, _ in rows], 5)}print(json.dumps(checks))
"""
    instruction = (
        "Convert data/items.csv into out/records.jsonl, one JSON object per row with its name and amount, and write "
        "the names, concatenated in order, into out/names.txt."
    )
    return instruction, {"data/items.csv": _csv(rows)}, check


def markdown(rng, n):
    topics = rng.sample(["budget", "hiring", "launch", "offsite", "security", "roadmap", "pricing"], 3)
    notes = "".join(f"- {t}: discussed, owner to follow up\n" for t in topics)
    check = f"""import json
try:
    text = open("notes/summary.md").read()
except OSError:
    text = None
checks = {{
    "summary_written": text is not None,
    "has_a_heading": text is not None and text.lstrip().startswith("#"),
    "mentions_every_topic": text is not None and all(t in text.lower() for t in {topics!r}),
}}
{_extra(rng, "notes/summary.md", ["owner", "follow", "decided", "next", "risk"], 5)}print(json.dumps(checks))
"""
    instruction = "Read meeting.md and write notes/summary.md: a heading, then one line per topic discussed."
    return instruction, {"meeting.md": "# Weekly sync\n" + notes}, check


def csv_header(rng, n):
    rows = _rows(rng, rng.randint(4, 8))
    keep = sorted(name for name, amount in rows if amount >= 50)
    check = f"""import csv, json
try:
    found = list(csv.reader(open("out/large.csv")))
except OSError:
    found = None
checks = {{
    "header_right": bool(found) and found[0] == ["name", "amount"],
    "rows_right": bool(found) and sorted(r[0] for r in found[1:] if r) == {keep!r},
}}
{_extra(rng, "out/large.csv", keep + [f"{a}" for _, a in rows if a >= 50], 10)}print(json.dumps(checks))
"""
    instruction = (
        "Copy the rows of data/items.csv with an amount of 50 or more into out/large.csv, columns name,amount."
    )
    return instruction, {"data/items.csv": _csv(rows)}, check


SCRIPT = """import csv, os
os.makedirs("out", exist_ok=True)
rows = list(csv.DictReader(open("data/items.csv")))
with open("out/sorted.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["name", "amount"])
    for r in sorted(rows, key=lambda r: KEY):
        w.writerow([r["name"], r["amount"]])
"""


def _runs_script(rng, n, *, strict_pay):
    rows = _rows(rng, rng.randint(4, 8))
    expected = [name for name, _ in sorted(rows, key=lambda r: -r[1])]
    ran = '"script_runs": ran,\n    "output_written": rows is not None,\n    ' if not strict_pay else ""
    check = f"""import csv, json, subprocess
ran = subprocess.run(["python3", "scripts/sort_items.py"], capture_output=True).returncode == 0
try:
    rows = [r["name"] for r in csv.DictReader(open("out/sorted.csv"))]
except (OSError, KeyError):
    rows = None
checks = {{
    {ran}"largest_first": ran and rows == {expected!r},
}}
print(json.dumps(checks))
"""
    script = SCRIPT.replace("KEY", 'r["name"]')  # the bug to fix: sorts by name, not by amount (largest first)
    stale = "name,amount\nold,0\n"
    instruction = "Fix scripts/sort_items.py so that out/sorted.csv lists the items of data/items.csv largest first."
    return instruction, {"data/items.csv": _csv(rows), "scripts/sort_items.py": script, "out/sorted.csv": stale}, check


def runs_script(rng, n):
    return _runs_script(rng, n, strict_pay=False)


def runs_script_strict(rng, n):
    return _runs_script(rng, n, strict_pay=True)


def unittest(rng, n):
    rate = rng.choice([5, 10, 20])
    module = f"def discount(price):\n    return price * {100 - rate} // 100 + 1  # off by one\n"
    check = f"""import json, subprocess, sys
sys.path.insert(0, ".")
tests = subprocess.run(["python", "-m", "unittest"], capture_output=True)
try:
    import pricing
    fixed = pricing.discount(200) == {200 * (100 - rate) // 100}
except Exception:
    fixed = False
checks = {{"unit_tests_pass": tests.returncode == 0, "discount_right": fixed}}
{_extra(rng, "test_pricing.py", ["discount", "assertEqual", "TestCase", "200"], 4)}print(json.dumps(checks))
"""
    instruction = f"pricing.py gives a wrong {rate}% discount: fix it and add unit tests in test_pricing.py."
    return instruction, {"pricing.py": module}, check


def fragile(rng, n):
    rows = _rows(rng, 5)
    check = f"""import csv, json
rows = list(csv.DictReader(open("data/items.csv")))  # no guard: the empty workspace has no input
try:
    out = json.load(open("reports/top.json"))
except (OSError, ValueError):
    out = None
print(json.dumps({{"top_right": isinstance(out, dict) and out.get("top") == "{max(rows, key=lambda r: r[1])[0]}",
                  "input_kept": len(rows) == {len(rows)}}}))
"""
    instruction = "Write the name of the largest item of data/items.csv into reports/top.json as {top}."
    return instruction, {"data/items.csv": _csv(rows)}, check


GENERATORS = {name: globals()[name] for name in SHAPES}


def generate(root: Path, count: int, seed: int) -> dict[str, tuple[str, str]]:
    """Write `count` task folders under `root`; returns {task id: (shape, category)}."""
    rng = random.Random(seed)
    # Round by round, each shape as many rounds as its weight: the first len(SHAPES) tasks hold one of every shape,
    # so a smoke run of a few tasks sees them all; any multiple of the cycle (20) holds them in their weights.
    shapes = [name for round_ in range(max(SHAPES.values())) for name, weight in SHAPES.items() if weight > round_]
    made = {}
    for n in range(count):
        shape = shapes[n % len(shapes)]
        category = CATEGORIES[n % len(CATEGORIES)]
        task_id = f"cgshape-{n:04d}-{shape}"
        instruction, inputs, check = GENERATORS[shape](rng, n)
        folder = root / task_id
        for path, text in inputs.items():
            target = folder / "input_files" / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        (folder / "reward").mkdir(parents=True)
        (folder / "reward" / "reward.sh").write_text(AVERAGING_REWARD_SH)
        (folder / "reward" / "check.py").write_text(check)
        metadata = {"category": category, "grading_type": "code"}
        entry = {"task_id": task_id, "user_query": instruction, "metadata": metadata}
        (folder / "data_entry.json").write_text(json.dumps(entry, indent=2))
        made[task_id] = (shape, category)
    return made


# --- the run -------------------------------------------------------------------------------------------------------


class BareBackend(ProcessBackend):
    """The process backend (no isolation) with the sandbox runtime's interpreter first on PATH."""

    def run(self, command, workspace, *, env=None, **options):
        path = f"{runtime_root()}/usr/bin:/usr/bin:/bin"
        return super().run(command, workspace, env={**(env or {}), "PATH": path}, **options)


def bare_sequential(revisions, runs_at_once: int = 1) -> tuple[float, dict]:
    """(seconds, {task id: (crashed, over_lenient, lazy_score)}) of the same checks run bare, one task after another,
    `runs_at_once` of a task's runs at a time (1: every run one after another)."""
    from sandbox.backends.process import ALLOW_ENV
    from tasks.sanity import SanityMaterial, evaluate

    before = os.environ.get(ALLOW_ENV)
    os.environ[ALLOW_ENV] = "1"
    try:
        backend = BareBackend()
        found = {}
        began = time.perf_counter()
        for revision in revisions:
            outcome = evaluate(SanityMaterial.from_revision(revision), backend=backend, runs_at_once=runs_at_once)
            found[revision.task.external_id] = (outcome.crashed, outcome.over_lenient, round(outcome.lazy_score, 6))
        return time.perf_counter() - began, found
    finally:
        if before is None:
            os.environ.pop(ALLOW_ENV)
        else:
            os.environ[ALLOW_ENV] = before


def bench(count: int, workers: int, seed: int, bare: bool = True, one_at_a_time: bool = False) -> dict:
    from tasks.importing import import_path
    from tasks.models import Task
    from tasks.sanity import check_here

    folder = Path(tempfile.mkdtemp(prefix="sanity-clawgym-shape-"))
    try:
        made = generate(folder, count, seed)
        began = time.perf_counter()
        imported = import_path(folder)
        import_seconds = time.perf_counter() - began
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    revisions = [t.current_revision for t in Task.objects.select_related("current_revision__task").order_by("pk")]
    bare_seconds, bare_found = bare_sequential(revisions) if bare else (None, {})
    side_by_side_seconds = None
    if bare:
        side_by_side_seconds, _found = bare_sequential(revisions, settings.CLAWGYM_SANITY_RUNS_AT_ONCE)
    sequential_seconds = None
    if one_at_a_time:
        began = time.perf_counter()
        list(check_here(revisions, workers=workers, runs_at_once=1))
        sequential_seconds = time.perf_counter() - began
    began = time.perf_counter()
    outcomes = list(check_here(revisions, workers=workers))
    seconds = time.perf_counter() - began

    errors = [f"{revision.task.external_id}: {error}" for revision, report, error in outcomes if report is None]
    reports = {revision.task.external_id: report for revision, report, _ in outcomes if report is not None}
    lazy = [r.lazy_score for r in reports.values()]
    paying = Counter(name for r in reports.values() for name in r.paying_checks)
    runs = [run for r in reports.values() for run in r.runs.values()]
    by_shape = defaultdict(lambda: {"tasks": 0, "crashed": 0, "over_lenient": 0, "lazy_sum": 0.0, "writes": 0})
    for task_id, report in reports.items():
        row = by_shape[made[task_id][0]]
        row["tasks"] += 1
        row["crashed"] += report.crashed
        row["over_lenient"] += report.over_lenient
        row["lazy_sum"] += report.lazy_score
        row["writes"] += bool(report.warnings)
    return {
        "tasks": len(revisions),
        "categories": len({category for _shape, category in made.values()}),
        "imported": imported.imported,
        "import_failed": imported.failed[:3],
        "workers": workers,
        "import_seconds": round(import_seconds, 2),
        "seconds": round(seconds, 2),
        "bare_sequential_seconds": None if bare_seconds is None else round(bare_seconds, 2),
        "ratio_to_bare_sequential": None if bare_seconds is None else round(seconds / bare_seconds, 2),
        "bare_side_by_side_seconds": None if side_by_side_seconds is None else round(side_by_side_seconds, 2),
        "ratio_to_bare_side_by_side": None
        if side_by_side_seconds is None
        else round(seconds / side_by_side_seconds, 2),
        "bare_same_findings": sum(
            bare_found.get(task_id) == (r.crashed, r.over_lenient, round(r.lazy_score, 6))
            for task_id, r in reports.items()
        )
        if bare
        else None,
        "runs_at_once": settings.CLAWGYM_SANITY_RUNS_AT_ONCE,
        "seconds_runs_one_at_a_time": None if sequential_seconds is None else round(sequential_seconds, 2),
        "ratio_one_at_a_time_to_bare": (
            round(sequential_seconds / bare_seconds, 2) if sequential_seconds is not None and bare_seconds else None
        ),
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "checker_runs": len(runs),
        "ms_per_checker_run_per_worker": round(seconds * 1000 * workers / max(len(runs), 1), 1),
        "crashed": sum(r.crashed for r in reports.values()),
        "over_lenient": sum(r.over_lenient for r in reports.values()),
        "passed": sum(r.verdict == "passed" for r in reports.values()),
        "lazy_score": {f"gt_{t:g}": sum(score > t for score in lazy) for t in THRESHOLDS},
        "lazy_mean": round(sum(lazy) / max(len(lazy), 1), 4),
        "with_workspace_writes": sum(bool(r.warnings) for r in reports.values()),
        "runs_without_subscores": sum(1 for run in runs if run["status"] == "ok" and not run["subscores"]),
        "top_paying_checks": dict(paying.most_common(8)),
        "by_shape": {
            shape: {
                "tasks": row["tasks"],
                "crashed": row["crashed"],
                "over_lenient": row["over_lenient"],
                "lazy_mean": round(row["lazy_sum"] / row["tasks"], 3),
                "with_workspace_writes": row["writes"],
            }
            for shape, row in sorted(by_shape.items())
        },
        "runtime": next((r.runtime for r in reports.values() if r.runtime), ""),
        "errors": errors[:3],
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-bare", dest="bare", action="store_false", help="skip the bare sequential baseline")
    parser.add_argument("--one-at-a-time", action="store_true", help="also time the runs one after another")
    args = parser.parse_args(argv)
    from django.db import connection

    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    try:
        found = bench(args.tasks, args.workers, args.seed, args.bare, args.one_at_a_time)
        found["database"] = connection.vendor
    finally:
        teardown_databases(old, verbosity=0)
    return found


if __name__ == "__main__":
    print(json.dumps(main()))
