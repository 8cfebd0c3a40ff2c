"""A reward-threshold study's cells, step by step: each builds its dataset at its minimum reward from the given run
(training_jobs' dataset corpus: rewards 1.0, 0.5, 0.4, 0.0 …), starts an SFT run of the tiny model on it, and once
that run succeeded has its last checkpoint evaluated. What the gpu workers do (train, serve, evaluate) is played here
by hand: the run is marked succeeded with a checkpoint, and the serving job's evaluation run is recorded as
"evaluate every checkpoint" records it. An empty dataset fails its cell with the dataset's reason."""

import pytest

from evaluation.testing import TASKS, endpoint, finished_run, freeze, make_tasks
from jobs.models import JobRun
from studies.kinds import StudyError
from studies.models import Study, StudyCell
from studies.services import advance_study, create_study, study_json
from tasks.models import TaskRevision
from training.tiny_model import tiny_model
from training_jobs.job_kinds import EVALUATE_JOB
from training_jobs.models import BaseModel, Checkpoint, CheckpointEvaluation, TrainingRun
from training_jobs.testing.corpus import make_corpus

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> str:
    return str(tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-qwen3"))


def test_each_threshold_builds_its_dataset_trains_and_is_evaluated(tiny_path):
    corpus = make_corpus()
    version = freeze(make_tasks().values())
    BaseModel.objects.create(name="tiny", path=tiny_path)
    study = create_study(
        kind="reward_threshold",
        params={
            "values": "1.0,0.5,0.99",
            "eval_runs": [corpus.run.pk],
            "base_model": "tiny",
            "benchmark_version": version.pk,
            "harness": "builtin",
        },
        user=None,
    )
    assert [c.label for c in study.cells.order_by("index")] == ["threshold 0.5", "threshold 0.99", "threshold 1"]

    advance_study(study.pk)  # the datasets
    cells = {c.label: c for c in study.cells.select_related("dataset")}
    assert cells["threshold 0.5"].dataset.filters["min_reward"] == 0.5
    assert cells["threshold 1"].dataset.filters["min_reward"] == 1.0
    kept = {label: cell.dataset.samples.count() for label, cell in cells.items()}
    # good (1.0), half (0.5) and long (1.0: no token cap asked); at 0.99 and 1.0 half is left out.
    assert kept == {"threshold 0.5": 3, "threshold 0.99": 2, "threshold 1": 2}
    assert all(cell.status == StudyCell.Status.RUNNING for cell in cells.values())

    advance_study(study.pk)  # the SFT runs, queued on the gpu queue
    advance_study(study.pk)  # nothing twice
    cells = {c.label: c for c in study.cells.select_related("training_run")}
    runs = {label: cell.training_run for label, cell in cells.items()}
    assert all(run is not None and run.kind == "sft" and run.status == "queued" for run in runs.values())
    assert TrainingRun.objects.count() == 3
    assert runs["threshold 0.5"].dataset_id == cells["threshold 0.5"].dataset_id

    # The gpu worker trained two of them; the third failed.
    for label in ("threshold 0.5", "threshold 1"):
        TrainingRun.objects.filter(pk=runs[label].pk).update(status="succeeded")
        Checkpoint.objects.create(run=runs[label], step=4, path=f"/tmp/{runs[label].pk}/checkpoint-4")
    TrainingRun.objects.filter(pk=runs["threshold 0.99"].pk).update(status="failed", error="CUDA out of memory")
    advance_study(study.pk)
    assert JobRun.objects.filter(kind=EVALUATE_JOB).count() == 2  # their checkpoints served and evaluated
    failed = study.cells.get(label="threshold 0.99")
    assert failed.status == StudyCell.Status.FAILED and "CUDA out of memory" in failed.error

    # What the serving job records: each last checkpoint's evaluation run on the version.
    evaluated = {}
    for label, score in (("threshold 0.5", 1.0), ("threshold 1", 0.5)):
        run = finished_run(endpoint(f"ckpt-{runs[label].pk}-4"), version, {t: [score, score] for t in TASKS})
        CheckpointEvaluation.objects.create(checkpoint=runs[label].checkpoints.get(), eval_run=run)
        evaluated[label] = run
    study = advance_study(study.pk)
    assert study.status == Study.Status.INCOMPLETE
    report = study_json(study)
    assert [(c["label"], c["status"], c["mean"]) for c in report["cells"]] == [
        ("threshold 0.5", "complete", 1.0),
        ("threshold 0.99", "failed", None),
        ("threshold 1", "complete", 0.5),
    ]
    assert report["best"]["label"] == "threshold 0.5" and report["best"]["eval_run"] == evaluated["threshold 0.5"].pk
    assert [(c["label"], c["mean_difference"]) for c in report["comparisons"]] == [("threshold 1", 0.5)]
    assert report["missing"] == ["threshold 0.99"]


def test_an_empty_dataset_fails_its_cell_with_the_reason(tiny_path):
    corpus = make_corpus()
    version = freeze(make_tasks().values())
    BaseModel.objects.create(name="tiny", path=tiny_path)
    study = create_study(
        kind="synthesis_routes",
        params={
            "routes": "skill",
            "eval_runs": [corpus.run.pk],
            "base_model": "tiny",
            "benchmark_version": version.pk,
        },
        user=None,
    )
    # The run's rollouts are all of persona-route tasks (the corpus's skill tasks are in a rollout group, not the run).
    study = advance_study(study.pk)
    cell = study.cells.get()
    assert cell.dataset.selection == {"eval_runs": [corpus.run.pk], "sources": ["skill"]}
    assert cell.status == StudyCell.Status.FAILED and f"dataset #{cell.dataset_id} is empty" in cell.error
    assert study.status == Study.Status.INCOMPLETE and study_json(study)["best"] is None


def test_synthesis_routes_find_the_runs_of_the_batches_kept_tasks(tiny_path):
    corpus = make_corpus()
    version = freeze(make_tasks().values())
    BaseModel.objects.create(name="tiny", path=tiny_path)
    # What the catalog stage writes of a kept task: the batch it came from (its route is the task's source).
    for task in ("sales-a", "sales-b"):  # persona tasks the corpus's run rolled out
        TaskRevision.objects.filter(pk=corpus.revisions[task].pk).update(metadata={"synthesis": {"batch": 7}})
    ask = {"batches": "7", "base_model": "tiny", "benchmark_version": version.pk}
    with pytest.raises(StudyError, match="route.s. skill, both need kept tasks of each of their routes"):
        create_study(kind="synthesis_routes", params=ask, user=None)
    study = create_study(kind="synthesis_routes", params={**ask, "routes": "persona"}, user=None)
    assert study.params["eval_runs"] == [corpus.run.pk] and study.params["batches"] == [7]
    study = advance_study(study.pk)
    cell = study.cells.get()
    assert cell.dataset.selection == {"eval_runs": [corpus.run.pk], "sources": ["persona"]}
    assert cell.dataset.samples.count() == 3 and cell.status == StudyCell.Status.RUNNING  # good, half, long
    with pytest.raises(StudyError, match="no kept task of synthesis batch #999"):
        create_study(kind="synthesis_routes", params={**ask, "batches": [999]}, user=None)
