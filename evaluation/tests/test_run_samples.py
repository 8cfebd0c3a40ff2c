"""A run's samples searched and filtered (by task, outcome, status, score and text) on its page and the API, and the
same task's rollouts of two runs side by side with each check's result. Runs are built as in test_eval_pages: their
rollouts are given outcomes, scores, checks and transcripts directly."""

import re

import pytest
from django.urls import reverse

from evaluation.models import Rollout
from evaluation.testing import build_world, text, url

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def world(db):
    return build_world()


def samples(response) -> list[tuple[str, str, str]]:
    """(task, repeat, score) of each row on show, in order."""
    html = response.content.decode()
    rows = re.findall(r'<tr data-sample="\d+">(.*?)</tr>', html, re.S)
    found = []
    for row in rows:
        task = re.search(r'class="mono" href="[^"]+">([^<]+)</a>', row).group(1)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        found.append((task, re.sub(r"<[^>]+>", "", cells[1]).strip(), cells[3].strip()))
    return found


# --- the samples page ----------------------------------------------------------------------------------------------


def test_the_samples_page_lists_every_rollout_and_narrows_by_score_outcome_and_task(world, viewer_client):
    strong, flaky = world["strong"], world["flaky"]
    everything = viewer_client.get(url("samples", strong.pk))
    assert everything.status_code == 200
    assert len(samples(everything)) == 8 and samples(everything)[:2] == [
        ("eval-a", "0", "1.000"),
        ("eval-a", "1", "1.000"),
    ]
    assert "8 of 8 samples" in text(everything)
    below = viewer_client.get(url("samples", strong.pk, max_score="0.9"))
    assert samples(below) == [("eval-b", "1", "0.500"), ("eval-d", "0", "0.750"), ("eval-d", "1", "0.750")]
    assert "3 of 8 samples · 3 scored" in text(below)
    between = viewer_client.get(url("samples", strong.pk, min_score="0.6", max_score="0.8", task="eval-d"))
    assert [s[:2] for s in samples(between)] == [("eval-d", "0"), ("eval-d", "1")]
    worst_first = viewer_client.get(url("samples", strong.pk, sort="score"))
    assert [s[2] for s in samples(worst_first)][:3] == ["0.500", "0.750", "0.750"]
    infra = viewer_client.get(url("samples", flaky.pk, outcome="infra"))
    assert samples(infra) == [("eval-d", "0 ×3", "—")]  # after its three attempts
    assert "Infrastructure failure" in infra.content.decode()
    failed = viewer_client.get(url("samples", flaky.pk, status="failed"))
    assert samples(failed) == samples(infra)
    # A bad value is dropped, not an error: the page lists as if it were not given.
    assert len(samples(viewer_client.get(url("samples", strong.pk, min_score="lots", outcome="nope")))) == 8


def test_a_text_search_finds_it_in_the_transcript_and_shows_where(world, viewer_client):
    strong = world["strong"]
    response = viewer_client.get(url("samples", strong.pk, q="MISCOUNTED"))  # case does not matter
    assert [s[:2] for s in samples(response)] == [("eval-b", "1"), ("eval-d", "0"), ("eval-d", "1")]
    html = response.content.decode()
    # The row says where the text is, with the match marked (the first place it occurs: the tool call's arguments).
    assert "<mark>miscounted</mark> the pears in eval-b" in html and "assistant:" in html
    by_answer = viewer_client.get(url("samples", strong.pk, q="repeat 1)"))  # the final message
    assert {s[1] for s in samples(by_answer)} == {"1"} and len(samples(by_answer)) == 4
    assert "final message:" in by_answer.content.decode()
    by_task = viewer_client.get(url("samples", strong.pk, q="eval-c"))
    assert {s[0] for s in samples(by_task)} == {"eval-c"}
    none = viewer_client.get(url("samples", strong.pk, q="bananas"))
    assert samples(none) == [] and "No sample matches these filters." in none.content.decode()


def test_htmx_gets_the_results_alone_and_links_lead_on(world, viewer_client):
    strong, weak = world["strong"], world["weak"]
    partial = viewer_client.get(url("samples", strong.pk, task="eval-a"), **HTMX)
    html = partial.content.decode()
    assert partial.status_code == 200 and "<html" not in html and 'id="sample-filters"' not in html
    assert len(samples(partial)) == 2
    beside = viewer_client.get(url("samples", strong.pk, task="eval-b", b=weak.pk)).content.decode()
    pair = reverse("evaluations:compare-rollouts")
    assert f'href="{pair}?a={strong.pk}&amp;b={weak.pk}&amp;task=eval-b&amp;ra=1"' in beside
    run_page = viewer_client.get(url("detail", strong.pk)).content.decode()
    assert f'href="{url("samples", strong.pk)}"' in run_page
    compare = viewer_client.get(url("compare", a=strong.pk, b=weak.pk)).content.decode()
    assert f'href="{pair}?a={strong.pk}&amp;b={weak.pk}&amp;task=eval-c">Side by side</a>' in compare


def test_outsiders_see_neither_page(world, outsider_client):
    strong, weak = world["strong"], world["weak"]
    assert outsider_client.get(url("samples", strong.pk)).status_code == 403
    assert outsider_client.get(url("compare-rollouts", a=strong.pk, b=weak.pk)).status_code == 403


# --- side by side --------------------------------------------------------------------------------------------------


def side(response, key: str) -> str:
    html = response.content.decode()
    start = html.index(f'data-testid="side-{key}"')
    return html[start : html.index("</section>", start)]


def check_cells(section: str) -> dict[str, tuple[str, bool]]:
    """{check: (its result, marked as differing)} of one side's checks table."""
    rows = re.findall(
        r'<tr data-check="([^"]+)"( class="check-differs")?>.*?<td class="num">([^<]+)</td>', section, re.S
    )
    return {name: (value.strip(), bool(marked)) for name, marked, value in rows}


def test_the_same_task_of_two_runs_side_by_side_with_each_checks_result(world, viewer_client):
    strong, weak = world["strong"], world["weak"]
    response = viewer_client.get(url("compare-rollouts", a=strong.pk, b=weak.pk, task="eval-b"))
    assert response.status_code == 200
    a, b = side(response, "a"), side(response, "b")
    assert strong.name in a and weak.name in b
    assert (
        '<dd class="score" data-testid="score">1.000</dd>' in a
        and '<dd class="score" data-testid="score">0.750</dd>' in b
    )
    # The same rows on both sides, in the same order; those that differ are marked on both.
    assert check_cells(a) == {
        "input_kept": ("1.000", False),
        "reported_done": ("1.000", False),
        "summary_right": ("1.000", True),
        "summary_written": ("1.000", False),
        "tidy": ("1.000", True),
    }
    assert check_cells(b)["summary_right"] == ("0.000", True) and check_cells(b)["tidy"] == ("0.000", True)
    assert list(check_cells(a)) == list(check_cells(b))
    assert "(rubric)" in a  # a rubric rule is named as one
    # Each side's transcript beside its checks.
    assert "Done: 3 apples, 2 pears." in a and "I miscounted the pears in eval-b" in b
    # Another repeat of B: repeat 1 of eval-b scored 0.75 too; the strong run's repeat 1 scored 0.5.
    other = viewer_client.get(url("compare-rollouts", a=strong.pk, b=weak.pk, task="eval-b", ra=1))
    assert '<dd class="score" data-testid="score">0.500</dd>' in side(other, "a")
    assert check_cells(side(other, "a"))["summary_right"] == ("0.000", False)  # both 0 now: no difference
    assert 'aria-current="true">1 ' in side(other, "a")
    # Every task of the two runs can be chosen; the page links the previous and the next.
    html = response.content.decode()
    assert re.findall(r'<option value="(eval-[a-d])"', html) == ["eval-a", "eval-b", "eval-c", "eval-d"]
    assert 'task=eval-a" rel="prev"' in html and 'task=eval-c" rel="next"' in html


def test_side_by_side_without_two_runs_or_a_rollout_says_so(world, viewer_client):
    strong, weak = world["strong"], world["weak"]
    Rollout.objects.filter(eval_run=weak, revision__task__external_id="eval-d").delete()
    missing = viewer_client.get(url("compare-rollouts", a=strong.pk, b=weak.pk, task="eval-d"))
    assert f"{weak.name} has no rollout of eval-d." in text(missing)
    assert "Done with eval-d (repeat 0)." in side(missing, "a")
    one = viewer_client.get(url("compare-rollouts", a=strong.pk))
    assert one.status_code == 200 and "Choose two runs (one more)" in text(one)
    unknown_task = viewer_client.get(url("compare-rollouts", a=strong.pk, b=weak.pk, task="nope"))
    assert '<option value="eval-a" selected>' in unknown_task.content.decode()  # the first task instead


# --- the API -------------------------------------------------------------------------------------------------------


def test_the_api_filters_a_runs_samples_as_its_page_does(world, api_as, viewer):
    strong, flaky = world["strong"], world["flaky"]
    client = api_as(viewer)
    base = f"/api/eval-runs/{strong.pk}/rollouts/"
    worst = client.get(base, {"max_score": 0.9, "sort": "score"}).json()["results"]
    assert [(r["task"], r["repeat_index"], r["score"]) for r in worst] == [
        ("eval-b", 1, 0.5),
        ("eval-d", 0, 0.75),
        ("eval-d", 1, 0.75),
    ]
    found = client.get(base, {"q": "miscounted the pears in eval-b"}).json()["results"]
    assert [(r["task"], r["repeat_index"]) for r in found] == [("eval-b", 1)]
    assert client.get(base, {"min_score": 2}).status_code == 400
    assert client.get(base, {"sort": "wrong"}).status_code == 400
    assert client.get(base, {"scor": 1}).status_code == 400  # a misspelt filter is no silent "everything"
    everywhere = client.get("/api/rollouts/", {"outcome": "infra"}).json()["results"]
    assert [(r["task"], r["repeat_index"]) for r in everywhere] == [("eval-d", 0)]
    of_one_run = client.get("/api/rollouts/", {"eval_run": flaky.pk, "min_score": 1, "q": "eval-a"}).json()
    assert {r["task"] for r in of_one_run["results"]} == {"eval-a"} and of_one_run["count"] == 2
