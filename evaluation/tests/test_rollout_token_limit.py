"""A rollout's token budget (the `token_limit` option), end to end with the builtin harness: the recording proxy
lowers each call's output cap to what is left, refuses the call after the budget is spent, and the rollout stops
as "token_limit": an agent limit, scored as the checker finds the workspace."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from evaluation.models import Rollout
from evaluation.services.rollouts import RolloutError, create_rollouts, execute_rollout
from evaluation.testing import RIGHT_SUMMARY, needs_bwrap
from llm.models import ModelCall
from llm.testing import Reply

pytestmark = pytest.mark.django_db(transaction=True)
WRITE_SUMMARY = {"path": "summary.txt", "content": RIGHT_SUMMARY}


def calls_of(rollout) -> list[ModelCall]:
    return list(ModelCall.objects.filter(session=rollout.proxy_session).order_by("created_at", "id"))


@needs_bwrap
def test_a_rollout_out_of_tokens_stops_as_token_limit_and_is_scored_on_what_it_wrote(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint, viewer_client
):
    scripted_upstream.push(
        Reply.tool_call("write", WRITE_SUMMARY, usage=(400, 100)),
        Reply.tool_call("ls", {}, usage=(450, 100)),  # 1,050 tokens in all: past the limit
        Reply.text("Done."),  # never asked for: the proxy refuses the third call
    )
    out = StringIO()
    call_command(
        "rollout",
        "--task",
        "fruit-summary",
        "--endpoint",
        "scripted",
        "--harness",
        "builtin",
        "--option",
        "token_limit=1000",
        "--here",
        "--json",
        stdout=out,
        stderr=StringIO(),
    )
    [row] = json.loads(out.getvalue().strip().splitlines()[-1])
    rollout = Rollout.objects.get(pk=row["id"])

    assert rollout.status == Rollout.Status.SCORED, rollout.error
    assert rollout.exit_reason == "token_limit"
    assert rollout.error.startswith("its model calls used 1050 tokens of its limit of 1000")
    assert "token_limit_exceeded" in rollout.error  # the proxy's record of the call it refused
    assert "token_limit_exceeded" in rollout.agent_account["detail"]  # and what the agent said it stopped on
    assert rollout.sub_scores == {"summary_written": 1.0, "summary_right": 1.0, "input_kept": 1.0, "reported_done": 0.0}
    assert rollout.score == 0.75
    assert rollout.harness_options == {"token_limit": 1000} and rollout.proxy_session.token_limit == 1000

    # Each call's output cap was what was left of the budget; the refused one never went upstream.
    assert [r.json["max_completion_tokens"] for r in scripted_upstream.requests] == [1000, 500]
    first, second, refused = calls_of(rollout)
    assert (first.status_code, second.status_code, refused.status_code) == (200, 200, 400)
    assert refused.error == "token_limit_exceeded: token limit of 1000 reached for this rollout (used 1050)"
    assert rollout.model_calls == 3 and (rollout.input_tokens, rollout.output_tokens) == (850, 200)

    html = viewer_client.get(reverse("evaluation:detail", args=[rollout.pk])).content.decode()
    assert "Out of tokens" in html and "of a limit of 1,000" in html
    assert "token_limit_exceeded" in html  # the refused call in the call log


@needs_bwrap
def test_an_agent_that_answers_after_spending_its_budget_still_ran_out_of_tokens(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    scripted_upstream.push(
        Reply.tool_call("write", WRITE_SUMMARY, usage=(300, 100)), Reply.text("Done.", usage=(100, 50))
    )
    [rollout] = create_rollouts(fruit_task, agent_endpoint, harness="builtin", options={"token_limit": 500}, user=None)
    rollout = execute_rollout(rollout.pk)

    # The harness saw a final answer; the budget was spent all the same (550 of 500).
    assert rollout.status == Rollout.Status.SCORED and rollout.exit_reason == "token_limit"
    assert rollout.final_message == "Done." and rollout.score == 1.0
    assert [c.status_code for c in calls_of(rollout)] == [200, 200]


@needs_bwrap
def test_a_rollout_under_its_limit_is_unaffected(live_server_asgi, scripted_upstream, fruit_task, agent_endpoint):
    scripted_upstream.push(
        Reply.tool_call("write", WRITE_SUMMARY, usage=(100, 10)), Reply.text("Done: written.", usage=(150, 20))
    )
    [rollout] = create_rollouts(
        fruit_task, agent_endpoint, harness="builtin", options={"token_limit": 10_000}, user=None
    )
    rollout = execute_rollout(rollout.pk)

    assert rollout.status == Rollout.Status.SCORED and rollout.exit_reason == "completed" and rollout.error == ""
    assert rollout.score == 1.0
    assert [r.json["max_completion_tokens"] for r in scripted_upstream.requests] == [10_000, 9_890]
    assert all(c.status_code == 200 for c in calls_of(rollout))


@pytest.mark.parametrize("limit", [0, -1, "x", True, 2.5])
def test_a_token_limit_that_is_not_a_positive_whole_number_is_refused(fruit_task, agent_endpoint, limit):
    with pytest.raises(RolloutError, match="the token_limit option must be a whole number of tokens"):
        create_rollouts(fruit_task, agent_endpoint, harness="builtin", options={"token_limit": limit}, user=None)
    assert not Rollout.objects.exists()


@needs_bwrap
@pytest.mark.harness
def test_openclaw_stops_at_the_refusal_without_retrying_it(
    harness_installed, live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    scripted_upstream.push(
        Reply.tool_call("write", WRITE_SUMMARY, usage=(3000, 100)),
        Reply.tool_call("ls", {}, usage=(3000, 100)),
        Reply.text("Done."),
    )
    options = {"timeout": 120, "token_limit": 5000}
    [rollout] = create_rollouts(fruit_task, agent_endpoint, harness="openclaw", options=options, user=None)
    rollout = execute_rollout(rollout.pk)

    assert rollout.status == Rollout.Status.SCORED, (rollout.error, rollout.log_tail)
    assert rollout.exit_reason == "token_limit", rollout.error
    assert rollout.score == 0.75  # the summary it wrote counts; it never said it was done
    # OpenClaw asks for max_completion_tokens (its catalog's 8192): lowered to what was left.
    assert [r.json["max_completion_tokens"] for r in scripted_upstream.requests] == [5000, 1900]
    assert [c.status_code for c in calls_of(rollout)] == [200, 200, 400]  # one refusal: it did not retry
