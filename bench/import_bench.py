#!/usr/bin/env python
"""Import and task-list benchmark.

1. Imports 2,000 generated tasks (4 files each) from a clawgym folder through the real import path.
2. Grows the catalog to 20,000 tasks (the extra 18,000 are written in bulk: how they arrive is not what is timed)
   and times the task list page (first page, a category filter, a search, a deep page) through Django's test client.

It runs on a throwaway test database (SQLite by default, or the PostgreSQL that DATABASE_URL names) and prints its
figures as one JSON object on the last line. Ratios compare against a baseline measured in the same process:
the list page at 2,000 tasks, and a bare `Task.objects.count()` query.
"""

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")

import django  # noqa: E402

django.setup()

from django.test import Client  # noqa: E402
from django.test.utils import setup_databases, setup_test_environment, teardown_databases  # noqa: E402

IMPORT_TASKS = int(os.environ.get("BENCH_IMPORT_TASKS", 2000))
LIST_TASKS = int(os.environ.get("BENCH_LIST_TASKS", 20000))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", 40))
CATEGORIES = [
    "Productivity & Collaboration",
    "Systems & Automation",
    "Analysis & Reasoning",
    "Content & Domain Support",
    "Planning & Knowledge Management",
    "Software Development",
]


def write_task_folder(root: Path, n: int) -> None:
    folder = root / f"bench-{n:06d}"
    (folder / "input_files" / "data").mkdir(parents=True)
    (folder / "reward").mkdir()
    entry = {
        "task_id": folder.name,
        "user_query": f"Task {n}: summarise data/records.csv into report.md and list the top {n % 7 + 3} rows.",
        "metadata": {"category": CATEGORIES[n % len(CATEGORIES)], "grading_type": "code"},
    }
    (folder / "data_entry.json").write_text(json.dumps(entry, indent=2) + "\n")
    rows = "\n".join(f"{i},{(i * n) % 97},item-{i}" for i in range(40))
    (folder / "input_files" / "data" / "records.csv").write_text(f"id,value,name\n{rows}\n")
    (folder / "input_files" / "notes.md").write_text(f"# Notes for task {n}\n\nKeep the report short.\n")
    (folder / "reward" / "reward.sh").write_text('#!/usr/bin/env bash\npython3 "$(dirname "$0")/check.py"\n')
    (folder / "reward" / "check.py").write_text(f"import json\nprint(json.dumps({{'exists_{n % 5}': 1}}))\n")


def grow_catalog(target: int) -> None:
    """Bulk-write tasks until the catalog holds `target` (one revision, two shared files each)."""
    from tasks.models import BenchmarkCategory, RevisionFile, Task, TaskRevision
    from tasks.services import store_blobs

    have = Task.objects.count()
    categories = list(BenchmarkCategory.objects.all())
    blobs = store_blobs([b"id,value\n1,2\n", b"print('{}')\n"])
    shared = list(blobs.values())
    batch = 2000
    for start in range(have, target, batch):
        ids = range(start, min(start + batch, target))
        tasks = Task.objects.bulk_create(
            Task(
                external_id=f"grown-{i:06d}",
                title=f"Grown task {i} about invoices and travel plans",
                benchmark_category=categories[i % len(categories)],
                status=["draft", "ready"][i % 2],
                source="imported",
            )
            for i in ids
        )
        revisions = TaskRevision.objects.bulk_create(
            TaskRevision(task=t, number=1, instruction=t.title, content_hash=f"{t.external_id}", author_stage="bench")
            for t in tasks
        )
        RevisionFile.objects.bulk_create(
            RevisionFile(revision=r, path=p, role=role, blob=b)
            for r in revisions
            for (p, role, b) in (("data.csv", "input", shared[0]), ("check.py", "reward", shared[1]))
        )
        for t, r in zip(tasks, revisions):
            t.current_revision = r
        Task.objects.bulk_update(tasks, ["current_revision"])


def time_pages(client: Client, urls: list[str]) -> dict:
    for url in urls:  # warm-up: template loading and query plans are not what is measured
        client.get(url)
    timings = []
    for _ in range(max(1, REQUESTS // len(urls))):
        for url in urls:
            began = time.perf_counter()
            response = client.get(url)
            timings.append((time.perf_counter() - began) * 1000)
            assert response.status_code == 200, (url, response.status_code)
    timings.sort()
    return {
        "requests": len(timings),
        "p50_ms": round(statistics.median(timings), 1),
        "p95_ms": round(timings[min(len(timings) - 1, int(0.95 * len(timings)))], 1),
        "max_ms": round(timings[-1], 1),
    }


def main() -> dict:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.urls import reverse

    from accounts.roles import VIEWER, grant_role
    from tasks.importing import import_path
    from tasks.models import Task

    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for n in range(IMPORT_TASKS):
                write_task_folder(root, n)
            began = time.perf_counter()
            report = import_path(root)
            import_seconds = time.perf_counter() - began
        assert report.as_dict()["imported"] == IMPORT_TASKS, report.as_dict()

        user = get_user_model().objects.create_user("bench", password="x")
        grant_role(user, VIEWER)
        client = Client()
        client.force_login(user)
        base = reverse("tasks:list")
        urls = [base, f"{base}?category=analysis-reasoning", f"{base}?q=invoices", f"{base}?status=ready&page=7"]

        began = time.perf_counter()
        for _ in range(50):
            Task.objects.count()
        count_ms = (time.perf_counter() - began) * 1000 / 50

        small = time_pages(client, urls)
        grow_catalog(LIST_TASKS)
        total = Task.objects.count()
        large = time_pages(client, urls)
        return {
            "database": connection.vendor,
            "import_tasks": IMPORT_TASKS,
            "import_files_per_task": 4,
            "import_seconds": round(import_seconds, 2),
            "import_tasks_per_second": round(IMPORT_TASKS / import_seconds, 1),
            "list_tasks": total,
            "list_at_2000": small,
            "list_at_20000": large,
            "list_p95_ratio_20000_vs_2000": round(large["p95_ms"] / small["p95_ms"], 2),
            "baseline_count_query_ms": round(count_ms, 2),
            "list_p95_vs_count_query": round(large["p95_ms"] / count_ms, 1) if count_ms else None,
            "targets": {"import_seconds": 20, "list_p95_ms": 150},
            "meets_targets": import_seconds < 20 and large["p95_ms"] < 150,
        }
    finally:
        teardown_databases(old, verbosity=0)


if __name__ == "__main__":
    print(json.dumps(main()))
