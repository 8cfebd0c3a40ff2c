"""review.diagnosis and the review.diagnose job, against the scripted OpenAI-compatible upstream on loopback."""

import json

import pytest

from jobs import runner
from jobs.models import JobRun
from llm.models import ModelCall
from llm.testing import Reply, scripted_endpoint
from review.diagnosis import DIAGNOSIS_PROMPT_VERSION, MAX_FILE_BYTES, DiagnosisFailed, diagnose_candidate
from review.models import BenchmarkCandidate, LLMDiagnosis
from review.services import NotAllowed, start_diagnosis, start_diagnosis_batch
from review.tests.helpers import sanity
from tasks.services import revise_task

REPORT = {
    "overall": "Clear task; the checker is too lenient.",
    "issues": [
        {
            "component": "checker",
            "path": "reward/check.py",
            "severity": "blocker",
            "problem": "awards points to an untouched workspace",
            "evidence": "report_exists is never checked",
            "suggested_fix": "check that report.md exists",
            "replacement": "print('{\"report_exists\": 1}')\n",
        },
        {
            "component": "input_file",
            "path": "missing.csv",
            "severity": "minor",
            "problem": "names a file",
            "evidence": "",
            "suggested_fix": "",
            "replacement": None,
        },
    ],
}


@pytest.fixture(autouse=True)
def fast_backoff(fast_llm_retries):
    """Every test here talks to a scripted upstream (llm.testing.fast_llm_retries)."""


@pytest.fixture
def endpoint(db, scripted_upstream):
    return scripted_endpoint(
        scripted_upstream, "diag", model="diag-model", roles=["diagnosis"], timeout_seconds=5, max_retries=1
    )


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
    lazy_runs = "empty 0, initial 1, scaffold 0, inputs_emptied 0, stubs 0, stubs_only 0, inputs_copied 0, claim 0"
    assert f"What a lazy agent earns: 1 at most ({lazy_runs})." in prompt
    paying = "Checks that pay a lazy agent (sub-score > 0 on those workspaces):\n- `out_exists` pays 1 on the initial"
    assert paying + " workspace" in prompt


def test_large_file_is_cut(candidate, endpoint, scripted_upstream):
    revise_task(
        candidate.task, user=None, message="big", file_changes={("input", "big.txt"): b"x" * (MAX_FILE_BYTES + 5)}
    )
    scripted_upstream.push(Reply.text(json.dumps({"overall": "fine", "issues": []})))
    diagnose_candidate(candidate)
    prompt = scripted_upstream.requests[0].json["messages"][1]["content"]
    assert f"cut: only its first {MAX_FILE_BYTES:,} bytes are shown" in prompt
    assert "x" * (MAX_FILE_BYTES + 1) not in prompt


def test_an_instruction_stored_before_the_bound_is_cut_for_the_model(candidate, endpoint, scripted_upstream, settings):
    """Revisions saved before CLAWGYM_MAX_INSTRUCTION_BYTES existed may hold megabytes: the model gets the bound."""
    instruction = candidate.task.current_revision.instruction
    settings.CLAWGYM_MAX_INSTRUCTION_BYTES = 12
    scripted_upstream.push(Reply.text(json.dumps({"overall": "fine", "issues": []})))
    diagnose_candidate(candidate)
    prompt = scripted_upstream.requests[0].json["messages"][1]["content"]
    assert instruction.encode()[:12].decode(errors="ignore") in prompt and instruction not in prompt
    assert f"cut: the instruction is {len(instruction.encode()):,} bytes; only the first 12 are shown" in prompt


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
    candidate.refresh_from_db()
    assert candidate.worst_rank == 0  # the blocker: the queue filters and sorts on it
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


def _candidate(benchmark, external_id):
    from review.services import propose_candidates
    from tasks.testing import make_task

    propose_candidates(benchmark, [make_task(external_id)], user=None)
    return BenchmarkCandidate.objects.get(task__external_id=external_id)


def test_diagnose_all_queues_one_child_per_waiting_candidate_and_skips_busy_ones(
    benchmark, candidate, admin_user, reviewer, django_capture_on_commit_callbacks
):
    from benchmarks.models import Benchmark
    from review.job_kinds import DIAGNOSE_BATCH_JOB, DIAGNOSE_JOB
    from review.tests.helpers import add_diagnosis

    add_diagnosis(_candidate(benchmark, "t-done"), [])  # awaiting review: not diagnosed again
    busy = _candidate(benchmark, "t-busy")
    other = _candidate(Benchmark.objects.create(name="other-bench"), "t-other")
    with django_capture_on_commit_callbacks(execute=False):
        start_diagnosis([busy], user=admin_user)  # a diagnosis of t-busy is queued already
        with pytest.raises(NotAllowed):
            start_diagnosis_batch(benchmark, user=reviewer)
        run = start_diagnosis_batch(benchmark, user=admin_user)

    assert run.kind == DIAGNOSE_BATCH_JOB and run.params == {"candidate_ids": [candidate.pk]}
    assert runner.execute(run.pk) == JobRun.Status.SUCCEEDED
    children = JobRun.objects.filter(parent=run)
    assert [(c.kind, c.params["candidate_id"]) for c in children] == [(DIAGNOSE_JOB, candidate.pk)]
    assert run.batch().total == 1 and not run.batch().is_finished

    with django_capture_on_commit_callbacks(execute=False):
        everything = start_diagnosis_batch(None, user=None)  # a script: every benchmark; queued ones are busy
        assert everything.params == {"candidate_ids": [other.pk]}
        start_diagnosis([other], user=None)
        assert start_diagnosis_batch(None, user=admin_user) is None  # nothing left that is not busy


def test_starting_a_diagnosis_twice_gives_the_run_already_under_way(
    candidate, admin_user, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        (first,) = start_diagnosis([candidate], user=admin_user)
        (again,) = start_diagnosis([candidate], user=admin_user)
        assert again == first and JobRun.objects.count() == 1
        JobRun.objects.filter(pk=first.pk).update(status=JobRun.Status.FAILED)
        (retry,) = start_diagnosis([candidate], user=admin_user)  # a finished run does not count
    assert retry != first and JobRun.objects.count() == 2
