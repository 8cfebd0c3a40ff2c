"""review.diagnosis and the review.diagnose job, against the scripted OpenAI-compatible upstream on loopback."""

import json

import pytest

from jobs import runner
from jobs.models import JobRun
from llm.models import ModelCall, ModelEndpoint
from llm.testing import Reply
from review.diagnosis import DIAGNOSIS_PROMPT_VERSION, MAX_FILE_BYTES, DiagnosisFailed, diagnose_candidate
from review.models import BenchmarkCandidate, LLMDiagnosis
from review.services import start_diagnosis
from tasks.services import revise_task

from .conftest import sanity

REPORT = {
    "overall": "Clear task; the checker is too lenient.",
    "issues": [
        {
            "component": "checker", "path": "reward/check.py", "severity": "blocker",
            "problem": "awards points to an untouched workspace", "evidence": "report_exists is never checked",
            "suggested_fix": "check that report.md exists", "replacement": "print('{\"report_exists\": 1}')\n",
        },
        {
            "component": "input_file", "path": "missing.csv", "severity": "minor", "problem": "names a file",
            "evidence": "", "suggested_fix": "", "replacement": None,
        },
    ],
}  # fmt: skip


@pytest.fixture(autouse=True)
def fast_backoff(settings):
    settings.CLAWGYM_LLM_BACKOFF_SECONDS = 0.01
    settings.CLAWGYM_LLM_BACKOFF_MAX_SECONDS = 0.05


@pytest.fixture
def endpoint(db, scripted_upstream):
    return ModelEndpoint.objects.create(
        name="diag", base_url=scripted_upstream.base_url, model="diag-model", roles=["diagnosis"],
        timeout_seconds=5, max_retries=1,
    )  # fmt: skip


def test_valid_report_is_stored_and_shows_the_task(candidate, endpoint, scripted_upstream):
    result = revise_task(
        candidate.task, user=None, message="add a binary", file_changes={("input", "logo.png"): b"\x89PNG\x00\x01"}
    )
    sanity(result.revision, over_lenient=True)
    scripted_upstream.push(Reply.text(json.dumps(REPORT)))
    diagnosis = diagnose_candidate(candidate)

    candidate.refresh_from_db()
    assert candidate.status == BenchmarkCandidate.Status.AWAITING_REVIEW and candidate.diagnosis_error == ""
    assert diagnosis.revision == result.revision
    assert diagnosis.prompt_version == DIAGNOSIS_PROMPT_VERSION and diagnosis.endpoint == endpoint
    assert diagnosis.model_call == ModelCall.objects.get(purpose="diagnosis")
    checker, missing = diagnosis.issues.order_by("severity_rank")
    assert (checker.path, checker.path_missing, checker.severity) == ("check.py", False, "blocker")
    assert checker.replacement.startswith("print(")
    assert (missing.path, missing.path_missing, missing.replacement) == ("missing.csv", True, None)

    prompt = scripted_upstream.requests[0].json["messages"][1]["content"]
    assert "Summarise sales.csv" in prompt and "item,amount" in prompt and "report_exists" in prompt
    assert "`logo.png` (binary, 6 bytes; content not shown)" in prompt
    assert "Verdict: over-lenient" in prompt


def test_large_file_is_cut(candidate, endpoint, scripted_upstream):
    revise_task(candidate.task, user=None, message="big", file_changes={("input", "big.txt"): b"x" * (MAX_FILE_BYTES + 5)})
    scripted_upstream.push(Reply.text(json.dumps({"overall": "fine", "issues": []})))
    diagnose_candidate(candidate)
    prompt = scripted_upstream.requests[0].json["messages"][1]["content"]
    assert f"cut: only its first {MAX_FILE_BYTES:,} bytes are shown" in prompt
    assert "x" * (MAX_FILE_BYTES + 1) not in prompt


def test_malformed_twice_records_the_failure(candidate, endpoint, scripted_upstream):
    scripted_upstream.push(Reply.text("not json at all"), Reply.text(json.dumps({"overall": "x"})))
    with pytest.raises(DiagnosisFailed, match="no valid JSON answer in 2 tries"):
        diagnose_candidate(candidate)
    candidate.refresh_from_db()
    assert candidate.status == BenchmarkCandidate.Status.AWAITING_DIAGNOSIS
    assert "no valid JSON answer" in candidate.diagnosis_error
    assert not LLMDiagnosis.objects.exists()
    assert len(scripted_upstream.requests) == 2  # one repair turn, no more


def test_no_endpoint_is_a_recorded_failure(candidate):
    with pytest.raises(DiagnosisFailed, match="serves the role 'diagnosis'"):
        diagnose_candidate(candidate)
    candidate.refresh_from_db()
    assert "serves the role 'diagnosis'" in candidate.diagnosis_error


def test_job_stores_the_diagnosis_and_a_second_delivery_calls_nothing(
    candidate, endpoint, scripted_upstream, reviewer, django_capture_on_commit_callbacks
):
    scripted_upstream.push(Reply.text(json.dumps(REPORT)))
    with django_capture_on_commit_callbacks(execute=False):
        (run,) = start_diagnosis([candidate], user=reviewer)
    assert runner.execute(run.pk) == JobRun.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.result["issues"] == {"blocker": 1, "minor": 1}
    assert LLMDiagnosis.objects.get().job_run == run
    from review.jobs import diagnose

    class Ctx:  # the same run delivered again: its diagnosis is returned, no new call
        def __init__(self):
            self.run = run

        def log(self, line):
            pass

    assert diagnose(Ctx(), candidate_id=candidate.pk)["diagnosis"] == LLMDiagnosis.objects.get().pk
    assert len(scripted_upstream.requests) == 1


def test_job_fails_with_the_reason(candidate, endpoint, scripted_upstream, django_capture_on_commit_callbacks):
    scripted_upstream.push(Reply.text("nope"), Reply.text("still nope"))
    with django_capture_on_commit_callbacks(execute=False):
        (run,) = start_diagnosis([candidate], user=None)
    assert runner.execute(run.pk) == JobRun.Status.FAILED
    run.refresh_from_db()
    assert "DiagnosisFailed" in run.error and "no valid JSON answer" in run.error
