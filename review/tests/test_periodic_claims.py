"""The periodic job review.expire_claims (jobs.periodic's table) hands expired claims back."""

from datetime import timedelta

from django.utils import timezone

from benchmarks.models import Benchmark
from jobs.testing import run_now
from review.models import BenchmarkCandidate, ClaimEvent
from review.services import claim, propose_candidates
from review.tests.helpers import add_diagnosis
from tasks.testing import make_task


def test_expired_review_claims_are_handed_back(admin_user, reviewer):
    benchmark = Benchmark.objects.create(name="claw-bench")
    propose_candidates(benchmark, [make_task("t-review")], user=admin_user)
    candidate = BenchmarkCandidate.objects.get(benchmark=benchmark)
    add_diagnosis(candidate, [])  # awaiting review: what a reviewer claims
    claim(candidate, user=reviewer)
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))

    run = run_now("review.expire_claims")

    assert run.result == {"handed_back": 1}
    candidate.refresh_from_db()
    assert candidate.status == BenchmarkCandidate.Status.AWAITING_REVIEW and candidate.claimed_by is None
    assert ClaimEvent.objects.filter(candidate=candidate, action="expire").count() == 1
