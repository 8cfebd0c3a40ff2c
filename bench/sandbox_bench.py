#!/usr/bin/env python
"""Sandbox and sanity-check benchmark.

1. The same trivial checker (`python3 reward/check.py`, which prints its sub-scores and a score) run N times as a
   bare subprocess and N times through the bubblewrap backend; also through tasks.verification.run_checker (which
   adds installing the checker, two workspace snapshots and parsing). The overhead is the difference of medians.
   The same bubblewrap run without the run's cgroup and size-limited workspace, with the cgroup only, and with both
   (the default), alternating in this process: what each bound costs per run, and the ratio to the unbounded run.
   And how long after its wall-clock limit a busy loop's run ends (the kill latency).
2. The sanity check (empty, initial, scaffold and solution runs) of 200 generated tasks, run in this process on all
   CPUs (`sanity_check --here`), reports stored, on a throwaway test database.
3. One task's sanity check alone (its four runs, as the synthesis pipeline's verify stage makes it), on
   BENCH_SANITY_PER_TASK tasks (default 20): bare (the process backend, runs one after another), sandboxed with the
   runs one after another (CLAWGYM_SANITY_RUNS_AT_ONCE=1, as before) and sandboxed with the default, interleaved
   task by task; seconds per task (median) and the sandbox's overhead per task over bare.

Targets: sandbox overhead at most 30 ms per run; 200 tasks sanity-checked in under 60 s. One JSON object on the
last line.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")

import django  # noqa: E402

django.setup()

from django.test.utils import setup_databases, setup_test_environment, teardown_databases  # noqa: E402

RUNS = int(os.environ.get("BENCH_SANDBOX_RUNS", 50))
SANITY_TASKS = int(os.environ.get("BENCH_SANITY_TASKS", 200))
PER_TASK = int(os.environ.get("BENCH_SANITY_PER_TASK", 20))
WORKERS = int(os.environ.get("BENCH_SANITY_WORKERS", os.cpu_count() or 1))
WARMUP = 3
TARGET_OVERHEAD_MS = 30
TARGET_SANITY_SECONDS = 60

TRIVIAL_CHECK = b'import json\nprint(json.dumps({"ran": 1}))\nprint(1.0)\n'
COMMAND = ["python3", "reward/check.py"]


def median_ms(timings: list[float]) -> float:
    return round(statistics.median(timings) * 1000, 2)


def summary(timings: list[float]) -> dict:
    timings = sorted(timings)
    return {
        "runs": len(timings),
        "median_ms": median_ms(timings),
        "mean_ms": round(statistics.mean(timings) * 1000, 2),
        "p95_ms": round(timings[min(len(timings) - 1, int(0.95 * len(timings)))] * 1000, 2),
    }


def time_runs(run_once) -> list[float]:
    for _ in range(WARMUP):  # page cache, bubblewrap's first start: not what is measured
        run_once()
    timings = []
    for _ in range(RUNS):
        began = time.perf_counter()
        run_once()
        timings.append(time.perf_counter() - began)
    return timings


def bench_overhead() -> dict:
    from sandbox import Limits, Workspace, get_backend
    from tasks.verification import CheckerSpec, run_checker

    backend = get_backend("bwrap")
    backend.check_available()
    limits = Limits(wall_seconds=30)
    with Workspace.create({"data.csv": b"a,b\n1,2\n", "reward/check.py": TRIVIAL_CHECK}) as workspace:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}

        def bare():
            done = subprocess.run(COMMAND, cwd=workspace.root, env=env, capture_output=True, timeout=30)
            assert done.returncode == 0 and done.stdout.endswith(b"1.0\n"), done

        def sandboxed():
            result = backend.run(COMMAND, workspace, limits=limits)
            assert result.ok and result.stdout.endswith("1.0\n"), result

        bare_times = time_runs(bare)
        bwrap_times = time_runs(sandboxed)

    checker = CheckerSpec("bench", "Check.", {}, " ".join(COMMAND), {"check.py": TRIVIAL_CHECK})
    with Workspace.create({"data.csv": b"a,b\n1,2\n"}) as workspace:

        def checked():
            result = run_checker(checker, workspace, backend=backend, limits=limits)
            assert result.ok and result.score == 1.0, result

        checker_times = time_runs(checked)
    overhead = median_ms(bwrap_times) - median_ms(bare_times)
    return {
        "bare": summary(bare_times),
        "bwrap": summary(bwrap_times),
        "run_checker": summary(checker_times),
        "overhead_ms": round(overhead, 2),
        "run_checker_overhead_ms": round(median_ms(checker_times) - median_ms(bare_times), 2),
    }


def bench_bounds() -> dict:
    """Per-run cost of the totals: the cgroup (memory, pids) and the workspace's own ext4 filesystem."""
    from sandbox import Limits, Workspace, get_backend

    backend = get_backend("bwrap")
    backend.check_available()
    tree, sized = backend._bounds()
    variants = {"unbounded": (None, False), "cgroup": (tree, False), "cgroup_and_disk": (tree, sized)}
    limits = Limits(wall_seconds=30)
    timings: dict[str, list[float]] = {name: [] for name in variants}
    with Workspace.create({"data.csv": b"a,b\n1,2\n", "reward/check.py": TRIVIAL_CHECK}) as workspace:
        for round_number in range(WARMUP + RUNS):
            for name, bounds in variants.items():  # interleaved, so a busy neighbour slows all three alike
                backend._totals = bounds
                began = time.perf_counter()
                result = backend.run(COMMAND, workspace, limits=limits)
                elapsed = time.perf_counter() - began
                assert result.ok, result
                if round_number >= WARMUP:
                    timings[name].append(elapsed)
        backend._totals = None
        kill_latency = []
        for _ in range(5):
            result = backend.run(["python3", "-c", "while True: pass"], workspace, limits=Limits(wall_seconds=1))
            assert result.status == "timeout", result
            kill_latency.append(result.duration - 1)
    base = median_ms(timings["unbounded"])
    return {
        "enforced_here": {"cgroup": tree is not None, "disk": sized},
        **{name: summary(values) for name, values in timings.items()},
        "cgroup_ms": round(median_ms(timings["cgroup"]) - base, 2),
        "disk_ms": round(median_ms(timings["cgroup_and_disk"]) - median_ms(timings["cgroup"]), 2),
        "ratio_bounded_to_unbounded": round(median_ms(timings["cgroup_and_disk"]) / base, 2),
        "timeout_kill_latency_ms": summary(kill_latency),
    }


def make_tasks(count: int) -> list:
    """Tasks like a small synthesised one: two inputs, check.py with three sub-scores, a reference solution."""
    from tasks.package import STANDARD_REWARD_SH, PackageFile, TaskPackage
    from tasks.services import save_package

    revisions = []
    for n in range(count):
        rows = "\n".join(f"{i},{(i * n) % 97}" for i in range(30))
        total = sum((i * n) % 97 for i in range(30))
        check = f"""import json
def load():
    try:
        return json.load(open("reports/summary.json"))
    except (OSError, ValueError):
        return None
out = load()
ok = isinstance(out, dict)
print(json.dumps({{
    "total": ok and out.get("total") == {total},
    "rows": ok and out.get("rows") == 30,
    "source": ok and out.get("source") == "data/values.csv",
}}))
"""
        files = [
            PackageFile("data/values.csv", f"id,value\n{rows}\n".encode(), "input"),
            PackageFile("notes.md", f"# Task {n}\n\nTotals only.\n".encode(), "input"),
            PackageFile("reward.sh", STANDARD_REWARD_SH.encode(), "reward"),
            PackageFile("check.py", check.encode(), "reward"),
            PackageFile(
                "reports/summary.json",
                json.dumps({"total": total, "rows": 30, "source": "data/values.csv"}).encode(),
                "solution",
            ),
        ]
        instruction = f"Task {n}: sum the values of data/values.csv into reports/summary.json (total, rows, source)."
        revisions.append(save_package(TaskPackage(f"sanity-bench-{n:04d}", instruction, files=files)).revision)
    return revisions


def bench_sanity() -> dict:
    from tasks.models import SanityReport
    from tasks.sanity import check_here

    revisions = make_tasks(SANITY_TASKS)
    began = time.perf_counter()
    outcomes = list(check_here(revisions, workers=WORKERS))
    seconds = time.perf_counter() - began
    errors = [error for _revision, report, error in outcomes if report is None]
    verdicts = {}
    for report in SanityReport.objects.all():
        verdicts[report.verdict] = verdicts.get(report.verdict, 0) + 1
    runs = sum(len(r.runs) + (r.solution_run is not None) for r in SanityReport.objects.all())
    return {
        "tasks": len(revisions),
        "workers": WORKERS,
        "checker_runs": runs,
        "seconds": round(seconds, 2),
        "tasks_per_second": round(len(revisions) / seconds, 1),
        "ms_per_checker_run_per_worker": round(seconds * 1000 * WORKERS / max(runs, 1), 1),
        "verdicts": verdicts,
        "errors": errors[:3],
    }


def bench_sanity_per_task() -> dict:
    """Seconds per task of one sanity check alone: bare, sandboxed one run after another, sandboxed side by side."""
    from django.conf import settings

    from sandbox import get_backend
    from sandbox.backends.process import ALLOW_ENV
    from tasks.models import TaskRevision
    from tasks.sanity import SanityMaterial, evaluate

    revisions = list(TaskRevision.objects.filter(task__external_id__startswith="sanity-bench-")[:PER_TASK])
    materials = [SanityMaterial.from_revision(revision) for revision in revisions]
    sandboxed = get_backend("bwrap")
    bare = get_backend("process")
    variants = {
        "bare": {"backend": bare, "runs_at_once": 1},
        "one_at_a_time": {"backend": sandboxed, "runs_at_once": 1},
        "side_by_side": {"backend": sandboxed, "runs_at_once": settings.CLAWGYM_SANITY_RUNS_AT_ONCE},
    }
    timings: dict[str, list[float]] = {name: [] for name in variants}
    os.environ[ALLOW_ENV] = "1"
    try:
        for number, material in enumerate(materials[:WARMUP] + materials):
            for name, options in variants.items():  # interleaved, so a busy neighbour slows all three alike
                began = time.perf_counter()
                outcome = evaluate(material, **options)
                elapsed = time.perf_counter() - began
                assert outcome.solvable and not outcome.over_lenient, (name, outcome)
                if number >= WARMUP:
                    timings[name].append(elapsed)
    finally:
        os.environ.pop(ALLOW_ENV)
    bare_s = statistics.median(timings["bare"])
    found = {name: round(statistics.median(values), 3) for name, values in timings.items()}
    return {
        "tasks": len(materials),
        "runs_per_task": len(materials[0].workspaces()) if materials else 0,
        "runs_at_once": settings.CLAWGYM_SANITY_RUNS_AT_ONCE,
        "seconds_per_task": found,
        "overhead_per_task_s": {name: round(found[name] - bare_s, 3) for name in ("one_at_a_time", "side_by_side")},
        "ratio_to_bare": {name: round(found[name] / bare_s, 2) for name in ("one_at_a_time", "side_by_side")},
    }


def main() -> dict:
    from django.db import connection

    overhead = bench_overhead()
    bounds = bench_bounds()
    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    try:
        sanity = bench_sanity()
        per_task = bench_sanity_per_task()
        database = connection.vendor
    finally:
        teardown_databases(old, verbosity=0)
    return {
        "database": database,
        "cpus": os.cpu_count(),
        "sandbox": overhead,
        "bounds": bounds,
        "sanity": sanity,
        "sanity_per_task": per_task,
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "targets": {"overhead_ms": TARGET_OVERHEAD_MS, "sanity_seconds": TARGET_SANITY_SECONDS},
        "meets_targets": overhead["overhead_ms"] <= TARGET_OVERHEAD_MS
        and sanity["seconds"] < TARGET_SANITY_SECONDS
        and not sanity["errors"]
        and sanity["verdicts"] == {"passed": SANITY_TASKS},
    }


if __name__ == "__main__":
    print(json.dumps(main()))
