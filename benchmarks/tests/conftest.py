"""Fixtures of the benchmark tests: a benchmark, and tasks to pin (benchmarks.services.create_version pins them
directly: what a freeze pins is the review's business, tested in review/tests)."""

import pytest

from benchmarks.models import Benchmark
from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package


def make_task(external_id="t-plain", instruction="Summarise sales.csv into report.md."):
    package = TaskPackage(
        external_id=external_id,
        instruction=instruction,
        files=[
            PackageFile("sales.csv", b"item,amount\na,1\n"),
            PackageFile("reward.sh", b"python3 reward/check.py\n", role="reward"),
            PackageFile("check.py", b"import json\nprint(json.dumps({'report_exists': 0}))\n", role="reward"),
        ],
    )
    return save_package(package).task


@pytest.fixture
def benchmark(db):
    return Benchmark.objects.create(name="claw-bench")
