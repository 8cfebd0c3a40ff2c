"""Review as a team (review.team): decisions needed and overlap, routing, blind second review, adjudication,
progress, and their pages."""

import pytest
from django.urls import reverse

from accounts.roles import LEAD, REVIEWER
from accounts.testing import make_user
from benchmarks.models import Benchmark
from lib.testing import signed_in_client
from review import adjudication, agreement, edits, precision, services, team
from review.models import BenchmarkCandidate, ClaimEvent, ReviewDecision
from review.tests.helpers import HTMX, add_diagnosis, sanity
from tasks.testing import make_task

Status = BenchmarkCandidate.Status


@pytest.fixture
def people(db):
    return {
        "ann": make_user("ann", REVIEWER),
        "bob": make_user("bob", REVIEWER),
        "lee": make_user("lee", LEAD),
    }


@pytest.fixture
def bench(people):
    benchmark = Benchmark.objects.create(name="team-bench", decisions_needed=2)
    return benchmark


def _candidates(benchmark, n, user):
    tasks = [make_task(f"t-{benchmark.name}-{i}") for i in range(n)]
    services.propose_candidates(benchmark, tasks, user=user)
    out = list(BenchmarkCandidate.objects.filter(benchmark=benchmark).order_by("id"))
    for c in out:
        sanity(c.task.current_revision)
        BenchmarkCandidate.objects.filter(pk=c.pk).update(status=Status.AWAITING_REVIEW)
        c.refresh_from_db()
    return out


def test_overlap_is_a_reproducible_share_of_candidates():
    chosen = [pk for pk in range(1, 2001) if team.in_overlap(pk, 0.2)]
    assert 340 < len(chosen) < 460  # about 20%
    assert chosen == [pk for pk in range(1, 2001) if team.in_overlap(pk, 0.2)]
    assert not any(team.in_overlap(pk, 0.0) for pk in range(1, 200))
    assert all(team.in_overlap(pk, 1.0) for pk in range(1, 200))


def test_overlap_adds_one_decision(people):
    benchmark = Benchmark.objects.create(name="overlap", overlap_share=1.0)
    (c,) = _candidates(benchmark, 1, people["ann"])
    assert team.decisions_required(c) == 2
    Benchmark.objects.filter(pk=benchmark.pk).update(overlap_share=0.0)
    c.refresh_from_db()
    assert team.decisions_required(c) == 1


def test_one_decision_needed_closes_as_before(people):
    benchmark = Benchmark.objects.create(name="solo")
    (c,) = _candidates(benchmark, 1, people["ann"])
    services.decide(c, "accept", user=people["ann"])
    assert c.status == Status.ACCEPTED


def test_agreeing_decisions_close_the_candidate(bench, people):
    (c,) = _candidates(bench, 1, people["ann"])
    services.decide(c, "reject", user=people["ann"], reason="vague")
    assert c.status == Status.AWAITING_REVIEW and c.claimed_by is None
    assert team.candidate_states(bench)[c.pk] == "needs_decisions"
    with pytest.raises(services.ReviewError, match="decided this candidate already"):
        services.decide(c, "accept", user=people["ann"])
    assert c.decisions.filter(reviewer=people["ann"]).count() == 1  # the refused second decision rolled back
    services.decide(c, "reject", user=people["bob"], reason="also vague")
    assert c.status == Status.REJECTED


def test_disagreeing_decisions_go_to_adjudication_and_a_lead_settles(bench, people):
    (c,) = _candidates(bench, 1, people["ann"])
    services.decide(c, "accept", user=people["ann"])
    services.decide(c, "reject", user=people["bob"], reason="the checker is lenient")
    assert c.status == Status.AWAITING_ADJUDICATION
    assert [s["reviewer"] for s in team.sides(c)] == ["ann", "bob"]
    with pytest.raises(services.ReviewError):
        services.claim(c, user=people["ann"])  # not open to reviewers any more
    with pytest.raises(services.NotAllowed):
        adjudication.adjudicate(c, "accept", user=people["ann"], reason="fine")
    with pytest.raises(services.ReviewError, match="needs a reason"):
        adjudication.adjudicate(c, "accept", user=people["lee"], reason=" ")
    row = adjudication.adjudicate(c, "reject", user=people["lee"], reason="bob is right")
    assert row.adjudication and c.status == Status.REJECTED
    kinds = list(c.decisions.order_by("created_at", "id").values_list("reviewer__username", "decision", "adjudication"))
    assert kinds == [("ann", "accept", False), ("bob", "reject", False), ("lee", "reject", True)]
    with pytest.raises(services.ReviewError, match="not awaiting adjudication"):
        adjudication.adjudicate(c, "accept", user=people["lee"], reason="again")


def test_different_issue_verdicts_are_a_disagreement(bench, people):
    (c,) = _candidates(bench, 1, people["ann"])
    issue = add_diagnosis(c, [{"component": "checker", "severity": "major"}]).issues.get()
    services.decide(c, "accept", user=people["ann"], verdicts={str(issue.pk): "valid"})
    services.decide(c, "accept", user=people["bob"], verdicts={str(issue.pk): "not_valid"})
    assert c.status == Status.AWAITING_ADJUDICATION
    assert team.disagreement(c, team.independent_decisions(c)) == [f"issue verdicts differ on #{issue.pk}"]
    adjudication.adjudicate(c, "accept", user=people["lee"], reason="minor, keep it")
    assert c.status == Status.ACCEPTED
    assert services.accepted_revision(c) == c.task.current_revision


def test_routing_least_reviewed_first_never_what_you_touched(bench, people):
    ann, bob = people["ann"], people["bob"]
    first, second, third = _candidates(bench, 3, ann)
    # first: ann decided it; second: ann edited it (a fix); third: untouched.
    services.decide(first, "accept", user=ann)
    ReviewDecision.objects.create(candidate=second, reviewer=ann, decision="fix")
    assert team.next_candidate(ann, bench).pk == third.pk
    # bob: first has one decision already, so the untouched (least-reviewed) ones come first, oldest first.
    assert [c.pk for c in team.routable(bob, bench)] == [second.pk, third.pk, first.pk]
    services.claim(second, user=ann)
    assert [c.pk for c in team.routable(bob, bench)] == [third.pk, first.pk]  # claims stay as they are


def test_routing_keeps_to_the_benchmarks_a_reviewer_reviews(bench, people):
    ann, bob = people["ann"], people["bob"]
    _candidates(bench, 1, ann)
    team.set_team(bench, user=make_user("ada", "admin"), reviewers=["ann"])
    assert team.next_candidate(ann) is not None
    assert team.next_candidate(bob) is None


def test_blind_second_review_hides_the_first_decision(bench, people):
    ann, bob = people["ann"], people["bob"]
    (c,) = _candidates(bench, 1, ann)
    issue = add_diagnosis(c, [{"component": "checker", "severity": "major"}]).issues.get()
    services.decide(c, "reject", user=ann, reason="SECRET-REASON", verdicts={str(issue.pk): "valid"})
    assert team.is_blind(c, bob) and not team.is_blind(c, ann)
    assert services.current_verdicts(c, bob) == {}
    assert services.current_verdicts(c, ann) == {str(issue.pk): "valid"}
    assert not [e for e in services.history(c, bob) if e["kind"] == "decision"]

    client = signed_in_client(bob)
    page = client.get(reverse("review:candidate", args=[c.pk])).content.decode()
    assert "SECRET-REASON" not in page and 'data-testid="team-note"' in page
    history = client.get(reverse("review:candidate_part", args=[c.pk, "history"]), **HTMX).content.decode()
    assert "SECRET-REASON" not in history
    api = client.get(f"/api/candidates/{c.pk}/").json()
    assert api["decisions"] == [] and api["verdicts"] == {}
    assert "SECRET-REASON" not in client.get(f"/api/candidates/{c.pk}/history/").content.decode()

    services.decide(c, "accept", user=bob)  # bob decides: the review is no longer blind to him
    page = client.get(reverse("review:candidate", args=[c.pk])).content.decode()
    assert "SECRET-REASON" in page
    assert len(client.get(f"/api/candidates/{c.pk}/").json()["decisions"]) == 2


def test_blind_second_review_hides_the_first_reviewers_edit_message_not_the_edit(bench, people):
    ann, bob = people["ann"], people["bob"]
    (c,) = _candidates(bench, 1, ann)
    services.claim(c, user=ann)
    base = c.task.current_revision
    edit = edits.save_edit(
        c, user=ann, field="instruction", content="Write EDITED.txt.", base_revision=base, reason="EDIT-SECRET"
    )
    number = edit.revision.number
    services.decide(c, "reject", user=ann, reason="no")
    assert team.is_blind(c, bob)

    (event,) = [e for e in services.history(c, bob) if e["kind"] == "revision"]
    assert event["what"] == f"r{number}" and event["reason"] == team.HIDDEN_MESSAGE
    (own,) = [e for e in services.history(c, ann) if e["kind"] == "revision"]
    assert "EDIT-SECRET" in own["reason"]  # the author reads their own message

    client = signed_in_client(bob)
    history = client.get(reverse("review:candidate_part", args=[c.pk, "history"]), **HTMX).content.decode()
    assert "EDIT-SECRET" not in history and team.HIDDEN_MESSAGE in history and f"r{number}" in history
    saved = client.get(reverse("review:candidate", args=[c.pk]) + f"?saved={number}").content.decode()
    assert "EDIT-SECRET" not in saved and 'data-testid="message-hidden"' in saved
    assert "EDITED.txt" in saved  # the edit itself is the task: it stays visible
    api = client.get(f"/api/candidates/{c.pk}/history/").content.decode()
    assert "EDIT-SECRET" not in api and team.HIDDEN_MESSAGE in api

    services.claim(c, user=bob)
    services.decide(c, "reject", user=bob, reason="no")
    assert "EDIT-SECRET" in client.get(f"/api/candidates/{c.pk}/history/").content.decode()
    saved = client.get(reverse("review:candidate", args=[c.pk]) + f"?saved={number}").content.decode()
    assert "EDIT-SECRET" in saved


def test_a_reviewer_who_decided_cannot_claim_what_waits_for_another(bench, people):
    ann, bob = people["ann"], people["bob"]
    (c,) = _candidates(bench, 1, ann)
    services.claim(c, user=ann)
    services.decide(c, "accept", user=ann)
    c.refresh_from_db()
    assert c.status in BenchmarkCandidate.OPEN and c.claimed_by is None
    with pytest.raises(services.ReviewError, match="you have decided this candidate already"):
        services.claim(c, user=ann)
    response = signed_in_client(ann).post(f"/api/candidates/{c.pk}/claim/", {}, content_type="application/json")
    assert response.status_code == 400 and "decided this candidate already" in response.json()["detail"]
    c.refresh_from_db()
    assert c.claimed_by is None
    assert services.claim(c, user=bob).claimed_by == bob  # the reviewer it waits for still can


def test_agreement_and_precision_leave_out_candidates_under_blind_review(people, admin_client):
    ann, bob, cat = people["ann"], people["bob"], make_user("cat", REVIEWER)
    bench = Benchmark.objects.create(name="three-bench", decisions_needed=3)
    (c,) = _candidates(bench, 1, ann)
    issue = add_diagnosis(c, [{"component": "checker", "severity": "major"}]).issues.get()
    for who in (ann, bob):  # two of three decisions: cat still reviews it blind
        services.decide(c, "reject", user=who, reason="no", verdicts={str(issue.pk): "valid"})
    c.refresh_from_db()
    assert c.status in BenchmarkCandidate.OPEN and team.is_blind(c, cat)
    figures = agreement.benchmark_agreement(bench)
    assert figures["decision"]["n"] == 0 and figures["issue_verdicts"]["n"] == 0
    assert figures["under_blind_review"] == 1
    judged = precision.benchmark_precision(bench)
    assert judged["overall"]["n"] == 0 and judged["under_blind_review"] == 1
    page = admin_client.get(reverse("review:diagnosis_precision", args=[bench.name])).content.decode()
    assert 'data-testid="precision-blind-left-out"' in page and "1 candidate still under blind review" in page
    page = admin_client.get(reverse("review:team_part", args=[bench.name, "agreement"]), **HTMX).content.decode()
    assert 'data-testid="agreement-blind-left-out"' in page

    services.decide(c, "reject", user=cat, reason="no", verdicts={str(issue.pk): "valid"})  # settled
    figures = agreement.benchmark_agreement(bench)
    assert figures["decision"]["n"] == 1 and figures["under_blind_review"] == 0
    assert precision.benchmark_precision(bench)["overall"]["n"] == 1
    page = admin_client.get(reverse("review:diagnosis_precision", args=[bench.name])).content.decode()
    assert 'data-testid="precision-blind-left-out"' not in page


def test_progress_counts_states_reviewers_and_time_to_decide(bench, people):
    ann, bob = people["ann"], people["bob"]
    first, second, _third = _candidates(bench, 3, ann)
    services.claim(first, user=ann)
    services.decide(first, "accept", user=ann)
    services.decide(first, "accept", user=bob)
    services.decide(second, "accept", user=ann)
    report = team.progress(bench)
    states = {s["state"]: s["count"] for s in report["by_state"]}
    assert states == {"accepted": 1, "awaiting_review": 1, "needs_decisions": 1}
    assert report["left"] == {"open": 2, "decisions": 3, "adjudications": 0}
    # ann's accept of second is pending: second is still open to a blind review (bob's)
    assert {r["reviewer"]: (r.get("accept"), r.get("pending")) for r in report["by_reviewer"]} == {
        "ann": (1, 1),
        "bob": (1, None),
    }
    assert sum(d["decisions"] for d in report["decisions_per_day"]) == 3
    assert report["timed_decisions"] == 3 and report["median_claim_to_decision_s"] >= 0
    assert ClaimEvent.objects.filter(candidate=first, user=bob).exists()  # deciding claimed on the way
    assert report["by_category"][0]["total"] == 3


def test_progress_by_reviewer_tells_no_blind_reviewer_which_way_the_first_went(bench, people):
    ann, bob = people["ann"], people["bob"]
    (c,) = _candidates(bench, 1, ann)
    services.decide(c, "reject", user=ann, reason="ANN-SECRET-REASON")
    assert team.is_blind(c, bob)
    assert team.progress(bench)["by_reviewer"] == [{"reviewer": "ann", "pending": 1}]
    client = signed_in_client(bob)
    assert client.get(f"/api/benchmarks/{bench.name}/progress/").json()["by_reviewer"] == [
        {"reviewer": "ann", "pending": 1}
    ]
    panel = client.get(reverse("review:team_part", args=[bench.name, "progress"]), **HTMX).content.decode()
    assert "<td>ann</td><td>0</td><td>0</td><td>1</td>" in panel  # accepted, rejected, pending

    services.decide(c, "reject", user=bob, reason="agreed")  # settled: which way each went shows now
    assert c.status == Status.REJECTED
    assert team.progress(bench)["by_reviewer"] == [
        {"reviewer": "ann", "reject": 1},
        {"reviewer": "bob", "reject": 1},
    ]


def test_team_settings_are_checked(bench, people):
    admin = make_user("ada", "admin")
    with pytest.raises(team.TeamNotAllowed):
        team.set_team(bench, user=people["lee"], decisions_needed=3)
    with pytest.raises(team.TeamError, match="between 1 and 5"):
        team.set_team(bench, user=admin, decisions_needed=0)
    with pytest.raises(team.TeamError, match="overlap share"):
        team.set_team(bench, user=admin, overlap_share=1.5)
    with pytest.raises(team.TeamError, match="no active user named zed"):
        team.set_team(bench, user=admin, reviewers=["zed"])
    with pytest.raises(team.TeamError, match="not reviewers"):
        team.set_team(bench, user=admin, reviewers=[make_user("vic", "viewer").username])
    team.set_team(bench, user=admin, reviewers=["ann", "bob"], decisions_needed=1, overlap_share=0.25)
    assert team.team_settings(bench) == {"reviewers": ["ann", "bob"], "decisions_needed": 1, "overlap_share": 0.25}


# --- pages -----------------------------------------------------------------------------------------------------


def test_next_claims_and_opens_the_routed_candidate(bench, people):
    first, second = _candidates(bench, 2, people["ann"])
    client = signed_in_client(people["bob"])
    response = client.post(reverse("review:next"), {"benchmark": bench.name})
    assert response.status_code == 302 and response["Location"] == reverse("review:candidate", args=[first.pk])
    first.refresh_from_db()
    assert first.claimed_by == people["bob"]
    ann = signed_in_client(people["ann"])
    response = ann.post(reverse("review:next"), {"benchmark": bench.name}, **HTMX)
    assert response["HX-Redirect"] == reverse("review:candidate", args=[second.pk])
    response = ann.post(reverse("review:next"), {"benchmark": bench.name})
    assert response["Location"] == reverse("review:candidate", args=[second.pk])  # the one she holds, first
    services.decide(second, "accept", user=people["ann"])
    response = ann.post(reverse("review:next"), {"benchmark": bench.name}, follow=True)
    assert "Nothing left for you to review in team-bench" in response.content.decode()
    assert ann.post(reverse("review:next"), {"benchmark": "nope"}, follow=True).status_code == 200
    assert signed_in_client(make_user("vic", "viewer")).post(reverse("review:next")).status_code == 403


def test_team_page_and_settings_form(bench, people, admin_client):
    page = admin_client.get(reverse("review:team", args=[bench.name]))
    assert page.status_code == 200 and 'data-testid="agreement-table"' in page.content.decode()
    response = admin_client.post(
        reverse("review:team_settings", args=[bench.name]),
        {"reviewers": [people["ann"].pk], "decisions_needed": 3, "overlap_share": 0.5},
    )
    assert response.status_code == 302
    bench.refresh_from_db()
    assert bench.decisions_needed == 3 and bench.overlap_share == 0.5
    bad = admin_client.post(
        reverse("review:team_settings", args=[bench.name]), {"decisions_needed": 9, "overlap_share": 2}, **HTMX
    )
    assert bad.status_code == 200 and 'id="settings"' in bad.content.decode() and "<html" not in bad.content.decode()
    reviewer = signed_in_client(people["ann"])
    assert reviewer.post(reverse("review:team_settings", args=[bench.name]), {}).status_code == 403
    assert reviewer.get(reverse("review:team_part", args=[bench.name, "progress"]), **HTMX).status_code == 200
    assert reviewer.get(reverse("review:team_part", args=[bench.name, "nope"]), **HTMX).status_code == 404


def test_adjudication_pages(bench, people):
    (c,) = _candidates(bench, 1, people["ann"])
    services.decide(c, "accept", user=people["ann"], reason="ANN-SIDE")
    services.decide(c, "reject", user=people["bob"], reason="BOB-SIDE")
    lead = signed_in_client(people["lee"])
    listing = lead.get(reverse("review:adjudication")).content.decode()
    assert f'data-testid="adjudicate-{c.pk}"' in listing
    page = lead.get(reverse("review:adjudicate", args=[c.pk])).content.decode()
    assert "ANN-SIDE" in page and "BOB-SIDE" in page
    refused = lead.post(reverse("review:adjudicate", args=[c.pk]), {"decision": "accept", "reason": ""})
    assert refused.status_code == 400
    done = lead.post(reverse("review:adjudicate", args=[c.pk]), {"decision": "accept", "reason": "ann is right"})
    assert done.status_code == 302
    c.refresh_from_db()
    assert c.status == Status.ACCEPTED
    again = lead.post(reverse("review:adjudicate", args=[c.pk]), {"decision": "reject", "reason": "x"}, **HTMX)
    assert again.status_code == 200 and "not awaiting adjudication" in again.content.decode()
    assert signed_in_client(people["ann"]).get(reverse("review:adjudication")).status_code == 403


def test_a_lead_who_reviews_blind_sees_no_side_before_deciding(bench, people):
    ann, lee = people["ann"], people["lee"]
    (c,) = _candidates(bench, 1, ann)
    issue = add_diagnosis(c, [{"component": "checker", "severity": "major"}]).issues.get()
    services.decide(c, "reject", user=ann, reason="ANN-SECRET-REASON", verdicts={str(issue.pk): "valid"})
    assert team.is_blind(c, lee)  # a lead reviews too: the second review is blind to lee as to anyone
    lead = signed_in_client(lee)
    refused = [
        lead.get(reverse("review:adjudicate", args=[c.pk])),
        lead.post(reverse("review:adjudicate", args=[c.pk]), {"decision": "accept", "reason": "looks fine"}),
        lead.get(f"/api/candidates/{c.pk}/sides/"),
    ]
    for response in refused:
        assert response.status_code == 403
        text = response.content.decode()
        assert "ANN-SECRET-REASON" not in text and "blind to you" in text
    with pytest.raises(team.BlindSides):
        team.sides(c, lee)
    assert c.decisions.filter(adjudication=True).count() == 0

    services.decide(c, "accept", user=lee)  # lee has decided: the disagreement and both sides show now
    assert c.status == Status.AWAITING_ADJUDICATION
    assert "ANN-SECRET-REASON" in lead.get(reverse("review:adjudicate", args=[c.pk])).content.decode()
    sides = lead.get(f"/api/candidates/{c.pk}/sides/").json()
    assert [(s["reviewer"], s["decision"]) for s in sides] == [("ann", "reject"), ("lee", "accept")]


# --- API -------------------------------------------------------------------------------------------------------


def test_api_team_settings_progress_and_agreement(bench, people, admin_client):
    url = f"/api/benchmarks/{bench.name}/team/"
    assert admin_client.get(url).json() == {"reviewers": [], "decisions_needed": 2, "overlap_share": 0.0}
    body = {"reviewers": ["ann", "bob"], "decisions_needed": 2, "overlap_share": 0.2}
    assert admin_client.post(url, body, content_type="application/json").json() == body
    assert admin_client.post(url, {"decisions_needed": 0}, content_type="application/json").status_code == 400
    assert admin_client.post(url, {"reviewers": ["zed"]}, content_type="application/json").status_code == 400
    assert (
        signed_in_client(people["lee"]).post(url, {"decisions_needed": 1}, content_type="application/json").status_code
        == 403
    )
    assert admin_client.get("/api/benchmarks/no-such/team/").status_code == 404
    admin_client.post(url, {"overlap_share": 0.0}, content_type="application/json")  # ids vary: no overlap below
    (c,) = _candidates(bench, 1, people["ann"])
    services.decide(c, "accept", user=people["ann"])
    services.decide(c, "accept", user=people["bob"])
    progress = admin_client.get(f"/api/benchmarks/{bench.name}/progress/").json()
    assert progress["by_state"] == [{"state": "accepted", "label": "Accepted", "count": 1}]
    agreement = admin_client.get(f"/api/benchmarks/{bench.pk}/agreement/").json()
    assert agreement["decision"]["n"] == 1 and agreement["decision"]["pairs"][0]["reviewers"] == ["ann", "bob"]


def test_api_next_and_adjudicate(bench, people):
    first, _second = _candidates(bench, 2, people["ann"])
    ann, bob, lee = (signed_in_client(people[n]) for n in ("ann", "bob", "lee"))
    taken = ann.post("/api/candidates/next/", {"benchmark": bench.name}, content_type="application/json")
    assert taken.status_code == 200 and taken.json()["id"] == first.pk and taken.json()["claimed_by"] == "ann"
    assert ann.post("/api/candidates/next/", {"benchmark": "nope"}, content_type="application/json").status_code == 400
    ann.post(f"/api/candidates/{first.pk}/decide/", {"decision": "accept"}, content_type="application/json")
    again = ann.post(f"/api/candidates/{first.pk}/decide/", {"decision": "accept"}, content_type="application/json")
    assert again.status_code == 400 and "already" in again.json()["detail"]
    bob.post(
        f"/api/candidates/{first.pk}/decide/", {"decision": "reject", "reason": "no"}, content_type="application/json"
    )
    assert bob.get(f"/api/candidates/{first.pk}/").json()["status"] == "awaiting_adjudication"
    assert bob.get(f"/api/candidates/{first.pk}/sides/").status_code == 403
    sides = lee.get(f"/api/candidates/{first.pk}/sides/").json()
    assert [(s["reviewer"], s["decision"]) for s in sides] == [("ann", "accept"), ("bob", "reject")]
    url = f"/api/candidates/{first.pk}/adjudicate/"
    assert bob.post(url, {"decision": "accept", "reason": "x"}, content_type="application/json").status_code == 403
    assert lee.post(url, {"decision": "fix", "reason": "x"}, content_type="application/json").status_code == 400
    assert lee.post(url, {"decision": "accept"}, content_type="application/json").status_code == 400
    done = lee.post(url, {"decision": "accept", "reason": "ann is right"}, content_type="application/json")
    assert done.status_code == 201 and done.json()["adjudication"] is True
    assert lee.post(url, {"decision": "accept", "reason": "again"}, content_type="application/json").status_code == 400
    # bob has decided, ann too: both see all three decisions now
    assert len(bob.get(f"/api/candidates/{first.pk}/").json()["decisions"]) == 3
    second = ann.post("/api/candidates/next/", {}, content_type="application/json").json()["id"]
    assert ann.post("/api/candidates/next/", {}, content_type="application/json").json()["id"] == second  # held
    ann.post(f"/api/candidates/{second}/decide/", {"decision": "accept"}, content_type="application/json")
    assert ann.post("/api/candidates/next/", {}, content_type="application/json").status_code == 404
