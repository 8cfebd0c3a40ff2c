"""A rollout holding a model call whose answer the recording proxy could not record is the infrastructure's failure,
never a score (issue 34, item 1). The proxy withholds such an answer (a 503, or an error event in place of a
stream's end), but a stream's chunks before its end did reach the agent and no record holds them: whatever the agent
did next is not the model's on the record. The builtin agent in the sandbox → the relay → the real proxy → the
scripted upstream; the record made to fail as in llm/tests/test_proxy_unrecordable.py."""

import json

import httpx
import pytest
from django.urls import reverse

from evaluation.infra import unrecorded_answers
from evaluation.models import Rollout
from evaluation.services.rollouts import create_rollouts, execute_rollout
from evaluation.testing import RIGHT_SUMMARY, needs_bwrap
from llm.models import ModelCall
from llm.recording import ANSWER_PENDING, ANSWER_UNRECORDED
from llm.services import open_proxy_session, proxy_base_url
from llm.testing import Reply, call_writes_refused

pytestmark = pytest.mark.django_db(transaction=True)

# Usage the token columns' CHECK (>= 0) refuses, on SQLite and PostgreSQL: the answer's record fails.
REFUSED_USAGE = (-1, 5)


@needs_bwrap
def test_a_rollout_whose_answer_the_proxy_could_not_record_fails_and_is_never_scored(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint, viewer_client
):
    # The first answer cannot be recorded: the agent gets a 503 and retries, then solves the task in full. Without
    # the check this was a clean 1.0 for a run the record does not hold whole.
    scripted_upstream.push(
        Reply.text("Let me look.", usage=REFUSED_USAGE),
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}),
        Reply.text("Done: summary.txt is written."),
    )
    [rollout] = create_rollouts(
        fruit_task, agent_endpoint, harness="builtin", options={"token_limit": 50_000}, user=None
    )

    rollout = execute_rollout(rollout.pk)

    assert len(scripted_upstream.requests) == 3  # the agent went on to the end
    assert rollout.status == Rollout.Status.FAILED and rollout.retryable and rollout.score is None
    assert rollout.exit_reason == "proxy_unavailable" and rollout.outcome == "infra", rollout.error
    assert "could not record the answer of 1 model call" in rollout.error and ANSWER_UNRECORDED in rollout.error
    unrecorded = ModelCall.objects.get(session_id=rollout.proxy_session_id, answer_state="unrecorded")
    assert unrecorded.response is None and unrecorded.held_tokens > 0  # counted against its token limit meanwhile
    # Shown as such on the rollout page and in the API; no transcript holds its answer.
    page = viewer_client.get(reverse("evaluation:detail", args=[rollout.pk])).content.decode()
    assert "answer not recorded" in page
    api = viewer_client.get(f"/api/model-calls/{unrecorded.pk}/").json()
    assert (api["answer_state"], api["ok"], api["response"]) == ("unrecorded", False, None)
    assert "Let me look." not in json.dumps(rollout.transcript)


def test_a_call_left_pending_by_a_database_that_failed_counts_as_unrecorded(
    live_server_asgi, scripted_upstream, agent_endpoint
):
    # Neither the answer nor the mark "not recorded" could be written: the row stays pending, and once the session's
    # calls are settled that is an answer the proxy could not record, as much as a marked one.
    session = open_proxy_session(agent_endpoint, subject="rollout:7")
    scripted_upstream.push(Reply.text("answered while the database was down"))
    with call_writes_refused("UPDATE"):
        withheld = httpx.post(
            proxy_base_url(session) + "/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
        )
    assert withheld.status_code == 503
    reason = unrecorded_answers(session.pk)
    assert reason.startswith("the recording proxy could not record the answer of 1 model call of this rollout")
    assert reason.endswith(ANSWER_PENDING)
    assert unrecorded_answers(open_proxy_session(agent_endpoint).pk) == ""
