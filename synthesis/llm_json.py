"""One model call of a pipeline stage: a JSON answer checked against a schema, with ONE repair turn.

    answer = ask_json(item, endpoint, "files", messages, SCHEMA)

- Through llm.client (every call a ModelCall, purpose "synthesis:<stage>", subject item.subject).
- Broken JSON or a schema violation: a second message quotes the problem and asks again, once; still broken →
  StageFailure with the reason (the item fails at that stage: the model could not be used, not the task).
- Each call's tokens and cost are added to the item and to its batch (F() updates: workers add at once).
- Before each call the batch's budget is checked: a batch over its budget_usd or budget_tokens is paused
  (status paused, status_reason) and BudgetReached is raised; the runner puts the item back where it was
  (pending, at the same stage), so a resume with a larger budget goes on from there.
- A call already recorded for this item with the same purpose, model and messages (a worker killed after the
  call, before the stage's result was stored) is used again instead of asking again: a resumed batch repeats no
  model call whose answer it has.
"""

from __future__ import annotations

import json

from django.db.models import F

from llm import jsonout
from llm.client import EndpointBusy, MissingApiKey, ModelCallError, complete
from llm.models import ModelCall, ModelEndpoint

from .models import SynthesisBatch, SynthesisItem

REPAIRS = 1


class StageFailure(Exception):
    """A stage could not run on the item (the model's JSON never valid, the model or the sandbox unreachable).

    `retryable`: a resume tries the stage again (the failure was the infrastructure's, not the answer's).
    `details`: what the stage did find before it failed (QA: the verdicts it has), kept with the failure.
    """

    def __init__(self, reason: str, *, retryable: bool = False, details: dict | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.details = details or {}


class BudgetReached(Exception):
    """The batch is over its budget: it was paused; the item stays where it is."""


def purpose_of(stage: str) -> str:
    return f"synthesis:{stage}"


def over_budget(batch: SynthesisBatch) -> str:
    """Why the batch may make no more calls ("" while it may)."""
    tokens = batch.input_tokens + batch.output_tokens
    if batch.budget_tokens is not None and tokens >= batch.budget_tokens:
        return f"token budget reached: {tokens:,} of {batch.budget_tokens:,} tokens used"
    if batch.budget_usd is not None and batch.cost >= batch.budget_usd:
        return f"cost budget reached: ${batch.cost:.4f} of ${batch.budget_usd:.4f} spent"
    return ""


def check_budget(batch_id: int) -> None:
    """Pause the batch and raise BudgetReached when it is over its budget (read afresh: workers share it)."""
    batch = SynthesisBatch.objects.get(pk=batch_id)
    reason = over_budget(batch)
    if not reason:
        return
    SynthesisBatch.objects.filter(
        pk=batch_id, status__in=[SynthesisBatch.Status.QUEUED, SynthesisBatch.Status.RUNNING]
    ).update(status=SynthesisBatch.Status.PAUSED, status_reason=reason[:500])
    raise BudgetReached(reason)


def add_usage(item: SynthesisItem, call: ModelCall) -> None:
    usage = {
        "input_tokens": F("input_tokens") + (call.input_tokens or 0),
        "output_tokens": F("output_tokens") + (call.output_tokens or 0),
        "cost": F("cost") + call.cost,
    }
    SynthesisItem.objects.filter(pk=item.pk).update(**usage)
    SynthesisBatch.objects.filter(pk=item.batch_id).update(**usage)


def _text_of(call: ModelCall) -> str:
    """The answer's text from a stored response (chat completions or Responses)."""
    response = call.response or {}
    if call.api == ModelEndpoint.ApiStyle.RESPONSES:
        parts = [
            content.get("text", "")
            for output in response.get("output") or []
            if output.get("type") == "message"
            for content in output.get("content") or []
            if content.get("type") == "output_text"
        ]
        return "".join(parts)
    choices = response.get("choices") or []
    return (choices[0].get("message") or {}).get("content") or "" if choices else ""


def _recorded(endpoint: ModelEndpoint, messages: list[dict], *, purpose: str, subject: str) -> ModelCall | None:
    """A successful call made before for this subject with exactly these messages to this model."""
    key = json.dumps(messages, sort_keys=True)
    calls = ModelCall.objects.filter(
        subject=subject, purpose=purpose, model=endpoint.model, endpoint_name=endpoint.name, response__isnull=False
    ).order_by("-pk")
    for call in calls:
        request = call.request or {}
        sent = request.get("messages", request.get("input"))
        if json.dumps(sent, sort_keys=True) == key:
            return call
    return None


def ask_json(
    item: SynthesisItem, endpoint: ModelEndpoint, stage: str, messages: list[dict], schema: dict | None
) -> tuple[dict, ModelCall]:
    """The model's JSON answer for `stage` of `item`, and its ModelCall. Raises StageFailure, BudgetReached."""
    purpose, subject = purpose_of(stage), item.subject
    conversation = list(messages)
    problem = ""
    for _turn in range(REPAIRS + 1):
        call = _recorded(endpoint, conversation, purpose=purpose, subject=subject)
        if call is None:
            check_budget(item.batch_id)
            try:
                done = complete(endpoint, conversation, purpose=purpose, subject=subject)
            except ModelCallError as exc:
                if exc.call is not None:
                    add_usage(item, exc.call)
                raise StageFailure(f"{stage}: {exc}", retryable=True) from None
            except (MissingApiKey, EndpointBusy) as exc:
                raise StageFailure(f"{stage}: {exc}", retryable=True) from None
            call, text = done.call, done.text
            add_usage(item, call)
        else:
            text = _text_of(call)
        try:
            return jsonout.parse_answer(text, schema), call
        except jsonout.JsonAnswerError as exc:
            problem = str(exc)
            if not call.error:
                ModelCall.objects.filter(pk=call.pk).update(error=f"invalid JSON answer: {problem}"[:2000])
        conversation = conversation + [
            {"role": "assistant", "content": text},
            {
                "role": "user",
                "content": (
                    f"Your answer could not be used: {problem}. Reply again with only one JSON object"
                    + (" that matches the schema." if schema else ".")
                ),
            },
        ]
    raise StageFailure(
        f"{stage}: {endpoint.name!r} gave no valid JSON answer in {REPAIRS + 1} tries; last problem: {problem}"
    )
