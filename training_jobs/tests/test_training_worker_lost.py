"""A gpu worker killed in the middle of a training run: its trainer exits with it (it watches the worker), the next
worker queues the lost job again (jobs.recover_lost), and that attempt goes on from the run's last checkpoint by
itself, with the steps past the checkpoint forgotten and trained again. Nobody has to `train --resume`."""

import os
import shutil

import pytest

from jobs.testing import start_celery_worker
from lib.testing import wait_until
from training_jobs.models import Checkpoint, TrainingMetric, TrainingRun
from training_jobs.run_jobs import group_alive, run_dir
from training_jobs.services.runs import cancel_training_run, start_training_run
from training_jobs.testing.runs import trainer_pid

pytestmark = [pytest.mark.workers, pytest.mark.once, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def offline():
    # The worker's training folder is its own settings' (var/training), so the run's folder is removed at the end.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


@pytest.fixture
def workers():
    started = []
    yield started
    for worker in started:
        worker.stop()
        worker.cleanup()


def test_a_killed_workers_run_goes_on_from_its_last_checkpoint(
    settings, celery_broker_url, workers, dataset, tiny_model_path
):
    settings.CLAWGYM_JOB_ENGINE = "celery"
    settings.CELERY_BROKER_URL = celery_broker_url
    first = start_celery_worker(celery_broker_url, queues="gpu")
    workers.append(first)
    run = start_training_run(
        kind="sft",
        dataset=dataset,
        base_model_path=tiny_model_path,
        preset="tiny-cpu",
        cpu=True,
        overrides={"max_steps": 400, "save_steps": 2},
        user=None,
    )
    pid = trainer_pid(run)
    wait_until(lambda: Checkpoint.objects.filter(run=run).exists(), "a first checkpoint", timeout=300)
    first.kill()  # kill -9: the job is never acknowledged nor recorded as ended
    wait_until(lambda: not group_alive(pid), "the trainer to notice its worker is gone", timeout=60)
    run.refresh_from_db()
    assert run.status == "running" and run.attempt == 1  # nobody said otherwise yet
    last_before = Checkpoint.objects.filter(run=run).order_by("-step").first()

    second = start_celery_worker(celery_broker_url, queues="gpu")  # it queues the lost job again on start
    workers.append(second)
    wait_until(lambda: TrainingRun.objects.get(pk=run.pk).attempt == 2, "the job's second attempt", timeout=300)
    run.refresh_from_db()
    resumed_from = run.resumed_from
    assert resumed_from is not None and resumed_from.step >= last_before.step
    line = f"resuming from checkpoint step {resumed_from.step}"
    wait_until(
        lambda: line in TrainingRun.objects.get(pk=run.pk).job_run.log_tail, "the job's log saying so", timeout=30
    )
    # The resumed trainer trains past the checkpoint; each step is logged once.
    wait_until(
        lambda: TrainingMetric.objects.filter(run=run, step__gt=resumed_from.step + 1).exists(),
        "a step trained past the checkpoint",
    )
    steps = list(TrainingMetric.objects.filter(run=run).order_by("step").values_list("step", flat=True))
    assert steps == sorted(set(steps)), steps
    cancel_training_run(run, user=None)
    wait_until(lambda: TrainingRun.objects.get(pk=run.pk).status == "cancelled", "the cancel", timeout=60)
    shutil.rmtree(run_dir(run), ignore_errors=True)
