"""The batch page of a running batch as it is polled: its funnel, cost per stage and distributions are those of an
exact recomputation (synthesis.batch_report) after each move of an item the pipeline writes (lib.polled_figures, keyed
on where the items are and the batch's usage), and are reused while nothing moves."""

import pytest
from django.core.cache import cache
from django.db.models import F
from django.urls import reverse

from lib import polled_figures
from llm.models import ModelCall, ModelEndpoint
from synthesis.batch_report import batch_json, distributions, funnel, stage_costs
from synthesis.models import SynthesisBatch, SynthesisItem
from synthesis.testing import PASS, make_batch

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def batch(db):
    cache.clear()
    endpoint = ModelEndpoint.objects.create(
        name="gen", base_url="http://127.0.0.1:9/v1", model="m", roles=["generator"]
    )
    made = make_batch(
        endpoint,
        endpoint,
        items=[
            ("rejected", "generate", {"generate": {"verdict": "fail", "reason": "needs the network"}}, "generate: x"),
            ("pending", "generate", {}, ""),
            ("pending", "generate", {}, ""),
        ],
    )
    yield made
    cache.clear()


def shown(client, batch: SynthesisBatch) -> dict:
    context = client.get(reverse("synthesis:detail", args=[batch.pk]), **HTMX).context
    return {"funnel": context["funnel"], "stage_rows": context["stage_rows"], "distributions": context["distributions"]}


def exact(client, batch: SynthesisBatch, monkeypatch) -> dict:
    """What the page shows when it computes every figure afresh."""
    with monkeypatch.context() as patch:
        patch.setattr(polled_figures, "cache", _NoCache())
        return shown(client, batch)


class _NoCache:
    def get(self, key):
        return None

    def set(self, *args, **kwargs):
        pass


def call(item: SynthesisItem, purpose: str) -> None:
    """A model call of the item's, its usage added to the batch as synthesis services add it."""
    ModelCall.objects.create(
        endpoint_name="gen", purpose=purpose, subject=item.subject, request={}, input_tokens=100, output_tokens=10
    )
    SynthesisBatch.objects.filter(pk=item.batch_id).update(
        input_tokens=F("input_tokens") + 100, output_tokens=F("output_tokens") + 10
    )


def test_each_poll_after_an_item_moves_shows_the_exact_figures(batch, viewer_client, monkeypatch):
    monkeypatch.setattr(polled_figures, "REUSE_FACTOR", 0)  # recompute on every change, however quick the polls
    first = shown(viewer_client, batch)
    assert first == exact(viewer_client, batch, monkeypatch)
    assert first["funnel"] == funnel(batch)
    item = batch.items.get(index=1)
    moves = [  # as synthesis/pipeline.py writes them: claimed, a stage passed, another, then rejected
        {"status": "running", "worker": "w"},
        {"stage": "files", "stage_results": {"generate": PASS}, "draft": {"difficulty": 3}},
        {"stage": "verify", "stage_results": {"generate": PASS, "files": PASS}},
        {
            "status": "rejected",
            "reason": "verify: no sane, solvable checker after 3 rounds",
            "stage_results": {"generate": PASS, "files": PASS, "verify": {"verdict": "fail", "sane": True}},
        },
    ]
    for move in moves:
        before = shown(viewer_client, batch)
        SynthesisItem.objects.filter(pk=item.pk).update(**move)
        if "stage" in move:
            call(item, f"synthesis:{move['stage']}")
        now = shown(viewer_client, batch)
        assert now == exact(viewer_client, batch, monkeypatch)
        assert now["funnel"] == funnel(batch) and stage_costs(batch) == {
            row["purpose"]: {k: row[k] for k in ("calls", "input_tokens", "output_tokens", "cost")}
            for row in now["stage_rows"]
        }
        assert distributions(batch)["all"]["difficulty"] == ({"3": 1} if "draft" in move or before != now else {})
    assert now != first
    checker = next(row for row in now["funnel"] if row["step"] == "checker_sane")
    assert checker["count"] == 1  # the rejected item's checker was sane


def test_figures_are_reused_while_nothing_moves(batch, viewer_client, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(polled_figures.time, "time", lambda: now[0])
    first = shown(viewer_client, batch)
    # A change the stamp does not see (an item's reason edited in place): shown once the figures are idle long enough.
    SynthesisItem.objects.filter(batch=batch, index=0).update(reason="generate: needs the network, really")
    assert shown(viewer_client, batch) == first
    now[0] += polled_figures.IDLE_SECONDS + 1
    reasons = [r["reason"] for row in shown(viewer_client, batch)["funnel"] for r in row["reasons"]]
    assert reasons == ["generate: needs the network, really"]


def test_the_figures_read_the_items_in_one_query_whatever_their_number(batch, django_assert_max_num_queries):
    SynthesisItem.objects.bulk_create(
        SynthesisItem(batch=batch, index=i, status="pending", stage="files", stage_results={"generate": PASS})
        for i in range(3, 40)
    )
    # Each item's batch is the one asked about (known to the related manager): no query per item to learn it.
    with django_assert_max_num_queries(1):
        funnel(batch)
    with django_assert_max_num_queries(1):
        distributions(batch)
    with django_assert_max_num_queries(2):  # the batch read again, then its items
        batch_json(batch)


def test_the_page_shows_each_steps_most_frequent_reasons_and_counts_the_rest(viewer_client):
    endpoint = ModelEndpoint.objects.create(name="g2", base_url="http://127.0.0.1:9/v1", model="m", roles=["generator"])
    rejected = [
        ("rejected", "generate", {"generate": {"verdict": "fail", "reason": f"reason {n}"}}, f"generate: reason {n}")
        for n in range(20)
        for _ in range(2 if n < 3 else 1)  # the first three twice: the most frequent
    ]
    batch = make_batch(endpoint, endpoint, items=rejected)
    html = viewer_client.get(reverse("synthesis:detail", args=[batch.pk])).content.decode()
    rows = html.split('<table id="funnel-reasons">')[1].split("</table>")[0].split("<tr data-step=")[1:]
    assert len(rows) == 16  # 15 reasons, then the rest in one row
    assert all(f"generate: reason {n}<" in "".join(rows[:3]) for n in range(3))
    assert 'data-testid="more-reasons">and 5 other reasons' in rows[-1] and '<td class="num">5</td>' in rows[-1]
    assert f'href="{reverse("synthesis:item", args=[batch.items.order_by("pk").first().pk])}"' in html
    assert len(funnel(batch)[0]["reasons"]) == 20  # the API's funnel keeps every reason
