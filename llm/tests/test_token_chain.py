"""A recorded call's prompt ids stored as a reference to an earlier call of its session plus the new ids
(llm.token_chain): every prompt rebuilds to exactly what was recorded, on chains, branches and forged rows, and a
chained conversation through the proxy stores each prompt's new ids only."""

import random
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from django.db.models import RestrictedError

from llm.models import ModelCall, ModelCallTokens, ModelEndpoint, ProxySession
from llm.services import open_proxy_session, proxy_base_url
from llm.testing import Reply
from llm.testing_tokens import TOY_EOS, toy_assistant, toy_prompt_ids, toy_tokenize
from llm.token_chain import BrokenChain, shared_length


@pytest.fixture
def session(db):
    endpoint = ModelEndpoint.objects.create(name="policy", base_url="http://127.0.0.1:9/v1", model="policy")
    return ProxySession.objects.create(endpoint=endpoint, subject="rollout:1", record_tokens=True)


def record(session, prompt: list[int], completion: list[int]) -> ModelCallTokens:
    call = ModelCall.objects.create(
        endpoint_name="policy", purpose="proxy", session=session, request={}, status_code=200
    )
    return ModelCallTokens.objects.record(
        call, prompt_token_ids=prompt, completion_token_ids=completion, completion_logprobs=[-0.5] * len(completion)
    )


def fresh(row: ModelCallTokens) -> ModelCallTokens:
    return ModelCallTokens.objects.get(pk=row.pk)


def ids(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(1000) for _ in range(n)]


def test_shared_length_matches_a_plain_loop():
    rng = random.Random(3)
    for _ in range(300):
        a = ids(rng, rng.randrange(0, 300))
        b = a[: rng.randrange(0, len(a) + 1)] + ids(rng, rng.randrange(0, 50))
        if rng.random() < 0.5:
            a, b = b, a
        naive = next((n for n, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        assert shared_length(a, b) == naive


def test_a_chain_of_sixty_calls_stores_each_prompt_new_ids_only_and_rebuilds_every_prompt(session):
    rng = random.Random(0)
    prompt, prompts, rows = ids(rng, 500), [], []
    for _ in range(60):  # deeper than any recursion would like, rebuilt in a loop
        completion = ids(rng, 40)
        prompts.append(list(prompt))
        rows.append(record(session, prompt, completion))
        prompt = prompt + completion + ids(rng, 30)  # the environment's new ids: tool results, the next turn's head

    assert rows[0].prompt_base_id is None and rows[0].prompt_suffix_ids == prompts[0]
    for before, row in zip(rows, rows[1:]):
        assert (row.prompt_base_id, row.prompt_base_length) == (before.pk, before.prompt_length + 40)
        assert len(row.prompt_suffix_ids) == 30
    for row, expected in zip(rows, prompts, strict=True):
        assert fresh(row).prompt_ids() == expected
    stored = sum(len(r.prompt_suffix_ids) for r in ModelCallTokens.objects.all())
    assert stored == 500 + 59 * 30 and sum(map(len, prompts)) > 10 * stored


def test_a_call_that_rewrites_the_end_of_its_history_shares_what_comes_before(session):
    # OpenClaw's shape: each request ends with an internal-context message that the next request replaces.
    rng = random.Random(1)
    history, context = ids(rng, 400), ids(rng, 20)
    first = record(session, history + context, completion := ids(rng, 30))
    second_prompt = history + completion + ids(rng, 25) + context
    second = record(session, second_prompt, ids(rng, 30))

    assert (second.prompt_base_id, second.prompt_base_length) == (first.pk, 400)
    assert fresh(second).prompt_ids() == second_prompt


def test_the_longest_share_wins_even_when_it_is_not_the_latest_call(session):
    rng = random.Random(2)
    root_prompt, root_completion = ids(rng, 300), ids(rng, 20)
    record(session, root_prompt, root_completion)
    second_prompt, second_completion = root_prompt + root_completion + ids(rng, 10), ids(rng, 20)
    second = record(session, second_prompt, second_completion)
    side = record(session, ids(rng, 50), ids(rng, 5))  # a side call, made last, sharing nothing
    branch_prompt = second_prompt + second_completion + ids(rng, 12)
    branch = record(session, branch_prompt, ids(rng, 20))
    # A retried turn: extends the root, not the call after it.
    retry_prompt = root_prompt + root_completion + ids(rng, 12)
    retry = record(session, retry_prompt, ids(rng, 20))

    assert side.prompt_base_id is None
    assert (branch.prompt_base_id, branch.prompt_base_length) == (second.pk, 350)
    assert retry.prompt_base_length >= 320
    assert fresh(branch).prompt_ids() == branch_prompt and fresh(retry).prompt_ids() == retry_prompt


def test_a_prompt_sharing_less_than_half_is_stored_whole(session):
    rng = random.Random(4)
    system = ids(rng, 100)
    record(session, system + ids(rng, 900), ids(rng, 20))
    compacted = system + ids(rng, 300)  # the history replaced by a summary: only the system prompt is shared

    row = record(session, compacted, ids(rng, 20))
    assert row.prompt_base_id is None and row.prompt_suffix_ids == compacted


def test_ids_that_only_look_like_a_prefix_are_compared_not_trusted(session):
    rng = random.Random(5)
    prompt, completion = ids(rng, 400), ids(rng, 30)
    first = record(session, prompt, completion)
    # Same length and the same ids but one, late in the completion: the share stops there.
    lookalike = prompt + completion[:20] + [completion[20] + 1] + completion[21:] + ids(rng, 10)
    row = record(session, lookalike, ids(rng, 5))
    assert (row.prompt_base_id, row.prompt_base_length) == (first.pk, 420)
    assert fresh(row).prompt_ids() == lookalike


def test_rows_of_another_session_are_never_a_base(session):
    rng = random.Random(6)
    prompt, completion = ids(rng, 400), ids(rng, 30)
    record(session, prompt, completion)
    other = ProxySession.objects.create(endpoint=session.endpoint, subject="rollout:2", record_tokens=True)

    row = record(other, prompt + completion + ids(rng, 10), ids(rng, 5))
    assert row.prompt_base_id is None and row.prompt_length == 440


def test_a_forged_row_fails_to_rebuild_and_is_never_taken_as_a_base(session):
    rng = random.Random(7)
    prompt, completion = ids(rng, 400), ids(rng, 30)
    first = record(session, prompt, completion)
    second_prompt = prompt + completion + ids(rng, 10)
    second = record(session, second_prompt, completion_2 := ids(rng, 30))
    ModelCallTokens.objects.filter(pk=first.pk).update(prompt_suffix_ids=prompt[:-1])  # an id lost

    with pytest.raises(BrokenChain, match="rebuilt 399 prompt ids, recorded 400"):
        fresh(second).prompt_ids()
    # A new call extending the second is stored whole rather than on a chain that does not add up.
    third_prompt = second_prompt + completion_2 + ids(rng, 10)
    third = record(session, third_prompt, ids(rng, 5))
    assert third.prompt_base_id is None and fresh(third).prompt_ids() == third_prompt

    ModelCallTokens.objects.filter(pk=first.pk).update(prompt_base=second, prompt_base_length=0)
    with pytest.raises(BrokenChain, match="loops"):  # the recursive query ends too (UNION)
        fresh(second).prompt_ids()


def test_a_chain_that_leaves_the_session_is_not_a_base(session):
    rng = random.Random(9)
    prompt, completion = ids(rng, 400), ids(rng, 30)
    first = record(session, prompt, completion)
    second_prompt = prompt + completion + ids(rng, 10)
    second = record(session, second_prompt, completion_2 := ids(rng, 30))
    other = ProxySession.objects.create(endpoint=session.endpoint, subject="rollout:2", record_tokens=True)
    elsewhere = record(other, ids(rng, 100), ids(rng, 5))
    ModelCallTokens.objects.filter(pk=first.pk).update(prompt_base=elsewhere)  # shares 0 of it: still reads
    assert fresh(second).prompt_ids() == second_prompt

    third = record(session, second_prompt + completion_2 + ids(rng, 10), ids(rng, 5))
    assert third.prompt_base_id is None


def test_a_base_cannot_be_deleted_alone_but_a_session_calls_go_together(session):
    rng = random.Random(8)
    prompt, completion = ids(rng, 100), ids(rng, 10)
    first = record(session, prompt, completion)
    record(session, prompt + completion + ids(rng, 10), ids(rng, 10))

    with pytest.raises(RestrictedError):
        first.call.delete()
    ModelCall.objects.filter(session=session).delete()
    assert not ModelCallTokens.objects.exists()


def test_an_old_row_without_a_base_reads_as_its_whole_prompt(session):
    call = ModelCall.objects.create(endpoint_name="policy", purpose="proxy", session=session, request={})
    row = ModelCallTokens.objects.create(
        call=call, prompt_suffix_ids=[5, 6, 7], prompt_length=3, completion_token_ids=[8], completion_logprobs=[-0.1]
    )
    assert fresh(row).prompt_ids() == [5, 6, 7]


# --- through the proxy ------------------------------------------------------------------------------------------

SYSTEM = {"role": "system", "content": "You edit files. " * 20}
USER = {"role": "user", "content": "write notes.md"}


@pytest.fixture
def training(live_server_asgi, vllm_upstream):
    endpoint = ModelEndpoint.objects.create(
        name="policy", base_url=vllm_upstream.base_url, model="policy-0", timeout_seconds=10
    )
    return open_proxy_session(endpoint, subject="rollout:1", record_tokens=True)


def agent_for(session):
    return openai.OpenAI(base_url=proxy_base_url(session), api_key="agent-key", max_retries=0, timeout=20)


def stored_rows(session) -> list[ModelCallTokens]:
    return list(ModelCallTokens.objects.filter(call__session=session).order_by("pk"))


def read_turn(n: int) -> list[dict]:
    """The assistant's read of f<n> (as the toy policy answered it) and the tool's result."""
    read = {"id": f"call_{n}", "type": "function", "function": {"name": "read", "arguments": f'{{"path": "f{n}"}}'}}
    return [
        {"role": "assistant", "content": f"step {n}", "tool_calls": [read]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": f"contents of f{n}"},
    ]


def test_a_conversation_through_the_proxy_stores_each_prompt_as_its_new_ids(training, vllm_upstream):
    vllm_upstream.push(
        *[Reply.tool_call("read", {"path": f"f{n}"}, content=f"step {n}") for n in range(3)], Reply.text("Done.")
    )
    messages = [SYSTEM, USER]
    with agent_for(training) as agent:
        for n in range(4):
            stream = n % 2 == 1  # whole and streamed answers alike
            answer = agent.chat.completions.create(model="x", messages=messages, stream=stream)
            if stream:
                list(answer)
            if n < 3:
                messages = messages + read_turn(n)

    sent = [r.json for r in vllm_upstream.requests if r.path.endswith("/chat/completions")]
    rows = stored_rows(training)
    assert len(rows) == 4 and rows[0].prompt_base_id is None
    for before, row, request in zip(rows, rows[1:], sent[1:]):
        whole = toy_prompt_ids(request)
        new = whole[before.prompt_length + len(before.completion_token_ids) :]
        assert (row.prompt_base_id, row.prompt_suffix_ids) == (before.pk, new)  # only the tool result and next head
    for row, request in zip(rows, sent, strict=True):
        assert row.prompt_ids() == toy_prompt_ids(request)
        assert row.prompt_length == len(toy_prompt_ids(request))


def test_calls_racing_in_one_session_each_rebuild_to_their_own_prompt(training, vllm_upstream):
    # Side calls in flight together: each may only lean on a row already committed, and every one rebuilds.
    vllm_upstream.push(Reply.text("First answer."))
    with agent_for(training) as agent:
        agent.chat.completions.create(model="x", messages=[SYSTEM, USER])
    first = [SYSTEM, USER, {"role": "assistant", "content": "First answer."}]
    vllm_upstream.push(*[Reply.text(f"side {n}", chunk_size=2) for n in range(6)])

    def side(n: int) -> None:
        messages = first + [{"role": "user", "content": f"and {n}?"}]
        with agent_for(training) as agent:
            list(agent.chat.completions.create(model="x", messages=messages, stream=True))

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(side, range(6)))

    sent = {ModelCall.objects.get(tokens=row).request["messages"][-1]["content"]: row for row in stored_rows(training)}
    assert len(sent) == 7
    for request in vllm_upstream.requests:
        row = sent[request.json["messages"][-1]["content"]]
        assert row.prompt_ids() == toy_prompt_ids(request.json)
        if row.prompt_base_id is not None:
            assert row.prompt_base_id < row.pk and row.prompt_base.call.session_id == training.pk
    assert all(row.prompt_base_id is not None for row in list(sent.values())[1:])


def test_completion_of_a_base_is_part_of_what_is_shared(training, vllm_upstream):
    reply = Reply.text("Hello.")
    vllm_upstream.push(reply, Reply.text("Bye."))
    with agent_for(training) as agent:
        agent.chat.completions.create(model="x", messages=[SYSTEM, USER])
        agent.chat.completions.create(
            model="x",
            messages=[SYSTEM, USER, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Thanks"}],
        )
    first, second = stored_rows(training)
    assert first.completion_token_ids == toy_tokenize(toy_assistant("Hello.", None)) + [TOY_EOS]
    assert second.prompt_base_length == first.prompt_length + len(first.completion_token_ids)


# --- rows written before the chain ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_the_migration_read_as_their_whole_prompt():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("llm", "0006_proxy_sampling_policy")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps

    def model(name: str):
        return old.get_model("llm", name).objects  # the model as it was at 0006

    endpoint = model("ModelEndpoint").create(name="p", base_url="http://127.0.0.1:9/v1", model="p")
    session = model("ProxySession").create(endpoint=endpoint, record_tokens=True)
    call = model("ModelCall").create(endpoint_name="p", session=session, request={})
    model("ModelCallTokens").create(
        call=call, prompt_token_ids=list(range(600)), completion_token_ids=[7], completion_logprobs=[-0.1]
    )

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # today's schema, every app's: the models below use it
    row = ModelCallTokens.objects.get(call_id=call.pk)
    assert (row.prompt_base_id, row.prompt_length, row.prompt_ids()) == (None, 600, list(range(600)))
    # A call recorded after it, in the same session, builds on it.
    new = record(ProxySession.objects.get(pk=session.pk), list(range(600)) + [7, 8, 9], [10])
    assert (new.prompt_base_id, new.prompt_suffix_ids) == (row.pk, [8, 9])
