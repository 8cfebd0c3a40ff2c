"""The solvability gate (review.solvability): accepting needs proof that the current revision can score full marks,
on every path (services, bulk, API, the pages), with an admin's override still possible; the proof is shown."""

import pytest
from django.urls import reverse

from accounts.roles import LEAD, REVIEWER
from accounts.testing import make_user
from evaluation.models import Rollout
from llm.models import ModelEndpoint
from review import adjudication, services
from review.bulk import decide_many
from review.models import BenchmarkCandidate, ReviewDecision
from review.solvability import HOW_TO_PROVE, ROLLOUT, SOLUTION, proof_for, solvability
from review.tests.helpers import HTMX, sanity, text, url
from tasks.models import SanityReport
from tasks.package import STANDARD_REWARD_SH
from tasks.sanity import check_revision
from tasks.services import revise_task
from tasks.testing import make_sanity_task, make_task

ALWAYS_ZERO_PY = b"import json\nprint(json.dumps({'always_zero': 0}))\n"
API = "/api/candidates/"


def propose(benchmark, task, admin_user):
    services.propose_candidates(benchmark, [task], user=admin_user)
    return BenchmarkCandidate.objects.get(task=task, benchmark=benchmark)


def rollout_of(revision, score, status=Rollout.Status.SCORED):
    endpoint, _ = ModelEndpoint.objects.get_or_create(
        name="agent", defaults={"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    )
    return Rollout.objects.create(
        revision=revision, endpoint=endpoint, harness="builtin", status=status, score=score, code_score=score
    )


def test_a_revision_whose_solution_scores_zero_is_refused_on_every_path(
    db, bwrap, benchmark, reviewer, admin_user, api_as, reviewer_client
):
    task = make_sanity_task("unsolvable", solution={"out.json": b'{"total": 0}\n'})
    report = check_revision(task.current_revision, backend=bwrap)
    assert report.verdict == "unsolvable" and report.solvable is False and report.lazy_score == 0.0
    candidate = propose(benchmark, task, admin_user)

    with pytest.raises(services.AcceptBlocked) as refused:
        services.decide(candidate, "accept", user=reviewer)
    message = str(refused.value)
    assert "unsolvable: the reference solution of r1 does not score 1 (it scored 0)" in message
    assert "fix the reference solution or the checker" in message
    assert "ready to accept" not in text(reviewer_client.get(url("candidate_part", candidate, "accept"), **HTMX))

    bulk = decide_many([candidate.pk], "accept", user=reviewer)
    assert bulk.decided == [] and "unsolvable" in bulk.refused[0].refused and bulk.refused[0].status == 409
    response = api_as(reviewer).post(f"{API}{candidate.pk}/decide/", {"decision": "accept"}, format="json")
    assert response.status_code == 409 and "unsolvable" in response.json()["detail"]
    response = reviewer_client.post(url("decide", candidate), {"decision": "accept"}, **HTMX)
    assert "unsolvable" in text(response)
    assert not ReviewDecision.objects.filter(decision="accept").exists()
    candidate.refresh_from_db()
    assert candidate.status != BenchmarkCandidate.Status.ACCEPTED


def test_a_checker_that_always_prints_zero_is_refused_for_want_of_proof(db, bwrap, benchmark, reviewer, admin_user):
    task = make_task("always-zero")
    result = revise_task(
        task,
        user=admin_user,
        message="the checker always prints zero",
        file_changes={("reward", "check.py"): ALWAYS_ZERO_PY, ("reward", "reward.sh"): STANDARD_REWARD_SH.encode()},
    )
    revision = result.revision
    report = check_revision(revision, backend=bwrap)
    # The old gate let this through: nothing crashed, a lazy agent earns 0, and there is no solution to fail.
    assert (report.crashed, report.lazy_score, report.solvable) == (False, 0.0, None)
    candidate = propose(benchmark, task, admin_user)

    assert proof_for(revision) is None
    with pytest.raises(services.AcceptBlocked) as refused:
        services.decide(candidate, "accept", user=reviewer)
    message = str(refused.value)
    assert "solvability is not proven" in message and "it has no reference solution" in message
    assert HOW_TO_PROVE in message  # the three routes: a reference solution, a solve on the page, a rollout
    assert "add a reference solution" in HOW_TO_PROVE and "candidate page" in HOW_TO_PROVE and "rollout" in HOW_TO_PROVE

    # A rollout of another revision, or one that did not score full marks, proves nothing; one of r2 at 1.0 does.
    rollout_of(task.revisions.get(number=1), 1.0)
    rollout_of(revision, 0.9)
    rollout_of(revision, None, status=Rollout.Status.FAILED)
    assert proof_for(revision) is None
    proven = rollout_of(revision, 1.0)
    proof = proof_for(revision)
    assert (proof.kind, proof.score, proof.rollout_id) == (ROLLOUT, 1.0, proven.pk)
    assert proof.link == f"/rollouts/{proven.pk}/" and f"rollout #{proven.pk} of r2" in proof.description
    row = services.decide(candidate, "accept", user=reviewer)
    assert row.revision == revision and row.override_reason == ""


def test_an_admin_may_override_the_solvability_gate_with_a_reason(db, benchmark, reviewer, admin_user, admin_client):
    task = make_task("no-proof")
    sanity(task.current_revision, solution=None)
    candidate = propose(benchmark, task, admin_user)
    with pytest.raises(services.NotAllowed):
        services.decide(candidate, "accept", user=reviewer, override_reason="trust me")
    with pytest.raises(services.AcceptBlocked, match="solvability is not proven"):
        services.decide(candidate, "accept", user=admin_user)
    row = services.decide(candidate, "accept", user=admin_user, override_reason="solved it by hand on a laptop")
    assert row.override_reason == "solved it by hand on a laptop"
    candidate.refresh_from_db()
    assert candidate.status == BenchmarkCandidate.Status.ACCEPTED

    # Marked wherever it is decided: the candidate's panel, its queue row and the benchmark's next-freeze list.
    assert 'data-testid="override-mark"' in text(admin_client.get(url("candidate", candidate)))
    queue = text(admin_client.get(reverse("review:queue")))
    row_html = queue[queue.index(f'<tr id="candidate-{candidate.pk}"') :]
    assert 'data-testid="override-mark"' in row_html[: row_html.index("</tr>")]
    assert "accepted by override" in text(admin_client.get(reverse("review:benchmark", args=[benchmark.name])))


def test_a_passing_solution_is_the_proof_and_the_page_and_api_show_it(
    db, benchmark, reviewer, admin_user, api_as, reviewer_client
):
    task = make_task("proven")
    revision = task.current_revision
    candidate = propose(benchmark, task, admin_user)
    assert solvability(revision)["proven"] is False
    shown = api_as(reviewer).get(f"{API}{candidate.pk}/").json()["solvability"]
    assert shown["proven"] is False and shown["kind"] is None and shown["how"] == HOW_TO_PROVE
    panel = text(reviewer_client.get(url("candidate_part", candidate, "accept"), **HTMX))
    assert "Solvability not proven" in panel and "ready to accept" not in panel

    report = sanity(revision)  # its reference solution scored 1
    proof = proof_for(revision)
    assert (proof.kind, proof.score, proof.report_id) == (SOLUTION, 1.0, report.pk)
    shown = api_as(reviewer).get(f"{API}{candidate.pk}/").json()["solvability"]
    assert shown["proven"] is True and shown["kind"] == "solution" and shown["link"] == "/tasks/proven/?rev=1"
    panel = text(reviewer_client.get(url("candidate_part", candidate, "accept"), **HTMX))
    assert "ready to accept" in panel and "Solvable:" in panel and "the reference solution of r1 scored 1" in panel

    # Only the latest report counts: a later check in which the solution fails takes the proof away.
    sanity(revision, solution=0.0)
    assert proof_for(revision) is None
    assert "unsolvable" in services.sanity_block(revision, benchmark)
    assert SanityReport.objects.filter(revision=revision).count() == 2


def test_a_lazy_checker_is_refused_even_when_solvable_and_every_reason_is_given(db, benchmark, reviewer, admin_user):
    task = make_task("lazy-and-unproven")
    sanity(task.current_revision, over_lenient=True, solution=None)
    candidate = propose(benchmark, task, admin_user)
    with pytest.raises(services.AcceptBlocked) as refused:
        services.decide(candidate, "accept", user=reviewer)
    message = str(refused.value)
    assert "a lazy agent earns 1" in message and "solvability is not proven" in message
    assert "fix the checker" in message and "add a reference solution" in message


def test_a_revision_with_a_solution_file_that_scores_one_passes_the_real_check(
    db, bwrap, benchmark, reviewer, admin_user
):
    task = make_sanity_task("sound-with-solution")
    check_revision(task.current_revision, backend=bwrap)
    candidate = propose(benchmark, task, admin_user)
    assert services.sanity_block(task.current_revision, benchmark) is None
    assert services.decide(candidate, "accept", user=reviewer).decision == "accept"


def test_a_lead_settling_a_disagreement_meets_the_same_gate(db, benchmark, admin_user):
    lead, ann, bob = make_user("lee", LEAD), make_user("ann", REVIEWER), make_user("bob", REVIEWER)
    benchmark.decisions_needed = 2
    benchmark.save(update_fields=["decisions_needed"])
    task = make_task("disputed")
    sanity(task.current_revision)  # its reference solution scored 1: ann may accept
    candidate = propose(benchmark, task, admin_user)
    services.decide(candidate, "accept", user=ann)
    services.decide(candidate, "reject", user=bob, reason="the reference solution is wrong")
    assert candidate.status == BenchmarkCandidate.Status.AWAITING_ADJUDICATION

    sanity(task.current_revision, solution=0.0)  # checked again: the reference solution fails now
    with pytest.raises(services.AcceptBlocked, match="cannot accept: unsolvable: the reference solution of r1"):
        adjudication.adjudicate(candidate, "accept", user=lead, reason="ann is right")
    candidate.refresh_from_db()
    assert candidate.status == BenchmarkCandidate.Status.AWAITING_ADJUDICATION
    assert adjudication.adjudicate(candidate, "reject", user=lead, reason="bob is right").decision == "reject"
