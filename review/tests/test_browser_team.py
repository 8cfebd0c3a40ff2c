"""Review as a team in a real browser: the queue's Next (n) routes a second reviewer to a candidate another has
decided, blind to that decision; the disagreement goes to a lead, who reads both sides and decides.

Screenshots go to $CLAWGYM_SCREENSHOT_DIR (default /tmp/clawgym-screens) for a look by eye.
"""

import pytest
from django.urls import reverse

from accounts.roles import LEAD, REVIEWER
from accounts.testing import make_user
from benchmarks.models import Benchmark
from lib.browser_testing import log_in, screenshot, watch
from review import services
from review.models import BenchmarkCandidate
from review.tests.helpers import make_candidate, sanity, settled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]

Status = BenchmarkCandidate.Status


def test_second_review_is_routed_blind_and_a_lead_adjudicates(page, live_server):
    ann, bob, lee = make_user("ann", REVIEWER), make_user("bob", REVIEWER), make_user("lee", LEAD)
    benchmark = Benchmark.objects.create(name="team-bench", decisions_needed=2)
    older = make_candidate(benchmark, "older-report", status=Status.AWAITING_REVIEW)
    newer = make_candidate(benchmark, "newer-report", status=Status.AWAITING_REVIEW)
    for candidate in (older, newer):
        sanity(candidate.task.current_revision)
    services.decide(older, "reject", user=ann, reason="ANN-SECRET-REASON: the checker pays an empty report")
    services.decide(newer, "accept", user=ann)
    services.claim(newer, user=make_user("cyd", REVIEWER))  # claims stay as they are: newer is cyd's
    watching = watch(page)

    log_in(page, live_server, bob)
    page.goto(f"{live_server.url}{reverse('review:queue')}")
    page.locator("[data-testid=next-candidate]").wait_for()
    settled(page)
    page.locator("h1").click()  # focus on the page, not in a field: keys are shortcuts
    page.keyboard.press("n")  # Next: older (one decision, nobody holds it), not newer (cyd holds it)
    page.wait_for_url(f"{live_server.url}{reverse('review:candidate', args=[older.pk])}")
    note = page.locator("[data-testid=team-note]")
    assert "Needs 2 independent decisions; 1 recorded" in note.inner_text()
    assert "You review blind" in note.inner_text()
    assert "ANN-SECRET-REASON" not in page.content()  # not on the page, not in the history
    assert BenchmarkCandidate.objects.get(pk=older.pk).claimed_by == bob
    screenshot(page, "team-blind-second-review")

    page.locator("#decide button[value=accept]").click()  # bob disagrees with ann
    page.locator("[data-testid=team-adjudication]").wait_for()
    settled(page)
    assert BenchmarkCandidate.objects.get(pk=older.pk).status == Status.AWAITING_ADJUDICATION
    page.reload()
    assert "ANN-SECRET-REASON" in page.content()  # bob has decided: the earlier decision shows now
    settled(page)
    page.locator("h1").first.click()
    page.keyboard.press("n")  # Next from the candidate page: nothing is left for bob (cyd holds newer)
    page.locator(".messages", has_text="Nothing left for you to review in team-bench").wait_for()

    page.context.clear_cookies()
    log_in(page, live_server, lee)
    page.goto(f"{live_server.url}{reverse('review:adjudication')}")
    page.locator(f"[data-testid=adjudicate-{older.pk}]").wait_for()
    page.keyboard.press("j")
    page.keyboard.press("Enter")  # open the selected disagreement
    page.wait_for_url(f"{live_server.url}{reverse('review:adjudicate', args=[older.pk])}")
    assert "ANN-SECRET-REASON" in page.locator("[data-testid=side-ann]").inner_text()
    assert "accept" in page.locator("[data-testid=side-bob]").inner_text()
    screenshot(page, "team-adjudication")

    page.locator("#adjudication-form button[value=reject]").click()  # no reason: the form asks for one
    assert page.locator("#adjudication-form textarea[name=reason]:invalid").count() == 1
    assert BenchmarkCandidate.objects.get(pk=older.pk).status == Status.AWAITING_ADJUDICATION
    page.fill("#adjudication-form textarea[name=reason]", "Ann is right: an empty report scores 1.")
    page.locator("#adjudication-form button[value=reject]").click()
    page.wait_for_url(f"{live_server.url}{reverse('review:adjudication')}")
    page.locator("[data-testid=adjudication-empty]").wait_for()
    older.refresh_from_db()
    assert older.status == Status.REJECTED
    kinds = list(older.decisions.order_by("created_at", "id").values_list("reviewer__username", "adjudication"))
    assert kinds == [("ann", False), ("bob", False), ("lee", True)]
    assert watching.console_errors == []


def test_admin_sets_the_team_and_reads_progress(page, live_server, admin_user):
    ann = make_user("ann", REVIEWER)
    make_user("bob", REVIEWER)
    benchmark = Benchmark.objects.create(name="team-bench")
    decided = make_candidate(benchmark, "decided-report", status=Status.AWAITING_REVIEW)
    make_candidate(benchmark, "open-report", status=Status.AWAITING_REVIEW)
    sanity(decided.task.current_revision)
    services.claim(decided, user=ann)
    services.decide(decided, "accept", user=ann)
    watching = watch(page)

    log_in(page, live_server, admin_user)
    page.goto(f"{live_server.url}{reverse('review:benchmark', args=[benchmark.name])}")
    by_state = page.locator("#progress [data-testid=by-state]")  # loaded into the benchmark page by htmx
    by_state.wait_for()
    assert "Accepted 1" in by_state.inner_text() and "Awaiting review 1" in by_state.inner_text()
    assert "1 open" in page.inner_text("#progress [data-testid=left]")

    page.locator("[data-testid=team-link]").click()
    page.wait_for_url(f"{live_server.url}{reverse('review:team', args=[benchmark.name])}")
    page.locator("#settings label", has_text="ann").locator("input").check()
    page.locator("#settings label", has_text="bob").locator("input").check()
    page.fill("#settings input[name=decisions_needed]", "2")
    page.fill("#settings input[name=overlap_share]", "0.2")
    page.locator("#settings button[type=submit]").click()
    page.locator("[data-testid=decisions-needed]", has_text="2").wait_for()
    settled(page)
    assert page.inner_text("[data-testid=overlap-share]") == "20%"
    assert "ann, bob" in page.inner_text("[data-testid=team-facts]")
    benchmark.refresh_from_db()
    assert (benchmark.decisions_needed, benchmark.overlap_share) == (2, 0.2)
    assert sorted(benchmark.reviewers.values_list("username", flat=True)) == ["ann", "bob"]
    assert "ann" in page.inner_text("[data-testid=by-reviewer]")
    screenshot(page, "team-page")
    assert watching.console_errors == []
