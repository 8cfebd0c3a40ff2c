"""Fixtures of the review tests: a benchmark with one candidate whose task has input, checker and rubric."""

import pytest

from benchmarks.models import Benchmark
from review.models import SEVERITY_RANK, BenchmarkCandidate, DiagnosisIssue, LLMDiagnosis
from review.services import propose_candidates
from tasks.models import SanityReport
from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package

CHECK_PY = b"import json\nprint(json.dumps({'report_exists': 0}))\n"


def make_task(external_id="t-review", instruction="Summarise sales.csv into report.md."):
    package = TaskPackage(
        external_id=external_id,
        instruction=instruction,
        files=[
            PackageFile("sales.csv", b"item,amount\na,1\n"),
            PackageFile("reward.sh", b"python3 reward/check.py\n", role="reward"),
            PackageFile("check.py", CHECK_PY, role="reward"),
        ],
    )
    return save_package(package).task


def sanity(revision, *, crashed=False, over_lenient=False, lazy=None, paying=None):
    """A stored sanity report of the revision with the given findings. An over-lenient one pays a lazy agent 1 on
    the initial workspace through `out_exists` unless `lazy` (its lazy score) and `paying` (its paying checks) say
    otherwise."""
    lazy = (1.0 if over_lenient else 0.0) if lazy is None else lazy
    paying = ({"out_exists": 1.0} if lazy else {}) if paying is None else paying
    run = {"score": 0.0, "status": "ok" if not crashed else "error", "reason": "boom" if crashed else "", "subscores": {}}
    initial = dict(run, score=lazy, subscores={**paying, "total_right": 0.0} if paying else {})
    return SanityReport.objects.create(
        revision=revision, runs={"empty": run, "initial": initial}, crashed=crashed, over_lenient=over_lenient or lazy > 0,
        lazy_score=lazy, solvable=None, tolerance=0.0, backend="process", isolated=False,
    )  # fmt: skip


def add_diagnosis(candidate, issues):
    """A stored diagnosis of the candidate's current revision, as if the diagnosis job had run."""
    revision = candidate.task.current_revision
    diagnosis = LLMDiagnosis.objects.create(
        candidate=candidate, revision=revision, endpoint_name="diag", prompt_version="test", overall="ok"
    )
    for i, fields in enumerate(issues):
        fields = {"component": "instruction", "severity": "minor", "problem": f"problem {i}"} | fields
        DiagnosisIssue.objects.create(diagnosis=diagnosis, severity_rank=SEVERITY_RANK[fields["severity"]], **fields)
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(status=BenchmarkCandidate.Status.AWAITING_REVIEW)
    BenchmarkCandidate.refresh_worst_rank(BenchmarkCandidate.objects.filter(pk=candidate.pk))
    candidate.refresh_from_db()
    return diagnosis


def accept_all(benchmark, tasks, *, admin_user, reviewer):
    """Propose the tasks and accept every candidate of the benchmark, each with a passing sanity report."""
    from review.services import claim, decide

    propose_candidates(benchmark, tasks, user=admin_user)
    for candidate in BenchmarkCandidate.objects.filter(benchmark=benchmark):
        sanity(candidate.task.current_revision)
        claim(candidate, user=reviewer)
        decide(candidate, "accept", user=reviewer)


@pytest.fixture
def benchmark(db):
    return Benchmark.objects.create(name="claw-bench")


@pytest.fixture
def candidate(benchmark, admin_user):
    task = make_task()
    propose_candidates(benchmark, [task], user=admin_user)
    return BenchmarkCandidate.objects.get(task=task, benchmark=benchmark)


@pytest.fixture
def second_reviewer(db):
    from accounts.roles import REVIEWER
    from clawgym_site.testing import make_user

    return make_user("rob_reviewer", REVIEWER)
