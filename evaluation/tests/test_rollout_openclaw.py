"""Rollouts with the real OpenClaw CLI (unmodified, installed by `make harness`) in the bubblewrap sandbox, its model
the scripted OpenAI-compatible server behind the recording proxy. Each run costs ~15 s and ~1 GB: two runs here.

What OpenClaw sends (learned by recording it): streamed chat completions (`stream: true`, usage in the last
chunk), its own system prompt, the instruction as the user message with a timestamp prefix and a runtime line,
an internal-context user message at the end of each request, and tools such as read, write, edit, exec, ls.
"""

import json

import pytest

from evaluation.models import Rollout, Trajectory
from evaluation.services.rollouts import create_rollouts, execute_rollout
from evaluation.testing import RIGHT_SUMMARY, needs_bwrap, network_probe, probe_result
from llm.models import ModelCall
from llm.testing import Reply

pytestmark = [needs_bwrap, pytest.mark.harness, pytest.mark.django_db(transaction=True)]


def run_openclaw(revision, endpoint) -> Rollout:
    [rollout] = create_rollouts(revision, endpoint, harness="openclaw", options={"timeout": 120}, user=None)
    return execute_rollout(rollout.pk)


def tool_calls(messages: list[dict]) -> list[tuple[str, dict]]:
    return [
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
        for message in messages
        if message["role"] == "assistant"
        for call in message.get("tool_calls") or []
    ]


def test_openclaw_writing_the_right_file_scores_one(
    harness_installed, live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    probe = {"command": "ls -a; ls reward 2>&1; echo; " + network_probe(live_server_asgi.port)}
    write = {"path": "summary.txt", "content": RIGHT_SUMMARY}
    scripted_upstream.push(
        Reply.tool_call("exec", probe),
        Reply.tool_call("write", write),
        Reply.text("Done: summary.txt holds the counts."),
    )
    rollout = run_openclaw(fruit_task, agent_endpoint)

    assert rollout.status == Rollout.Status.SCORED, (rollout.error, rollout.log_tail)
    assert rollout.exit_reason == "completed", rollout.error
    assert rollout.score == 1.0, rollout.sub_scores
    assert rollout.final_message == "Done: summary.txt holds the counts."
    assert (rollout.turns, rollout.tool_calls, rollout.tools_used) == (3, 2, {"exec": 1, "write": 1})
    assert rollout.workspace_changes() == [{"path": "summary.txt", "change": "added", "size": 18, "kind": "file"}]

    # Every model call OpenClaw made went through the proxy, streamed, and is linked to the rollout.
    calls = list(ModelCall.objects.filter(session=rollout.proxy_session).order_by("created_at", "id"))
    assert len(calls) == rollout.model_calls == len(scripted_upstream.requests) == 3
    assert all(call.stream and call.status_code == 200 and call.subject == rollout.subject for call in calls)
    assert rollout.input_tokens == sum(call.input_tokens for call in calls) > 0

    # The transcript as the proxy saw it (the tool results OpenClaw got inside the sandbox are in its requests), and
    # OpenClaw's own from its state database, kept as its account.
    assert [m["role"] for m in rollout.transcript if m["role"] != "system"] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    own = rollout.agent_account["transcript"]
    assert [m["role"] for m in own] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert rollout.agent_account["final_message"] == rollout.final_message
    result = next(m["content"] for m in rollout.transcript if m["role"] == "tool")
    assert result == own[2]["content"]
    assert "fruit.csv" in result and "No such file" in result  # the agent never saw reward/
    probed = probe_result(result)
    for name in ("web_app", "postgres", "redis", "host_web_app", "outside"):
        assert probed[name].startswith("refused"), (name, probed)
    assert probed["dns"].startswith("failed") and probed["bridge_site_page"] == "HTTP 404"

    # The rebuilt trajectory is the scripted conversation.
    [trajectory] = Trajectory.objects.filter(rollout=rollout)
    assert not trajectory.excluded, trajectory.exclusion_reason
    assert tool_calls(trajectory.messages) == [("exec", probe), ("write", write)]
    assert [m["role"] for m in trajectory.messages if m["role"] != "system"] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert fruit_task.instruction in trajectory.messages[1]["content"]
    assert trajectory.messages[-1] == {"role": "assistant", "content": "Done: summary.txt holds the counts."}
    assert trajectory.reward == 1.0 and trajectory.stats["tool_types"] == ["exec", "write"]
    assert trajectory.model_call_ids == [call.pk for call in calls]


def test_openclaw_writing_a_wrong_file_scores_below_one(
    harness_installed, live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    scripted_upstream.push(
        Reply.tool_call("write", {"path": "summary.txt", "content": "3 apples and some pears\n"}),
        Reply.text("Done."),
    )
    rollout = run_openclaw(fruit_task, agent_endpoint)

    assert rollout.status == Rollout.Status.SCORED and rollout.exit_reason == "completed", rollout.error
    assert rollout.score == 0.75 and rollout.sub_scores["summary_right"] == 0.0
    assert rollout.model_calls == len(scripted_upstream.requests) == 2
    [trajectory] = rollout.trajectories.all()
    assert tool_calls(trajectory.messages) == [
        ("write", {"path": "summary.txt", "content": "3 apples and some pears\n"})
    ]
