"""Bad SFT input fails before anything is queued, saying what to change, on the form, the API and `train`: a run that
would train on nothing (every assistant token past max_length), an empty dataset, a base model that is no model folder,
GPUs this install lacks. Runs that train on less than asked are queued with the share of samples cut, as a warning.
The trainer's side: a run whose prepared dataset holds no trainable token never ends "succeeded", and a failure says
"resumable from its last checkpoint" only when there is one."""

import json
import re
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from evaluation.models import EvalRun
from tasks.models import Task
from tasks.testing import make_task
from training_jobs.kinds import TrainingRunError
from training_jobs.models import Checkpoint, TrainingMetric, TrainingRun
from training_jobs.run_jobs import _launch, _Stream, execute_training, run_dir
from training_jobs.services.datasets import build_dataset
from training_jobs.services.runs import start_training_run
from training_jobs.testing.corpus import add, conversation, make_corpus

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("training_dir")]


@pytest.fixture
def first_assistant(dataset, model) -> int:
    """Where the tiny tokenizer's render of the samples reaches its first assistant turn, at the earliest (about 293:
    the ids written into the conversations make it a few tokens longer on PostgreSQL, whose sequences run on)."""
    from training_jobs.kinds.sft_checks import trainable_report

    return min(
        c.first_assistant_token
        for c in trainable_report(dataset, model, None).counted
        if c.first_assistant_token is not None
    )


@pytest.fixture
def model(tiny_model_path) -> str:
    """The tiny Qwen3's folder (weights, config, tokenizer with generation markers)."""
    return tiny_model_path


@pytest.fixture(autouse=True)
def cpu_only(settings):
    settings.CLAWGYM_TRAINING_GPUS = 0  # this machine, whatever it is: no GPU


@pytest.fixture
def corpus(db):
    return make_corpus()


@pytest.fixture
def dataset(corpus):
    """Seven samples, all training ones, and one more whose long task statement puts its first assistant turn far
    later than the others'."""
    corpus.revisions["g-long"] = make_task(
        "g-long", "Do g-long.", files=[], source=Task.Source.PERSONA
    ).current_revision
    long_ask = conversation("g-long")
    long_ask[1] = {**long_ask[1], "content": long_ask[1]["content"] + " Mind the details, please. " * 40}
    add(corpus, "g-long", "g-long", reward=1.0, in_run=False, messages=long_ask)
    return build_dataset(
        selection={"eval_runs": [corpus.run.pk], "groups": [corpus.group]},
        filters={"validation_share": 0, "max_tokens": 65536},
        name="with a long ask",
        user=None,
    )


def start(dataset, path, **edits):
    return start_training_run(
        kind="sft",
        dataset=dataset,
        base_model_path=path,
        preset="tiny-cpu",
        cpu=True,
        overrides=edits,
        enqueue=False,
        user=None,
    )


def test_a_run_with_no_assistant_token_left_is_refused_everywhere(
    dataset, model, admin_client, api_as, admin_user, first_assistant
):
    says = (
        f"none of the 8 training samples keeps an assistant token: the first assistant turn starts at token "
        f"{first_assistant}"
    )
    with pytest.raises(TrainingRunError, match=says):
        start(dataset, model, max_length=first_assistant)
    page = admin_client.post(
        reverse("training:run-start"),
        {
            "dataset": dataset.pk,
            "base_model_path": model,
            "preset": "tiny-cpu",
            "cpu": "on",
            "overrides": f"max_length={first_assistant}",
        },
    )
    assert page.status_code == 400 and "no sample would be trained on" in page.content.decode()
    api = api_as(admin_user).post(
        "/api/training/runs/",
        {
            "dataset": dataset.pk,
            "base_model_path": model,
            "preset": "tiny-cpu",
            "cpu": True,
            "overrides": {"max_length": 100},
        },
        format="json",
    )
    assert api.status_code == 400 and "no sample would be trained on" in api.json()["detail"]
    assert "Raise max_length (max_length=" in api.json()["detail"]
    with pytest.raises(CommandError, match="no sample would be trained on"):
        call_command(
            "train",
            "--dataset",
            str(dataset.pk),
            "--base-model",
            model,
            "--preset",
            "tiny-cpu",
            "--cpu",
            "--set",
            "max_length=64",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    assert not TrainingRun.objects.exists()


def test_samples_that_lose_their_assistant_turns_are_warned_about_with_their_share(
    dataset, model, admin_client, api_as, admin_user, first_assistant
):
    # Cut just past the others' first assistant turn: the long ask keeps none of its own, the others part of theirs.
    from training_jobs.base_models import add_by_path
    from training_jobs.kinds.sft_checks import trainable_report

    cut = first_assistant + 10
    longest = trainable_report(dataset, model, cut).longest  # the long ask, tokenized (not its usage)
    assert 1000 < longest != max(dataset.samples.values_list("tokens", flat=True))
    run = start(dataset, model, max_length=cut)
    assert run.warnings == [
        f"1 of 8 training samples (12%) lose all their assistant turns when cut to max_length {cut} and train on "
        "nothing",
        f"7 of 8 training samples (88%) lose part of their assistant turns when cut to max_length {cut} "
        f"(max_length={longest:,} keeps every sample whole)",
    ]
    assert "warning: 1 of 8 training samples (12%) lose all their assistant turns" in run.log_tail
    response = admin_client.post(
        reverse("training:run-start"),
        {
            "dataset": dataset.pk,
            "base_model_path": model,
            "preset": "tiny-cpu",
            "cpu": "on",
            "overrides": f"max_length={cut}",
        },
        follow=True,
    )
    assert response.status_code == 200 and 'class="msg-warning"' in response.content.decode()
    assert "1 of 8 training samples (12%) lose all their assistant turns" in response.content.decode()
    created = api_as(admin_user).post(
        "/api/training/runs/",
        {
            "dataset": dataset.pk,
            "base_model_path": model,
            "preset": "tiny-cpu",
            "cpu": True,
            "overrides": {"max_length": cut},
        },
        format="json",
    )
    assert created.status_code == 201 and len(created.json()["warnings"]) == 2
    err = StringIO()
    with pytest.raises(CommandError, match="no job worker took"):  # it got as far as waiting for a gpu worker
        call_command(
            "train",
            "--dataset",
            str(dataset.pk),
            "--base-model",
            model,
            "--preset",
            "tiny-cpu",
            "--cpu",
            "--set",
            f"max_length={cut}",
            "--start-timeout",
            "0",
            stdout=StringIO(),
            stderr=err,
        )
    assert "warning: 1 of 8 training samples (12%)" in err.getvalue()
    # Counted with the same tokenizer files when the dataset was built: the stored counts are used, the same figures.
    tiny = add_by_path("tiny", model)[0]
    tokenized = build_dataset(selection=dataset.selection, filters=dataset.filters, base_model=tiny, user=None)
    stored = trainable_report(tokenized, tiny.path, cut)
    tokenized.tokenizer_sha256 = ""  # as if counted with another tokenizer: counted again now
    counted = trainable_report(tokenized, tiny.path, cut)
    assert not stored.counted_now and counted.counted_now and stored.counted == counted.counted
    assert stored.samples == 9 and stored.samples_without == 1  # the "long" one is kept now: its usage said 90,000
    # No warning when everything fits.
    assert start(dataset, model).warnings == []


def test_an_empty_dataset_is_refused_on_the_form_the_api_and_the_command(
    corpus, model, admin_client, api_as, admin_user
):
    corpus.run = EvalRun.objects.create(
        name="bench only", endpoint=corpus.endpoint, harness="builtin", config_hash="z" * 64
    )
    add(corpus, "b", "bench-task", reward=1.0)
    empty = build_dataset(selection={"eval_runs": [corpus.run.pk]}, name="nothing left", user=None)
    says = f"dataset #{empty.pk} is empty: the one trajectory is a benchmark task (the contamination guard), excluded"
    with pytest.raises(TrainingRunError, match=re.escape(f"{says}; nothing to train on")):
        start(empty, model)
    form = admin_client.get(reverse("training:run-start")).content.decode()
    assert "nothing left" not in form  # not offered
    posted = admin_client.post(
        reverse("training:run-start"),
        {"dataset": empty.pk, "base_model_path": model, "preset": "tiny-cpu", "cpu": "on"},
    )
    assert posted.status_code == 400
    api = api_as(admin_user).post(
        "/api/training/runs/",
        {"dataset": empty.pk, "base_model_path": model, "preset": "tiny-cpu", "cpu": True},
        format="json",
    )
    assert api.status_code == 400 and says in api.json()["detail"]
    with pytest.raises(CommandError, match=re.escape(says)):
        call_command(
            "train",
            "--dataset",
            str(empty.pk),
            "--base-model",
            model,
            "--preset",
            "tiny-cpu",
            "--cpu",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    assert not TrainingRun.objects.exists()


def test_a_missing_base_model_and_missing_gpus_are_refused_before_queueing(
    dataset, model, settings, admin_client, api_as, admin_user
):
    with pytest.raises(TrainingRunError, match="the base model: /nowhere/qwen3 is not a folder on this machine"):
        start(dataset, "/nowhere/qwen3")
    posted = admin_client.post(
        reverse("training:run-start"),
        {"dataset": dataset.pk, "base_model_path": "/nowhere", "preset": "tiny-cpu", "cpu": "on"},
    )
    assert posted.status_code == 400 and "/nowhere is not a folder on this machine" in posted.content.decode()
    with pytest.raises(CommandError, match="holds no config.json: not a model folder"):
        call_command(
            "train",
            "--dataset",
            str(dataset.pk),
            "--base-model",
            "/tmp",
            "--preset",
            "tiny-cpu",
            "--cpu",
            stdout=StringIO(),
            stderr=StringIO(),
        )

    # The paper preset on an install without a GPU: told to train on CPU, before anything is queued.
    api = api_as(admin_user)
    refused = api.post(
        "/api/training/runs/", {"dataset": dataset.pk, "base_model_path": model, "preset": "paper"}, format="json"
    )
    assert refused.status_code == 400
    assert refused.json()["detail"].startswith(
        "this install has no GPU (CLAWGYM_TRAINING_GPUS) and the paper preset "
        "asks for 8 (distributed.gpus): train on CPU"
    )
    with pytest.raises(CommandError, match="this install has no GPU"):
        call_command("train", "--dataset", str(dataset.pk), "--base-model", model, stdout=StringIO(), stderr=StringIO())
    settings.CLAWGYM_TRAINING_GPUS = 2
    with pytest.raises(TrainingRunError, match=r"the paper preset asks for 8 GPUs .* has 2 .*: set distributed.gpus=2"):
        start_training_run(kind="sft", dataset=dataset, base_model_path=model, preset="paper", enqueue=False, user=None)
    assert (
        start_training_run(
            kind="sft",
            dataset=dataset,
            base_model_path=model,
            preset="paper",
            enqueue=False,
            overrides={"distributed.gpus": 2},
            user=None,
        ).config["distributed"]["gpus"]
        == 2
    )
    # Counted on this machine unless the gpu workers seen lately are other machines: then their trainer finds out.
    from django.utils import timezone

    from jobs.models import Worker

    settings.CLAWGYM_TRAINING_GPUS = -1
    now = timezone.now()
    Worker.objects.create(
        name="gpu-host:1:0", host="gpu-host-elsewhere", engine="celery", queues="gpu", started_at=now, seen_at=now
    )
    assert start_training_run(
        kind="sft", dataset=dataset, base_model_path=model, preset="paper", enqueue=False, user=None
    )
    assert TrainingRun.objects.count() == 2


def test_resuming_with_an_edit_that_leaves_nothing_to_train_is_refused(dataset, model):
    run = start(dataset, model)
    TrainingRun.objects.filter(pk=run.pk).update(status="failed")
    from training_jobs.services.runs import resume_training_run

    with pytest.raises(TrainingRunError, match="no sample would be trained on"):
        resume_training_run(run, overrides={"max_length": 50}, enqueue=False, user=None)
    run.refresh_from_db()
    assert run.status == "failed" and run.config["max_length"] == 2048


# --- the trainer's side ---------------------------------------------------------------------------------------


def fake_trainer(run: TrainingRun, script: str) -> tuple[str, str]:
    """What the job makes of a trainer that prints `script`'s lines and exits as it does (a real subprocess)."""
    folder = run_dir(run)
    folder.mkdir(parents=True, exist_ok=True)
    return _launch(run, [sys.executable, "-c", script], folder, _Stream(run), None)


def test_a_trainer_that_saw_no_trainable_token_never_succeeds(dataset, model):
    run = start(dataset, model)
    finished = (
        'print(\'{"event": "dataset", "samples": 8, "sequences": 1, "trainable_tokens": %d}\'); '
        'print(\'{"event": "finished", "step": 2}\')'
    )
    assert fake_trainer(run, finished % 0) == (
        "failed",
        "the trainer's steps saw no trainable token: nothing was learnt",
    )
    assert fake_trainer(run, finished % 12) == ("succeeded", "")
    refusing = (
        'print(\'{"event": "error", "message": "no sample would be trained on: cut to max_length 16"}\'); '
        "raise SystemExit(3)"
    )
    status, error = fake_trainer(run, refusing)
    assert status == "failed" and error.startswith("no sample would be trained on: cut to max_length 16\n")
    assert "resum" not in error


def test_a_failure_says_resumable_only_when_there_is_a_checkpoint(dataset, model):
    run = start(dataset, model)
    status, error = fake_trainer(run, "print('Traceback (most recent call last):'); raise SystemExit(1)")
    assert status == "failed"
    assert error.startswith(
        f"the trainer exited with 1; no checkpoint was saved, so `train --resume {run.pk}` starts "
        "it again from the start\n"
    )
    assert "resumable from its last checkpoint" not in error
    Checkpoint.objects.create(run=run, step=4, path="/tmp/checkpoint-4")
    status, error = fake_trainer(run, "raise SystemExit(1)")
    assert error.startswith(
        f"the trainer exited with 1; resumable from its last checkpoint, step 4 (`train --resume {run.pk}`)"
    )


@pytest.mark.once  # ~30 s: accelerate launch and TRL's preparation of the dataset
def test_the_sft_trainer_refuses_a_dataset_with_no_trainable_token(dataset, model):
    """Through `accelerate launch -m training.trainers.sft`: a config edited past the checks (max_length below
    every first assistant turn) stops before the first step, saying why."""
    run = start(dataset, model)
    TrainingRun.objects.filter(pk=run.pk).update(config={**run.config, "max_length": 64})
    result = execute_training(run.pk)
    run.refresh_from_db()
    assert result["status"] == "failed" and run.steps == 0, run.log_tail
    assert run.error.startswith(
        "no sample would be trained on: cut to max_length 64, none of the 8 samples keeps an assistant token"
    )
    assert "resumable" not in run.error and "0 trainable tokens" in run.log_tail
    assert not TrainingMetric.objects.filter(run=run).exists() and not Checkpoint.objects.filter(run=run).exists()
    assert json.loads((run_dir(run) / f"trainer-{run.attempt}.json").read_text())["max_length"] == 64


def test_the_run_page_offers_a_resume_only_from_a_checkpoint_it_has(dataset, model, admin_client):
    run = start(dataset, model)
    TrainingRun.objects.filter(pk=run.pk).update(
        status="failed",
        error="the trainer exited with 1; no checkpoint was "
        "saved, so `train --resume 1` starts it again from the start",
    )
    page = admin_client.get(reverse("training:run", args=[run.pk])).content.decode()
    assert "Start again (no checkpoint was saved)" in page and "Resume from the last checkpoint" not in page
    after = admin_client.post(reverse("training:run-action", args=[run.pk, "resume"]), follow=True).content.decode()
    assert f"Run #{run.pk} queued again from the start (it has no checkpoint)." in after
    Checkpoint.objects.create(run=run, step=2, path="/tmp/checkpoint-2")
    TrainingRun.objects.filter(pk=run.pk).update(status="failed")
    assert (
        "Resume from the last checkpoint" in admin_client.get(reverse("training:run", args=[run.pk])).content.decode()
    )
    after = admin_client.post(reverse("training:run-action", args=[run.pk, "resume"]), follow=True).content.decode()
    assert f"Run #{run.pk} queued again from checkpoint step 2." in after
