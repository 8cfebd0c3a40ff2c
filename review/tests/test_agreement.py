"""Agreement statistics (review.agreement): checked against published examples, then over a benchmark's decisions."""

import pytest

from accounts.roles import REVIEWER
from accounts.testing import make_user
from benchmarks.models import Benchmark
from review.agreement import (
    benchmark_agreement,
    bootstrap_ci,
    cohen_kappa,
    krippendorff_alpha,
)
from review.models import BenchmarkCandidate, ReviewDecision
from review.services import propose_candidates
from review.stats import wilson_interval
from review.tests.helpers import add_diagnosis
from tasks.testing import make_task


def test_cohen_kappa_matches_the_textbook_example():
    # Wikipedia's "Cohen's kappa" example: 50 grant proposals, both yes 20, A yes B no 5, A no B yes 10, both no 15.
    first = ["yes"] * 25 + ["no"] * 25
    second = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(first, second) == pytest.approx(0.4)


def test_cohen_kappa_of_perfect_and_chance_agreement():
    assert cohen_kappa(["a", "b", "a"], ["a", "b", "a"]) == pytest.approx(1.0)
    assert cohen_kappa(["a", "a", "b", "b"], ["a", "b", "a", "b"]) == pytest.approx(0.0)
    assert cohen_kappa(["a", "a"], ["a", "a"]) is None  # chance agreement is certain: kappa is undefined
    assert cohen_kappa([], []) is None


def test_krippendorff_alpha_matches_krippendorffs_own_example():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", nominal data with missing values: 0.743.
    observers = [
        "1 2 3 3 2 1 4 1 2 . . .",
        "1 2 3 3 2 2 4 1 2 5 . 3",
        ". 3 3 3 2 3 4 2 2 5 1 .",
        "1 2 3 3 2 4 4 1 2 5 1 .",
    ]
    units = [[v for v in unit if v != "."] for unit in zip(*(o.split() for o in observers), strict=True)]
    assert krippendorff_alpha(units) == pytest.approx(0.743, abs=5e-4)


def test_krippendorff_alpha_matches_the_krippendorff_package_example():
    # The `krippendorff` package's test data (3 coders, 15 units, nominal): 0.691358.
    rows = [
        [None, None, None, None, None, 3, 4, 1, 2, 1, 1, 3, 3, None, 3],
        [1, None, 2, 1, 3, 3, 4, 3, None, None, None, None, None, None, None],
        [None, None, 2, 1, 3, 4, 4, None, 2, 1, 1, 3, 3, None, 4],
    ]
    units = [[v for v in unit if v is not None] for unit in zip(*rows, strict=True)]
    assert krippendorff_alpha(units) == pytest.approx(0.691358, abs=1e-6)


def test_two_raters_alpha_is_close_to_kappa_and_undefined_without_variation():
    assert krippendorff_alpha([["a", "a"], ["b", "b"], ["a", "b"]]) == pytest.approx(0.4444, abs=1e-4)
    assert krippendorff_alpha([["a", "a"], ["a", "a"]]) is None
    assert krippendorff_alpha([["a"], ["b"]]) is None  # nothing pairable


def test_bootstrap_is_reproducible_and_brackets_the_estimate():
    items = [("a", "a")] * 30 + [("b", "b")] * 30 + [("a", "b")] * 10

    def kappa(sample):
        return cohen_kappa([x for x, _ in sample], [y for _, y in sample])

    ci = bootstrap_ci(items, kappa)
    assert ci == bootstrap_ci(items, kappa)
    assert ci[0] < kappa(items) < ci[1]
    assert bootstrap_ci(items[:1], kappa) is None


def test_wilson_interval():
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-3) and high == pytest.approx(0.9433, abs=1e-3)
    assert wilson_interval(0, 0) is None


def _decide(candidate, user, decision, verdicts=None, adjudication=False):
    return ReviewDecision.objects.create(
        candidate=candidate, reviewer=user, decision=decision, verdicts=verdicts or {}, adjudication=adjudication
    )


@pytest.mark.django_db
def test_benchmark_agreement_over_overlapping_candidates(admin_user):
    benchmark = Benchmark.objects.create(name="agree")
    ann, bob, cyd = (make_user(name, REVIEWER) for name in ("ann", "bob", "cyd"))
    tasks = [make_task(f"t-{i}") for i in range(6)]
    propose_candidates(benchmark, tasks, user=admin_user)
    c = list(BenchmarkCandidate.objects.filter(benchmark=benchmark).order_by("id"))
    issue = add_diagnosis(c[0], [{"component": "checker", "severity": "major", "problem": "lenient"}]).issues.get()
    accept, reject = ReviewDecision.Decision.ACCEPT, ReviewDecision.Decision.REJECT
    # ann and bob: agree on c0 (accept) and c1 (reject), disagree on c2; a lead settles c2 as reject.
    _decide(c[0], ann, accept, {str(issue.pk): "valid"})
    _decide(c[0], bob, accept, {str(issue.pk): "fixed"})
    _decide(c[1], ann, reject)
    _decide(c[1], bob, reject)
    _decide(c[2], ann, accept)
    _decide(c[2], bob, reject)
    _decide(c[2], admin_user, reject, adjudication=True)
    # cyd joins ann on c3 (agree); c4 has a single decision and is no overlap.
    _decide(c[3], ann, accept)
    _decide(c[3], cyd, accept)
    _decide(c[4], cyd, reject)

    report = benchmark_agreement(benchmark)

    decision = report["decision"]
    assert decision["n"] == 4
    # first vs second: (acc, acc), (rej, rej), (acc, rej), (acc, acc): p_o = .75, p_e = (3*2 + 1*2)/16 = .5
    assert decision["kappa"] == pytest.approx(0.5)
    assert decision["observed_agreement"] == 0.75
    pairs = {tuple(p["reviewers"]): p for p in decision["pairs"]}
    assert set(pairs) == {("ann", "bob"), ("ann", "cyd")}
    assert pairs[("ann", "bob")]["n"] == 3
    assert pairs[("ann", "bob")]["kappa"] == pytest.approx(cohen_kappa(["a", "r", "a"], ["a", "r", "r"]), abs=1e-4)
    assert pairs[("ann", "cyd")]["kappa"] is None  # one item, one label: undefined
    assert report["alpha"]["decision"]["n"] == 4 and report["alpha"]["decision"]["ratings"] == 8
    assert report["issue_verdicts"]["n"] == 1
    assert report["issue_verdicts"]["observed_agreement"] == 1.0  # fixed counts as valid
    adjudicated = {r["reviewer"]: r for r in report["vs_adjudicated"]["reviewers"]}
    assert report["vs_adjudicated"]["adjudicated"] == 1
    assert adjudicated["ann"]["agreed"] == 0 and adjudicated["bob"]["agreed"] == 1
    assert adjudicated["bob"]["share"] == 1.0 and adjudicated["bob"]["ci"][1] == 1.0
    assert report["candidates"] == 6
    assert benchmark_agreement(benchmark) == report  # the bootstrap's seed is fixed


@pytest.mark.django_db
def test_a_reviewers_latest_decision_is_their_rating():
    benchmark = Benchmark.objects.create(name="agree-latest")
    ann, bob = make_user("ann", REVIEWER), make_user("bob", REVIEWER)
    propose_candidates(benchmark, [make_task("t-a"), make_task("t-b")], user=ann)
    first, second = BenchmarkCandidate.objects.filter(benchmark=benchmark).order_by("id")
    _decide(first, ann, "reject")
    _decide(first, ann, "accept")
    _decide(first, bob, "accept")
    _decide(second, ann, "reject")
    _decide(second, bob, "reject")
    report = benchmark_agreement(benchmark)
    assert report["decision"]["n"] == 2
    assert report["decision"]["kappa"] == pytest.approx(1.0)
    assert report["decision"]["ci"] is not None


@pytest.mark.django_db
def test_no_overlap_gives_no_figures():
    report = benchmark_agreement(Benchmark.objects.create(name="empty"))
    assert report["decision"] == {
        "kappa": None,
        "n": 0,
        "ci": None,
        "observed_agreement": None,
        "pairs": [],
        "alpha": {"alpha": None, "n": 0, "ratings": 0, "ci": None},
    }
    assert report["vs_adjudicated"]["reviewers"] == []
