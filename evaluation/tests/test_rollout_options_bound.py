"""Harness options are text a person sends (page, API, command): an oversized object is refused, saying so, and so
is an option of the wrong type (the builtin harness's `max_turns: "abc"` failed each rollout at its start, in the
sandbox, instead of being refused where it was asked for)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import EvalRun, Rollout
from evaluation.services.rollouts import RolloutError, create_rollouts
from evaluation.testing import endpoint, make_tasks, text, url


def test_oversized_harness_options_are_refused(fruit_task, agent_endpoint):
    options = {"timeout": 300, "system_prompt": "Be careful with the CSV header.\n" * 600}
    with pytest.raises(RolloutError, match=r"the harness options is .* bytes as JSON, over the limit of 16,384 bytes"):
        create_rollouts(fruit_task, agent_endpoint, harness="builtin", options=options, user=None)
    assert not Rollout.objects.exists()


REFUSED = "the max_turns option must be a whole number from 1, got 'abc'"


@pytest.mark.django_db
def test_max_turns_that_is_no_whole_number_is_refused_on_every_way_in(admin_client):
    make_tasks()
    endpoint("weak")
    rollouts = {"task": "eval-a", "endpoint": "weak", "harness": "builtin", "options": {"max_turns": "abc"}}
    response = admin_client.post("/api/rollouts/", rollouts, content_type="application/json")
    assert response.status_code == 400 and response.json() == {"detail": REFUSED}

    run = {"endpoint": "weak", "harness": "builtin", "tasks": ["eval-a"], "limits": {"max_turns": "abc"}}
    response = admin_client.post("/api/eval-runs/", run, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"limits": {"max_turns": ["A valid integer is required."]}}
    form = {"endpoint": "weak", "harness": "builtin", "repeats": 1, "pass_threshold": 1.0, "tasks": "eval-a"}
    response = admin_client.post(url("start"), {**form, "options": "", "max_turns": "abc"})
    assert response.status_code == 400 and "Enter a whole number." in text(response)

    task = ["--task", "eval-a", "--endpoint", "weak", "--harness", "builtin", "--here"]
    with pytest.raises(CommandError) as refused:
        call_command("rollout", *task, "--option", "max_turns=abc", stdout=StringIO(), stderr=StringIO())
    assert str(refused.value) == REFUSED and refused.value.returncode == 2
    with pytest.raises(CommandError, match="argument --max-turns: invalid int value: 'abc'"):
        call_command("evaluate", *task, "--max-turns", "abc", stdout=StringIO(), stderr=StringIO())
    assert not EvalRun.objects.exists() and not Rollout.objects.exists()
