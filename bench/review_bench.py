#!/usr/bin/env python
"""Review queue benchmark: the queue page with 5,000 benchmark candidates.

1. Grows the catalog to `--candidates` tasks in bulk (bench/import_bench.py's grow_catalog: how the tasks arrive is
   not what is timed) and proposes each for one of two benchmarks, with the statuses of a queue in use: most
   diagnosed (0 to 4 issues of mixed severity; some diagnosed twice, the latest counting), some claimed, some
   decided, some with agent mean scores.
2. Signs a reviewer in through Django's test client and times `--requests` GETs of /review/, cycling through a mix
   of filters, sorts and pages, half of them as htmx requests (the results partial), after one untimed warm-up
   round. It also counts each URL's queries: that number must not depend on the rows.

It runs on a throwaway test database (SQLite by default, or the PostgreSQL that DATABASE_URL names), prints a
summary, and as its last line one JSON object:
{"candidates", "requests", "p50_ms", "p95_ms", "max_ms", "target_p95_ms", "met", "database", ...}.

    .venv/bin/python bench/review_bench.py [--candidates 5000] [--requests 200]
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchstats import percentile  # noqa: E402  (bench/ helper)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import (  # noqa: E402
    CaptureQueriesContext,
    setup_databases,
    setup_test_environment,
    teardown_databases,
)
from django.utils import timezone  # noqa: E402
from import_bench import grow_catalog  # noqa: E402  (bench/ helper: the bulk-written catalog)

TARGET_P95_MS = 200
SEED = 6
# Share of candidates per status, in order; the rest awaits review.
STATUS_SHARES = [("awaiting_diagnosis", 0.15), ("in_review", 0.10), ("accepted", 0.15), ("rejected", 0.10)]


def build_queue(n: int, reviewer, other) -> dict:
    """`n` candidates over two benchmarks, with diagnoses, issues, claims and scores. Returns what was built."""
    from benchmarks.models import Benchmark
    from review.models import SEVERITY_RANK, BenchmarkCandidate, DiagnosisIssue, LLMDiagnosis
    from tasks.models import Task

    rng = random.Random(SEED)
    grow_catalog(n)
    tasks = list(Task.objects.order_by("id").values_list("id", "current_revision_id")[:n])
    benchmarks = [Benchmark.objects.create(name="bench-main"), Benchmark.objects.create(name="bench-hard")]
    now = timezone.now()
    candidates = []
    for i, (task_id, _) in enumerate(tasks):
        roll, status = rng.random(), "awaiting_review"
        for name, share in STATUS_SHARES:
            if roll < share:
                status = name
                break
            roll -= share
        c = BenchmarkCandidate(task_id=task_id, benchmark=benchmarks[i % 2], status=status)
        if status == "in_review":
            c.claimed_by = reviewer if rng.random() < 0.3 else other
            c.claimed_at, c.claim_expires_at = now, now + timedelta(minutes=30)
        if rng.random() < 0.3:
            c.strong_mean, c.small_mean = round(rng.random(), 3), round(rng.random() * 0.6, 3)
        candidates.append(c)
    candidates = BenchmarkCandidate.objects.bulk_create(candidates, batch_size=1000)
    for i, c in enumerate(candidates):  # spread the update times, as a day of reviewing would
        c.updated_at = now - timedelta(minutes=i * 7 % 4000)
    BenchmarkCandidate.objects.bulk_update(candidates, ["updated_at"], batch_size=1000)

    revision_of = dict(tasks)
    diagnosed = [c for c in candidates if c.status != "awaiting_diagnosis"]
    rounds = [diagnosed, [c for c in diagnosed if rng.random() < 0.1]]  # some were diagnosed again after a fix
    diagnoses = []
    for number, round_ in enumerate(rounds):
        diagnoses += [
            LLMDiagnosis(
                candidate=c,
                revision_id=revision_of[c.task_id],
                endpoint_name="bench",
                prompt_version=f"bench-{number}",
                overall="The task is clear; see the issues.",
            )
            for c in round_
        ]
    diagnoses = LLMDiagnosis.objects.bulk_create(diagnoses, batch_size=1000)
    issues = []
    for d in diagnoses:
        for k in range(rng.choice([0, 0, 1, 1, 2, 3, 4])):
            severity = rng.choice(["blocker", "major", "major", "minor", "minor", "minor"])
            issues.append(
                DiagnosisIssue(
                    diagnosis=d,
                    component="checker",
                    severity=severity,
                    severity_rank=SEVERITY_RANK[severity],
                    problem=f"problem {k}",
                )
            )
    DiagnosisIssue.objects.bulk_create(issues, batch_size=2000)
    BenchmarkCandidate.refresh_worst_rank(BenchmarkCandidate.objects.all())
    return {"candidates": len(candidates), "diagnoses": len(diagnoses), "issues": len(issues)}


def queue_urls() -> list[tuple[str, bool]]:
    """(URL, as htmx) pairs: the filters, sorts and pages reviewers use."""
    from tasks.models import BenchmarkCategory

    category = BenchmarkCategory.objects.order_by("order").values_list("slug", flat=True).first()
    urls = [
        "/review/",
        "/review/?sort=severity",
        "/review/?severity=blocker",
        "/review/?status=awaiting_review&sort=task",
        f"/review/?category={category}&sort=category&page=3",
        "/review/?q=task+12",
        "/review/?mine=on",
        "/review/?benchmark=bench-hard&sort=strong&page=10",
        "/review/?severity=none&status=awaiting_diagnosis&page=2",
        "/review/?sort=severity&page=40",
    ]
    return [(url, htmx) for url in urls for htmx in (False, True)]


def time_queue(client: Client, urls: list[tuple[str, bool]], requests: int) -> tuple[list[float], dict, dict]:
    """Timings (ms) of `requests` GETs cycling through `urls`, the slowest URL's p95, and each URL's queries."""
    queries = {}
    for url, htmx in urls:  # warm-up: template loading and query plans are not what is measured
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url, **({"HTTP_HX_REQUEST": "true"} if htmx else {}))
        assert response.status_code == 200, (url, response.status_code)
        queries[url + (" (htmx)" if htmx else "")] = len(ctx.captured_queries)
    timings, per_url = [], {}
    for i in range(requests):
        url, htmx = urls[i % len(urls)]
        began = time.perf_counter()
        response = client.get(url, **({"HTTP_HX_REQUEST": "true"} if htmx else {}))
        elapsed = (time.perf_counter() - began) * 1000
        assert response.status_code == 200, (url, response.status_code)
        timings.append(elapsed)
        per_url.setdefault(url + (" (htmx)" if htmx else ""), []).append(elapsed)
    slowest = max(per_url.items(), key=lambda item: percentile(item[1], 0.95))
    return timings, {"url": slowest[0], "p95_ms": round(percentile(slowest[1], 0.95), 1)}, queries


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=5000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()

    from django.contrib.auth import get_user_model

    from accounts.roles import REVIEWER, grant_role

    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    try:
        users = get_user_model().objects
        reviewer, other = users.create_user("bench-reviewer"), users.create_user("bench-other")
        grant_role(reviewer, REVIEWER)
        grant_role(other, REVIEWER)
        began = time.perf_counter()
        built = build_queue(args.candidates, reviewer, other)
        build_seconds = time.perf_counter() - began
        if connection.vendor == "postgresql":
            # Autovacuum analyzes tables within a minute of a bulk load like this one; a queue in use has statistics.
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

        client = Client()
        client.force_login(reviewer)
        timings, slowest, queries = time_queue(client, queue_urls(), args.requests)
        p95 = percentile(timings, 0.95)
        report = {
            "candidates": built["candidates"],
            "diagnoses": built["diagnoses"],
            "issues": built["issues"],
            "requests": len(timings),
            "p50_ms": round(statistics.median(timings), 1),
            "p95_ms": round(p95, 1),
            "max_ms": round(max(timings), 1),
            "slowest_url": slowest,
            "queries_per_request": {"min": min(queries.values()), "max": max(queries.values())},
            "build_seconds": round(build_seconds, 1),
            "target_p95_ms": TARGET_P95_MS,
            "met": p95 < TARGET_P95_MS,
            "database": connection.vendor,
        }
    finally:
        teardown_databases(old, verbosity=0)

    print(
        f"Review queue on {report['database']}: {report['candidates']:,} candidates, {report['diagnoses']:,} "
        f"diagnoses, {report['issues']:,} issues (built in {report['build_seconds']} s)"
    )
    print(
        f"{report['requests']} requests over {len(queries)} URL variants: p50 {report['p50_ms']} ms, "
        f"p95 {report['p95_ms']} ms, max {report['max_ms']} ms (target p95 < {TARGET_P95_MS} ms: "
        f"{'met' if report['met'] else 'NOT met'})"
    )
    print(f"slowest URL: {slowest['url']} (p95 {slowest['p95_ms']} ms)")
    for url, n in queries.items():
        print(f"  {n:3d} queries  {url}")
    return report


if __name__ == "__main__":
    print(json.dumps(main()))
