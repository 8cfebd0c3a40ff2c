"""Repeats of a seeded run are independent samples of a real model, and a rerun draws them again: the tiny Qwen3
served by the batched backend (which seeds each request's sampling with the request's seed) at temperature 1, two
repeats of one task through the recording proxy and the sandboxed builtin agent, run twice. With the run's seed on
every call, both repeats would have answered the same."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from evaluation.services import runs
from evaluation.testing import needs_bwrap
from llm.models import ModelCall, ModelEndpoint

# once: a model server, nothing about the database engine (CI runs it in the PostgreSQL pass).
pytestmark = [
    needs_bwrap,
    pytest.mark.once,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("training_dir"),
]


def first_answers(revision, endpoint) -> list[str]:
    """The model's first answer in each repeat of a fresh two-repeat run, run here, by repeat."""
    run, _ = runs.create_eval_run(
        endpoint=endpoint, revisions=[revision], harness="builtin", repeats=2, fresh=True, user=None
    )
    answers = []
    for rollout in runs.run_here(run).rollouts.order_by("repeat_index"):
        call = ModelCall.objects.filter(session=rollout.proxy_session).order_by("created_at", "id").first()
        assert call is not None and call.status_code == 200, (rollout.status, rollout.error, rollout.log_tail)
        assert call.request["seed"] == rollout.seed and call.request["temperature"] == 1.0
        answers.append(json.dumps(call.response["choices"][0]["message"], sort_keys=True))
    return answers


def test_two_repeats_on_the_tiny_model_differ_and_a_rerun_draws_both_again(
    live_server_asgi, fruit_task, tiny_model_path
):
    call_command("base_models", "add", "tiny", "--path", tiny_model_path, stdout=StringIO())
    call_command("base_models", "serve", "tiny", "--backend", "batched", stdout=StringIO())
    endpoint = ModelEndpoint.objects.get(name="base-tiny")
    endpoint.sampling = {"temperature": 1.0, "seed": 7, "max_tokens": 24}
    endpoint.save()
    try:
        first = first_answers(fruit_task, endpoint)
        again = first_answers(fruit_task, endpoint)
    finally:
        call_command("base_models", "stop", "tiny", stdout=StringIO())
    assert first[0] != first[1]  # one prompt, two seeds: two samples
    assert again == first  # the same seeds again: the same samples
