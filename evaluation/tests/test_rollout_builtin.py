"""Rollouts with the builtin harness, end to end: scripted model on loopback -> recording proxy (uvicorn) -> relay ->
bubblewrap sandbox -> the agent's tools on the real workspace -> the real checker. Fast (well under a second of
agent time each), so the behaviours common to every harness are proved here."""

import json
import re

import pytest

from evaluation.models import Rollout, RolloutFile, Trajectory
from evaluation.services.rollouts import RolloutError, create_rollouts, execute_rollout
from evaluation.testing import RIGHT_SUMMARY, needs_bwrap, network_probe, probe_result
from llm.models import ModelCall
from llm.testing import Reply

pytestmark = [needs_bwrap, pytest.mark.django_db(transaction=True)]


def run_one(revision, endpoint, **options) -> Rollout:
    [rollout] = create_rollouts(revision, endpoint, harness="builtin", options=options, user=None)
    return execute_rollout(rollout.pk)


def test_a_script_writing_the_right_file_scores_one_and_every_call_is_recorded(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    scripted_upstream.push(
        Reply.tool_call("exec", {"command": "ls -a; ls reward 2>&1; echo; " + network_probe(live_server_asgi.port)}),
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}),
        Reply.text("Done: summary.txt holds the counts."),
    )
    rollout = run_one(fruit_task, agent_endpoint)

    assert rollout.status == Rollout.Status.SCORED, rollout.error
    assert rollout.exit_reason == "completed"
    assert rollout.score == 1.0
    assert rollout.sub_scores == {"summary_written": 1.0, "summary_right": 1.0, "input_kept": 1.0, "reported_done": 1.0}
    assert (rollout.turns, rollout.tool_calls, rollout.tools_used) == (3, 2, {"exec": 1, "write": 1})
    assert rollout.final_message == "Done: summary.txt holds the counts."
    assert rollout.attempt == 1 and rollout.agent_seconds > 0

    # Every model call went through the proxy and is linked to the rollout's session.
    calls = ModelCall.objects.filter(session=rollout.proxy_session).order_by("created_at", "id")
    assert rollout.model_calls == calls.count() == len(scripted_upstream.requests) == 3
    assert all(call.subject == f"rollout:{rollout.pk}" and call.status_code == 200 for call in calls)
    assert rollout.input_tokens == sum(c.input_tokens for c in calls)
    assert not rollout.proxy_session.is_open  # closed once the agent stopped

    # The workspace diff: one file added, with its contents stored as a blob.
    [change] = RolloutFile.objects.filter(rollout=rollout)
    assert (change.path, change.change, change.size) == ("summary.txt", "added", len(RIGHT_SUMMARY))
    assert change.blob.content == RIGHT_SUMMARY.encode()
    assert rollout.workspace_changes() == [{"path": "summary.txt", "change": "added", "size": 18, "kind": "file"}]

    # The agent never saw the checker: no reward/ folder, and check.py's text went to no model call.
    listing = rollout.transcript[3]["content"]
    assert "fruit.csv" in listing and "No such file" in listing
    assert not any("summary_right" in json.dumps(r.json) for r in scripted_upstream.requests)


def test_the_agent_cannot_reach_anything_but_the_proxy(live_server_asgi, scripted_upstream, fruit_task, agent_endpoint):
    scripted_upstream.push(
        Reply.tool_call("exec", {"command": network_probe(live_server_asgi.port)}), Reply.text("done")
    )
    rollout = run_one(fruit_task, agent_endpoint)

    probe = probe_result(rollout.transcript[3]["content"])
    for name in ("web_app", "postgres", "redis", "host_web_app", "outside"):
        assert probe[name].startswith("refused"), (name, probe)
    assert probe["dns"].startswith("failed")
    # The bridge leads to the relay, which passes only this rollout's OpenAI API calls: the site is not behind it.
    assert probe["bridge_site_page"] == "HTTP 404" and probe["bridge_api"] == "HTTP 404"
    assert "[proxy relay refused] 404 GET /admin/" in rollout.log_tail
    assert rollout.model_calls == 2


def test_a_wrong_answer_scores_below_one(live_server_asgi, scripted_upstream, fruit_task, agent_endpoint):
    scripted_upstream.push(
        Reply.tool_call("write", {"path": "summary.txt", "content": "2 apples, 3 pears\n"}),
        Reply.tool_call("exec", {"command": "rm fruit.csv"}),
        Reply.text("Done."),
    )
    rollout = run_one(fruit_task, agent_endpoint)

    assert rollout.status == Rollout.Status.SCORED
    assert rollout.score == 0.5
    assert rollout.sub_scores["summary_right"] == 0.0 and rollout.sub_scores["input_kept"] == 0.0
    changes = {(f.path, f.change) for f in rollout.files.all()}
    assert changes == {("summary.txt", "added"), ("fruit.csv", "deleted")}


def test_the_trajectory_is_rebuilt_from_the_recorded_calls(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    scripted_upstream.push(
        Reply.tool_call("read", {"path": "fruit.csv"}),
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}),
        Reply.text("Done."),
    )
    rollout = run_one(fruit_task, agent_endpoint)

    [trajectory] = Trajectory.objects.filter(rollout=rollout)
    assert not trajectory.excluded and trajectory.reward == 1.0
    roles = [m["role"] for m in trajectory.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert trajectory.messages[1]["content"] == fruit_task.instruction
    called = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for m in trajectory.messages
        for c in m.get("tool_calls") or []
    ]
    assert called == [("read", {"path": "fruit.csv"}), ("write", {"path": "summary.txt", "content": RIGHT_SUMMARY})]
    assert trajectory.messages[3]["content"].startswith("fruit,count")
    assert trajectory.messages[-1]["content"] == "Done."
    assert {t["function"]["name"] for t in trajectory.tools} == {"read", "write", "edit", "ls", "exec"}
    assert trajectory.stats["turns"] == 3 and trajectory.stats["tool_calls"] == 2
    assert trajectory.stats["tool_types"] == ["read", "write"]
    assert len(trajectory.model_call_ids) == 3


def test_running_out_of_turns_is_scored_with_its_reason(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    scripted_upstream.default = Reply.tool_call("ls", {})
    rollout = run_one(fruit_task, agent_endpoint, max_turns=3)

    assert rollout.status == Rollout.Status.SCORED
    assert rollout.exit_reason == "max_turns" and "its 3 turns" in rollout.error
    assert rollout.agent_account["detail"] == "stopped after 3 model calls without a final answer"  # its own words
    assert rollout.turns == rollout.model_calls == 3
    assert rollout.score == 0.25  # only the untouched input file counts


def test_a_model_that_fails_ends_the_agent_with_an_error_and_is_still_scored(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    scripted_upstream.push(Reply.error(400, "context length exceeded"))
    rollout = run_one(fruit_task, agent_endpoint)

    assert rollout.status == Rollout.Status.SCORED and rollout.exit_reason == "error"
    assert "HTTP 400" in rollout.error and "context length exceeded" in rollout.error
    assert rollout.model_calls == 1 and rollout.score == 0.25


def test_an_agent_past_its_deadline_is_stopped_and_scored(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    scripted_upstream.push(
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}),
        Reply.tool_call("exec", {"command": "sleep 60"}),
    )
    rollout = run_one(fruit_task, agent_endpoint, timeout=3)

    # How soon it was stopped is measured by `bench/rollout_bench.py --deadline 3`, not asserted here.
    assert rollout.status == Rollout.Status.SCORED and rollout.exit_reason == "timeout"
    # Stopped inside the sleep: the model handed out the `exec` and was never asked again with its result.
    assert rollout.model_calls == len(scripted_upstream.requests) == 2
    assert rollout.sub_scores["summary_right"] == 1.0  # what it wrote before its deadline counts
    # The transcript is the proxy's: it ends with the exec the model asked for. The agent's own transcript so far
    # was kept as its account, with the result it had when it was stopped.
    assert rollout.transcript[-1]["tool_calls"][0]["name"] == "exec" and rollout.final_message == ""
    assert rollout.agent_account["transcript"][-1]["role"] == "tool"


def test_few_shot_opens_the_conversation_with_one_worked_tool_call(
    live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    # A base model prompted with a tool-call format it has never seen is measured on the format as much as on the
    # task: few_shot shows it one call first (the learning bench's fairer base).
    scripted_upstream.push(Reply.text("Nothing to do."))
    rollout = run_one(fruit_task, agent_endpoint, few_shot=True)
    assert rollout.status == Rollout.Status.SCORED, rollout.error
    [request] = scripted_upstream.requests
    roles = [m["role"] for m in request.json["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    example = request.json["messages"][2]["tool_calls"][0]["function"]
    assert example["name"] == "read" and json.loads(example["arguments"]) == {"path": "welcome.md"}
    assert request.json["messages"][-1]["content"] == fruit_task.instruction
    # Only the example opens it: without the option the instruction follows the system prompt at once.
    scripted_upstream.push(Reply.text("Nothing to do."))
    run_one(fruit_task, agent_endpoint)
    assert [m["role"] for m in scripted_upstream.requests[-1].json["messages"]] == ["system", "user"]


def test_the_builtin_harness_refuses_options_of_the_wrong_type(fruit_task, agent_endpoint):
    for options, refused in (
        ({"few_shot": "yes"}, "the few_shot option must be true or false, got 'yes'"),
        ({"max_turns": "6"}, "the max_turns option must be a whole number from 1, got '6'"),
        ({"max_turns": 0}, "the max_turns option must be a whole number from 1, got 0"),
    ):
        with pytest.raises(RolloutError, match=re.escape(refused)):
            create_rollouts(fruit_task, agent_endpoint, harness="builtin", options=options, user=None)
    assert not Rollout.objects.exists()
