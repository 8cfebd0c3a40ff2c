"""docs/tutorials/first-hour.md, walked as its reader would: every command of the page, in order, in one shell
(lib.docs_testing), against the demo server, the recording proxy on loopback and the sandbox. `make demo` is
the one line it stands in for: the demo server fixture, the example tasks and the admin that `make run` makes, and
the demo's setup (the frozen benchmark "demo" and its reviewers) that `make demo` runs."""

import pytest
from django.core.management import call_command
from django.urls import reverse

from accounts.roles import ADMIN
from accounts.testing import make_user
from benchmarks.models import Benchmark
from demo.services import DEMO_BENCHMARK
from demo.tests.test_demo_evaluation import EXAMPLES
from evaluation.models import EvalRun
from evaluation.reports import run_json
from jobs.testing import database_url
from lib.docs_testing import DOCS, walk
from lib.testing import signed_in_client
from review.models import BenchmarkCandidate, DiagnosisIssue, PlantedFlaw
from synthesis.models import SynthesisBatch
from tasks.importing import import_path
from training_jobs.models import TrainingDataset, TrainingRun

pytestmark = [pytest.mark.once, pytest.mark.usefixtures("bwrap", "taxonomy", "shipped_seeds")]

PAGE = DOCS / "tutorials" / "first-hour.md"


def test_the_first_hour_tutorial_runs_to_its_end(live_server_asgi, demo_server, tmp_path):
    import_path(EXAMPLES)  # what `make run` loads
    admin = make_user("admin", ADMIN)  # what `make run` creates
    call_command("demo_models", "--setup")  # what `make demo` runs before serving
    walked = walk(
        PAGE,
        tmp_path,
        env={"DATABASE_URL": database_url(), "CLAWGYM_PROXY_PUBLIC_URL": live_server_asgi.url},
        stand_ins={"make demo": "the demo_server fixture, the examples, the admin and the demo's setup"},
    )

    [batch] = SynthesisBatch.objects.all()
    assert batch.status == "complete", batch.status
    assert batch.items.filter(status="kept").exists(), list(batch.items.values_list("status", flat=True))

    good, weak = (
        EvalRun.objects.get(endpoint__name=name, benchmark_version__isnull=False)
        for name in ("demo-agent-good", "demo-agent-weak")
    )
    assert f"good run {good.pk}, weak run {weak.pk}" in walked.stdout
    figures = {run.endpoint.name: run_json(run) for run in (good, weak)}
    assert {run.status for run in (good, weak)} == {EvalRun.Status.COMPLETE}
    assert figures["demo-agent-good"]["overall"]["mean"] == 1.0, figures["demo-agent-good"]
    assert 0 < figures["demo-agent-weak"]["overall"]["mean"] < 1.0
    assert "mean difference" in walked.stdout.lower(), walked.stdout
    # On the frozen demo version: ranked on the leaderboard, with a score per category.
    version = Benchmark.objects.get(name=DEMO_BENCHMARK).versions.get()
    assert {good.benchmark_version_id, weak.benchmark_version_id} == {version.pk}
    assert f"{version}: 2 model(s) with a complete run" in walked.stdout
    assert len(figures["demo-agent-good"]["categories"]) == 6, figures["demo-agent-good"]
    # What the first hour comes for, in the browser's pages: scores by category and the leaderboard.
    pages = signed_in_client(admin)
    dashboard = pages.get(reverse("dashboard")).content.decode()
    assert "No frozen benchmark version yet" not in dashboard
    assert f"The latest complete run of each model on {version}" in dashboard
    board = pages.get(reverse("evaluations:leaderboard")).content.decode()
    assert "demo-agent-good" in board and "demo-agent-weak" in board

    # The kept drafts were proposed and diagnosed; the demo judge found issues with fixes in some of them.
    drafts = BenchmarkCandidate.objects.filter(benchmark__name=DEMO_BENCHMARK, task__source="persona", plant=None)
    assert drafts.exists() and not drafts.filter(status="awaiting_diagnosis").exists()
    issues = DiagnosisIssue.objects.filter(diagnosis__candidate__in=drafts).exclude(replacement=None)
    # --seed 3 draws three kinds: one with a lenient check, one with a vague instruction, one with no issue.
    assert sorted(issues.values_list("component", flat=True)) == ["checker", "instruction"], walked.stdout
    assert drafts.count() == 3
    assert sorted(PlantedFlaw.objects.values_list("kind", flat=True)) == ["check_removed", "instruction_cut"]

    [dataset] = TrainingDataset.objects.all()
    assert dataset.status == TrainingDataset.Status.READY
    [run] = TrainingRun.objects.all()
    assert (run.kind, run.status, run.dataset_id) == ("sft", TrainingRun.Status.SUCCEEDED, dataset.pk), run.error
    assert run.checkpoints.exists()
