"""Training kinds as an interface (training_jobs.kinds): SFT and RL are named implementations picked by name, an
unknown name is refused, and both start through the one entry point, services.runs.start_training_run, with each
kind's presets and rules."""

import pytest
from django.template.loader import get_template
from django.urls import reverse

from tasks.testing import make_task
from training_jobs.kinds import KINDS, TrainingKind, TrainingRunError, get_kind
from training_jobs.models import TrainingRun
from training_jobs.services.runs import clone_training_run, run_json, start_training_run
from training_jobs.testing.rl_tasks import distinct_instruction

pytestmark = pytest.mark.django_db


def test_the_kinds_are_named_implementations_of_one_interface():
    assert list(KINDS) == ["sft", "rl"] == [value for value, _ in TrainingRun.Kind.choices]
    for name, kind in KINDS.items():
        assert isinstance(kind, TrainingKind) and kind.name == name and get_kind(name) is kind
        assert kind.job == f"training.{name}_run"
        assert {"paper", "tiny-cpu"} <= set(kind.presets)
        get_template(kind.page_template)  # the run page's part of the kind exists


def test_an_unknown_kind_is_refused_loudly_and_records_nothing(dataset):
    with pytest.raises(TrainingRunError, match=r"unknown training kind 'dpo'; known: sft, rl"):
        get_kind("dpo")
    with pytest.raises(TrainingRunError, match="unknown training kind 'dpo'"):
        start_training_run(kind="dpo", dataset=dataset, base_model_path="/models/x", user=None, enqueue=False)
    with pytest.raises(TypeError):  # the kind is always said: there is no default kind
        start_training_run(dataset=dataset, base_model_path="/models/x", user=None, enqueue=False)
    assert not TrainingRun.objects.exists()


def test_presets_and_rules_are_each_kinds_own():
    sft, rl = get_kind("sft"), get_kind("rl")
    assert sft.build_config("paper")["gradient_accumulation_steps"] == 16
    assert rl.build_config("paper")["num_generations"] == 8
    assert sft.presets["tiny-cpu"]["max_steps"] == 2 and rl.presets["tiny-cpu"]["max_steps"] == 2
    # One kind's keys are unknown to the other's config.
    with pytest.raises(TrainingRunError, match="unknown config key 'num_generations'"):
        sft.build_config("paper", {"num_generations": 4})
    with pytest.raises(TrainingRunError, match="unknown config key 'lora.enabled'"):
        rl.build_config("paper", {"lora.enabled": True})
    # Each kind's rules across keys and choices.
    with pytest.raises(TrainingRunError, match="not a multiple"):
        sft.build_config("paper", {"distributed.gpus": 3})
    with pytest.raises(TrainingRunError, match="num_generations must be at least 2"):
        rl.build_config("paper", {"num_generations": 1})
    with pytest.raises(TrainingRunError, match="policy.backend takes one of live, vllm"):
        rl.build_config("paper", {"policy.backend": "sglang"})
    with pytest.raises(TrainingRunError, match="unknown preset 'huge'"):
        sft.build_config("huge")
    with pytest.raises(TrainingRunError, match="unknown RL preset 'huge'"):
        rl.build_config("huge")
    # A CPU run: what a CPU cannot do, each kind's way.
    assert sft.for_cpu(sft.build_config("paper"))["distributed"] == {"deepspeed": None, "fsdp": None, "gpus": 0}
    assert rl.for_cpu(rl.build_config("paper"))["policy"]["backend"] == "live"


def test_sft_and_rl_start_through_the_same_entry_point(dataset, tiny_model_path):
    task = make_task("kind-rl", distinct_instruction("kind-rl")).current_revision
    sft = start_training_run(
        kind="sft", dataset=dataset, base_model_path=tiny_model_path, preset="tiny-cpu", cpu=True, user=None
    )
    rl = start_training_run(
        kind="rl",
        tasks=[task.pk],
        harness="builtin",
        base_model_path=tiny_model_path,
        preset="tiny-cpu",
        cpu=True,
        user=None,
    )
    sft.refresh_from_db()
    rl.refresh_from_db()
    assert (sft.kind, sft.job_run.kind, sft.dataset) == ("sft", "training.sft_run", dataset)
    assert (rl.kind, rl.job_run.kind, rl.dataset, rl.config["tasks"]) == ("rl", "training.rl_run", None, [task.pk])
    assert sft.job_run.queue == rl.job_run.queue == "gpu"
    assert sft.name.startswith("sft sales on ") and rl.name.startswith("rl on 1 task(s) from ")
    assert set(run_json(sft)) == {"run", "status", "steps", "checkpoints", "metrics"}
    assert set(run_json(rl)) == {"run", "status", "steps", "rollouts", "checkpoints", "metrics"}
    # A clone goes through the same entry point, with what its run was given.
    assert clone_training_run(rl, {"max_steps": 3}, user=None, enqueue=False).config["tasks"] == [task.pk]
    assert clone_training_run(sft, user=None, enqueue=False).dataset == dataset


def test_each_kind_refuses_what_the_other_trains_on(dataset, tiny_model_path):
    task = make_task("kind-other", distinct_instruction("kind-other")).current_revision
    with pytest.raises(TrainingRunError, match="an SFT run trains on a dataset"):
        start_training_run(kind="sft", dataset=dataset, tasks=[task.pk], base_model_path=tiny_model_path, user=None)
    with pytest.raises(TrainingRunError, match="give the dataset to train on"):
        start_training_run(kind="sft", base_model_path=tiny_model_path, user=None)
    with pytest.raises(TrainingRunError, match="an RL run trains on tasks"):
        start_training_run(kind="rl", dataset=dataset, tasks=[task.pk], base_model_path=tiny_model_path, user=None)
    with pytest.raises(TrainingRunError, match="give a base model"):
        start_training_run(kind="rl", tasks=[task.pk], user=None)
    assert not TrainingRun.objects.exists()


def test_the_run_page_shows_the_kinds_own_part(dataset, tiny_model_path, admin_client):
    task = make_task("kind-page", distinct_instruction("kind-page")).current_revision
    sft = start_training_run(
        kind="sft",
        dataset=dataset,
        base_model_path=tiny_model_path,
        preset="tiny-cpu",
        cpu=True,
        user=None,
        enqueue=False,
    )
    rl = start_training_run(
        kind="rl",
        tasks=[task.pk],
        base_model_path=tiny_model_path,
        preset="tiny-cpu",
        cpu=True,
        user=None,
        enqueue=False,
    )
    sft_page = admin_client.get(reverse("training:run", args=[sft.pk])).content.decode()
    rl_page = admin_client.get(reverse("training:run", args=[rl.pk])).content.decode()
    assert "Loss and learning rate" in sft_page and "Reward and loss" not in sft_page
    assert "Reward and loss" in rl_page and "Loss and learning rate" not in rl_page


def test_the_api_and_the_command_offer_the_kinds_by_name(api_as, admin_user, tiny_model_path):
    from training_jobs.management.commands.train import Command

    parser = Command().create_parser("manage.py", "train")
    kind = next(a for a in parser._actions if a.dest == "kind")
    assert list(kind.choices) == list(KINDS)
    task = make_task("kind-api", distinct_instruction("kind-api")).current_revision
    response = api_as(admin_user).post(
        "/api/training/runs/",
        {"kind": "rl", "tasks": ["kind-api"], "base_model_path": tiny_model_path, "preset": "tiny-cpu", "cpu": True},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["kind"] == "rl" and response.json()["config"]["tasks"] == [task.pk]
