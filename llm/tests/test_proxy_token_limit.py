"""A proxy session's token limit: output caps lowered to what is left, then every call refused (and recorded) once
its recorded calls' input + output tokens reach it. The openai SDK → uvicorn running the ASGI app → the scripted
upstream, as in test_proxy."""

import openai
import pytest

from llm.models import ModelCall
from llm.services import open_proxy_session, proxy_base_url
from llm.testing import Reply

pytestmark = pytest.mark.django_db(transaction=True)
HI = [{"role": "user", "content": "hi"}]


def agent_of(session) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy_base_url(session), api_key="agent-side-key", max_retries=0, timeout=20)


def test_calls_are_capped_to_what_is_left_and_refused_once_the_limit_is_reached(
    live_server_asgi, scripted_upstream, agent_endpoint
):
    session = open_proxy_session(agent_endpoint, subject="rollout:3", token_limit=100)
    scripted_upstream.push(Reply.text("one", usage=(30, 20)), Reply.text("two", usage=(40, 10)))
    with agent_of(session) as agent:
        agent.chat.completions.create(model="m", messages=HI, max_tokens=1000)  # asks for more than is left
        agent.chat.completions.create(model="m", messages=HI, max_completion_tokens=7)  # asks for less
        with pytest.raises(openai.BadRequestError) as refused:
            agent.chat.completions.create(model="m", messages=HI)

    first, second = (r.json for r in scripted_upstream.requests)
    assert first["max_tokens"] == 100 and "max_completion_tokens" not in first  # the caller's own field, lowered
    assert second["max_completion_tokens"] == 7  # the caller's smaller cap is kept
    assert len(scripted_upstream.requests) == 2  # the refused call never went upstream

    assert refused.value.status_code == 400
    assert refused.value.response.json() == {
        "error": {
            "message": "token limit of 100 reached for this rollout (used 100)",
            "type": "token_limit_exceeded",
            "code": "token_limit_exceeded",
        }
    }
    last = ModelCall.objects.filter(session=session).order_by("-created_at", "-id").first()
    assert (last.status_code, last.subject) == (400, "rollout:3")
    assert last.error == "token_limit_exceeded: token limit of 100 reached for this rollout (used 100)"
    assert last.request["messages"] == HI and (last.input_tokens, last.output_tokens) == (None, None)
    assert session.calls.count() == 3 and session.tokens_used() == 100


def test_a_responses_call_without_a_cap_gets_one_and_a_stream_is_asked_for_its_usage(
    live_server_asgi, scripted_upstream, agent_endpoint
):
    session = open_proxy_session(agent_endpoint, token_limit=500)
    scripted_upstream.push(Reply.text("r", usage=(100, 50)), Reply.text("streamed", usage=(250, 150)))
    with agent_of(session) as agent:
        agent.responses.create(model="m", input="hi")
        # Without include_usage a streamed chat answer says nothing of its tokens, and would count for nothing.
        for _chunk in agent.chat.completions.create(model="m", messages=HI, stream=True):
            pass
        with pytest.raises(openai.BadRequestError, match="token limit of 500 reached for this rollout .used 550."):
            agent.responses.create(model="m", input="again")

    responses_call, streamed = (r.json for r in scripted_upstream.requests)
    assert responses_call["max_output_tokens"] == 500
    assert streamed["max_completion_tokens"] == 350 and streamed["stream_options"] == {"include_usage": True}
    assert session.tokens_used() == 550  # the last call went past the limit by its prompt: it is refused after


def test_a_session_without_a_limit_is_passed_through_untouched(live_server_asgi, scripted_upstream, agent_endpoint):
    session = open_proxy_session(agent_endpoint)
    scripted_upstream.push(Reply.text("a", usage=(10**6, 10**6)), Reply.text("b"))
    with agent_of(session) as agent:
        agent.chat.completions.create(model="m", messages=HI)
        agent.chat.completions.create(model="m", messages=HI)
    assert [r.json for r in scripted_upstream.requests] == [{"model": "scripted-model", "messages": HI}] * 2


@pytest.mark.parametrize("limit", [0, -5, "100", True, 2.5])
def test_a_limit_that_is_not_a_positive_whole_number_is_refused(agent_endpoint, limit):
    with pytest.raises(ValueError, match="token limit must be a positive whole number"):
        open_proxy_session(agent_endpoint, token_limit=limit)
