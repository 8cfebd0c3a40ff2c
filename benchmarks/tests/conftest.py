"""Fixtures of the benchmark tests: a benchmark, and tasks to pin (benchmarks.services.create_version pins them
directly: what a freeze pins is the review's business, tested in review/tests)."""

import pytest

from benchmarks.models import Benchmark


@pytest.fixture
def benchmark(db):
    return Benchmark.objects.create(name="claw-bench")
