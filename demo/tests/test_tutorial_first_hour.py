"""docs/tutorials/first-hour.md, walked as its reader would: every command of the page, in order, in one shell
(lib.docs_testing), against the demo server, the recording proxy on loopback and the sandbox. `make demo` is
the one line it stands in for: the demo server fixture, and the example tasks that `make run` loads."""

import pytest

from demo.tests.test_demo_evaluation import EXAMPLES
from evaluation.models import EvalRun
from evaluation.services.runs import run_json
from jobs.testing import database_url
from lib.docs_testing import DOCS, walk
from synthesis.models import SynthesisBatch
from tasks.importing import import_path
from training_jobs.models import TrainingDataset, TrainingRun

pytestmark = [pytest.mark.once, pytest.mark.usefixtures("bwrap", "taxonomy", "shipped_seeds")]

PAGE = DOCS / "tutorials" / "first-hour.md"


def test_the_first_hour_tutorial_runs_to_its_end(live_server_asgi, demo_server, tmp_path):
    import_path(EXAMPLES)  # what `make run` loads
    walked = walk(
        PAGE,
        tmp_path,
        env={"DATABASE_URL": database_url(), "CLAWGYM_PROXY_PUBLIC_URL": live_server_asgi.url},
        stand_ins={"make demo": "the demo_server fixture, and the example tasks imported as `make run` does"},
    )

    [batch] = SynthesisBatch.objects.all()
    assert batch.status == "complete", batch.status
    assert batch.items.filter(status="kept").exists(), list(batch.items.values_list("status", flat=True))

    good, weak = (EvalRun.objects.get(endpoint__name=name) for name in ("demo-agent-good", "demo-agent-weak"))
    assert f"good run {good.pk}, weak run {weak.pk}" in walked.stdout
    figures = {run.endpoint.name: run_json(run) for run in (good, weak)}
    assert {run.status for run in (good, weak)} == {EvalRun.Status.COMPLETE}
    assert figures["demo-agent-good"]["overall"]["mean"] == 1.0, figures["demo-agent-good"]
    assert 0 < figures["demo-agent-weak"]["overall"]["mean"] < 1.0
    assert "mean difference" in walked.stdout.lower(), walked.stdout

    [dataset] = TrainingDataset.objects.all()
    assert dataset.status == TrainingDataset.Status.READY
    [run] = TrainingRun.objects.all()
    assert (run.kind, run.status, run.dataset_id) == ("sft", TrainingRun.Status.SUCCEEDED, dataset.pk), run.error
    assert run.checkpoints.exists()
