"""Bounds on what reviewers write: reasons, override reasons, verdict comments, notes, names, inline edits.

The services check them (lib.bounds), so the pages and the API refuse the same way, saying how long the text
is and which setting bounds it; nothing is recorded.
"""

import json

import pytest

from benchmarks.models import Benchmark, BenchmarkVersion
from benchmarks.services import BenchmarkError, get_or_create_benchmark
from review import edits, quality, services
from review.models import ReviewDecision
from review.tests.helpers import accept_all, add_diagnosis
from tasks.testing import make_task

NOTE_LIMIT = 16 * 1024
# A reason as a reviewer pastes one: a whole checker run's output under a one-line verdict.
PASTED = "The checker crashes on an empty workspace; its output:\n" + "Traceback line of the checker run\n" * 600


def test_the_default_note_limit_is_16_kib(settings):
    assert settings.CLAWGYM_MAX_NOTE_BYTES == NOTE_LIMIT and len(PASTED.encode()) > NOTE_LIMIT


@pytest.mark.parametrize("field", ["reason", "override_reason"])
def test_a_decision_with_an_oversized_reason_is_refused(candidate, admin_user, field):
    services.claim(candidate, user=admin_user)
    with pytest.raises(services.ReviewError, match=r"over the limit of 16,384 bytes \(CLAWGYM_MAX_NOTE_BYTES\)"):
        services.decide(candidate, "reject", user=admin_user, **{"reason": "broken checker", field: PASTED})
    assert not ReviewDecision.objects.exists()


def test_the_api_answers_400_for_an_oversized_rejection_reason(candidate, reviewer, api_as):
    api = api_as(reviewer)
    assert api.post(f"/api/candidates/{candidate.pk}/claim/", {}, format="json").status_code == 200
    response = api.post(
        f"/api/candidates/{candidate.pk}/decide/", {"decision": "reject", "reason": PASTED}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["detail"] == (  # the API trims the reason's last newline
        f"the reason is {len(PASTED.strip().encode()):,} bytes, over the limit of 16,384 bytes (CLAWGYM_MAX_NOTE_BYTES)"
    )
    assert not ReviewDecision.objects.exists()


def test_a_verdict_comment_is_bounded(candidate, reviewer):
    diagnosis = add_diagnosis(candidate, [{"problem": "the checker ignores the totals row"}])
    services.claim(candidate, user=reviewer)
    with pytest.raises(services.ReviewError, match="the verdict comment is"):
        services.record_verdicts(candidate, {diagnosis.issues.get().pk: "valid"}, user=reviewer, reason=PASTED)
    assert not ReviewDecision.objects.exists()


def test_the_inline_editor_refuses_an_oversized_instruction_or_rubric(candidate, reviewer):
    services.claim(candidate, user=reviewer)
    base = candidate.task.current_revision
    huge = "Summarise sales.csv into report.md.\n" + "Also mention row 17 of sales.csv.\n" * 2500
    with pytest.raises(services.ReviewError, match=r"the instruction is .* \(CLAWGYM_MAX_INSTRUCTION_BYTES\)"):
        edits.save_edit(candidate, user=reviewer, field="instruction", content=huge, base_revision=base)
    rules = [
        {"name": f"rule {n}", "target_file": "report.md", "scores": {"0": "no", "1": "y" * 4000}} for n in range(20)
    ]
    with pytest.raises(services.ReviewError, match=r"the rubric is .* \(CLAWGYM_MAX_RUBRIC_BYTES\)"):
        edits.save_edit(candidate, user=reviewer, field="rubric", content=json.dumps(rules), base_revision=base)
    assert candidate.task.revisions.count() == 1 and not ReviewDecision.objects.exists()


def test_names_and_notes_of_benchmarks_versions_and_samples(benchmark, admin_user, reviewer):
    with pytest.raises(BenchmarkError, match="the benchmark name is 121 characters, over the limit of 120"):
        get_or_create_benchmark("b" * 121, user=admin_user)
    with pytest.raises(BenchmarkError, match="the benchmark description is"):
        get_or_create_benchmark("office-bench", user=admin_user, description=PASTED)
    assert list(Benchmark.objects.values_list("name", flat=True)) == ["claw-bench"]

    accept_all(benchmark, [make_task("t-1")], admin_user=admin_user, reviewer=reviewer)
    with pytest.raises(services.ReviewError, match="the version note is 501 characters, over the limit of 500"):
        services.freeze_version(benchmark, user=admin_user, note="n" * 501)  # was cut to 500 without a word
    assert not BenchmarkVersion.objects.exists()

    with pytest.raises(services.ReviewError, match="the sample name is 201 characters, over the limit of 200"):
        quality.draw_sample(name="s" * 201, size=1, pool={}, user=admin_user)


def test_the_api_creates_benchmarks_through_the_service_and_its_bounds(api_as, admin_user):
    api = api_as(admin_user)
    response = api.post("/api/benchmarks/", {"name": "office-bench", "description": PASTED}, format="json")
    assert response.status_code == 400 and "the benchmark description is" in response.json()["detail"][0]
    response = api.post("/api/benchmarks/", {"name": "office-bench", "description": "Office tasks."}, format="json")
    assert response.status_code == 201 and response.json()["description"] == "Office tasks."
    assert list(Benchmark.objects.values_list("name", flat=True)) == ["office-bench"]
