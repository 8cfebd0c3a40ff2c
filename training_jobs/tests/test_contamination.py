"""Contamination: a benchmark task that training data holds, the same (content hash) or paraphrased (the novelty
embeddings at synthesis QA's threshold). Freezing refuses with the list (service, API, page); building a dataset
leaves such trajectories out and lists them; starting a training run (SFT on such a dataset, RL on such tasks)
refuses; `contamination_for` finds each, and nothing for an unrelated task."""

import pytest
from django.urls import reverse

from benchmarks.contamination import EXACT, NEAR, contamination_for
from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.models import EvalRun
from review.services import ReviewError, freeze_version
from review.tests.helpers import accept_all
from tasks.testing import make_task
from training_jobs.contamination import threshold
from training_jobs.kinds import TrainingRunError
from training_jobs.models import TrainingDataset, TrainingRun
from training_jobs.services.datasets import build_dataset
from training_jobs.services.runs import start_training_run
from training_jobs.testing.corpus import Corpus, add

pytestmark = pytest.mark.django_db

SALES = "Read sales.csv and write report.md with the total amount sold per region, sorted from the largest total to the smallest."
# The same task in other words: no word order, task id or content hash in common with SALES.
PARAPHRASE = "Using sales.csv, create report.md listing the total sales amount for each region, ordered from largest to smallest total."
# A second paraphrase, nearer still: two training tasks match the one frozen task.
REWORDED = "Read sales.csv and write report.md with the total amount sold in each region, sorted from the largest total to the smallest."
PHOTOS = "Rename every photo in the pictures folder to its date taken and move duplicates into a folder called dupes."


@pytest.fixture
def corpus(db):
    from llm.models import ModelEndpoint

    endpoint = ModelEndpoint.objects.create(name="agent-m", base_url="http://127.0.0.1:9/v1", model="m")
    run = EvalRun.objects.create(name="m on tasks", endpoint=endpoint, harness="builtin", config_hash="x" * 64)
    corpus = Corpus(endpoint=endpoint, run=run, group="g" * 12)
    for external_id, instruction in (
        ("t-sales", SALES),
        ("t-paraphrase", PARAPHRASE),
        ("t-reworded", REWORDED),
        ("t-photos", PHOTOS),
    ):
        corpus.revisions[external_id] = make_task(external_id, instruction).current_revision
    return corpus


def dataset_of(corpus, *tasks) -> TrainingDataset:
    """A dataset built from a fresh evaluation run holding one rewarded trajectory of each task."""
    corpus.run = EvalRun.objects.create(
        name=f"run {len(tasks)}", endpoint=corpus.endpoint, harness="builtin", config_hash="y" * 64
    )
    for task in tasks:
        add(corpus, task, task, reward=1.0)
    return build_dataset(selection={"eval_runs": [corpus.run.pk]}, name="+".join(tasks), user=None)


def test_the_threshold_is_synthesis_qas_novelty_threshold():
    from synthesis.qa_checks import DEFAULT_THRESHOLDS

    assert threshold() == DEFAULT_THRESHOLDS["novelty"] == 0.90


def test_exact_and_near_findings_name_the_task_and_the_dataset(corpus):
    exact = dataset_of(corpus, "t-sales")
    near = dataset_of(corpus, "t-paraphrase")
    findings = contamination_for([corpus.revisions["t-sales"]])
    by_source = {f.source_id: f for f in findings}
    assert {f.source_kind for f in findings} == {"dataset"} and set(by_source) == {exact.pk, near.pk}
    assert (by_source[exact.pk].kind, by_source[exact.pk].similarity, by_source[exact.pk].training_task) == (
        EXACT,
        1.0,
        "t-sales",
    )
    paraphrase = by_source[near.pk]
    assert paraphrase.kind == NEAR and paraphrase.training_task == "t-paraphrase"
    assert threshold() <= paraphrase.similarity < 1.0
    assert "a near-duplicate (similarity" in str(paraphrase) and f"dataset #{near.pk}" in str(paraphrase)
    # An unrelated task is clean, and so is a task no training data holds.
    assert contamination_for([corpus.revisions["t-photos"]]) == []


def test_training_runs_are_training_data_too(corpus, tiny_model_path):
    run = start_training_run(
        kind="rl", user=None, base_model_path=tiny_model_path, cpu=True, tasks=["t-paraphrase"], enqueue=False
    )
    (finding,) = contamination_for([corpus.revisions["t-sales"]])
    assert (finding.source_kind, finding.source_id, finding.kind) == ("run", run.pk, NEAR)


def test_freezing_refuses_with_the_list_through_the_service(corpus, admin_user, reviewer):
    dataset = dataset_of(corpus, "t-paraphrase")
    benchmark = Benchmark.objects.create(name="claw-bench")
    accept_all(
        benchmark,
        [corpus.revisions["t-sales"].task, corpus.revisions["t-photos"].task],
        admin_user=admin_user,
        reviewer=reviewer,
    )
    with pytest.raises(ReviewError) as refused:
        freeze_version(benchmark, user=admin_user)
    message = str(refused.value)
    assert "cannot be frozen: training data holds 1 of its task(s) (contamination)" in message
    assert f"t-sales r1: dataset #{dataset.pk}" in message and "t-photos" not in message
    assert not BenchmarkVersion.objects.exists()


def test_freezing_refuses_through_the_api_and_the_page(corpus, admin_user, reviewer, api_as, admin_client):
    dataset_of(corpus, "t-sales")
    benchmark = Benchmark.objects.create(name="claw-bench")
    accept_all(benchmark, [corpus.revisions["t-sales"].task], admin_user=admin_user, reviewer=reviewer)
    response = api_as(admin_user).post(f"/api/benchmarks/{benchmark.pk}/freeze/", {}, format="json")
    assert response.status_code == 400
    assert "with the same content" in str(response.json()) and "t-sales r1" in str(response.json())
    page = admin_client.post(reverse("review:freeze", args=["claw-bench"]), {"note": "v1"})
    assert page.status_code in (200, 400, 422)
    html = page.content.decode()
    assert "Nothing was frozen" in html and "contamination" in html and "t-sales r1" in html
    assert not BenchmarkVersion.objects.exists()


def test_a_dataset_leaves_out_paraphrases_of_frozen_tasks_and_lists_them(corpus, admin_user):
    benchmark = Benchmark.objects.create(name="claw-bench")
    version = BenchmarkVersion.objects.create(benchmark=benchmark, number=1)
    PinnedRevision.objects.create(version=version, revision=corpus.revisions["t-sales"])
    dataset = dataset_of(corpus, "t-paraphrase", "t-photos")
    assert dataset.status == TrainingDataset.Status.READY
    assert set(dataset.samples.values_list("task_external_id", flat=True)) == {"t-photos"}
    assert dataset.excluded == {"benchmark_duplicate": 1}
    (listed,) = dataset.stats["contamination"]
    assert (listed["task"], listed["training_task"], listed["kind"], listed["version"]) == (
        "t-sales",
        "t-paraphrase",
        NEAR,
        "claw-bench v1",
    )
    # An admin's override (with a reason) lets them in, as it does the benchmark's own tasks.
    allowed = build_dataset(
        selection={"eval_runs": [corpus.run.pk]},
        user=admin_user,
        allow_benchmark_tasks=True,
        override_reason="studying contamination on purpose",
    )
    assert set(allowed.samples.values_list("task_external_id", flat=True)) == {"t-paraphrase", "t-photos"}


def test_a_dataset_leaves_out_every_paraphrase_of_a_frozen_task_so_its_run_may_start(corpus, tiny_model_path):
    # Both match t-sales; the run's check names only the closer one of them, so the dataset must leave out both or
    # the run on what it kept is refused.
    pin(corpus.revisions["t-sales"])
    dataset = dataset_of(corpus, "t-paraphrase", "t-reworded", "t-photos")
    assert set(dataset.samples.values_list("task_external_id", flat=True)) == {"t-photos"}
    assert dataset.excluded == {"benchmark_duplicate": 2}
    listed = {(f["task"], f["training_task"], f["kind"]) for f in dataset.stats["contamination"]}
    assert listed == {("t-sales", "t-paraphrase", NEAR), ("t-sales", "t-reworded", NEAR)}
    run = start_training_run(
        kind="sft", user=None, base_model_path=tiny_model_path, cpu=True, dataset=dataset, enqueue=False
    )
    assert run.dataset == dataset


def test_training_refuses_a_dataset_holding_a_task_frozen_since(corpus, tiny_model_path):
    dataset = dataset_of(corpus, "t-paraphrase")
    benchmark = Benchmark.objects.create(name="claw-bench")
    version = BenchmarkVersion.objects.create(benchmark=benchmark, number=1)
    PinnedRevision.objects.create(version=version, revision=corpus.revisions["t-sales"])
    with pytest.raises(TrainingRunError, match="never trained on \\(contamination\\): t-sales r1 \\(claw-bench v1\\)"):
        start_training_run(
            kind="sft", user=None, base_model_path=tiny_model_path, cpu=True, dataset=dataset, enqueue=False
        )
    with pytest.raises(TrainingRunError, match="a near-duplicate"):
        start_training_run(
            kind="rl", user=None, base_model_path=tiny_model_path, cpu=True, tasks=["t-paraphrase"], enqueue=False
        )
    assert not TrainingRun.objects.exists()
    run = start_training_run(
        kind="rl", user=None, base_model_path=tiny_model_path, cpu=True, tasks=["t-photos"], enqueue=False
    )
    assert run.config["tasks"] == [corpus.revisions["t-photos"].pk]


def pin(revision, number=1):
    benchmark, _ = Benchmark.objects.get_or_create(name="claw-bench")
    version, _ = BenchmarkVersion.objects.get_or_create(benchmark=benchmark, number=number)
    PinnedRevision.objects.create(version=version, revision=revision)


def test_starting_a_run_refuses_through_the_api_and_the_page(corpus, admin_user, api_as, admin_client):
    pin(corpus.revisions["t-sales"])
    base = {"base_model_path": "/models/tiny", "harness": "builtin", "preset": "tiny-cpu"}
    api = api_as(admin_user).post(
        "/api/training/runs/", {**base, "kind": "rl", "tasks": ["t-paraphrase"]}, format="json"
    )
    assert api.status_code == 400 and "contamination" in str(api.json()) and "t-sales r1" in str(api.json())
    page = admin_client.post(reverse("training:rl-run-start"), {**base, "tasks": "t-paraphrase"})
    html = page.content.decode()
    assert page.status_code == 400 and "contamination" in html and "a near-duplicate (similarity" in html
    assert not TrainingRun.objects.exists()


def test_the_dataset_page_lists_what_was_left_out_as_contamination(corpus, viewer_client):
    pin(corpus.revisions["t-sales"])
    dataset = dataset_of(corpus, "t-paraphrase", "t-photos")
    html = viewer_client.get(reverse("training:dataset", args=[dataset.pk])).content.decode()
    assert 'data-reason="benchmark_duplicate"' in html and "paraphrase of, a benchmark version" in html
    table = html.split('id="contamination-table"')[1].split("</table>")[0]
    assert "t-sales r1" in table and "claw-bench v1" in table and "t-paraphrase" in table and "near-duplicate" in table
