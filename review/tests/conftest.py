"""Fixtures of the review tests: a benchmark with one candidate whose task has input, checker and rubric."""

import pytest

from benchmarks.models import Benchmark
from review.models import BenchmarkCandidate
from review.services import propose_candidates
from tasks.testing import make_task


@pytest.fixture
def benchmark(db):
    return Benchmark.objects.create(name="claw-bench")


@pytest.fixture
def candidate(benchmark, admin_user):
    task = make_task("t-review")
    propose_candidates(benchmark, [task], user=admin_user)
    return BenchmarkCandidate.objects.get(task=task, benchmark=benchmark)


@pytest.fixture
def second_reviewer(db):
    from accounts.roles import REVIEWER
    from accounts.testing import make_user

    return make_user("rob_reviewer", REVIEWER)
