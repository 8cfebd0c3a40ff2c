"""The review queue page: roles, filters, sorts, counts, paging, claims, decisions from the queue and diagnoses."""

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import Benchmark
from jobs.models import JobRun
from review.job_kinds import DIAGNOSE_BATCH_JOB, DIAGNOSE_JOB
from review.models import BenchmarkCandidate, ClaimEvent, ReviewDecision
from review.tests.helpers import add_diagnosis, claim_for, make_candidate, row_html, sanity
from review.views.queue import PAGE_SIZE
from tasks.models import BenchmarkCategory, Task

Status = BenchmarkCandidate.Status
HTMX = {"HTTP_HX_REQUEST": "true"}
QUEUE = "/review/"
BASE_DIR = Path(__file__).resolve().parent.parent.parent


def listed(response) -> list[str]:
    """The task ids of the rows on show, in order."""
    return re.findall(r"data-shortcut-open>([^<]+)</a>", response.content.decode())


def status_counts(response) -> dict[str, int]:
    found = re.findall(
        r'data-testid="status-(\w+)">[^<]*<span class="count">([\d,]+)</span>', response.content.decode()
    )
    return {name: int(n.replace(",", "")) for name, n in found}


@pytest.fixture
def other_benchmark(db):
    return Benchmark.objects.create(name="other-bench")


@pytest.fixture
def queue_rows(benchmark, other_benchmark, reviewer):
    """Five candidates that differ in every filtered and sorted column. `alpha` was diagnosed twice: its latest
    diagnosis found a minor issue only, the earlier one a blocker."""
    now = timezone.now()
    alpha = make_candidate(benchmark, "alpha", category="analysis-reasoning", issues=["blocker"], strong_mean=0.9)
    add_diagnosis(alpha, [{"severity": "minor"}])
    rows = {
        "alpha": alpha,
        "beta": make_candidate(
            benchmark, "beta", category="software-development", issues=["major", "minor", "minor"], strong_mean=0.2
        ),
        "gamma": make_candidate(
            other_benchmark,
            "gamma",
            title="Plan the garden beds",
            category="analysis-reasoning",
            issues=[],
            strong_mean=0.5,
        ),
        "delta": make_candidate(other_benchmark, "delta"),
        "epsilon": make_candidate(benchmark, "epsilon", issues=["minor"]),
    }
    claim_for(rows["epsilon"], reviewer)
    for minutes, name in enumerate(["gamma", "alpha", "epsilon", "delta", "beta"]):  # gamma updated last
        BenchmarkCandidate.objects.filter(pk=rows[name].pk).update(updated_at=now - timedelta(minutes=minutes))
    return rows


# --- roles -------------------------------------------------------------------------------------------------------


def test_anonymous_is_sent_to_log_in(client, candidate):
    for response in (client.get(QUEUE), client.post(reverse("review:claim", args=[candidate.pk]))):
        assert response.status_code == 302 and response.url.startswith("/login/")


@pytest.mark.parametrize(
    "method, name, with_pk",
    [
        ("get", "review:queue", False),
        ("get", "review:queue_row", True),
        ("post", "review:claim", True),
        ("post", "review:release", True),
        ("get", "review:queue_decide", True),
        ("post", "review:queue_decide", True),
        ("post", "review:diagnose_one", True),
        ("post", "review:diagnose_all", False),
    ],
)
def test_outsider_is_refused_everywhere(outsider_client, candidate, method, name, with_pk):
    url = reverse(name, args=[candidate.pk] if with_pk else [])
    response = getattr(outsider_client, method)(url, {"decision": "reject", "reason": "x"} if method == "post" else {})
    assert response.status_code == 403
    assert not ReviewDecision.objects.exists() and not ClaimEvent.objects.exists() and not JobRun.objects.exists()


def test_viewer_reads_the_queue_without_any_action(viewer_client, candidate, reviewer):
    claim_for(candidate, reviewer)
    response = viewer_client.get(QUEUE)
    assert response.status_code == 200 and listed(response) == ["t-review"]
    html = response.content.decode()
    assert "rita_reviewer" in row_html(response, candidate)  # everyone sees who holds a candidate
    assert "data-key=" not in html and reverse("review:claim", args=[candidate.pk]) not in html
    assert "Diagnose" not in html and "<th>Actions</th>" not in html
    assert viewer_client.post(reverse("review:release", args=[candidate.pk])).status_code == 403
    assert viewer_client.get(reverse("review:queue_decide", args=[candidate.pk])).status_code == 403


def test_reviewer_and_admin_see_their_actions(reviewer_client, admin_client, candidate):
    html = reviewer_client.get(QUEUE).content.decode()
    assert reverse("review:claim", args=[candidate.pk]) in html
    assert 'data-key="a"' in html and 'data-key="f"' in html and 'data-key="r"' in html
    assert "Diagnose all" not in html and reverse("review:diagnose_one", args=[candidate.pk]) not in html
    html = admin_client.get(QUEUE).content.decode()
    assert "Diagnose all awaiting diagnosis" in html and reverse("review:diagnose_one", args=[candidate.pk]) in html
    assert admin_client.get(QUEUE).context["nav"] == "review"


# --- filters, sorts, counts, pages ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query, expected",
    [
        ("", {"alpha", "beta", "gamma", "delta", "epsilon"}),
        ("benchmark=other-bench", {"gamma", "delta"}),
        ("category=analysis-reasoning", {"alpha", "gamma"}),
        ("severity=blocker", set()),  # alpha's blocker was in its earlier diagnosis
        ("severity=major", {"beta"}),
        ("severity=minor", {"alpha", "epsilon"}),
        ("severity=none", {"gamma", "delta"}),
        ("status=awaiting_diagnosis", {"delta"}),
        ("status=in_review", {"epsilon"}),
        ("mine=on", {"epsilon"}),
        ("q=bet", {"beta"}),
        ("q=GARDEN", {"gamma"}),
        ("benchmark=claw-bench&severity=minor&category=analysis-reasoning", {"alpha"}),
        ("severity=bogus&status=nope&benchmark=missing", {"alpha", "beta", "gamma", "delta", "epsilon"}),
    ],
)
def test_filters(reviewer_client, queue_rows, query, expected):
    response = reviewer_client.get(f"{QUEUE}?{query}")
    assert response.status_code == 200
    assert set(listed(response)) == expected


def test_mine_is_per_user(client, queue_rows, second_reviewer):
    client.force_login(second_reviewer)
    assert listed(client.get(f"{QUEUE}?mine=on")) == []


@pytest.mark.parametrize(
    "sort, expected",
    [
        ("", ["gamma", "alpha", "epsilon", "delta", "beta"]),
        ("updated", ["gamma", "alpha", "epsilon", "delta", "beta"]),
        ("severity", ["beta", "alpha", "epsilon", "gamma", "delta"]),  # then no issues / undiagnosed, by update
        ("task", ["alpha", "beta", "delta", "epsilon", "gamma"]),
        ("strong", ["beta", "gamma", "alpha", "delta", "epsilon"]),  # lowest first; no score last, by id
    ],
)
def test_sorts(reviewer_client, queue_rows, sort, expected):
    assert listed(reviewer_client.get(f"{QUEUE}?sort={sort}")) == expected


@pytest.fixture
def lazy_rows(queue_rows):
    """What a lazy agent earns with each task's current checker: alpha 0.78, beta 0.15, gamma 0, delta 1 (an earlier
    report: 0); epsilon never sanity-checked."""
    for name, lazy in (("alpha", 0.78), ("beta", 0.15), ("gamma", 0.0), ("delta", 0.0), ("delta", 1.0)):
        sanity(queue_rows[name].task.current_revision, lazy=lazy)
    return queue_rows


@pytest.mark.parametrize(
    "query, expected",
    [
        ("lazy=0", {"alpha", "beta", "delta"}),
        ("lazy=0.2", {"alpha", "delta"}),
        ("lazy=0.5", {"alpha", "delta"}),
        ("lazy=0.5&benchmark=other-bench", {"delta"}),
        ("lazy=bogus", {"alpha", "beta", "gamma", "delta", "epsilon"}),
    ],
)
def test_filter_by_what_a_lazy_agent_earns(reviewer_client, lazy_rows, query, expected):
    assert set(listed(reviewer_client.get(f"{QUEUE}?{query}"))) == expected


def test_sort_by_lazy_score_and_the_rows_show_it(reviewer_client, lazy_rows):
    response = reviewer_client.get(f"{QUEUE}?sort=lazy")
    assert listed(response) == ["delta", "alpha", "beta", "gamma", "epsilon"]  # never checked: last
    assert 'data-testid="lazy-score">0.78<' in row_html(response, lazy_rows["alpha"])
    assert 'data-testid="lazy-score"><span class="muted" title="Not sanity-checked">' in row_html(
        response, lazy_rows["epsilon"]
    )
    assert status_counts(reviewer_client.get(f"{QUEUE}?lazy=0.5"))["all"] == 2


def test_the_api_filters_candidates_by_lazy_score(api_as, reviewer, lazy_rows):
    body = api_as(reviewer).get("/api/candidates/", {"lazy_above": 0.5}).json()
    assert sorted(row["task"] for row in body["results"]) == ["alpha", "delta"]
    assert api_as(reviewer).get("/api/candidates/", {"lazy_above": 2}).status_code == 400


def test_sort_by_category_follows_the_taxonomy_order(reviewer_client, queue_rows):
    analysis, software = (BenchmarkCategory.objects.get(slug=s) for s in ("analysis-reasoning", "software-development"))
    by_category = ["alpha", "gamma", "beta"] if analysis.order < software.order else ["beta", "alpha", "gamma"]
    assert listed(reviewer_client.get(f"{QUEUE}?sort=category")) == by_category + ["delta", "epsilon"]


def test_rows_show_issues_scores_and_claims(reviewer_client, queue_rows, second_reviewer):
    claim_for(queue_rows["beta"], second_reviewer)
    response = reviewer_client.get(QUEUE)
    beta = row_html(response, queue_rows["beta"])
    assert 'class="badge sev-major"' in beta and "1 major · 2 minor" in beta
    assert "0.20" in beta and "rob_reviewer" in beta and "until" in beta
    assert 'data-key="a"' not in beta  # held by someone else: no accept or reject
    assert "<strong>you</strong>" in row_html(response, queue_rows["epsilon"])
    assert "No issues" in row_html(response, queue_rows["gamma"])
    assert "Not diagnosed" in row_html(response, queue_rows["delta"])
    assert "1 minor" in row_html(response, queue_rows["alpha"])  # the latest diagnosis only


def test_status_counts_follow_the_other_filters(reviewer_client, queue_rows):
    response = reviewer_client.get(QUEUE)
    assert status_counts(response) == {
        "all": 5,
        "awaiting_diagnosis": 1,
        "diagnosis_failed": 0,
        "awaiting_review": 3,
        "in_review": 1,
        "accepted": 0,
        "rejected": 0,
        "awaiting_adjudication": 0,
    }
    # The status filter itself does not change the tabs: they say where each click leads.
    response = reviewer_client.get(f"{QUEUE}?benchmark=claw-bench&status=awaiting_review")
    assert listed(response) == ["alpha", "beta"]
    assert status_counts(response)["all"] == 3 and status_counts(response)["in_review"] == 1
    assert "2 candidates" in response.content.decode()
    html = response.content.decode()
    assert 'href="/review/?benchmark=claw-bench"' in html  # "All" drops the status, keeps the benchmark
    assert 'href="?benchmark=claw-bench&amp;status=in_review"' in html


def test_pages_and_the_htmx_partial(reviewer_client, benchmark):
    tasks = Task.objects.bulk_create(Task(external_id=f"bulk-{i:03d}", title=f"Bulk {i}") for i in range(PAGE_SIZE + 5))
    BenchmarkCandidate.objects.bulk_create(BenchmarkCandidate(task=t, benchmark=benchmark) for t in tasks)
    first = reviewer_client.get(f"{QUEUE}?sort=task")
    assert len(listed(first)) == PAGE_SIZE and listed(first)[0] == "bulk-000"
    html = first.content.decode()
    assert "page 1 of 2" in html and 'rel="next" href="?sort=task&amp;page=2"' in html
    second = reviewer_client.get(f"{QUEUE}?sort=task&page=2", **HTMX)
    assert listed(second) == [f"bulk-{i:03d}" for i in range(PAGE_SIZE, PAGE_SIZE + 5)]
    html = second.content.decode()
    assert "<html" not in html and 'id="status-filter" hx-swap-oob="true"' in html
    assert "HX-Request" in second["Vary"]
    restored = reviewer_client.get(f"{QUEUE}?sort=task&page=2", HTTP_HX_HISTORY_RESTORE_REQUEST="true", **HTMX)
    assert "<html" in restored.content.decode() and "hx-swap-oob" not in restored.content.decode()
    assert len(listed(reviewer_client.get(f"{QUEUE}?page=99"))) == 5  # past the end: the last page


def test_query_count_does_not_grow_with_rows(reviewer_client, benchmark, reviewer, django_assert_max_num_queries):
    def fill(start, n):
        for i in range(start, start + n):
            c = make_candidate(benchmark, f"q-{i:03d}", category="analysis-reasoning", issues=["major", "minor"])
            if i % 3 == 0:
                claim_for(c, reviewer)

    def count(url):
        with CaptureQueriesContext(connection) as ctx:
            assert reviewer_client.get(url).status_code == 200
        return len(ctx.captured_queries)

    fill(0, 2)
    urls = [QUEUE, f"{QUEUE}?sort=severity&severity=major", f"{QUEUE}?category=analysis-reasoning&mine=on&q=q-"]
    few = [count(url) for url in urls]
    fill(2, 18)
    with django_assert_max_num_queries(max(few)):
        reviewer_client.get(QUEUE)
    assert [count(url) for url in urls] == few


# --- claims ------------------------------------------------------------------------------------------------------


def test_claim_and_release_from_the_row(reviewer_client, client, candidate, reviewer, second_reviewer):
    add_diagnosis(candidate, [])
    claim_url, release_url = (reverse(name, args=[candidate.pk]) for name in ("review:claim", "review:release"))
    response = reviewer_client.post(claim_url, {"target": "row", "next": QUEUE}, **HTMX)
    assert response.status_code == 200 and response.content.decode().lstrip().startswith("<tr")
    assert "<strong>you</strong>" in response.content.decode() and release_url in response.content.decode()
    assert json.loads(response["HX-Trigger"]) == {"queue-changed": {"id": candidate.pk}}  # the counts refresh
    candidate.refresh_from_db()
    assert candidate.held_by() == reviewer and candidate.status == Status.IN_REVIEW

    client.force_login(second_reviewer)
    assert "rita_reviewer" in row_html(client.get(QUEUE), candidate)  # everyone sees who holds it
    conflict = client.post(claim_url, {"target": "row"}, **HTMX)
    assert conflict.status_code == 200 and "HX-Trigger" not in conflict
    assert re.search(r'role="alert">rita_reviewer holds this candidate until \d\d:\d\d UTC', conflict.content.decode())
    refused = client.post(release_url, {"target": "row"}, **HTMX)
    assert re.search(r"rita_reviewer holds this candidate until \d\d:\d\d UTC, not you", refused.content.decode())
    candidate.refresh_from_db()
    assert candidate.held_by() == reviewer

    released = reviewer_client.post(release_url, {"target": "row"}, **HTMX)
    assert claim_url in released.content.decode() and "<strong>you</strong>" not in released.content.decode()
    candidate.refresh_from_db()
    assert candidate.claimed_by is None and candidate.status == Status.AWAITING_REVIEW


def test_plain_claim_redirects_to_a_safe_next_with_a_message(reviewer_client, client, candidate, second_reviewer):
    url = reverse("review:claim", args=[candidate.pk])
    response = reviewer_client.post(url, {"next": f"{QUEUE}?status=in_review"})
    assert response.status_code == 302 and response.url == f"{QUEUE}?status=in_review"
    assert [str(m) for m in get_messages(response.wsgi_request)][0].startswith("You hold t-review until")
    client.force_login(second_reviewer)
    response = client.post(url, {"next": "https://evil.example/steal"})
    assert response.status_code == 302 and response.url == QUEUE
    assert "rita_reviewer holds this candidate" in str(list(get_messages(response.wsgi_request))[0])
    # htmx without target=row (the candidate page's plain forms) is redirected too
    assert client.post(reverse("review:release", args=[candidate.pk]), **HTMX).status_code == 302


# --- decisions from the queue ------------------------------------------------------------------------------------


def decide(client, candidate, htmx=True, **data):
    return client.post(reverse("review:queue_decide", args=[candidate.pk]), data, **(HTMX if htmx else {}))


def test_the_decision_form_is_a_dialog_fragment_or_a_page(reviewer_client, admin_client, candidate):
    url = reverse("review:queue_decide", args=[candidate.pk])
    fragment = reviewer_client.get(f"{url}?decision=reject", **HTMX).content.decode()
    assert "<html" not in fragment and "hx-post" in fragment and "required autofocus" in fragment
    assert "override_reason" not in fragment
    page = reviewer_client.get(f"{url}?decision=reject&next=/review/?page=2").content.decode()
    assert "<html" in page and "hx-post" not in page and 'href="/review/?page=2">Cancel' in page
    assert 'name="override_reason"' in admin_client.get(f"{url}?decision=accept", **HTMX).content.decode()
    assert 'name="override_reason"' not in admin_client.get(f"{url}?decision=reject", **HTMX).content.decode()


def test_accept_claims_then_records_and_updates_the_row(reviewer_client, reviewer, candidate):
    add_diagnosis(candidate, [{"severity": "minor"}])
    sanity(candidate.task.current_revision)
    response = decide(reviewer_client, candidate, decision="accept", reason="clean task")
    assert response.status_code == 200
    events = json.loads(response["HX-Trigger"])  # closes the dialog; refreshes the counts
    assert events == {
        "queue-decided": {"id": candidate.pk, "decision": "accept"},
        "queue-changed": {"id": candidate.pk},
    }
    assert 'data-testid="status">Accepted' in response.content.decode() and "data-key" not in response.content.decode()
    row = ReviewDecision.objects.get()
    assert (row.decision, row.reviewer, row.reason) == ("accept", reviewer, "clean task")
    assert row.revision == candidate.task.current_revision
    candidate.refresh_from_db()
    assert candidate.status == Status.ACCEPTED and candidate.claimed_by is None
    assert ClaimEvent.objects.filter(candidate=candidate, user=reviewer, action="claim").count() == 1


def test_blocked_accept_shows_why_and_records_nothing(reviewer_client, reviewer, candidate):
    add_diagnosis(candidate, [])
    sanity(candidate.task.current_revision, crashed=True)
    response = decide(reviewer_client, candidate, decision="accept", reason="looks fine to me")
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#queue-dialog" and response["HX-Reswap"] == "innerHTML settle:0ms"
    html = response.content.decode()
    assert "cannot accept: the latest sanity check found the checker crashed" in html
    assert ">looks fine to me</textarea>" in html  # what was typed is kept
    assert "<template>" in html and "<strong>you</strong>" not in html  # the row behind: a refusal claims nothing
    assert not ReviewDecision.objects.exists()
    candidate.refresh_from_db()
    assert candidate.status == Status.AWAITING_REVIEW and candidate.held_by() is None

    # The way on: fix the checker on the candidate's page (linked), or an admin's override.
    assert "To accept, fix the checker (its sanity check runs again)" in html
    assert f'href="{reverse("review:candidate", args=[candidate.pk])}" data-testid="blocked-next"' in html

    plain = decide(reviewer_client, candidate, htmx=False, decision="accept")
    assert plain.status_code == 409 and "cannot accept" in plain.content.decode()


def test_an_accept_before_any_sanity_check_says_to_run_one(reviewer_client, candidate):
    add_diagnosis(candidate, [])
    html = decide(reviewer_client, candidate, decision="accept").content.decode()
    assert (
        "cannot accept: the checker of this revision has not been sanity-checked yet. To accept, run its sanity" in html
    )
    assert 'data-testid="blocked-next"' in html and "to run its sanity check or fix its checker" in html
    assert not ReviewDecision.objects.exists()


def test_admin_overrides_a_failed_sanity_check(admin_client, reviewer_client, admin_user, candidate):
    add_diagnosis(candidate, [])
    sanity(candidate.task.current_revision, over_lenient=True)
    refused = decide(reviewer_client, candidate, decision="accept", override_reason="I checked it")
    assert "overriding the sanity check needs the admin role" in refused.content.decode()
    assert decide(reviewer_client, candidate, htmx=False, decision="accept", override_reason="x").status_code == 403
    assert not ReviewDecision.objects.exists()

    BenchmarkCandidate.objects.filter(pk=candidate.pk).update(claimed_by=None, claim_expires_at=None)
    response = decide(admin_client, candidate, decision="accept", override_reason="the lenient run is a known flake")
    assert 'data-testid="status">Accepted' in response.content.decode()
    row = ReviewDecision.objects.get()
    assert (row.decision, row.reviewer) == ("accept", admin_user)
    assert row.override_reason == "the lenient run is a known flake"


def test_reject_needs_a_reason(reviewer_client, reviewer, candidate):
    add_diagnosis(candidate, [])
    response = decide(reviewer_client, candidate, decision="reject", reason="   ")
    assert response.status_code == 200 and response["HX-Retarget"] == "#queue-dialog"
    assert "Rejecting needs a reason." in response.content.decode()
    assert decide(reviewer_client, candidate, htmx=False, decision="reject").status_code == 400
    candidate.refresh_from_db()
    assert not ReviewDecision.objects.exists() and candidate.claimed_by is None
    assert candidate.status == Status.AWAITING_REVIEW

    response = decide(reviewer_client, candidate, decision="reject", reason="the checker cannot be satisfied")
    assert 'data-testid="status">Rejected' in response.content.decode()
    row = ReviewDecision.objects.get()
    assert (row.decision, row.reason) == ("reject", "the checker cannot be satisfied")
    candidate.refresh_from_db()
    assert candidate.status == Status.REJECTED


def test_plain_reject_redirects_with_a_message(reviewer_client, candidate):
    response = decide(reviewer_client, candidate, htmx=False, decision="reject", reason="dup", next="/review/?page=2")
    assert response.status_code == 302 and response.url == "/review/?page=2"
    assert str(list(get_messages(response.wsgi_request))[0]) == "Rejected t-review."


def test_deciding_a_candidate_someone_else_holds_is_refused(reviewer_client, candidate, second_reviewer):
    claim_for(candidate, second_reviewer)
    response = decide(reviewer_client, candidate, decision="reject", reason="a duplicate of t-17")
    html = response.content.decode()
    assert "rob_reviewer holds this candidate until" in html and ">a duplicate of t-17</textarea>" in html
    assert not ReviewDecision.objects.exists()
    assert decide(reviewer_client, candidate, htmx=False, decision="reject", reason="x").status_code == 409


def test_fixing_is_not_a_queue_decision(reviewer_client, candidate):
    response = decide(reviewer_client, candidate, htmx=False, decision="fix", reason="edited")
    assert response.status_code == 400 and "Fixing happens on the candidate page." in response.content.decode()
    assert not ReviewDecision.objects.exists()


def test_a_decided_candidate_cannot_be_decided_again(reviewer_client, candidate):
    decide(reviewer_client, candidate, decision="reject", reason="broken")
    response = decide(reviewer_client, candidate, decision="reject", reason="again")
    assert "the candidate is already rejected" in response.content.decode()
    assert ReviewDecision.objects.count() == 1


# --- diagnoses ---------------------------------------------------------------------------------------------------


def test_diagnose_all_starts_one_batch_of_the_filtered_benchmark(
    admin_client, reviewer_client, benchmark, other_benchmark, admin_user
):
    waiting = [make_candidate(benchmark, f"w-{i}") for i in range(3)]
    make_candidate(benchmark, "diagnosed", issues=[])
    make_candidate(other_benchmark, "elsewhere")
    url = reverse("review:diagnose_all")
    assert reviewer_client.post(url, {"benchmark": "claw-bench"}).status_code == 403

    response = admin_client.post(url, {"benchmark": "claw-bench"}, **HTMX)
    run = JobRun.objects.get(kind=DIAGNOSE_BATCH_JOB)
    assert run.params == {"candidate_ids": [c.pk for c in waiting]} and run.created_by == admin_user
    assert f'id="batch-progress-{run.pk}"' in response.content.decode()
    # A reload keeps the progress bar while the batch runs.
    assert f'id="batch-progress-{run.pk}"' in admin_client.get(QUEUE).content.decode()
    JobRun.objects.filter(pk=run.pk).update(status=JobRun.Status.SUCCEEDED)
    assert f'id="batch-progress-{run.pk}"' not in admin_client.get(QUEUE).content.decode()

    empty = Benchmark.objects.create(name="empty-bench")
    response = admin_client.post(url, {"benchmark": empty.name}, **HTMX)
    assert "Nothing awaits diagnosis in empty-bench" in response.content.decode()
    assert "There is no benchmark called" in admin_client.post(url, {"benchmark": "nope"}, **HTMX).content.decode()
    assert JobRun.objects.count() == 1

    plain = admin_client.post(url, {})  # all benchmarks, without JS: the job's page
    latest = JobRun.objects.filter(kind=DIAGNOSE_BATCH_JOB).latest("id")
    assert plain.status_code == 302 and plain.url == reverse("jobs:detail", args=[latest.pk])
    assert len(latest.params["candidate_ids"]) == 4


def test_diagnose_one_shows_progress_in_its_row(admin_client, candidate):
    response = admin_client.post(reverse("review:diagnose_one", args=[candidate.pk]), **HTMX)
    run = JobRun.objects.get(kind=DIAGNOSE_JOB)
    assert run.params == {"candidate_id": candidate.pk}
    row = response.content.decode()
    assert f'id="job-progress-{run.pk}"' in row and 'hx-trigger="job-finished"' in row
    assert reverse("review:diagnose_one", args=[candidate.pk]) not in row  # no second start while it runs
    assert f'id="job-progress-{run.pk}"' in row_html(admin_client.get(QUEUE), candidate)  # also after a reload

    add_diagnosis(candidate, [{"severity": "blocker"}])
    JobRun.objects.filter(pk=run.pk).update(status=JobRun.Status.SUCCEEDED)
    fresh = admin_client.get(reverse("review:queue_row", args=[candidate.pk]), **HTMX).content.decode()
    assert "job-progress" not in fresh and "sev-blocker" in fresh and "job-finished" not in fresh
    plain = admin_client.get(reverse("review:queue_row", args=[candidate.pk]))
    assert plain.status_code == 302 and plain.url == f"{QUEUE}?q=t-review"


@pytest.mark.django_db(transaction=True)
def test_a_broker_that_is_down_is_an_error_in_place(admin_client, candidate, settings):
    settings.CLAWGYM_JOB_ENGINE = "celery"
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    response = admin_client.post(reverse("review:diagnose_all"), **HTMX)
    assert response.status_code == 200 and "The diagnoses could not be started" in response.content.decode()
    response = admin_client.post(reverse("review:diagnose_one", args=[candidate.pk]), **HTMX)
    assert "The diagnosis could not be started" in row_html(response, candidate)
    assert "job-progress" not in response.content.decode()
    assert set(JobRun.objects.values_list("status", flat=True)) == {JobRun.Status.FAILED}


# --- the benchmark ------------------------------------------------------------------------------------------------


def test_review_bench_runs_and_ends_with_its_json_report():
    # On SQLite whatever this session runs on: on PostgreSQL the bench's throwaway database would be this session's
    # test database (test_<name>), and dropping it at the end would pull it from under these tests.
    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, "bench/review_bench.py", "--candidates", "120", "--requests", "20"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["candidates"] == 120 and report["requests"] == 20 and report["target_p95_ms"] == 200
    assert report["diagnoses"] > 0 and report["issues"] > 0
    assert report["p50_ms"] <= report["p95_ms"] <= report["max_ms"] and isinstance(report["met"], bool)
    assert report["queries_per_request"]["max"] - report["queries_per_request"]["min"] <= 2
    assert report["database"] == "sqlite"


def test_a_failed_diagnosis_shows_in_the_row_also_beside_an_earlier_one(viewer_client, benchmark):
    never = make_candidate(benchmark, "t-never", diagnosis_error="no endpoint serves the role 'diagnosis'")
    again = make_candidate(benchmark, "t-again", issues=["major"], diagnosis_error="the model answered no JSON")
    fine = make_candidate(benchmark, "t-fine", issues=["minor"])

    response = viewer_client.get(QUEUE)

    assert "Diagnosis failed" in row_html(response, never) and "Not diagnosed" not in row_html(response, never)
    assert "Major" in row_html(response, again) and "Last diagnosis failed" in row_html(response, again)
    assert 'title="the model answered no JSON"' in row_html(response, again)
    assert "failed" not in row_html(response, fine)


def test_candidates_whose_diagnosis_failed_have_a_tab_and_stay_reviewable(reviewer_client, api_as, reviewer, benchmark):
    never = make_candidate(benchmark, "t-never", diagnosis_error="no endpoint serves the role 'diagnosis'")
    make_candidate(benchmark, "t-waiting")
    make_candidate(
        benchmark,
        "t-again",
        issues=["major"],
        diagnosis_error="the model answered no JSON",
        status=Status.AWAITING_REVIEW,
    )

    response = reviewer_client.get(QUEUE)
    counts = status_counts(response)
    assert (counts["all"], counts["awaiting_diagnosis"], counts["diagnosis_failed"], counts["awaiting_review"]) == (
        3,
        1,
        1,
        1,
    )
    assert listed(reviewer_client.get(QUEUE, {"status": "diagnosis_failed"})) == ["t-never"]
    assert listed(reviewer_client.get(QUEUE, {"status": "awaiting_diagnosis"})) == ["t-waiting"]
    ids = [
        row["task"] for row in api_as(reviewer).get("/api/candidates/", {"diagnosis_failed": True}).json()["results"]
    ]
    assert sorted(ids) == ["t-again", "t-never"]
    # Not stuck behind a diagnosis that is not coming: a reviewer claims it and may decide it.
    row = row_html(reviewer_client.get(QUEUE, {"status": "diagnosis_failed"}), never)
    assert 'data-key="a"' in row and "Diagnosis failed" in row


# --- what a row and the accept dialog say (issue 10, item 13) ----------------------------------------------------


def test_a_claimed_candidate_awaiting_its_diagnosis_shows_in_review(reviewer_client, benchmark, reviewer):
    waiting = make_candidate(benchmark, "waiting")
    now = timezone.now()
    BenchmarkCandidate.objects.filter(pk=waiting.pk).update(
        claimed_by=reviewer, claimed_at=now, claim_expires_at=now + timedelta(minutes=30)
    )  # claiming leaves "awaiting diagnosis" stored: nothing reviewed it yet
    row = row_html(reviewer_client.get(reverse("review:queue")), waiting)
    assert 'data-testid="status" title="Claimed before its diagnosis">In review</span>' in row
    assert "Awaiting diagnosis" not in row and "not diagnosed" in row
    page = reviewer_client.get(reverse("review:candidate", args=[waiting.pk])).content.decode()
    assert 'data-testid="candidate-status" title="Claimed before its diagnosis">In review' in page


def test_the_queue_shows_why_a_candidate_was_rejected(reviewer_client, benchmark, reviewer, second_reviewer):
    rejected = make_candidate(benchmark, "rejected-one", issues=[], status=Status.REJECTED)
    ReviewDecision.objects.create(candidate=rejected, reviewer=reviewer, decision="reject", reason="First try.")
    ReviewDecision.objects.create(
        candidate=rejected,
        reviewer=second_reviewer,
        decision="reject",
        reason="The checker cannot tell a right total from a wrong one.",
    )
    response = reviewer_client.get(reverse("review:queue"), {"status": "rejected"})
    row = row_html(response, rejected)
    assert "“The checker cannot tell a right total from a wrong one.” — " + second_reviewer.username in row
    assert "First try." not in row


def test_accepting_a_candidate_whose_diagnosis_failed_warns(reviewer_client, benchmark):
    failed = make_candidate(benchmark, "diagnosis-failed", diagnosis_error="the diagnosis endpoint answered 503")
    dialog = reviewer_client.get(reverse("review:queue_decide", args=[failed.pk]), {"decision": "accept"}, **HTMX)
    html = dialog.content.decode()
    assert 'data-testid="diagnosis-warning"' in html and "no model has checked this task" in html
    assert "answered 503" in html
    page = reviewer_client.get(reverse("review:candidate", args=[failed.pk])).content.decode()
    accept = page[page.index('id="accept-state"') : page.index("</div>", page.index('id="accept-state"'))]
    assert "The LLM diagnosis failed" in accept
    # A diagnosed candidate whose re-diagnosis failed: the issues shown are older.
    later = make_candidate(
        benchmark, "rediagnosis-failed", issues=["minor"], status=Status.AWAITING_REVIEW, diagnosis_error="timed out"
    )
    html = reviewer_client.get(reverse("review:queue_decide", args=[later.pk]), {"decision": "accept"}, **HTMX)
    assert "the issues shown are from an earlier diagnosis" in html.content.decode()
    diagnosed = make_candidate(benchmark, "diagnosed", issues=[], status=Status.AWAITING_REVIEW)
    clean = reviewer_client.get(reverse("review:queue_decide", args=[diagnosed.pk]), {"decision": "accept"}, **HTMX)
    assert "diagnosis-warning" not in clean.content.decode()
    rejecting = reviewer_client.get(reverse("review:queue_decide", args=[failed.pk]), {"decision": "reject"}, **HTMX)
    assert "diagnosis-warning" not in rejecting.content.decode()
