"""A recorded call's request stored as a reference to an earlier call of its session plus what is new
(llm.request_chain): every request rebuilds to exactly what was sent, on OpenClaw-shaped chains, rewritten histories,
values that only look equal, deep sessions and forged rows; a conversation through the proxy stores each request's
new messages only, and the call's page and API show the whole request. The proxy's cache of the requests it recorded
(RequestCache) stores a call as the chains read back would, serves a request only to its own row, and is bounded."""

import asyncio
import json
import random
from datetime import timedelta

import openai
import pytest
from django.db import connection, transaction
from django.db.models import RestrictedError
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from llm import request_chain
from llm.managers import fill_requests, latest_calls, request_links
from llm.models import ModelCall, ModelEndpoint, ProxySession
from llm.request_chain import BrokenChain, RequestCache, canonical
from llm.services import open_proxy_session, proxy_base_url
from llm.testing import Reply

SYSTEM = {"role": "system", "content": "You are an agent that edits files. " * 40}
TOOLS = [
    {"type": "function", "function": {"name": name, "description": "A tool. " * 30, "parameters": {"type": "object"}}}
    for name in ("exec", "read", "write")
]


@pytest.fixture
def session(db):
    endpoint = ModelEndpoint.objects.create(name="agent", base_url="http://127.0.0.1:9/v1", model="agent")
    return ProxySession.objects.create(endpoint=endpoint, subject="rollout:1")


def record(session, request: dict, api: str = "chat", requests: RequestCache | None = None) -> ModelCall:
    return ModelCall.objects.record(
        endpoint_name="agent",
        purpose="proxy",
        session=session,
        api=api,
        request=request,
        status_code=200,
        requests=requests,
    )


def context(n: int) -> dict:
    return {"role": "user", "content": f"<internal-context>turn {n}</internal-context>"}


def openclaw_requests(turns: int) -> list[dict]:
    """Requests shaped as OpenClaw's: each ends with an internal-context message the next one replaces."""
    history, requests = [SYSTEM, {"role": "user", "content": "go"}], []
    for n in range(turns):
        requests.append({"model": "m", "messages": [*history, context(n)], "tools": TOOLS, "stream": True})
        call = {"id": f"c{n}", "type": "function", "function": {"name": "exec", "arguments": f'{{"n": {n}}}'}}
        history = [*history, {"role": "assistant", "content": None, "tool_calls": [call]}]
        history.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n}"})
    return requests


def stored(call: ModelCall) -> ModelCall:
    return ModelCall.objects.get(pk=call.pk)


def rebuilt(call: ModelCall) -> dict:
    return stored(call).request


def test_an_openclaw_rollout_stores_each_request_new_messages_only_and_rebuilds_every_one(
    session, django_assert_num_queries
):
    requests = openclaw_requests(12)
    calls = [record(session, request) for request in requests]
    first, *rest = (stored(call) for call in calls)
    assert first.request_base_id is None and first.request_part == requests[0]
    whole = len(canonical(requests[-1]))
    for before, call in zip([first, *rest], rest, strict=False):
        # Its base is the call before; it shares that call's history but the internal-context message it replaced.
        assert (call.request_base_id, call.request_inherited) == (before.pk, ["model", "tools", "stream"])
        assert call.request_shared == len(before.request["messages"]) - 1
        assert [m["role"] for m in call.request_part["messages"]] == ["assistant", "tool", "user"]
        assert len(canonical(call.request_part)) < whole / 10
    for call, request in zip(calls, requests, strict=True):
        assert canonical(stored(call).request) == canonical(request)  # each one alone: its chain in one query
    with django_assert_num_queries(2):  # the calls, then every chain at once
        rebuilt = list(ModelCall.objects.filter(session=session).order_by("pk").with_requests())
        assert [canonical(c.request) for c in rebuilt] == [canonical(r) for r in requests]
    assert all(c.request_chars == len(json.dumps(r, ensure_ascii=False)) for c, r in zip(rebuilt, requests))
    rebuilt[1].request["messages"].append("changed")  # a request handed out is a copy, never a shared list
    assert canonical(stored(calls[2]).request) == canonical(requests[2])


def test_a_rewritten_history_is_stored_whole_and_other_sessions_and_apis_are_never_a_base(session):
    first, second = openclaw_requests(2)
    record(session, first)
    compacted = {"model": "m", "messages": [{"role": "system", "content": "compacted"}], "tools": [], "stream": True}
    call = stored(record(session, compacted))
    assert call.request_base_id is None and call.request_part == compacted
    other = ProxySession.objects.create(endpoint=session.endpoint, subject="rollout:2")
    assert stored(record(other, second)).request_base_id is None  # the same history, another rollout's session
    responses = {"model": "m", "input": first["messages"], "tools": TOOLS}
    assert stored(record(session, responses, api="responses")).request_base_id is None
    again = stored(record(session, {**responses, "input": [*first["messages"], context(9)]}, api="responses"))
    assert again.request_base_id is not None and again.request_shared == len(first["messages"])
    assert canonical(again.request) == canonical({**responses, "input": [*first["messages"], context(9)]})


def test_values_that_only_look_equal_are_never_shared(session):
    # In Python 1 == 1.0 == True: an agent sending those in turn must get each one back as sent.
    base = {"model": "m", "temperature": 1, "messages": [SYSTEM, {"role": "user", "content": 1}], "tools": TOOLS}
    record(session, base)
    for value in (True, 1.0):
        request = {**base, "temperature": value, "messages": [SYSTEM, {"role": "user", "content": value}, context(1)]}
        call = stored(record(session, request))
        assert (
            call.request_base_id is not None
            and call.request_shared == 1
            and "temperature" not in call.request_inherited
        )
        assert call.request["temperature"] is value if value is True else call.request["temperature"] == 1.0
        assert canonical(call.request) == canonical(request)


def test_same_is_canonical_json_equality_without_writing_it():
    rng = random.Random(5)
    leaves = [0, 1, -1, 1.0, 0.0, -0.0, 2.5, True, False, None, "", "1", "a", "é"]

    def value(depth: int):
        kind = rng.random()
        if depth > 2 or kind < 0.5:
            return rng.choice(leaves)
        if kind < 0.75:
            return [value(depth + 1) for _ in range(rng.randrange(3))]
        return {rng.choice("abc"): value(depth + 1) for _ in range(rng.randrange(3))}

    pairs = [(value(0), value(0)) for _ in range(3000)]
    pairs += [(a, json.loads(json.dumps(a))) for a, _ in pairs[:500]]  # equal ones, as the database gives them back
    for a, b in pairs:
        assert request_chain.same(a, b) == (canonical(a) == canonical(b)), (a, b)
    assert sum(request_chain.same(a, b) for a, b in pairs) >= 500


def test_a_deep_session_starts_a_new_chain_so_a_read_is_bounded(session, monkeypatch):
    monkeypatch.setattr(request_chain, "MAX_DEPTH", 4)
    requests = openclaw_requests(10)
    calls = [stored(record(session, request)) for request in requests]
    links = request_links([c.pk for c in calls])
    assert max(request_chain.depth(links, c.pk) for c in calls) == 4
    assert sum(c.request_base_id is None for c in calls) >= 2  # a new whole request once the chain is full
    assert [canonical(c.request) for c in calls] == [canonical(r) for r in requests]


def test_forged_rows_are_reported_not_rebuilt_into_something_else(session):
    a, b = (record(session, request) for request in openclaw_requests(2))
    ModelCall.objects.filter(pk=a.pk).update(request_base=b.pk, request_shared=1)  # a loop
    with pytest.raises(BrokenChain):
        rebuilt(b)
    ModelCall.objects.filter(pk=a.pk).update(request_base=None, request_shared=0)
    ModelCall.objects.filter(pk=b.pk).update(request_shared=999)  # more than the base has
    with pytest.raises(BrokenChain, match="fewer"):
        rebuilt(b)
    ModelCall.objects.filter(pk=b.pk).update(request_shared=1, request_inherited=["tools", "absent"])
    with pytest.raises(BrokenChain, match="does not name"):
        rebuilt(b)
    # A new call never leans on a base that does not rebuild.
    third = stored(record(session, openclaw_requests(3)[2]))
    assert third.request_base_id == a.pk


def test_a_base_is_never_deleted_alone_and_a_session_calls_go_together(session):
    first, second = (record(session, request) for request in openclaw_requests(2))
    assert stored(second).request_base_id == first.pk
    with pytest.raises(RestrictedError):
        first.delete()
    ModelCall.objects.filter(session=session).delete()
    assert not ModelCall.objects.exists()


def test_calls_recorded_whole_before_the_chain_read_as_they_are(session):
    call = ModelCall.objects.create(endpoint_name="agent", purpose="judge", request={"messages": [SYSTEM]})
    fill_requests([call])
    assert stored(call).request == {"messages": [SYSTEM]} and stored(call).request_base_id is None


async def read_all(pieces) -> bytes:
    return b"".join([piece async for piece in pieces])


@pytest.mark.django_db(transaction=True)
def test_calls_recorded_before_the_migration_read_as_their_whole_request_and_are_a_base():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("llm", "0007_token_prompt_chain")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model  # the models as they were at 0007
    endpoint = old("llm", "ModelEndpoint").objects.create(name="a", base_url="http://127.0.0.1:9/v1", model="a")
    session = old("llm", "ProxySession").objects.create(endpoint=endpoint)
    first, second = openclaw_requests(2)
    call = old("llm", "ModelCall").objects.create(endpoint_name="a", session=session, request=first)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # every app's: evaluation 0013 went back with llm 0012
    assert stored(call).request == first and stored(call).request_chars is None
    new = stored(record(ProxySession.objects.get(pk=session.pk), second))
    assert new.request_base_id == call.pk and canonical(new.request) == canonical(second)


# --- the proxy's cache of the requests it recorded ----------------------------------------------------------------

CHAIN_READ = "WITH RECURSIVE"  # the query reading calls' request chains back


def recorded_with(cache: RequestCache, session, request: dict, capture) -> tuple[ModelCall, list[str]]:
    """Record a call as the proxy does (its cache kept once committed): the call, and the queries it took."""
    with capture(execute=True), CaptureQueriesContext(connection) as queries:
        call = record(session, request, requests=cache)
    return stored(call), [query["sql"] for query in queries]


def stored_as(call: ModelCall, calls: list[ModelCall]) -> tuple:
    """How a call's request is stored, its base named by its place among `calls`."""
    base = [c.pk for c in calls].index(call.request_base_id) if call.request_base_id else None
    return base, call.request_shared, call.request_inherited, call.request_part


def test_a_call_compared_with_held_requests_is_stored_as_with_its_chains_read_back(
    session, django_capture_on_commit_callbacks
):
    other = ProxySession.objects.create(endpoint=session.endpoint, subject="rollout:2")
    cache, requests = RequestCache(10**7), openclaw_requests(8)
    held, read_back = [], []
    for request in requests:
        call, queries = recorded_with(cache, session, request, django_capture_on_commit_callbacks)
        assert not any(CHAIN_READ in sql for sql in queries)  # the latest calls were all held
        held.append(call)
        read_back.append(stored(record(other, request)))  # no cache: every chain read back
    assert [stored_as(c, held) for c in held] == [stored_as(c, read_back) for c in read_back]
    assert all(c.request_base_id for c in held[1:])
    assert [canonical(c.request) for c in held] == [canonical(r) for r in requests]
    assert len(cache) == len(requests) and cache.chars == sum(c.request_chars for c in held)


def test_a_request_held_for_another_row_is_never_a_base(session, django_capture_on_commit_callbacks):
    first, second = openclaw_requests(2)
    call = record(session, first)
    [(pk, stamp)] = latest_calls(session.pk, "chat")
    other = ProxySession.objects.create(endpoint=session.endpoint, subject="rollout:2")
    # What a cache may hold under this id: another session's call, or a row rolled back whose id was used again.
    for wrong in [(other.pk, *stamp[1:]), (*stamp[:2], stamp[2] + timedelta(microseconds=1), stamp[3])]:
        cache = RequestCache(10**7)
        cache.put(pk, wrong, {**first, "messages": [SYSTEM, context(7)]}, 1, stamp[3])
        new, queries = recorded_with(cache, session, second, django_capture_on_commit_callbacks)
        assert any(CHAIN_READ in sql for sql in queries)  # its base read back, not taken from the cache
        assert new.request_base_id == call.pk and canonical(new.request) == canonical(second)
        assert cache.get(pk, stamp) is not None  # what was read back is held for the next call
        ModelCall.objects.filter(pk=new.pk).delete()


def test_a_record_rolled_back_is_never_held(session, django_capture_on_commit_callbacks):
    cache, [first] = RequestCache(10**7), openclaw_requests(1)
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
        with transaction.atomic():
            record(session, first, requests=cache)
            raise RuntimeError("rolled back")
    assert len(cache) == 0
    recorded_with(cache, session, first, django_capture_on_commit_callbacks)
    assert len(cache) == 1


def test_the_cache_holds_at_most_its_characters_the_least_recently_used_out():
    cache = RequestCache(100)
    cache.put(1, ("a",), {"n": 1}, 1, 60)
    cache.put(2, ("b",), {"n": 2}, 2, 30)
    assert cache.get(1, ("a",)) == ({"n": 1}, 1)  # 1 used last: 2 goes first
    cache.put(3, ("c",), {"n": 3}, 1, 30)
    assert cache.get(2, ("b",)) is None and cache.get(3, ("c",)) == ({"n": 3}, 1)
    assert (len(cache), cache.chars) == (2, 90)
    cache.put(4, ("d",), {"n": 4}, 1, 101)  # larger than the whole cache: not held, nothing dropped for it
    assert cache.get(4, ("d",)) is None and (len(cache), cache.chars) == (2, 90)
    cache.put(3, ("c",), {"n": 3}, 1, 30)  # again: counted once
    assert cache.chars == 90


# --- through the proxy, and on the call's page and API -----------------------------------------------------------


@pytest.fixture
def recorded(live_server_asgi, scripted_upstream):
    endpoint = ModelEndpoint.objects.create(name="agent", base_url=scripted_upstream.base_url, model="agent-0")
    return open_proxy_session(endpoint, subject="rollout:1")


def test_a_conversation_through_the_proxy_is_stored_as_differences_and_shown_whole(
    recorded, scripted_upstream, admin_client
):
    scripted_upstream.push(*[Reply.tool_call("exec", {"n": n}) for n in range(3)], Reply.text("Done."))
    messages = [SYSTEM, {"role": "user", "content": "go"}]
    with openai.OpenAI(base_url=proxy_base_url(recorded), api_key="k", max_retries=0, timeout=20) as agent:
        for n in range(4):
            answer = agent.chat.completions.create(model="x", messages=[*messages, context(n)], tools=TOOLS)
            message = answer.choices[0].message
            if message.tool_calls:
                call = message.tool_calls[0]
                messages += [
                    message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": "ok"},
                ]

    sent = [r.json for r in scripted_upstream.requests if r.path.endswith("/chat/completions")]
    calls = list(ModelCall.objects.filter(session=recorded).order_by("pk").with_requests())
    assert len(calls) == len(sent) == 4
    assert [c.request_base_id is not None for c in calls] == [False, True, True, True]
    assert [canonical(c.request) for c in calls] == [canonical(body) for body in sent]

    last = calls[-1]
    shown = admin_client.get(reverse("modelcall-detail", args=[last.pk])).json()
    assert canonical(shown["request"]) == canonical(sent[-1]) and shown["request_length"] == len(
        json.dumps(last.request, ensure_ascii=False)
    )
    body = admin_client.get(reverse("modelcall-body", kwargs={"pk": last.pk, "part": "request"}))
    assert canonical(json.loads(asyncio.run(read_all(body.streaming_content)))) == canonical(sent[-1])
    piece = admin_client.get(
        reverse("modelcall-body", kwargs={"pk": last.pk, "part": "request"}), {"offset": 2, "length": 10}
    ).json()
    assert (
        piece["text"] == json.dumps(last.request, ensure_ascii=False)[2:12]
        and piece["total"] == shown["request_length"]
    )
    page = admin_client.get(reverse("llm:call", args=[last.pk])).content.decode()
    assert "internal-context" in page and "turn 3" in page
