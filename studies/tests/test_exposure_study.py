"""A training-exposure study: each checkpoint of a training run is a cell. A checkpoint evaluated on the version
already is followed as it is; one that is not has its run's "evaluate every checkpoint" job queued (once, however
often the study advances), and when that job fails the cell says why and the study ends incomplete, naming it."""

import pytest

from evaluation.testing import TASKS, endpoint, finished_run, freeze, make_tasks
from jobs.models import JobRun
from studies.models import Study, StudyCell
from studies.services import advance_study, create_study, study_json
from training_jobs.job_kinds import EVALUATE_JOB
from training_jobs.models import Checkpoint, CheckpointEvaluation, TrainingRun

pytestmark = pytest.mark.django_db


def test_each_checkpoint_is_a_cell_and_one_that_cannot_be_served_says_why():
    version = freeze(make_tasks().values())
    training = TrainingRun.objects.create(name="sft", kind="sft", base_model_path="/models/tiny", status="succeeded")
    evaluated = {}
    for step, score in ((60, 0.5), (120, 1.0)):
        checkpoint = Checkpoint.objects.create(run=training, step=step, path=f"/tmp/checkpoint-{step}")
        run = finished_run(endpoint(f"ckpt-{training.pk}-{step}"), version, {t: [score, score] for t in TASKS})
        CheckpointEvaluation.objects.create(checkpoint=checkpoint, eval_run=run)
        evaluated[step] = run
    Checkpoint.objects.create(run=training, step=180, path="/tmp/checkpoint-180")

    study = create_study(
        kind="training_exposure",
        params={"training_run": training.pk, "benchmark_version": version.pk, "harness": "builtin"},
        user=None,
    )
    assert [c.label for c in study.cells.order_by("index")] == ["step 60", "step 120", "step 180"]
    advance_study(study.pk)
    advance_study(study.pk)  # a second step starts nothing twice
    cells = {c.label: c for c in study.cells.all()}
    assert cells["step 60"].eval_run == evaluated[60] and cells["step 60"].status == StudyCell.Status.COMPLETE
    assert cells["step 120"].eval_run == evaluated[120] and cells["step 120"].status == StudyCell.Status.COMPLETE
    assert cells["step 180"].status == StudyCell.Status.RUNNING and cells["step 180"].eval_run is None
    job = JobRun.objects.get(kind=EVALUATE_JOB)
    assert job.params["run_id"] == training.pk and job.params["include_base"] is False and job.queue == "gpu"
    assert Study.objects.get(pk=study.pk).status == Study.Status.RUNNING

    # The gpu worker could not serve the checkpoint: its job failed.
    JobRun.objects.filter(pk=job.pk).update(status=JobRun.Status.FAILED, error="Traceback…\nServingError: no GPU")
    study = advance_study(study.pk)
    assert study.status == Study.Status.INCOMPLETE and study.finished_at is not None
    report = study_json(study)
    last = report["cells"][2]
    assert last["status"] == "failed" and "ServingError: no GPU" in last["error"] and f"job #{job.pk}" in last["error"]
    assert report["missing"] == ["step 180"]
    assert report["best"] == {
        "cell": 1,
        "label": "step 120",
        "eval_run": evaluated[120].pk,
        "mean": 1.0,
        "ci": evaluated[120].summary["overall"]["ci"],
    }
    assert [(c["label"], c["mean_difference"]) for c in report["comparisons"]] == [("step 60", 0.5)]
    assert [row["mean"] for row in report["cells"]] == [0.5, 1.0, None]
