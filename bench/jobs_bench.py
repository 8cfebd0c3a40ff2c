#!/usr/bin/env python
"""Job engine benchmark: how fast `jobs.enqueue` gives up when the Celery broker is down.

Enqueueing must fail in about a second (a few quick reconnect tries, no long retry loop), so that a page or a command
tells its user at once instead of hanging. N tries against a port nothing listens on, on a throwaway test database.
Target: every try under 5 s. One JSON object on the last line.
"""

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")

import django  # noqa: E402

django.setup()

from django.test.utils import (  # noqa: E402
    override_settings,
    setup_databases,
    setup_test_environment,
    teardown_databases,
)

TRIES = int(os.environ.get("BENCH_JOBS_TRIES", 5))
TARGET_SECONDS = 5
DEAD_BROKER = "redis://127.0.0.1:1/0"  # nothing listens there


def bench_broker_down() -> dict:
    import jobs
    from jobs.engine import JobEngineError
    from jobs.models import JobRun

    timings, statuses = [], []
    with override_settings(CLAWGYM_JOB_ENGINE="celery", CELERY_BROKER_URL=DEAD_BROKER):
        for _ in range(TRIES):
            started = time.monotonic()
            try:
                jobs.enqueue("jobs.ping")
            except JobEngineError:
                pass
            timings.append(time.monotonic() - started)
    statuses = sorted(set(JobRun.objects.values_list("status", flat=True)))
    return {
        "tries": TRIES,
        "median_s": round(statistics.median(timings), 3),
        "max_s": round(max(timings), 3),
        "run_statuses": statuses,
    }


def main() -> dict:
    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    try:
        broker_down = bench_broker_down()
    finally:
        teardown_databases(old, verbosity=0)
    return {
        "broker_down": broker_down,
        "targets": {"broker_down_max_s": TARGET_SECONDS},
        "meets_targets": broker_down["max_s"] < TARGET_SECONDS and broker_down["run_statuses"] == ["failed"],
    }


if __name__ == "__main__":
    print(json.dumps(main()))
