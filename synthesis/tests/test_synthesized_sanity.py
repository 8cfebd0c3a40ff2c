"""A synthesized task is sanity-checked when it enters the catalog: the verify stage's sandboxed check (the real
bubblewrap sandbox, the scripted generator of tests/scripted.py) is stored as its revision's SanityReport, the
report tasks.sanity stores, so the task page shows its verdict and a reviewer can accept it without another run.
The item page says "new task", never "imported"."""

import pytest
from django.urls import reverse

from benchmarks.models import Benchmark
from review.services import sanity_block
from synthesis.services import run_here, start_batch
from synthesis.stages.catalog import store_sanity_report
from synthesis.testing import ScriptedPipeline, make_endpoints
from tasks.models import SanityReport
from tasks.sanity import SanityMaterial, check_revision, evaluate, material_digest, report_fields

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("bwrap")]


def test_a_kept_task_carries_the_verify_stages_sanity_report(viewer_client, scripted_upstream, settings):
    # The verify stage checks a draft, with no judge-written lazy workspace (that needs the stored revision): the
    # re-check below is compared with it like for like.
    settings.CLAWGYM_SANITY_LLM_LAZY = False
    generator, judge = make_endpoints(scripted_upstream)
    scripted_upstream.responder = ScriptedPipeline(["lenient"])  # round 1 over-lenient, round 2 sane
    batch = run_here(
        start_batch("persona", 1, generator, judge, seed=4, options={"qa_stages": []}, here=True, user=None)
    )
    item = batch.items.get()
    assert item.status == "kept" and len(item.stage_results["verify"]["rounds"]) == 2
    revision = item.task.current_revision

    report = SanityReport.objects.get(revision=revision)
    assert (report.verdict, report.lazy_score, report.solvable, report.isolated) == ("passed", 0.0, True, True)
    assert report.backend == "bwrap" and report.runtime and report.scaffold_paths == ["totals.json"]
    assert {"empty", "initial", "scaffold"} <= set(report.runs) and report.solution_run["score"] == 1.0
    # What a check of the stored revision finds (the checked round's findings, not round 1's lenient ones).
    again = check_revision(revision)
    same = (
        "crashed",
        "over_lenient",
        "lazy_score",
        "lazy_scores",
        "solvable",
        "scaffold_paths",
        "tolerance",
        "backend",
        "runtime",
        "isolated",
    )
    assert {k: report.as_dict()[k] for k in same} == {k: again.as_dict()[k] for k in same}
    assert {k: (r["score"], r["subscores"]) for k, r in report.runs.items()} == {
        k: (r["score"], r["subscores"]) for k, r in again.runs.items()
    }
    assert sanity_block(revision, Benchmark.objects.create(name="bench")) is None

    page = viewer_client.get(reverse("tasks:detail", args=[item.task.external_id])).content.decode()
    assert 'data-testid="sanity-verdict">Passed<' in page and 'data-testid="sanity-missing"' not in page
    assert f'data-testid="sanity-runtime">{report.runtime}<' in page
    page = viewer_client.get(reverse("synthesis:item", args=[item.pk])).content.decode()
    assert f"{item.task.external_id} r1 (new task)" in page and "(imported)" not in page


def test_a_revision_not_holding_what_was_checked_gets_no_report(scripted_upstream):
    generator, judge = make_endpoints(scripted_upstream)
    scripted_upstream.responder = ScriptedPipeline(["good"])
    batch = run_here(
        start_batch("persona", 1, generator, judge, seed=5, options={"qa_stages": []}, here=True, user=None)
    )
    item = batch.items.get()
    revision = item.task.current_revision
    stored = item.draft["sanity_report"]
    SanityReport.objects.filter(revision=revision).delete()

    material = SanityMaterial.from_revision(revision)
    assert stored["digest"] == material_digest(material)
    assert store_sanity_report(revision, {**stored, "digest": "0" * 64}) is None  # other files were checked
    assert store_sanity_report(revision, None) is None
    report = store_sanity_report(revision, stored)
    assert report is not None and store_sanity_report(revision, stored) is None  # one report per revision
    assert set(stored) - {"digest", "job_run"} == set(report_fields(material, evaluate(material)))
