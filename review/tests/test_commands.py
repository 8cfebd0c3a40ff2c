"""propose_candidates, diagnose and freeze_benchmark management commands."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from benchmarks.models import Benchmark, BenchmarkVersion
from jobs.models import JobRun
from llm.models import ModelEndpoint
from llm.testing import Reply
from review.models import BenchmarkCandidate, LLMDiagnosis
from review.services import decide
from review.tests.helpers import sanity
from tasks.testing import make_task


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_propose_creates_the_benchmark_and_counts(db):
    make_task("t-a"), make_task("t-b")
    out = run("propose_candidates", "--benchmark", "new-bench", "--task", "t-a")
    assert "created benchmark new-bench" in out and "proposed 1, already candidates 0" in out
    out = run("propose_candidates", "--benchmark", "new-bench", "--all")
    assert "proposed 1, already candidates 1" in out
    assert Benchmark.objects.get(name="new-bench").candidates.count() == 2


def test_propose_refuses_unknown_tasks_and_bad_names(db):
    make_task("t-a")
    with pytest.raises(CommandError, match="no such task: t-nope"):
        run("propose_candidates", "--benchmark", "b", "--task", "t-a", "t-nope")
    with pytest.raises(CommandError, match="must be letters"):
        run("propose_candidates", "--benchmark", "bad name", "--all")
    assert not BenchmarkCandidate.objects.exists()


def test_diagnose_here_prints_json(candidate, scripted_upstream, fast_llm_retries):
    ModelEndpoint.objects.create(
        name="diag", base_url=scripted_upstream.base_url, model="m", roles=["diagnosis"], timeout_seconds=5
    )
    scripted_upstream.push(Reply.text(json.dumps({"overall": "fine", "issues": []})))
    out = run("diagnose", "--benchmark", candidate.benchmark.name, "--here", "--json")
    rows = json.loads(out.strip().splitlines()[-1])
    assert rows == [
        {"task": "t-review", "candidate": candidate.pk, "diagnosis": LLMDiagnosis.objects.get().pk, "issues": 0}
    ]
    # Nothing awaits diagnosis any more: a second run does nothing.
    assert "no candidate awaits diagnosis" in run("diagnose", "--benchmark", candidate.benchmark.name)


def test_diagnose_again_names_candidates_or_takes_every_open_one(candidate, scripted_upstream, fast_llm_retries):
    ModelEndpoint.objects.create(
        name="diag", base_url=scripted_upstream.base_url, model="m", roles=["diagnosis"], timeout_seconds=5
    )
    for overall in ("first", "after the fix", "all again"):
        scripted_upstream.push(Reply.text(json.dumps({"overall": overall, "issues": []})))
    bench = candidate.benchmark.name
    run("diagnose", "--benchmark", bench, "--here")
    rows = json.loads(run("diagnose", "--candidate", str(candidate.pk), "--here", "--json").splitlines()[-1])
    latest = candidate.diagnoses.first()
    assert rows == [{"task": "t-review", "candidate": candidate.pk, "diagnosis": latest.pk, "issues": 0}]
    assert latest.overall == "after the fix" and candidate.diagnoses.count() == 2
    assert "no candidate awaits diagnosis" in run("diagnose", "--benchmark", bench, "--here")
    assert f"{bench}: diagnosed 1 of 1 candidates" in run("diagnose", "--benchmark", bench, "--again", "--here")
    assert candidate.diagnoses.first().overall == "all again"
    for args, refusal in [
        (("--candidate", str(candidate.pk + 1)), f"no candidate {candidate.pk + 1}"),
        (("--benchmark", "other", "--candidate", str(candidate.pk)), "no benchmark is named 'other'"),
        (("--again",), "--again needs --benchmark"),
        ((), "name a benchmark"),
    ]:
        with pytest.raises(CommandError, match=refusal):
            run("diagnose", *args, "--here")


def test_diagnose_here_failure_exits_non_zero(candidate):
    with pytest.raises(CommandError, match="1 diagnosis\\(es\\) failed; first: t-review"):
        run("diagnose", "--benchmark", candidate.benchmark.name, "--here")


def test_diagnose_without_workers_gives_up_and_cancels(candidate, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        with pytest.raises(CommandError, match="no job worker took the diagnosis jobs"):
            run("diagnose", "--benchmark", candidate.benchmark.name, "--start-timeout", "0.2")
    assert list(JobRun.objects.values_list("kind", "status")) == [("review.diagnose", "cancelled")]


def test_diagnose_unknown_benchmark(db):
    with pytest.raises(CommandError, match="no benchmark is named 'nope'"):
        run("diagnose", "--benchmark", "nope")


def test_freeze_benchmark_pins_the_accepted_revisions_and_prints_the_apis_version(
    candidate, benchmark, admin_user, reviewer
):
    with pytest.raises(CommandError, match="has no accepted candidates to freeze"):
        run("freeze_benchmark", "--benchmark", benchmark.name, "--by", admin_user.username)
    sanity(candidate.task.current_revision)
    decide(candidate, "accept", user=reviewer)
    with pytest.raises(CommandError, match=f"no admin '{reviewer.username}'"):
        run("freeze_benchmark", "--benchmark", benchmark.name, "--by", reviewer.username)
    with pytest.raises(CommandError, match="no benchmark 'nope'"):
        run("freeze_benchmark", "--benchmark", "nope", "--by", admin_user.username)
    assert not BenchmarkVersion.objects.exists()

    out = run("freeze_benchmark", "--benchmark", benchmark.name, "--by", admin_user.username, "--note", "v1", "--json")
    first, last = out.strip().splitlines()
    assert first == f"{benchmark.name} v1: 1 task(s) pinned (t-review r1)"
    version = BenchmarkVersion.objects.get()
    report = json.loads(last)
    assert (report["id"], report["benchmark"], report["number"], report["note"]) == (
        version.pk,
        benchmark.name,
        1,
        "v1",
    )
    assert (report["created_by"], report["task_count"]) == (admin_user.username, 1)
    assert report["revisions"] == [
        {"task": "t-review", "revision": 1, "revision_id": candidate.task.current_revision_id}
    ]
    assert report["downloads"]["zip"] == f"/api/benchmark-versions/{version.pk}/export/?format=zip"
