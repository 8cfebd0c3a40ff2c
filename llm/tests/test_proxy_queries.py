"""What a proxied call asks of the database: the session's lookup (one query, its budget included) and the call's
record (one read of the session's latest calls, whose requests the proxy holds when it recorded them, and one INSERT
before it is forwarded, one UPDATE with its answer; no transaction unless it carries tokens; the chains of latest calls
it does not hold read back in one more query), pinned so that a query added to every call is seen; the record's
statements, compiled once, write what the ORM's would; and the lookup keeps nothing between calls, so a session closed
or an endpoint disabled after a call is seen by the next one. The openai SDK → uvicorn running the ASGI app → the
scripted upstream, as in test_proxy."""

import asyncio
from decimal import Decimal

import openai
import pytest
from django.db import DEFAULT_DB_ALIAS, connections
from django.test.utils import CaptureQueriesContext

from llm import recording
from llm.managers import insert_call, latest_calls, update_call
from llm.models import ModelCall, ModelEndpoint, ProxySession
from llm.recording import close_db_pool, find_session, in_db
from llm.request_chain import RequestCache
from llm.sampling import policy_for
from llm.services import close_proxy_session, open_proxy_session, proxy_base_url
from llm.testing import Reply

pytestmark = pytest.mark.django_db(transaction=True)

LOOKUP = 1  # the session, its endpoint and what its calls used, in one query
# The session's latest calls (the requests of those this process recorded are held: llm.recording.REQUESTS_KEPT) and
# the INSERT of the call, both before it is forwarded (a call whose row cannot be written never is), then the UPDATE
# adding its answer: one write more than a record written after the answer, the price of failing closed (llm.proxy).
RECORD = 3
CHAINS_READ_BACK = 1  # the request chains of latest calls this process does not hold (another process recorded them)


@pytest.fixture
def endpoint(scripted_upstream):
    return ModelEndpoint.objects.create(
        name="upstream", base_url=scripted_upstream.base_url, model="real-model-7b", roles=["agent"], timeout_seconds=10
    )


@pytest.fixture
def proxy_connection(live_server_asgi, settings):
    """The connection of the proxy's database pool, cut to one thread: every query of a proxied call runs on it."""
    close_db_pool()
    settings.CLAWGYM_PROXY_DB_THREADS = 1

    def own_connection():
        connections[DEFAULT_DB_ALIAS].ensure_connection()
        return connections[DEFAULT_DB_ALIAS]

    yield asyncio.run(in_db(own_connection))
    close_db_pool()  # the next test gets a pool of the usual size


def rollout_session(endpoint) -> ProxySession:
    return open_proxy_session(endpoint, subject="rollout:9", token_limit=10_000, sampling=policy_for(endpoint))


def test_a_rollout_call_costs_one_lookup_and_one_record(proxy_connection, endpoint, scripted_upstream):
    session = rollout_session(endpoint)
    scripted_upstream.default = Reply.text("done", usage=(12, 3))
    messages = [{"role": "system", "content": "You are an agent. " * 50}, {"role": "user", "content": "go"}]
    with openai.OpenAI(base_url=proxy_base_url(session), api_key="k", max_retries=0, timeout=20) as agent:
        agent.chat.completions.create(model="m", messages=messages)
        messages += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "and then?"}]
        with CaptureQueriesContext(proxy_connection) as queries:
            stream = agent.chat.completions.create(model="m", messages=messages, stream=True)
            assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == "done"

    assert len(queries) == LOOKUP + RECORD, [query["sql"][:80] for query in queries]
    latest = ModelCall.objects.filter(session=session).order_by("-id").first()
    assert latest.request_base_id is not None  # recorded as a request chain
    assert latest.request["messages"] == messages


def test_a_call_whose_session_another_process_recorded_reads_the_chains_back(
    proxy_connection, endpoint, scripted_upstream, monkeypatch
):
    session = rollout_session(endpoint)
    scripted_upstream.default = Reply.text("done", usage=(12, 3))
    messages = [{"role": "system", "content": "You are an agent. " * 50}, {"role": "user", "content": "go"}]
    with openai.OpenAI(base_url=proxy_base_url(session), api_key="k", max_retries=0, timeout=20) as agent:
        agent.chat.completions.create(model="m", messages=messages)
        monkeypatch.setattr(recording, "REQUESTS_KEPT", RequestCache(10**7))  # as a process that recorded nothing
        messages += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "and then?"}]
        with CaptureQueriesContext(proxy_connection) as queries:
            agent.chat.completions.create(model="m", messages=messages)

    assert len(queries) == LOOKUP + RECORD + CHAINS_READ_BACK, [query["sql"][:80] for query in queries]
    latest = ModelCall.objects.filter(session=session).order_by("-id").first()
    assert latest.request_base_id is not None and latest.request["messages"] == messages
    assert recording.REQUESTS_KEPT.get(latest.request_base_id, latest_calls(session.pk, "chat")[1][1])  # held now


def row_values(call: ModelCall) -> dict:
    return {f.attname: getattr(call, f.attname) for f in ModelCall._meta.concrete_fields if f.attname != "id"}


def test_the_record_statements_compiled_once_write_what_the_orm_writes(db, endpoint):
    session = open_proxy_session(endpoint)
    row = {
        "endpoint": endpoint,
        "endpoint_name": endpoint.name,
        "purpose": "proxy",
        "subject": "rollout:\0 9",
        "session": session,
        "api": ModelEndpoint.ApiStyle.CHAT,
        "request": {"messages": [{"role": "user", "content": "a NUL \0 and a mark \ue000"}], "temperature": 0.5},
        "sampling_changes": [{"field": "seed", "set": 7}],
        "error": "pending \0",
        "held_tokens": 40,
        "cost": Decimal("0.00012345"),
    }
    inserted = ModelCall(**row)
    insert_call(inserted)
    saved = ModelCall(**row)
    saved.save(force_insert=True)
    assert inserted.pk and inserted.pk != saved.pk
    fresh = [ModelCall.objects.get(pk=call.pk) for call in (inserted, saved)]
    assert row_values(fresh[0]) | {"created_at": None} == row_values(fresh[1]) | {"created_at": None}
    assert fresh[0].created_at == inserted.created_at  # what the proxy's cache stamps it with

    answer = {"status_code": 200, "response": {"text": "ok \0"}, "error": "", "input_tokens": 9, "cost": Decimal("1.5")}
    answer |= {"answer_state": ModelCall.AnswerState.RECORDED, "held_tokens": None}
    assert update_call(inserted.pk, answer) == 1
    assert ModelCall.objects.filter(pk=saved.pk).update(**answer) == 1
    fresh = [ModelCall.objects.get(pk=call.pk) for call in (inserted, saved)]
    assert row_values(fresh[0]) | {"created_at": None} == row_values(fresh[1]) | {"created_at": None}
    assert update_call(saved.pk + 1000, answer) == 0  # no such row: nothing matched


def test_the_lookup_reads_what_the_orm_reads_and_the_budget_used(db, endpoint):
    session = rollout_session(endpoint)
    # Two answered calls, and one whose answer is not recorded: it counts the output cap it holds.
    for input_tokens, output_tokens, held in [(30, 5, None), (None, 7, None), (None, None, 100)]:
        call = {"endpoint": endpoint, "endpoint_name": endpoint.name, "purpose": "proxy", "session": session}
        ModelCall.objects.record(
            **call, request={}, input_tokens=input_tokens, output_tokens=output_tokens, held_tokens=held
        )

    found = find_session(session.token)

    expected = ProxySession.objects.select_related("endpoint").get(pk=session.pk)
    for found_object, expected_object in [(found, expected), (found.endpoint, expected.endpoint)]:
        for field in type(expected_object)._meta.concrete_fields:
            value, expected_value = getattr(found_object, field.attname), getattr(expected_object, field.attname)
            assert (value, type(value)) == (expected_value, type(expected_value)), field.name
    assert found.tokens_spent == session.tokens_used() == 142
    assert find_session(open_proxy_session(endpoint).token).tokens_spent is None  # no limit: not summed
    assert find_session("cgs_unknown") is None


def test_a_session_closed_or_an_endpoint_disabled_after_a_call_is_refused_at_once(
    live_server_asgi, endpoint, scripted_upstream
):
    scripted_upstream.default = Reply.text("fine")
    first, second = open_proxy_session(endpoint), open_proxy_session(endpoint)
    agents = [
        openai.OpenAI(base_url=proxy_base_url(s), api_key="k", max_retries=0, timeout=20) for s in (first, second)
    ]
    for agent in agents:
        agent.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])

    close_proxy_session(first)
    with pytest.raises(openai.AuthenticationError):
        agents[0].chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(enabled=False)  # as a policy server's shutdown does
    with pytest.raises(openai.InternalServerError) as disabled:
        agents[1].chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])

    assert disabled.value.status_code == 503
    assert len(scripted_upstream.requests) == 2
    for agent in agents:
        agent.close()
