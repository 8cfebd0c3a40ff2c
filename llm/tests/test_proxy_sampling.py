"""A rollout's session holds every call to its run's sampling (llm.sampling): the run's temperature, top_p and seed, n =
1, the output capped at the endpoint's limit, anything that changes how the model samples refused with a recorded 400,
and what was changed recorded on the call. The openai SDK → uvicorn running the ASGI app → the scripted upstream."""

import openai
import pytest

from llm.models import ModelCall, ModelEndpoint
from llm.sampling import policy_for
from llm.services import open_proxy_session, proxy_base_url
from llm.testing import Reply, scripted_endpoint

pytestmark = pytest.mark.django_db(transaction=True)
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def endpoint(scripted_upstream):
    return scripted_endpoint(
        scripted_upstream,
        "policy",
        model="policy-7b",
        roles=["agent"],
        timeout_seconds=10,
        sampling={"temperature": 0.7, "max_tokens": 64},
    )


def agent_of(session) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy_base_url(session), api_key="agent-side-key", max_retries=0, timeout=20)


def last_call(session) -> ModelCall:
    return ModelCall.objects.filter(session=session).order_by("-created_at", "-id").first()


def test_the_runs_sampling_is_sent_whatever_the_agent_asked_and_the_changes_are_recorded(
    live_server_asgi, scripted_upstream, endpoint, viewer_client
):
    session = open_proxy_session(endpoint, subject="rollout:7", sampling=policy_for(endpoint))
    scripted_upstream.push(Reply.text("ok"))
    with agent_of(session) as agent:
        agent.chat.completions.create(
            model="m", messages=HI, temperature=0.01, top_p=0.1, seed=5, n=3, max_tokens=100_000, presence_penalty=1.5
        )

    [sent] = [r.json for r in scripted_upstream.requests]
    assert sent == {"model": "policy-7b", "messages": HI, "temperature": 0.7, "n": 1, "max_tokens": 64}
    call = last_call(session)
    assert call.status_code == 200 and call.request == sent  # the record is what went upstream ...
    assert {c["field"]: c for c in call.sampling_changes} == {  # ... and what the agent had asked for instead
        "temperature": {"field": "temperature", "action": "set", "asked": 0.01, "sent": 0.7},
        "top_p": {"field": "top_p", "action": "removed", "asked": 0.1},
        "seed": {"field": "seed", "action": "removed", "asked": 5},
        "presence_penalty": {"field": "presence_penalty", "action": "removed", "asked": 1.5},
        "n": {"field": "n", "action": "set", "asked": 3, "sent": 1},
        "max_tokens": {"field": "max_tokens", "action": "capped", "asked": 100_000, "sent": 64},
    }
    assert call.as_dict()["sampling_changes"] == call.sampling_changes
    assert viewer_client.get(f"/api/model-calls/{call.pk}/").json()["sampling_changes"] == call.sampling_changes


def test_a_call_without_a_cap_gets_the_endpoints_and_the_setting_is_the_default_limit(
    live_server_asgi, scripted_upstream, endpoint, settings
):
    settings.CLAWGYM_PROXY_MAX_OUTPUT_TOKENS = 300
    endpoint.sampling = {"seed": 11}  # the run's seed is sent; no max_tokens of its own: the setting's limit
    endpoint.save()
    session = open_proxy_session(endpoint, sampling=policy_for(endpoint))
    scripted_upstream.push(Reply.text("a"), Reply.text("b"))
    with agent_of(session) as agent:
        agent.chat.completions.create(model="m", messages=HI)
        agent.chat.completions.create(model="m", messages=HI, seed=99, max_completion_tokens=100)

    first, second = (r.json for r in scripted_upstream.requests)
    assert first == {"model": "policy-7b", "messages": HI, "seed": 11, "max_completion_tokens": 300}
    assert second == {"model": "policy-7b", "messages": HI, "seed": 11, "max_completion_tokens": 100}  # smaller: kept
    assert last_call(session).sampling_changes == [{"field": "seed", "action": "set", "asked": 99, "sent": 11}]


@pytest.mark.parametrize(
    "extra, refused",
    [
        ({"ignore_eos": True, "min_tokens": 4000}, ["ignore_eos", "min_tokens"]),
        ({"logit_bias": {"50256": -100}}, ["logit_bias"]),
        ({"logprobs": True, "top_logprobs": 20}, ["logprobs", "top_logprobs"]),
        ({"guided_json": {"type": "object"}}, ["guided_json"]),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}}, ["response_format"]),
        ({"tool_choice": "required"}, ["tool_choice"]),
        (
            {"chat_template": "{{ 'assistant: rm -rf /' }}", "continue_final_message": True},
            ["chat_template", "continue_final_message"],
        ),
        ({"use_beam_search": True, "best_of": 4}, ["best_of", "use_beam_search"]),
    ],
)
def test_what_changes_how_the_model_samples_is_refused_and_recorded(
    live_server_asgi, scripted_upstream, endpoint, extra, refused
):
    session = open_proxy_session(endpoint, subject="rollout:8", sampling=policy_for(endpoint))
    with agent_of(session) as agent, pytest.raises(openai.BadRequestError) as error:
        agent.chat.completions.create(model="m", messages=HI, extra_body=extra)

    assert scripted_upstream.requests == []  # nothing went upstream
    body = error.value.response.json()["error"]
    assert body["type"] == body["code"] == "sampling_not_allowed" and body["param"] == refused[0]
    assert all(name in body["message"] for name in refused)
    call = last_call(session)
    assert (call.status_code, call.subject, call.input_tokens) == (400, "rollout:8", None)
    assert call.error.startswith("sampling_not_allowed: the proxy does not pass")
    assert [c["field"] for c in call.sampling_changes if c["action"] == "refused"] == refused


def test_what_changes_nothing_of_the_sampling_passes_as_sent(live_server_asgi, scripted_upstream, endpoint):
    session = open_proxy_session(endpoint, sampling=policy_for(endpoint))
    scripted_upstream.push(Reply.text("streamed"))
    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
    with agent_of(session) as agent:
        stream = agent.chat.completions.create(
            model="m",
            messages=HI,
            tools=tools,
            tool_choice="auto",
            parallel_tool_calls=True,
            stop=["\nObservation:"],
            store=False,
            stream=True,
            stream_options={"include_usage": True},
            max_tokens=50,
            temperature=0.7,
            logprobs=False,
            extra_body={"prompt_cache_key": "k1", "response_format": {"type": "text"}},
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "streamed"

    [sent] = [r.json for r in scripted_upstream.requests]
    assert sent["tools"] == tools and sent["tool_choice"] == "auto" and sent["stop"] == ["\nObservation:"]
    assert (sent["max_tokens"], sent["temperature"], sent["prompt_cache_key"]) == (50, 0.7, "k1")
    assert last_call(session).sampling_changes == []


def test_responses_calls_are_held_too_and_continue_only_this_sessions_responses(
    live_server_asgi, scripted_upstream, endpoint
):
    endpoint.api_style = ModelEndpoint.ApiStyle.RESPONSES
    endpoint.save()
    session = open_proxy_session(endpoint, sampling=policy_for(endpoint))
    other = open_proxy_session(endpoint, sampling=policy_for(endpoint))
    scripted_upstream.push(Reply.text("first"), Reply.text("second"), Reply.text("elsewhere"))
    with agent_of(session) as agent, agent_of(other) as stranger:
        first = agent.responses.create(model="m", input="hi", temperature=0.0, max_output_tokens=10**6)
        agent.responses.create(model="m", input="and?", previous_response_id=first.id)
        elsewhere = stranger.responses.create(model="m", input="hello")
        # History the upstream keeps for another session (or none): the record of this one would not show it.
        with pytest.raises(openai.BadRequestError, match="no response recorded in this rollout's session"):
            agent.responses.create(model="m", input="go on", previous_response_id=elsewhere.id)
        with pytest.raises(openai.BadRequestError, match="truncation"):
            agent.responses.create(model="m", input="x", truncation="auto")

    sent = [r.json for r in scripted_upstream.requests]
    assert len(sent) == 3
    assert (sent[0]["temperature"], sent[0]["max_output_tokens"]) == (0.7, 64)
    assert sent[1]["previous_response_id"] == first.id
    refused = last_call(session)
    assert refused.status_code == 400 and refused.error.startswith("sampling_not_allowed")


def test_a_token_budget_lowers_the_runs_cap_further(live_server_asgi, scripted_upstream, endpoint):
    session = open_proxy_session(endpoint, token_limit=40, sampling=policy_for(endpoint))
    scripted_upstream.push(Reply.text("a"))
    with agent_of(session) as agent:
        agent.chat.completions.create(model="m", messages=HI, max_tokens=100_000)
    assert scripted_upstream.requests[0].json["max_tokens"] == 40


def test_a_training_session_still_records_tokens_and_the_agent_cannot_ask_for_logprobs(live_server_asgi, vllm_upstream):
    endpoint = ModelEndpoint.objects.create(
        name="rl-policy",
        base_url=vllm_upstream.base_url,
        model="policy",
        sampling={"temperature": 1.0, "max_tokens": 32},
    )
    session = open_proxy_session(endpoint, record_tokens=True, sampling=policy_for(endpoint))
    vllm_upstream.push(Reply.text("sampled"))
    with agent_of(session) as agent:
        with pytest.raises(openai.BadRequestError, match="logprobs"):
            agent.chat.completions.create(model="m", messages=HI, logprobs=True)
        answer = agent.chat.completions.create(model="m", messages=HI, temperature=0.01)

    [sent] = [r.json for r in vllm_upstream.requests]
    # The proxy's own token fields are added after the run's sampling is held: the agent gets no logprobs back.
    assert (sent["temperature"], sent["max_tokens"]) == (1.0, 32) and sent["logprobs"] and sent["return_token_ids"]
    assert answer.choices[0].logprobs is None
    call = last_call(session)
    assert call.tokens.completion_token_ids and call.sampling_changes[0]["field"] == "temperature"


def test_a_session_without_a_policy_passes_the_agents_sampling(live_server_asgi, scripted_upstream, endpoint):
    session = open_proxy_session(endpoint)  # a person's own session (`proxy_session`)
    scripted_upstream.push(Reply.text("a"))
    with agent_of(session) as agent:
        agent.chat.completions.create(model="m", messages=HI, temperature=0.01, extra_body={"ignore_eos": True})
    assert scripted_upstream.requests[0].json == {
        "model": "policy-7b",
        "messages": HI,
        "temperature": 0.01,
        "ignore_eos": True,
    }
    assert last_call(session).sampling_changes == []


def test_a_policy_is_checked_when_the_session_is_opened(endpoint):
    with pytest.raises(ValueError, match="policy_for's shape"):
        open_proxy_session(endpoint, sampling={"temperature": 0.5})
