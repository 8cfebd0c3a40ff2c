"""RL samples from recorded calls: exact tokens chained on prefixes (environment tokens masked, logprobs aligned),
parallel tool calls in one completion, a history rewrite starting a new sample, re-tokenized (inexact) calls. First
on a real sandboxed rollout whose calls the proxy recorded from a vLLM-shaped upstream, then on calls recorded here."""

import json

import pytest

from evaluation.models import Rollout
from evaluation.services.rollouts import RolloutError, create_rollouts, execute_rollout
from evaluation.testing import RIGHT_SUMMARY, needs_bwrap, tool
from llm.models import ModelCall, ModelCallTokens, ModelEndpoint
from llm.testing import Reply
from llm.testing_tokens import (
    TOY_EOS,
    toy_detokenize,
    toy_logprob,
    toy_prompt_ids,
    toy_render,
    toy_tokenize,
)
from training.masks import chat_messages
from training_jobs.rl.samples import SampleError, build_samples, retokenize, samples_for_rollout
from training_jobs.testing.policy_calls import SYSTEM, USER, answer, calls_of, record

# --- a real rollout ---------------------------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.django_db(transaction=True)
def test_a_sandboxed_rollout_recorded_with_exact_tokens_makes_one_chained_sample(
    live_server_asgi, vllm_upstream, fruit_task
):
    endpoint = ModelEndpoint.objects.create(
        name="policy", base_url=vllm_upstream.base_url, model="policy", roles=["agent"], timeout_seconds=30
    )
    vllm_upstream.push(
        Reply.tool_call("exec", {"command": "head -3 fruit.csv"}),
        Reply(
            content="Writing it.",
            tool_calls=[  # two tool calls in one answer: both are kept and trained
                {"name": "write", "arguments": json.dumps({"path": "summary.txt", "content": RIGHT_SUMMARY})},
                {"name": "read", "arguments": '{"path": "summary.txt"}'},
            ],
        ),
        Reply.text("Done: summary.txt holds the counts."),
    )
    [rollout] = create_rollouts(fruit_task, endpoint, harness="builtin", options={"record_tokens": True}, user=None)
    rollout = execute_rollout(rollout.pk)

    assert rollout.status == Rollout.Status.SCORED and rollout.score == 1.0, rollout.error
    assert rollout.proxy_session.record_tokens
    requests = [r.json for r in vllm_upstream.requests if r.path.endswith("/chat/completions")]
    assert len(requests) == 3 and all(r["return_token_ids"] and r["logprobs"] for r in requests)
    assert ModelCallTokens.objects.filter(call__session=rollout.proxy_session, exact=True).count() == 3

    [sample] = samples_for_rollout(rollout)
    calls = list(ModelCall.objects.filter(session=rollout.proxy_session).order_by("created_at", "id"))
    assert sample.exact and sample.call_ids == [c.pk for c in calls]
    assert sample.prompt_ids == toy_prompt_ids(requests[0])
    # The whole chain is the last prompt followed by the last completion: nothing lost, nothing doubled.
    last = calls[-1].tokens
    assert sample.prompt_ids + sample.completion_ids == last.prompt_ids() + last.completion_token_ids
    runs = sample.segments()
    assert [mask for mask, _, _ in runs] == [1, 0, 1, 0, 1]
    for (_, ids, logprobs), call in zip(runs[::2], calls, strict=True):
        assert ids == call.tokens.completion_token_ids and ids[-1] == TOY_EOS
        assert logprobs == [toy_logprob(t, n) for n, t in enumerate(ids)]  # aligned with the tokens they scored
    assert toy_detokenize(runs[2][1]).count("<tool_call>") == 2  # the parallel calls, both in the trained tokens
    for _, ids, logprobs in runs[1::2]:  # the environment: tool results and the next turn's header, untrained
        assert logprobs == [0.0] * len(ids)
        assert toy_detokenize(ids).endswith("<|im_start|>assistant\n") and "result call_" in toy_detokenize(ids)
    assert toy_detokenize(runs[1][1]).count("\n") >= 3  # head -3 fruit.csv's lines, as the sandbox ran it


@needs_bwrap
@pytest.mark.harness
@pytest.mark.django_db(transaction=True)
def test_openclaw_streams_through_token_recording_and_every_call_is_exact(
    harness_installed, live_server_asgi, vllm_upstream, fruit_task
):
    """The real OpenClaw CLI, streaming, gets the token fields and none of the logprobs in its chunks: it runs as ever,
    and every call it made has its exact tokens."""
    endpoint = ModelEndpoint.objects.create(
        name="policy", base_url=vllm_upstream.base_url, model="policy", roles=["agent"], timeout_seconds=30
    )
    vllm_upstream.push(
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}),
        Reply.text("Done: summary.txt holds the counts."),
    )
    [rollout] = create_rollouts(
        fruit_task, endpoint, harness="openclaw", options={"timeout": 120, "record_tokens": True}, user=None
    )
    rollout = execute_rollout(rollout.pk)

    assert rollout.status == Rollout.Status.SCORED and rollout.score == 1.0, (rollout.error, rollout.log_tail)
    calls = list(ModelCall.objects.filter(session=rollout.proxy_session).order_by("created_at", "id"))
    assert len(calls) == 2 and all(c.stream and c.status_code == 200 for c in calls)
    assert ModelCallTokens.objects.filter(call__in=calls, exact=True).count() == 2
    samples = samples_for_rollout(rollout)
    # OpenClaw puts an internal-context user message at the end of every request, after the history: the next
    # call's prompt has its answer where that message was, so it does not extend the chain and each call is a
    # sample of its own (each still exactly the tokens sampled, in the context they were sampled in).
    first, second = (c.request["messages"] for c in calls)
    assert "OPENCLAW_INTERNAL_CONTEXT" in json.dumps(first[-1]) and second[len(first) - 1]["role"] == "assistant"
    assert [s.call_ids for s in samples] == [[calls[0].pk], [calls[1].pk]]
    assert all(s.exact for s in samples)
    for sample, call in zip(samples, calls, strict=True):
        assert (sample.prompt_ids, sample.completion_ids) == (
            call.tokens.prompt_ids(),
            call.tokens.completion_token_ids,
        )
        assert sample.env_mask == [1] * len(sample.completion_ids)


def test_record_tokens_is_a_bool_option(fruit_task):
    endpoint = ModelEndpoint.objects.create(name="p", base_url="http://127.0.0.1:9/v1", model="p")
    with pytest.raises(RolloutError, match="record_tokens option must be true or false"):
        create_rollouts(fruit_task, endpoint, harness="builtin", options={"record_tokens": "yes"}, user=None)


# --- calls recorded here ----------------------------------------------------------------------------------------


def conversation(session, turns: int):
    """`turns` calls of one agent run, each a read with its result, then a final answer."""
    messages = [SYSTEM, USER]
    for n in range(turns - 1):
        message = answer(f"step {n}", [("read", json.dumps({"path": f"f{n}"}))])
        record(session, list(messages), message)
        messages += [message, tool("call_0", f"contents of f{n}")]
    record(session, list(messages), answer("Done."))
    return messages


def test_four_calls_chain_into_one_sample_with_environment_tokens_masked(session):
    messages = conversation(session, 4)
    [sample] = build_samples(calls_of(session))

    assert sample.exact and len(sample.call_ids) == 4
    assert sample.prompt_ids == toy_tokenize(toy_render([SYSTEM, USER], add_generation_prompt=True))
    # The chain decodes to the whole conversation as the template renders it (the final turn's trailing newline is
    # the template's, not sampled).
    whole = toy_render(messages + [answer("Done.")])
    assert toy_detokenize(sample.prompt_ids + sample.completion_ids) + "\n" == whole
    runs = sample.segments()
    assert [m for m, _, _ in runs] == [1, 0, 1, 0, 1, 0, 1]
    policy = [f'step {n}<tool_call>read {{"path": "f{n}"}}</tool_call><|im_end|>' for n in range(3)]
    assert [toy_detokenize(ids) for m, ids, _ in runs if m] == policy + ["Done.<|im_end|>"]
    env = [toy_detokenize(ids) for m, ids, _ in runs if not m]
    assert env == [
        f"\n<|im_start|>tool\nresult call_0: contents of f{n}<|im_end|>\n<|im_start|>assistant\n" for n in range(3)
    ]
    for mask, ids, logprobs in runs:
        expected = [toy_logprob(t, n) for n, t in enumerate(ids)] if mask else [0.0] * len(ids)
        assert logprobs == expected
    assert sample.policy_tokens == sum(len(ids) for m, ids, _ in runs if m)


def test_parallel_tool_calls_are_one_completion(session):
    message = answer("Both.", [("read", '{"path": "a"}'), ("read", '{"path": "b"}'), ("ls", "{}")])
    record(session, [SYSTEM, USER], message)
    record(
        session,
        [SYSTEM, USER, message, tool("call_0", "A"), tool("call_1", "B"), tool("call_2", "a b")],
        answer("Read both."),
    )

    [sample] = build_samples(calls_of(session))
    runs = sample.segments()
    assert [m for m, _, _ in runs] == [1, 0, 1]
    assert toy_detokenize(runs[0][1]).count("<tool_call>") == 3
    assert toy_detokenize(runs[1][1]).count("<|im_start|>tool") == 3  # the three results, all environment


def test_a_rewritten_history_starts_a_new_sample_of_the_same_rollout(session):
    first = answer("Reading.", [("read", '{"path": "big.log"}')])
    record(session, [SYSTEM, USER], first)
    second = answer("Again.", [("read", '{"path": "big.log"}')])
    record(session, [SYSTEM, USER, first, tool("call_0", "x" * 50)], second)
    # Compaction: the harness replaced the history with a summary; this prompt does not extend the chain.
    compacted = [SYSTEM, {"role": "user", "content": "Summary so far: big.log read twice."}]
    record(session, compacted, answer("Done."))
    record(session, compacted + [answer("Done."), {"role": "user", "content": "Sure?"}], answer("Yes."))

    samples = build_samples(calls_of(session))
    calls = list(calls_of(session))
    assert [s.call_ids for s in samples] == [[calls[0].pk, calls[1].pk], [calls[2].pk, calls[3].pk]]
    assert samples[1].prompt_ids == calls[2].tokens.prompt_ids()
    assert [m for m, _, _ in samples[1].segments()] == [1, 0, 1]
    assert all(s.exact for s in samples)


def test_calls_without_an_answer_are_left_out(session):
    record(session, [SYSTEM, USER], answer(), error="upstream HTTP 429: slow down", status=429)
    record(session, [SYSTEM, USER], answer("Hello."))

    [sample] = build_samples(calls_of(session))
    assert sample.call_ids == [calls_of(session)[1].pk]
    assert build_samples([]) == []


# --- re-tokenized calls -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer():
    from training.tiny_model import tiny_tokenizer

    return tiny_tokenizer()


def test_calls_without_tokens_are_retokenized_and_flagged_inexact(session, tokenizer):
    from training.tiny_model import TOOLS

    first = answer("Reading.", [("read", '{"path": "a.txt"}')])
    record(session, [SYSTEM, USER], first, tokens=False, tools=TOOLS)
    record(session, [SYSTEM, USER, first, tool("call_0", "alpha")], answer("Done."), tokens=False, tools=TOOLS)

    # A prefix-preserving template (TRL's Qwen3 training one) chains re-tokenized calls as it does exact ones.
    [sample] = build_samples(calls_of(session), tokenizer)
    assert not sample.exact and len(sample.call_ids) == 2
    # Rendered from the request as the database gives it back (PostgreSQL's jsonb reorders the tools' schema keys,
    # one more way a re-tokenized prompt can differ from the one the policy saw).
    stored_tools = calls_of(session)[0].request["tools"]
    expected_prompt = tokenizer.apply_chat_template(
        chat_messages([SYSTEM, USER]), tools=stored_tools, add_generation_prompt=True, tokenize=True
    )["input_ids"]
    assert sample.prompt_ids == list(expected_prompt)
    runs = sample.segments()
    assert [m for m, _, _ in runs] == [1, 0, 1]
    assert tokenizer.decode(runs[0][1]).endswith("</tool_call><|im_end|>") and "a.txt" in tokenizer.decode(runs[0][1])
    assert "alpha" in tokenizer.decode(runs[1][1]) and tokenizer.decode(runs[2][1]).endswith("Done.<|im_end|>")
    # The sampled logprobs are unknown: None (TRL makes them NaN, no importance correction); environment 0.0.
    assert all(lp is None for m, _, lps in runs if m for lp in lps)
    assert all(lp == 0.0 for m, _, lps in runs if not m for lp in lps)


def test_a_responses_api_call_is_retokenized_from_its_items(session, tokenizer):
    request = {
        "model": "policy",
        "instructions": "You work in /workspace.",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Read a.txt."}]}],
        "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}],
    }
    response = {
        "object": "response",
        "status": "completed",
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]},
            {"type": "function_call", "call_id": "fc1", "name": "read", "arguments": '{"path": "a.txt"}'},
        ],
    }
    call = ModelCall.objects.create(
        endpoint_name="policy",
        purpose="proxy",
        session=session,
        api="responses",
        request=request,
        response=response,
        status_code=200,
    )
    cut_off = {"object": "response", "status": "incomplete_stream", "output_text": "Rea"}
    ModelCall.objects.create(
        endpoint_name="policy",
        purpose="proxy",
        session=session,
        api="responses",
        request=request,
        response=cut_off,
        status_code=200,
    )

    [sample] = build_samples(calls_of(session), tokenizer)  # the cut-off stream answered nothing: left out
    assert sample.call_ids == [call.pk] and not sample.exact
    prompt = tokenizer.decode(sample.prompt_ids)
    assert "You work in /workspace." in prompt and "Read a.txt." in prompt and '"name": "read"' in prompt
    completion = tokenizer.decode(sample.completion_ids)
    assert "Reading." in completion and '"path": "a.txt"' in completion and completion.endswith("<|im_end|>")


def test_one_inexact_call_makes_its_sample_inexact(session, tokenizer):
    record(session, [SYSTEM, USER], answer("exact"))
    record(session, [{"role": "user", "content": "new"}], answer("re-tokenized"), tokens=False)
    samples = build_samples(calls_of(session), tokenizer)
    assert [s.exact for s in samples] == [True, False]
    assert retokenize(calls_of(session)[1], tokenizer).exact is False


def test_the_tokenizer_is_loaded_from_a_path_only_when_a_call_needs_it(session, tokenizer, tmp_path):
    record(session, [SYSTEM, USER], answer("exact"))
    assert len(build_samples(calls_of(session), str(tmp_path / "absent"))) == 1  # never loaded: nothing inexact
    record(session, [USER], answer("inexact"), tokens=False)
    tokenizer.save_pretrained(tmp_path / "tok")
    samples = build_samples(calls_of(session), str(tmp_path / "tok"))
    assert [s.exact for s in samples] == [True, False]


def test_a_call_without_tokens_and_no_tokenizer_is_a_clear_error(session):
    call = record(session, [SYSTEM, USER], answer("text only"), tokens=False)
    with pytest.raises(SampleError, match=f"call #{call.pk} has no exact tokens; pass the policy's tokenizer"):
        build_samples(calls_of(session))
