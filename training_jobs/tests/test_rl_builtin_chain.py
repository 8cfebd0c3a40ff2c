"""A builtin-harness rollout is one multi-turn sample with the real chat template: a sandboxed rollout through the
recording proxy to the RL live policy server (training.rl.policy_server) rendering prompts with the tiny
model's tokenizer (TRL's Qwen3 training template), whose model is scripted to sample each answer's canonical tokens (training_jobs.testing.scripted_model).
Each call's recorded prompt is the previous prompt + answer + tool results, so the calls chain: the policy's tokens
trained, the tool results and turn headers masked out by env_mask. (A random model's tokens need not be the ones its
text re-tokenizes to; such a rollout breaks into several samples, each trained: test_rl_every_sample.)"""

import json

import pytest

from evaluation.models import Rollout
from evaluation.services.rollouts import create_rollouts, execute_rollout
from evaluation.testing import RIGHT_SUMMARY, needs_bwrap
from llm.models import SERVED_KEY_PREFIX, ModelCall, ModelEndpoint, served_key
from training.rl.groups import main_samples
from training_jobs.rl.samples import samples_for_rollout
from training_jobs.testing import sampling, scripted_model

KEY_ENV = f"{SERVED_KEY_PREFIX}RL_CHAIN_TEST"


def assistant(content, calls=()):
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            for i, (name, arguments) in enumerate(calls)
        ]
    return message


def canonical(tokenizer, message) -> list[int]:
    """The tokens the template gives an answer after its generation prompt, up to and with the end of turn."""

    def ids(encoded):
        return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)

    user = [{"role": "user", "content": "x"}]
    prompt = ids(tokenizer.apply_chat_template(user, add_generation_prompt=True, tokenize=True))
    whole = ids(tokenizer.apply_chat_template(user + [message], tokenize=True))
    assert whole[: len(prompt)] == prompt
    answer = whole[len(prompt) :]
    return answer[: answer.index(tokenizer.eos_token_id) + 1]


@pytest.fixture
def tokenizer():
    from training.tiny_model import tiny_tokenizer

    return tiny_tokenizer()


@needs_bwrap
@pytest.mark.django_db(transaction=True)
def test_a_builtin_rollout_on_the_live_policy_is_one_sample_with_tool_results_masked(
    live_server_asgi, fruit_task, tokenizer
):
    from training.rl.policy_server import LivePolicy, PolicyServer

    script = [
        assistant("", [("exec", {"command": "head -3 fruit.csv"})]),
        assistant(
            "Writing it.",
            [("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}), ("read", {"path": "summary.txt"})],
        ),  # parallel calls: one completion
        assistant("Done: summary.txt holds the counts."),
    ]
    answers = [canonical(tokenizer, message) for message in script]
    model = scripted_model(list(answers))
    server = PolicyServer(
        LivePolicy(lambda: model, tokenizer, temperature=1.0, max_tokens=256, max_context=32768, prefix_bytes=0),
        api_key=served_key(KEY_ENV),
    )
    try:
        base_url = server.start()
        endpoint = ModelEndpoint.objects.create(
            name="policy",
            base_url=base_url,
            model="policy",
            roles=["agent"],
            timeout_seconds=30,
            api_key_env=KEY_ENV,
            served_at=base_url,  # as the run's job registers its live policy (rl.batches.policy_endpoint)
            served_key_env=KEY_ENV,
        )
        [rollout] = create_rollouts(fruit_task, endpoint, harness="builtin", options={"record_tokens": True}, user=None)
        with sampling(server.policy):
            rollout = execute_rollout(rollout.pk)
    finally:
        server.stop()

    assert rollout.status == Rollout.Status.SCORED and rollout.score == 1.0, (rollout.error, rollout.log_tail)
    calls = list(ModelCall.objects.filter(session=rollout.proxy_session).select_related("tokens").order_by("id"))
    assert len(calls) == 3 and all(c.tokens.exact for c in calls)
    assert [list(c.tokens.completion_token_ids) for c in calls] == answers

    samples = samples_for_rollout(rollout)
    assert len(samples) == 1, [s.call_ids for s in samples]  # the calls chain: one multi-turn sample
    [sample] = main_samples(samples)
    assert sample.exact and sample.call_ids == [c.pk for c in calls]
    last = calls[-1].tokens
    assert sample.prompt_ids + sample.completion_ids == last.prompt_ids() + list(last.completion_token_ids)
    runs = sample.segments()
    assert [mask for mask, _, _ in runs] == [1, 0, 1, 0, 1]
    for (_, ids, logprobs), call in zip(runs[::2], calls, strict=True):  # the policy's tokens, with its logprobs
        assert ids == list(call.tokens.completion_token_ids) and logprobs == list(call.tokens.completion_logprobs)
    environment = [tokenizer.decode(ids) for _, ids, _ in runs[1::2]]
    for text, logprobs in zip(environment, [lp for _, _, lp in runs[1::2]], strict=True):
        assert "<tool_response>" in text and text.endswith("<|im_start|>assistant\n")
        assert logprobs == [0.0] * len(logprobs)
    assert "apple,3\npear,2" in environment[0]  # what head -3 fruit.csv printed in the sandbox: context, never trained
    assert environment[1].count("<tool_response>") == 2  # the two parallel calls' results
    assert sum(sample.env_mask) == sum(len(a) for a in answers)
