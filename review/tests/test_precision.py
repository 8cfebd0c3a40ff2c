"""Diagnosis precision: the valid share of judged issues with Wilson intervals, by component, severity, model and
prompt version, and the queue's sort by the issues most likely valid."""

import pytest
from django.urls import reverse

from review import precision
from review.models import LLMDiagnosis
from review.services import record_verdicts
from review.stats import wilson_interval
from review.tests.helpers import add_diagnosis, make_candidate

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("valid", "n", "low", "high"),
    # Newcombe (1998), Statistics in Medicine 17:857-872, table I, method 3 (the score interval without correction).
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)],
)
def test_the_wilson_interval_matches_published_values(valid, n, low, high):
    got = wilson_interval(valid, n)
    assert got == pytest.approx((low, high), abs=6e-5)


def test_no_interval_without_verdicts_and_no_impossible_proportion():
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def judge(candidate, user, **verdicts):
    issues = {i.problem: i.pk for i in candidate.latest_diagnosis().issues.all()}
    record_verdicts(candidate, {str(issues[name]): value for name, value in verdicts.items()}, user=user)


def diagnosed(benchmark, external_id, issues, *, model="judge-a", prompt="candidate-diagnosis/2"):
    candidate = make_candidate(benchmark, external_id)
    diagnosis = add_diagnosis(candidate, issues)
    LLMDiagnosis.objects.filter(pk=diagnosis.pk).update(endpoint_name=model, prompt_version=prompt)
    return candidate


def test_precision_by_component_severity_model_and_prompt(benchmark, reviewer, second_reviewer):
    one = diagnosed(
        benchmark,
        "t-one",
        [
            {"component": "checker", "severity": "blocker", "problem": "lenient"},
            {"component": "instruction", "severity": "minor", "problem": "vague"},
            {"component": "checker", "severity": "major", "problem": "unjudged"},
        ],
    )
    two = diagnosed(
        benchmark,
        "t-two",
        [
            {"component": "checker", "severity": "blocker", "problem": "crash"},
            {"component": "rubric", "severity": "minor", "problem": "overlap"},
        ],
        model="judge-b",
        prompt="candidate-diagnosis/1",
    )
    judge(one, reviewer, lenient="valid", vague="valid")
    judge(one, reviewer, vague="not_valid")  # the latest verdict on an issue wins
    judge(two, second_reviewer, crash="fixed", overlap="not_valid")  # a fixed issue was valid
    report = precision.benchmark_precision(benchmark)

    assert report["overall"]["valid"] == 2 and report["overall"]["n"] == 4
    assert report["overall"]["precision"] == 0.5
    low, high = wilson_interval(2, 4)
    assert (report["overall"]["low"], report["overall"]["high"]) == (round(low, 4), round(high, 4))
    assert report["by_component"]["checker"] | {"low": None, "high": None} == {
        "precision": 1.0,
        "valid": 2,
        "n": 2,
        "low": None,
        "high": None,
    }
    assert list(report["by_component"]) == ["instruction", "input_file", "checker", "rubric"]
    assert report["by_component"]["input_file"] == {"precision": None, "valid": 0, "n": 0, "low": None, "high": None}
    assert report["by_severity"]["minor"]["precision"] == 0.0 and report["by_severity"]["minor"]["n"] == 2
    assert report["by_severity"]["major"]["n"] == 0  # nobody judged it
    assert report["by_model"]["judge-a"]["precision"] == 0.5 and report["by_model"]["judge-b"]["n"] == 2
    assert report["by_prompt_version"]["candidate-diagnosis/1"]["valid"] == 1
    assert report["by_model_prompt"][0]["model"] == "judge-a"
    assert report["by_model_prompt"][1] | {"low": 0, "high": 0} == {
        "model": "judge-b",
        "prompt_version": "candidate-diagnosis/1",
        "precision": 0.5,
        "valid": 1,
        "n": 2,
        "low": 0,
        "high": 0,
    }


def test_other_benchmarks_verdicts_stay_out(benchmark, reviewer):
    from benchmarks.models import Benchmark

    other = Benchmark.objects.create(name="other")
    judge(diagnosed(other, "t-else", [{"problem": "p"}]), reviewer, p="valid")
    assert precision.benchmark_precision(benchmark)["overall"]["n"] == 0
    assert precision.benchmark_precision(other)["overall"]["n"] == 1


def test_the_queue_sorts_by_the_issues_most_likely_valid(benchmark, reviewer, reviewer_client):
    # History: checker blockers were right 3 of 3 times, instruction minors 0 of 3.
    for i in range(3):
        past = diagnosed(
            benchmark,
            f"t-past-{i}",
            [
                {"component": "checker", "severity": "blocker", "problem": "c"},
                {"component": "instruction", "severity": "minor", "problem": "i"},
            ],
        )
        judge(past, reviewer, c="valid", i="not_valid")
    likelihoods = precision.cell_likelihoods()
    assert likelihoods[("checker", "blocker")] == 4 / 5 and likelihoods[("instruction", "minor")] == 1 / 5
    assert likelihoods[("rubric", "major")] == 0.5
    minor = diagnosed(benchmark, "t-minor", [{"component": "instruction", "severity": "minor", "problem": "x"}])
    strong = diagnosed(benchmark, "t-strong", [{"component": "checker", "severity": "blocker", "problem": "y"}])
    unknown = diagnosed(benchmark, "t-unknown", [{"component": "rubric", "severity": "major", "problem": "z"}])
    clean = make_candidate(benchmark, "t-clean", issues=[])

    response = reviewer_client.get(reverse("review:queue"), {"sort": "likely", "status": "awaiting_review"})
    html = response.content.decode()
    order = [html.index(f'id="candidate-{c.pk}"') for c in (strong, unknown, minor, clean)]
    assert order == sorted(order)
    assert "Issues most likely valid first" in html


def test_the_likely_sort_costs_the_same_queries_for_more_rows(benchmark, reviewer, reviewer_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count():
        with CaptureQueriesContext(connection) as ctx:
            assert reviewer_client.get(reverse("review:queue"), {"sort": "likely"}).status_code == 200
        return len(ctx.captured_queries)

    judge(diagnosed(benchmark, "t-0", [{"problem": "a"}]), reviewer, a="valid")
    few = count()
    for i in range(1, 12):
        diagnosed(benchmark, f"t-{i}", [{"component": "checker", "severity": "major", "problem": "b"}])
    assert count() == few
