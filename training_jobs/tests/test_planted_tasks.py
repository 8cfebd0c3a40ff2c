"""A planted flaw's task is never trained on: dataset building leaves its trajectories out (no override lets them
in) and training runs refuse it or leave it out of a selection (training_jobs)."""

import pytest

from benchmarks.models import Benchmark
from review.models import BenchmarkCandidate, PlantedFlaw
from training_jobs.kinds.base import TrainingRunError
from training_jobs.kinds.rl import resolve_tasks, tasks_from
from training_jobs.services.datasets import build_dataset
from training_jobs.testing.corpus import make_corpus

pytestmark = pytest.mark.django_db


def plant_on(task):
    """Mark `task` as a planted flaw's copy, as review.planting leaves it."""
    benchmark = Benchmark.objects.get_or_create(name="planted-bench")[0]
    candidate = BenchmarkCandidate.objects.create(task=task, benchmark=benchmark)
    return PlantedFlaw.objects.create(
        benchmark=benchmark, candidate=candidate, kind="input_removed", component="input_file", change="emptied"
    )


def test_datasets_leave_planted_tasks_out_whatever_the_override(admin_user):
    corpus = make_corpus()
    selection = {"eval_runs": [corpus.run.pk], "groups": [corpus.group]}
    before = build_dataset(selection=selection, user=None)
    assert "g-1" in {s.task_external_id for s in before.samples.all()}
    plant_on(corpus.revisions["g-1"].task)
    after = build_dataset(selection=selection, allow_benchmark_tasks=True, override_reason="ablation", user=admin_user)
    assert after.excluded["planted_flaw"] == 1
    assert "g-1" not in {s.task_external_id for s in after.samples.all()}
    assert after.trajectories_count == before.trajectories_count  # the override let the benchmark task in


def test_training_runs_refuse_planted_tasks_and_selections_leave_them_out():
    corpus = make_corpus()
    plant_on(corpus.revisions["g-2"].task)
    with pytest.raises(TrainingRunError, match="planted flaw.*g-2"):
        resolve_tasks(["g-1", "g-2"])
    assert [r.task.external_id for r in resolve_tasks(["g-1"])] == ["g-1"]
    chosen = {r.task.external_id for r in tasks_from("prefix=g-")}
    assert chosen == {"g-1", "g-3", "g-4", "g-5"}
