"""review.services: claims, verdicts, fixes, decisions, freezing and the history timeline."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from benchmarks.models import BenchmarkVersion
from jobs.models import JobRun
from review import edits, services
from review.models import BenchmarkCandidate, ReviewDecision
from review.tests.helpers import add_diagnosis, sanity
from tasks.models import Task
from tasks.services import StaleRevisionError, revise_task
from tasks.testing import make_task

Status = BenchmarkCandidate.Status


def test_propose_creates_once_and_skips_tasks_without_revision(benchmark, admin_user):
    tasks = [make_task("t-a"), make_task("t-b"), Task.objects.create(external_id="t-empty")]
    first = services.propose_candidates(benchmark, tasks, user=admin_user)
    again = services.propose_candidates(benchmark, tasks, user=admin_user)
    assert (first.created, first.existing, first.skipped) == (2, 0, ["t-empty"])
    assert (again.created, again.existing) == (0, 2)
    assert set(benchmark.candidates.values_list("status", flat=True)) == {Status.AWAITING_DIAGNOSIS}


def test_claim_locks_out_a_second_reviewer_until_it_expires(candidate, reviewer, second_reviewer):
    add_diagnosis(candidate, [])
    services.claim(candidate, user=reviewer, minutes=10)
    assert candidate.status == Status.IN_REVIEW and candidate.held_by() == reviewer
    with pytest.raises(services.ClaimConflict, match="rita_reviewer holds"):
        services.claim(candidate, user=second_reviewer)
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    services.claim(candidate, user=second_reviewer)
    assert candidate.held_by() == second_reviewer


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_claiming_at_once_only_one_wins(benchmark, admin_user, reviewer, second_reviewer):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite serialises writers; the race is exercised on PostgreSQL")
    task = make_task("t-review")
    services.propose_candidates(benchmark, [task], user=admin_user)
    candidate = BenchmarkCandidate.objects.get(task=task)
    barrier, outcomes = threading.Barrier(2), []

    def grab(user):
        barrier.wait()
        try:
            services.claim(BenchmarkCandidate.objects.get(pk=candidate.pk), user=user)
            outcomes.append("won")
        except services.ClaimConflict:
            outcomes.append("lost")
        finally:
            connection.close()

    threads = [threading.Thread(target=grab, args=(u,)) for u in (reviewer, second_reviewer)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(outcomes) == ["lost", "won"]


def test_sequential_claims_by_two_reviewers_one_conflict(candidate, reviewer, second_reviewer):
    # The conditional UPDATE is what decides the race: a stale in-memory copy must not let the loser through.
    stale_copy = BenchmarkCandidate.objects.get(pk=candidate.pk)
    services.claim(candidate, user=reviewer)
    with pytest.raises(services.ClaimConflict):
        services.claim(stale_copy, user=second_reviewer)


def test_release_only_by_holder_and_viewer_cannot_claim(candidate, reviewer, second_reviewer, viewer):
    add_diagnosis(candidate, [])
    services.claim(candidate, user=reviewer)
    with pytest.raises(services.ClaimConflict):
        services.release(candidate, user=second_reviewer)
    services.release(candidate, user=reviewer)
    assert candidate.claimed_by is None and candidate.status == Status.AWAITING_REVIEW
    with pytest.raises(services.NotAllowed):
        services.claim(candidate, user=viewer)


def test_anyone_may_clear_a_claim_that_ran_out(candidate, reviewer, second_reviewer):
    add_diagnosis(candidate, [])
    services.claim(candidate, user=reviewer)
    with pytest.raises(services.ClaimConflict, match=r"rita_reviewer holds this candidate until \d\d:\d\d UTC"):
        services.release(candidate, user=second_reviewer)
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    services.release(candidate, user=second_reviewer)
    assert candidate.claimed_by is None and candidate.status == Status.AWAITING_REVIEW


def test_expired_claims_are_handed_back_once_with_a_history_event(benchmark, candidate, reviewer, second_reviewer):
    add_diagnosis(candidate, [])
    services.claim(candidate, user=reviewer)
    services.propose_candidates(benchmark, [make_task("t-live")], user=None)
    live = BenchmarkCandidate.objects.get(task__external_id="t-live")
    add_diagnosis(live, [])
    services.claim(live, user=second_reviewer)
    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))

    assert services.expire_claims() == 1
    assert services.expire_claims() == 0  # already handed back: recorded once

    candidate.refresh_from_db()
    live.refresh_from_db()
    assert (candidate.status, candidate.claimed_by) == (Status.AWAITING_REVIEW, None)
    assert (live.status, live.held_by()) == (Status.IN_REVIEW, second_reviewer)  # a running claim stays
    claims = [(e["what"], e["who"]) for e in services.history(candidate) if e["kind"] == "claim"]
    assert claims == [("expire", "rita_reviewer"), ("claim", "rita_reviewer")]


def test_accept_blocked_by_crashed_or_over_lenient_sanity(candidate, reviewer):
    revision = candidate.task.current_revision
    with pytest.raises(services.AcceptBlocked, match="not been sanity-checked"):
        services.decide(candidate, "accept", user=reviewer)
    sanity(revision, crashed=True)
    with pytest.raises(services.AcceptBlocked, match="crashed"):
        services.decide(candidate, "accept", user=reviewer)
    sanity(revision, over_lenient=True)
    with pytest.raises(services.AcceptBlocked, match="a lazy agent earns 1 with this checker") as blocked:
        services.decide(candidate, "accept", user=reviewer)
    refusal = str(blocked.value)
    assert "above the tolerance 0 of" in refusal and "the checks that pay: out_exists=1" in refusal
    with pytest.raises(services.NotAllowed):
        services.decide(candidate, "accept", user=reviewer, override_reason="I say so")
    assert not candidate.decisions.exists()
    sanity(revision)
    row = services.decide(candidate, "accept", user=reviewer, reason="good task")
    assert candidate.status == Status.ACCEPTED and row.revision == revision and candidate.claimed_by is None


def test_the_benchmark_sets_the_lazy_score_its_accept_gate_tolerates(candidate, reviewer, admin_user):
    revision = candidate.task.current_revision
    sanity(revision, lazy=0.2, paying={"records_exist": 1.0, "every_line_is_json": 0.6})
    with pytest.raises(services.AcceptBlocked) as blocked:
        services.decide(candidate, "accept", user=reviewer)
    refusal = str(blocked.value)
    lazy_runs = "empty 0, initial 0.2, scaffold 0, inputs_emptied 0, stubs 0, stubs_only 0, inputs_copied 0, claim 0"
    assert f"a lazy agent earns 0.2 with this checker ({lazy_runs}), above the tolerance 0" in refusal
    assert "the checks that pay: records_exist=1, every_line_is_json=0.6" in refusal

    with pytest.raises(services.NotAllowed):
        services.set_lazy_tolerance(candidate.benchmark, 0.25, user=reviewer)
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(services.ReviewError, match="must be in"):
            services.set_lazy_tolerance(candidate.benchmark, bad, user=admin_user)
    services.set_lazy_tolerance(candidate.benchmark, 0.2, user=admin_user)
    candidate.benchmark.refresh_from_db()
    assert candidate.benchmark.lazy_tolerance == 0.2
    candidate = BenchmarkCandidate.objects.get(pk=candidate.pk)  # as a request would read it
    row = services.decide(candidate, "accept", user=reviewer)  # 0.2 is not above 0.2
    assert candidate.status == Status.ACCEPTED and row.override_reason == ""


def test_a_crashed_checker_blocks_whatever_the_tolerance(candidate, reviewer, admin_user):
    services.set_lazy_tolerance(candidate.benchmark, 1.0, user=admin_user)
    sanity(candidate.task.current_revision, crashed=True)
    with pytest.raises(services.AcceptBlocked, match="crashed on the empty workspace: error: boom"):
        services.decide(BenchmarkCandidate.objects.get(pk=candidate.pk), "accept", user=reviewer)


def test_admin_override_accepts_with_its_reason(candidate, admin_user):
    sanity(candidate.task.current_revision, crashed=True)
    row = services.decide(candidate, "accept", user=admin_user, override_reason="checker crash is a sandbox quirk")
    assert row.override_reason == "checker crash is a sandbox quirk"
    assert candidate.status == Status.ACCEPTED


def test_reject_needs_a_reason(candidate, reviewer):
    with pytest.raises(services.ReviewError, match="needs a reason"):
        services.decide(candidate, "reject", user=reviewer)
    services.decide(candidate, "reject", user=reviewer, reason="infeasible")
    assert candidate.status == Status.REJECTED
    with pytest.raises(services.ReviewError, match="already rejected"):
        services.decide(candidate, "accept", user=reviewer)


def test_verdicts_are_checked_and_appended(candidate, reviewer):
    diagnosis = add_diagnosis(candidate, [{}, {"severity": "major"}])
    first, second = diagnosis.issues.order_by("id")
    services.record_verdicts(candidate, {str(first.pk): "valid"}, user=reviewer)
    services.record_verdicts(candidate, {str(first.pk): "not_valid", str(second.pk): "valid"}, user=reviewer)
    assert services.current_verdicts(candidate) == {str(first.pk): "not_valid", str(second.pk): "valid"}
    assert candidate.decisions.count() == 2
    with pytest.raises(services.ReviewError, match="not an issue"):
        services.record_verdicts(candidate, {"999999": "valid"}, user=reviewer)
    with pytest.raises(services.ReviewError, match="is not one of"):
        services.record_verdicts(candidate, {str(first.pk): "maybe"}, user=reviewer)


def test_decisions_are_append_only(candidate, reviewer):
    row = services.decide(candidate, "reject", user=reviewer, reason="bad")
    row.reason = "rewritten"
    with pytest.raises(ValueError, match="append-only"):
        row.save()
    assert ReviewDecision.objects.get(pk=row.pk).reason == "bad"


def test_a_revision_already_recorded_as_a_fix_is_not_recorded_twice(
    candidate, reviewer, django_capture_on_commit_callbacks
):
    diagnosis = add_diagnosis(candidate, [{"component": "checker", "path": "check.py", "replacement": "print('{}')\n"}])
    with django_capture_on_commit_callbacks(execute=False):
        fix = edits.apply_suggested_fix(
            diagnosis.issues.get(), user=reviewer, base_revision=candidate.task.current_revision
        )

    with pytest.raises(services.ReviewError, match=f"r{fix.revision.number} is recorded as a fix already"):
        services.decide(candidate, "fix", user=reviewer, reason="recorded again")
    fixes = [e for e in services.history(candidate) if e["kind"] == "decision" and e["what"] == "fix"]
    assert [e["revision"] for e in fixes] == [fix.revision.number]
    # A revision made elsewhere (the task page's editor records no fix) is still recorded by "Record fix".
    task = candidate.task
    revise_task(task, user=reviewer, message="by hand", base_revision=task.current_revision, instruction="Sum it all.")
    row = services.decide(candidate, "fix", user=reviewer, reason="fixed on the task page")
    assert row.revision.number == fix.revision.number + 1


def test_apply_fix_makes_a_revision_and_queues_a_sanity_check(candidate, reviewer, django_capture_on_commit_callbacks):
    diagnosis = add_diagnosis(candidate, [{"component": "checker", "path": "check.py", "replacement": "print('{}')\n"}])
    issue = diagnosis.issues.get()
    base = candidate.task.current_revision
    with django_capture_on_commit_callbacks(execute=False):
        fix = edits.apply_suggested_fix(issue, user=reviewer, base_revision=base)
    assert fix.revision.number == base.number + 1 and fix.revision.author_user == reviewer
    assert fix.revision.files.get(role="reward", path="check.py").blob.content == b"print('{}')\n"
    assert fix.decision.decision == "fix" and fix.decision.verdicts == {str(issue.pk): "fixed"}
    run = JobRun.objects.get(pk=fix.sanity_run.pk)
    assert run.kind == "tasks.sanity_check" and run.params == {"revision_id": fix.revision.pk}


def test_stale_fix_is_a_conflict_and_writes_nothing(candidate, reviewer, django_capture_on_commit_callbacks):
    diagnosis = add_diagnosis(candidate, [{"replacement": "A clearer instruction."}])
    base = candidate.task.current_revision
    revise_task(candidate.task, user=reviewer, message="someone else's edit", instruction="Another instruction.")
    with pytest.raises(StaleRevisionError):
        edits.apply_suggested_fix(diagnosis.issues.get(), user=reviewer, base_revision=base)
    assert candidate.task.revisions.count() == 2
    assert not candidate.decisions.exists() and not JobRun.objects.exists()


def test_rubric_fix_must_be_a_valid_rubric(candidate, reviewer):
    diagnosis = add_diagnosis(candidate, [{"component": "rubric", "replacement": '[{"name": 1}]'}])
    with pytest.raises(services.ReviewError, match="not a valid rubric"):
        edits.apply_suggested_fix(diagnosis.issues.get(), user=reviewer, base_revision=candidate.task.current_revision)


def test_freeze_pins_accepted_revisions_and_ignores_later_edits(benchmark, candidate, reviewer, admin_user):
    other = make_task("t-other")
    services.propose_candidates(benchmark, [other], user=admin_user)
    accepted_revision = candidate.task.current_revision
    sanity(accepted_revision)
    services.decide(candidate, "accept", user=reviewer)
    with pytest.raises(services.NotAllowed):
        services.freeze_version(benchmark, user=reviewer)
    version = services.freeze_version(benchmark, user=admin_user, note="first")
    revise_task(candidate.task, user=reviewer, message="later edit", instruction="Changed after freezing.")
    version = BenchmarkVersion.objects.get(pk=version.pk)
    assert list(version.revisions.all()) == [accepted_revision]
    assert version.number == 1
    with pytest.raises(ValueError, match="immutable"):
        version.save()
    assert services.freeze_version(benchmark, user=admin_user).number == 2


def test_freeze_without_accepted_candidates_refused(benchmark, candidate, admin_user):
    with pytest.raises(services.ReviewError, match="no accepted candidates"):
        services.freeze_version(benchmark, user=admin_user)


def test_history_shows_claims_diagnoses_decisions_and_revisions(candidate, reviewer):
    diagnosis = add_diagnosis(candidate, [{"replacement": "Better words."}])
    services.claim(candidate, user=reviewer)
    edits.apply_suggested_fix(diagnosis.issues.get(), user=reviewer, base_revision=candidate.task.current_revision)
    services.decide(candidate, "reject", user=reviewer, reason="still unclear")
    kinds = [event["kind"] for event in services.history(candidate)]
    assert {"claim", "diagnosis", "decision", "revision"} <= set(kinds)
    reject = next(e for e in services.history(candidate) if e["what"] == "reject")
    assert reject["who"] == "rita_reviewer" and reject["reason"] == "still unclear"
