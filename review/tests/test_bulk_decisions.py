"""Bulk accept and reject of ticked candidates: each through services.decide (the same accept gate, claims and one
decision row a candidate), on the queue page (htmx and plain) and the API."""

import json

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from review.bulk import MAX_BULK, decide_many
from review.models import BenchmarkCandidate, ClaimEvent, ReviewDecision
from review.services import NotAllowed, ReviewError, history
from review.tests.helpers import claim_for, make_candidate, row_html, sanity

Status = BenchmarkCandidate.Status
HTMX = {"HTTP_HX_REQUEST": "true"}
QUEUE = "/review/"
BULK = reverse("review:bulk_decide")


@pytest.fixture
def three(benchmark):
    """`good` and `fine` have passing sanity reports; `crashy`'s checker crashed: the accept gate refuses it."""
    good = make_candidate(benchmark, "good-task", issues=[])
    fine = make_candidate(benchmark, "fine-task", issues=["minor"])
    crashy = make_candidate(benchmark, "crashy-task", issues=["blocker"])
    sanity(good.task.current_revision)
    sanity(fine.task.current_revision)
    sanity(crashy.task.current_revision, crashed=True)
    return good, fine, crashy


def statuses(*candidates) -> list[str]:
    return [BenchmarkCandidate.objects.get(pk=c.pk).status for c in candidates]


# --- the service ---------------------------------------------------------------------------------------------------


def test_each_candidate_goes_through_the_accept_gate(three, reviewer):
    good, fine, crashy = three
    result = decide_many([good.pk, crashy.pk, fine.pk, good.pk], "accept", user=reviewer, reason="checked by hand")
    assert [i.task for i in result.items] == ["good-task", "crashy-task", "fine-task"]  # in order, each once
    assert [i.task for i in result.decided] == ["good-task", "fine-task"]
    (refused,) = result.refused
    assert refused.status == 409 and refused.refused.startswith("cannot accept: the latest sanity check found")
    assert result.summary() == "Accepted 2, refused 1."
    assert statuses(good, fine, crashy) == [Status.ACCEPTED, Status.ACCEPTED, Status.AWAITING_REVIEW]
    # The audit trail of each: one decision row (reviewer, reason, revision), the claim taken on the way.
    for candidate in (good, fine):
        (row,) = ReviewDecision.objects.filter(candidate=candidate)
        assert (row.decision, row.reviewer, row.reason) == ("accept", reviewer, "checked by hand")
        assert row.revision == candidate.task.current_revision and row.override_reason == ""
        assert [e["what"] for e in history(candidate) if e["kind"] == "decision"] == ["accept"]
    assert ClaimEvent.objects.filter(candidate=good, user=reviewer, action="claim").count() == 1
    # The refused one: no decision and no claim (its transaction was rolled back).
    assert not ReviewDecision.objects.filter(candidate=crashy).exists()
    assert not ClaimEvent.objects.filter(candidate=crashy).exists()
    assert BenchmarkCandidate.objects.get(pk=crashy.pk).claimed_by is None


def test_another_reviewers_claim_and_a_closed_candidate_are_refused_alone(three, reviewer, second_reviewer):
    good, fine, crashy = three
    claim_for(fine, second_reviewer)
    decide_many([crashy.pk], "reject", user=reviewer, reason="the checker crashes")
    result = decide_many([good.pk, fine.pk, crashy.pk, 999_999], "reject", user=reviewer, reason="not for this one")
    assert [i.task for i in result.decided] == ["good-task"]
    reasons = {i.task or i.candidate_id: (i.status, i.refused) for i in result.refused}
    assert reasons["fine-task"][0] == 409 and "rob_reviewer holds this candidate" in reasons["fine-task"][1]
    assert reasons["crashy-task"] == (400, "the candidate is already rejected")
    assert reasons[999_999] == (404, "there is no candidate #999999")
    assert statuses(good, fine, crashy) == [Status.REJECTED, Status.IN_REVIEW, Status.REJECTED]
    assert ReviewDecision.objects.filter(candidate=crashy).count() == 1  # not rejected twice


def test_what_would_refuse_every_candidate_decides_nothing(three, reviewer, viewer):
    good, _, _ = three
    for kwargs, message in [
        ({"user": viewer, "decision": "accept"}, "needs the reviewer role"),
        ({"user": reviewer, "decision": "fix"}, "a bulk decision is accept or reject"),
        ({"user": reviewer, "decision": "reject"}, "rejecting needs a reason"),
    ]:
        with pytest.raises(ReviewError, match=message) as caught:
            decide_many([good.pk], **kwargs)
        assert isinstance(caught.value, NotAllowed) == (kwargs["user"] == viewer)
    with pytest.raises(ReviewError, match="no candidate selected"):
        decide_many([], "accept", user=reviewer)
    with pytest.raises(ReviewError, match=f"at most {MAX_BULK}"):
        decide_many(range(1, MAX_BULK + 2), "accept", user=reviewer)
    assert not ReviewDecision.objects.exists() and not ClaimEvent.objects.exists()


# --- the queue page ------------------------------------------------------------------------------------------------


def test_the_queue_offers_ticks_to_reviewers_only_on_rows_they_may_decide(
    reviewer_client, viewer_client, three, benchmark, second_reviewer
):
    good, fine, crashy = three
    claim_for(fine, second_reviewer)
    done = make_candidate(benchmark, "done-task", status=Status.ACCEPTED)
    response = reviewer_client.get(QUEUE)
    html = response.content.decode()
    assert 'id="bulk-form"' in html and "Accept ticked" in html and "Reject ticked" in html
    tick = 'name="ids" value="{}" form="bulk-form"'
    assert tick.format(good.pk) in row_html(response, good) and tick.format(crashy.pk) in row_html(response, crashy)
    assert 'name="ids"' not in row_html(response, fine)  # held by another reviewer
    assert 'name="ids"' not in row_html(response, done)  # decided already
    viewer_html = viewer_client.get(QUEUE).content.decode()
    assert 'id="bulk-form"' not in viewer_html and 'name="ids"' not in viewer_html


def test_htmx_bulk_accept_reports_each_refusal_and_swaps_the_rows(reviewer_client, reviewer, three):
    good, fine, crashy = three
    response = reviewer_client.post(
        BULK,
        {"ids": [good.pk, crashy.pk, fine.pk], "decision": "accept", "reason": "", "next": f"{QUEUE}?sort=task"},
        **HTMX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert '<strong data-testid="bulk-summary">Accepted 2, refused 1.</strong>' in html
    start = html.index('data-testid="bulk-refused"')
    refused = html[start : html.index("</ul>", start)]
    assert "crashy-task" in refused and "cannot accept: the latest sanity check found the checker crashed" in refused
    assert "good-task" not in refused
    for candidate in three:  # every row acted on comes back out of band, with its new state
        assert (
            f'<tr id="candidate-{candidate.pk}" data-shortcut-item data-id="{candidate.pk}" hx-swap-oob="true"' in html
        )
    assert json.loads(response["HX-Trigger"]) == {"queue-changed": {"ids": [good.pk, fine.pk]}}
    assert statuses(good, fine, crashy) == [Status.ACCEPTED, Status.ACCEPTED, Status.AWAITING_REVIEW]
    assert ReviewDecision.objects.filter(reviewer=reviewer, decision="accept").count() == 2


def test_htmx_bulk_reject_without_a_reason_decides_nothing(reviewer_client, three):
    good, fine, _ = three
    response = reviewer_client.post(BULK, {"ids": [good.pk, fine.pk], "decision": "reject", "reason": " "}, **HTMX)
    assert response.status_code == 200 and "HX-Trigger" not in response
    assert "Nothing was decided: Rejecting needs a reason." in response.content.decode()
    nothing = reviewer_client.post(BULK, {"decision": "accept"}, **HTMX)
    assert "Nothing was decided: Select at least one candidate." in nothing.content.decode()
    assert not ReviewDecision.objects.exists()


def test_plain_bulk_reject_returns_to_the_queue_with_messages(reviewer_client, three, reviewer, second_reviewer):
    good, fine, crashy = three
    claim_for(crashy, second_reviewer)
    response = reviewer_client.post(
        BULK,
        {
            "ids": [good.pk, fine.pk, crashy.pk],
            "decision": "reject",
            "reason": "duplicates of t-1",
            "next": f"{QUEUE}?status=awaiting_review",
        },
    )
    assert response.status_code == 302 and response.url == f"{QUEUE}?status=awaiting_review"
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert shown[0] == "Rejected 2, refused 1."
    assert shown[1].startswith("Refused crashy-task: rob_reviewer holds this candidate until")
    assert statuses(good, fine, crashy) == [Status.REJECTED, Status.REJECTED, Status.IN_REVIEW]
    for candidate in (good, fine):
        (row,) = ReviewDecision.objects.filter(candidate=candidate)
        assert (row.decision, row.reviewer, row.reason) == ("reject", reviewer, "duplicates of t-1")
    # A next that leaves the site is not followed.
    away = reviewer_client.post(BULK, {"ids": [good.pk], "decision": "accept", "next": "https://evil.example/"})
    assert away.url == QUEUE


def test_viewers_and_outsiders_cannot_bulk_decide(viewer_client, outsider_client, client, three):
    good, _, _ = three
    for who in (viewer_client, outsider_client):
        assert who.post(BULK, {"ids": [good.pk], "decision": "accept"}).status_code == 403
    assert client.post(BULK, {"ids": [good.pk], "decision": "accept"}).url.startswith("/login/")
    assert not ReviewDecision.objects.exists()


# --- the API -------------------------------------------------------------------------------------------------------


def test_api_bulk_decide(api_as, reviewer, viewer, three):
    good, fine, crashy = three
    url = "/api/candidates/bulk-decide/"
    response = api_as(reviewer).post(
        url, {"candidates": [good.pk, crashy.pk, 424242], "decision": "accept"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["decision"] == "accept" and body["summary"] == "Accepted 1, refused 2."
    (decided,) = body["decided"]
    assert decided["candidate"] == good.pk and decided["task"] == "good-task"
    assert decided["decision"]["reviewer"] == "rita_reviewer" and decided["decision"]["decision"] == "accept"
    refused = {r["candidate"]: r for r in body["refused"]}
    assert refused[crashy.pk]["status"] == 409 and refused[crashy.pk]["reason"].startswith("cannot accept")
    assert refused[424242] == {
        "candidate": 424242,
        "task": "",
        "reason": "there is no candidate #424242",
        "status": 404,
    }
    no_reason = api_as(reviewer).post(url, {"candidates": [fine.pk], "decision": "reject"}, format="json")
    assert no_reason.status_code == 400 and no_reason.json() == {"detail": "rejecting needs a reason"}
    fix = api_as(reviewer).post(url, {"candidates": [fine.pk], "decision": "fix"}, format="json")
    assert fix.status_code == 400 and "decision" in fix.json()
    too_many = api_as(reviewer).post(
        url, {"candidates": list(range(1, MAX_BULK + 2)), "decision": "accept"}, format="json"
    )
    assert too_many.status_code == 400 and "candidates" in too_many.json()
    assert api_as(viewer).post(url, {"candidates": [fine.pk], "decision": "accept"}, format="json").status_code == 403
    assert statuses(good, fine, crashy) == [Status.ACCEPTED, Status.AWAITING_REVIEW, Status.AWAITING_REVIEW]


# --- ids that are no ids: a clear refusal, never a 500 ----------------------------------------------------------------

NOT_IDS = {
    "superscript two": "²",  # str.isdigit() says yes, int() says no
    "5,000 nines": "9" * 5000,
    "20 digits": "99999999999999999999",
    "one past the largest id": str(2**63),
    "zero": "0",
}


@pytest.mark.parametrize("value", NOT_IDS.values(), ids=NOT_IDS.keys())
def test_the_queue_form_refuses_what_is_not_a_candidate_id(reviewer_client, three, value):
    good, _, _ = three
    htmx = reviewer_client.post(BULK, {"ids": [good.pk, value], "decision": "accept"}, **HTMX)
    assert htmx.status_code == 200 and "HX-Trigger" not in htmx
    assert f"Nothing was decided: Not a candidate id: {value[:40]}" in htmx.content.decode()
    plain = reviewer_client.post(BULK, {"ids": [value], "decision": "accept"})
    assert plain.status_code == 302
    (shown,) = [str(m) for m in get_messages(plain.wsgi_request)]
    assert shown.startswith("Nothing was decided: Not a candidate id: ")
    assert not ReviewDecision.objects.exists()


@pytest.mark.parametrize("value", [10**20, 2**63, 0, -1], ids=["20 digits", "one past the largest id", "0", "-1"])
def test_the_api_refuses_what_is_not_a_candidate_id(api_as, reviewer, three, value):
    good, _, _ = three
    response = api_as(reviewer).post(
        "/api/candidates/bulk-decide/", {"candidates": [good.pk, value], "decision": "accept"}, format="json"
    )
    assert response.status_code == 400, response.content
    assert list(response.json()) == ["candidates"]
    assert not ReviewDecision.objects.exists()


def test_the_largest_id_is_an_id_that_names_no_candidate(api_as, reviewer, three):
    response = api_as(reviewer).post(
        "/api/candidates/bulk-decide/", {"candidates": [2**63 - 1], "decision": "accept"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["refused"] == [
        {"candidate": 2**63 - 1, "task": "", "reason": f"there is no candidate #{2**63 - 1}", "status": 404}
    ]
