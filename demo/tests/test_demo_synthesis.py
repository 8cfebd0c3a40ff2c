"""A synthesis batch against the demo generator and judge, end to end: the demo server on loopback, every stage and
every QA stage (novelty with the real MiniLM encoder), the checkers proven by the sandboxed sanity check."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from llm.models import ModelCall
from synthesis.models import SynthesisBatch, SynthesisItem
from tasks.models import SanityReport, Task

pytestmark = [pytest.mark.once, pytest.mark.usefixtures("bwrap", "taxonomy", "shipped_seeds")]


def test_a_persona_batch_completes_with_tasks_kept_and_duplicates_rejected_by_novelty(demo_server):
    out = StringIO()
    call_command(
        "synthesize",
        "--route",
        "persona",
        "--count",
        "6",
        "--generator",
        "demo-generator",
        "--judge",
        "demo-judge",
        "--seed",
        "3",
        "--here",
        "--json",
        stdout=out,
        stderr=StringIO(),
    )
    found = json.loads(out.getvalue().strip().splitlines()[-1])
    batch = SynthesisBatch.objects.get(pk=found["batch"])
    assert found["status"] == "complete" and found["failed"] == {}, found
    assert found["kept"] >= 2, found
    # Every rejection is a kind drawn twice: the later item is a duplicate of one kept before it.
    assert set(found["rejected"]) <= {"qa:novelty"}, found
    assert found["kept"] + sum(found["rejected"].values()) == 6

    # Every model call got an answer its stage could use at once: no repair turn, no error.
    calls = ModelCall.objects.filter(subject__startswith="synthesis-item:")
    assert calls.exists() and not calls.exclude(error="").exists()
    assert not any("could not be used" in json.dumps(c.request) for c in calls)
    kept = SynthesisItem.objects.filter(batch=batch, status=SynthesisItem.Status.KEPT)
    for item in kept:
        assert item.stage_results["verify"]["reason"] == "sane and solvable in round 1"
        task = Task.objects.get(pk=item.task_id)
        assert task.status == Task.Status.DRAFT
        report = SanityReport.objects.get(revision=task.current_revision)
        assert report.verdict == "passed" and not report.problems, report.as_dict()
