"""A training config takes finite numbers only: NaN, Infinity and 1e999 (which JSON reads as infinity) in a
`key=value` line or an API edit are refused, naming the key, on every way in (the command, the form, the API)."""

import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from training_jobs.kinds import TrainingRunError, parse_overrides
from training_jobs.models import TrainingRun

NOT_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "[1, NaN]", '{"a": Infinity}']


@pytest.mark.parametrize("value", NOT_FINITE)
def test_a_config_line_with_a_number_that_is_not_finite_is_refused(value):
    with pytest.raises(TrainingRunError, match=r"^learning_rate takes a finite number, got "):
        parse_overrides([f"learning_rate={value}"])


def test_finite_numbers_and_text_still_parse():
    assert parse_overrides(["learning_rate=2e-5", "max_steps=3", "lora.enabled=true", "report_to=none"]) == {
        "learning_rate": 2e-5,
        "max_steps": 3,
        "lora.enabled": True,
        "report_to": "none",
    }


def test_the_command_refuses_it():
    with pytest.raises(CommandError, match="learning_rate takes a finite number, got 'NaN'"):
        call_command("train", "--kind", "sft", "--set", "learning_rate=NaN")


@pytest.mark.django_db
def test_the_form_and_the_api_refuse_it(admin_client, admin_user, api_as, dataset, tiny_model_path):
    page = admin_client.post(
        reverse("training:run-start"),
        {
            "dataset": dataset.pk,
            "base_model_path": tiny_model_path,
            "preset": "tiny-cpu",
            "overrides": "warmup_ratio=Infinity",
        },
    )
    assert (
        page.status_code == 400
        and "warmup_ratio takes a finite number, got &#x27;Infinity&#x27;" in page.content.decode()
    )
    # 1e999 is a valid JSON number that Python reads as infinity: the API's parser refuses it (lib.api_parsers), as it
    # refuses NaN and Infinity, before the run's config is read.
    body = json.dumps({"dataset": dataset.pk, "base_model_path": tiny_model_path, "preset": "tiny-cpu"})
    body = body[:-1] + ', "overrides": {"learning_rate": 1e999}}'
    refused = api_as(admin_user).post("/api/training/runs/", body, content_type="application/json")
    assert refused.status_code == 400, refused.content
    assert "the number 1e999, which is out of range" in refused.json()["detail"]
    assert not TrainingRun.objects.exists()
