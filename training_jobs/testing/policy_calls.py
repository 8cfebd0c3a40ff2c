"""Model calls of a policy, recorded as the proxy records them (its request, its answer and the toy policy's tokens),
for the RL sample tests; a tool result is evaluation.testing's `tool`."""

from llm.models import ModelCall, ModelCallTokens
from llm.testing_tokens import (
    TOY_EOS,
    toy_assistant,
    toy_logprob,
    toy_prompt_ids,
    toy_tokenize,
)

SYSTEM = {"role": "system", "content": "You work in /workspace."}


USER = {"role": "user", "content": "Summarise fruit.csv."}


def answer(content=None, calls=()):
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(calls)
        ]
    return message


def record(session, messages, message, *, tokens=True, error="", status=200, tools=None) -> ModelCall:
    """One proxied call as the proxy stores it: its request, answer and (with `tokens`) the toy policy's tokens."""
    request = {"model": "policy", "messages": messages, **({"tools": tools} if tools else {})}
    call = ModelCall.objects.create(
        endpoint_name="policy",
        purpose="proxy",
        session=session,
        request=request,
        status_code=status,
        error=error,
        response=None if error else {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]},
    )
    if tokens and not error:
        completion = toy_tokenize(toy_assistant(message.get("content"), message.get("tool_calls"))) + [TOY_EOS]
        ModelCallTokens.objects.record(
            call=call,
            prompt_token_ids=toy_prompt_ids(request),
            completion_token_ids=completion,
            completion_logprobs=[toy_logprob(t, n) for n, t in enumerate(completion)],
        )
    return call


def calls_of(session):
    return ModelCall.objects.filter(session=session).select_related("tokens").order_by("created_at", "id")
