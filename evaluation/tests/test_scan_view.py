"""What the scanners read of a rollout, built from what was recorded (evaluation.scanners.view): a real rollout of the
builtin harness in the sandbox behind the proxy (a few seconds), its model calls matched to the assistant turns of
its transcript, each tool call with the result the harness sent back, the final workspace's files and the failed
call the proxy refused past the token budget."""

import pytest

from evaluation.scanners import get_scanner
from evaluation.scanners.view import rollout_view
from evaluation.services.rollouts import create_rollouts, execute_rollout
from evaluation.testing import needs_bwrap
from llm.models import ModelCall
from llm.testing import Reply

pytestmark = [needs_bwrap, pytest.mark.django_db(transaction=True)]


def test_the_view_of_a_recorded_rollout_points_each_step_at_its_model_call(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    read = Reply.tool_call("read", {"path": "fruit.csv"}, usage=(100, 10))
    scripted_upstream.push(
        read,
        read,
        read,
        Reply.tool_call("write", {"path": "summary.txt", "content": ""}, usage=(100, 10)),
        Reply.text("Done: the summary is written.", usage=(100, 10)),
    )
    [rollout] = create_rollouts(fruit_task, agent_endpoint, harness="builtin", options={"token_limit": 420}, user=None)
    rollout = execute_rollout(rollout.pk)
    assert rollout.exit_reason == "token_limit", rollout.error  # 440 tokens: the fifth call was refused

    view = rollout_view(rollout)
    calls = list(ModelCall.objects.filter(session=rollout.proxy_session).order_by("created_at", "id"))
    answered = [c.pk for c in calls if not c.error]
    assert [view.answered_by[i] for i, m in enumerate(view.transcript) if m["role"] == "assistant"] == answered
    assert view.failed_calls == [{"id": calls[-1].pk, "error": calls[-1].error}]
    steps = view.tool_steps()
    assert [(s.name, s.model_call) for s in steps] == [
        ("read", answered[0]),
        ("read", answered[1]),
        ("read", answered[2]),
        ("write", answered[3]),
    ]
    assert all("apple" in s.result for s in steps[:3])  # what the tool gave back, as the next request carried it
    assert [(f.path, f.change, f.size, f.head) for f in view.files] == [("summary.txt", "added", 0, b"")]
    assert view.reward_paths == ["reward/check.py", "reward/reward.sh"]

    found = {name: get_scanner(name).scan(view) for name in ("loop", "placeholder_paid", "out_of_budget")}
    [loop] = found["loop"]
    assert loop.model_call == answered[2] and view.transcript[loop.step]["tool_calls"][0]["name"] == "read"
    [placeholder] = found["placeholder_paid"]
    assert placeholder.path == "summary.txt" and placeholder.model_call == answered[3]
    [budget] = found["out_of_budget"]
    assert budget.model_call == calls[-1].pk and "token_limit_exceeded" in budget.evidence
