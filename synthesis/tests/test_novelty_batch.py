"""Novelty in a batch compares with the whole pool, whatever the subcategories: near-identical tasks drawn in
different subcategories are duplicates of the first one kept (a real batch: the scripted generator of
tests/scripted.py, the bubblewrap sandbox, the MiniLM embedding), and the batch and item pages say so. The batch's
drafts not in the catalog yet are compared with too (stages.qa.batch_drafts)."""

import pytest
from django.urls import reverse

from synthesis.batch_plan import draw_seeds
from synthesis.models import SynthesisBatch, SynthesisItem
from synthesis.pipeline import StageContext
from synthesis.services import run_here, start_batch
from synthesis.stages import qa as qa_stage
from synthesis.testing import ScriptedPipeline, make_batch, make_endpoints

pytestmark = pytest.mark.django_db


def seed_of_distinct_subcategories(count: int) -> int:
    """A batch seed whose `count` persona draws are each of another subcategory."""
    for seed in range(100):
        drawn = [s["subcategory"]["id"] for s in draw_seeds("persona", count, seed, {})]
        if len(set(drawn)) == count:
            return seed
    raise AssertionError("no seed draws distinct subcategories")


@pytest.mark.usefixtures("bwrap")
def test_near_identical_tasks_of_other_subcategories_are_rejected_as_duplicates(viewer_client, scripted_upstream):
    generator, judge = make_endpoints(scripted_upstream)
    scripted_upstream.responder = ScriptedPipeline(["good"] * 3)  # "sum sales.csv", differing only in "Request n"
    seed = seed_of_distinct_subcategories(3)
    batch = start_batch(
        "persona", 3, generator, judge, seed=seed, options={"qa_stages": ["novelty"]}, here=True, user=None
    )
    batch = run_here(batch)

    items = list(batch.items.order_by("index"))
    assert len({item.draft["subcategory"] for item in items}) == 3
    assert [(i.status, i.stage) for i in items] == [("kept", "catalog"), ("rejected", "qa"), ("rejected", "qa")]
    first = items[0].task.external_id
    for item in items[1:]:
        verdict = item.stage_results["qa"]["verdicts"]["novelty"]
        assert verdict["details"]["nearest"] == first and verdict["details"]["similarity"] >= 0.9
        assert "in the whole pool; no other task is of its subcategory" in verdict["reason"]

    page = viewer_client.get(reverse("synthesis:detail", args=[batch.pk])).content.decode()
    assert '<span id="count-kept">1</span>' in page and '<span id="count-rejected">2</span>' in page
    assert f"near-duplicate of {first}" in page
    page = viewer_client.get(reverse("synthesis:item", args=[items[2].pk])).content.decode()
    assert f"near-duplicate of {first}" in page and "no task to compare with" not in page


def test_drafts_of_the_batch_not_in_the_catalog_yet_are_compared_with(viewer_client, scripted_upstream):
    generator, judge = make_endpoints(scripted_upstream)
    text = "Please read `sales.csv` (columns region,amount) and write `totals.json` with each region's sum."
    draft = {
        "instruction": text,
        "files": {"sales.csv": "region,amount\nnorth,1\n"},
        "checker": {},
        "rubric": [],
        "category": "office-work",
        "subcategory": "spreadsheets",
    }
    past_qa = {"generate": {"verdict": "pass"}, "qa": {"verdict": "pass"}}
    batch = make_batch(
        generator,
        judge,
        items=[
            ("pending", "catalog", past_qa, ""),  # past QA, waiting for the catalog stage
            ("running", "qa", {}, ""),  # being assessed now on another worker (a lower index: it wins)
            ("running", "qa", {}, ""),
        ],
    )
    SynthesisBatch.objects.filter(pk=batch.pk).update(options={"qa_stages": ["novelty"]})
    batch.refresh_from_db()
    first, second, third = batch.items.order_by("index")
    SynthesisItem.objects.filter(pk=first.pk).update(draft={**draft, "subcategory": "documents"})
    SynthesisItem.objects.filter(pk=second.pk).update(draft={**draft, "instruction": text + " Round to cents."})
    SynthesisItem.objects.filter(pk=third.pk).update(draft={**draft, "instruction": text + " Sort the keys."})
    second.refresh_from_db()
    third.refresh_from_db()

    assert [name for name, _, _ in qa_stage.batch_drafts(second)] == [f"syn-{batch.pk}-1"]
    assert [name for name, _, _ in qa_stage.batch_drafts(third)] == [f"syn-{batch.pk}-1", f"syn-{batch.pk}-2"]
    result = qa_stage.run(third, StageContext.for_batch(batch))
    assert (result.verdict, result.rejected_at) == ("fail", "qa:novelty")
    assert "as an item of this batch not in the catalog yet" in result.reason
    # The first is the one waiting for the catalog; a kept or rejected item is not a draft any more.
    SynthesisItem.objects.filter(pk=first.pk).update(status="kept")
    SynthesisItem.objects.filter(pk=second.pk).update(status="rejected")
    assert qa_stage.batch_drafts(third) == []
