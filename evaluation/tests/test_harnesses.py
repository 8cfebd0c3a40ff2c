"""The harnesses' host side: OpenClaw's generated config, reading back what an agent left, and the failures that
leave a rollout unscored (and retryable)."""

import json
import os

import pytest

from evaluation.harnesses import AgentTask
from evaluation.harnesses.base import BASE_URL, AgentFiles
from evaluation.harnesses.builtin import BuiltinHarness
from evaluation.harnesses.openclaw import exit_reason, openclaw_config, own_words, read_transcript
from evaluation.models import Rollout
from evaluation.services.rollouts import create_rollouts, execute_rollout

TASK = AgentTask("Do it", "org/model-7b", "chat", "session-token", 300)
OOM = "OpenClaw ran out of memory"
KILLED_AT_630 = "OpenClaw did not stop at its deadline; killed after 630 s"


def test_openclaw_config_points_at_the_bridge_with_the_session_token_and_denies_web_tools():
    config = openclaw_config(TASK)
    provider = config["models"]["providers"]["clawgym"]
    assert (provider["baseUrl"], provider["apiKey"], provider["api"]) == (
        BASE_URL,
        "session-token",
        "openai-completions",
    )
    assert [m["id"] for m in provider["models"]] == ["org/model-7b"]
    assert config["models"]["mode"] == "replace"  # no other provider exists to route around the proxy
    assert config["agents"]["defaults"]["model"]["primary"] == "clawgym/org/model-7b"
    assert config["tools"]["deny"] == ["group:web"]

    responses = AgentTask(
        "Do it",
        "m",
        "responses",
        "t",
        60,
        options={"deny": ["exec"], "max_tokens": 1024, "config": {"tools": {"exec": {"timeoutSec": 30}}}},
    )
    config = openclaw_config(responses)
    provider = config["models"]["providers"]["clawgym"]
    assert provider["api"] == "openai-responses" and provider["models"][0]["maxTokens"] == 1024
    assert config["tools"] == {"deny": ["group:web", "exec"], "exec": {"timeoutSec": 30}}


def test_openclaw_transcript_events_become_chat_like_messages(tmp_path):
    events = [
        {"type": "session", "id": "s"},
        {"type": "message", "message": {"role": "user", "content": "Count the fruit"}},
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "csv first"},
                    {"type": "text", "text": "Looking."},
                    {"type": "toolCall", "id": "call_0", "name": "read", "arguments": {"path": "fruit.csv"}},
                ],
            },
        },
        {"type": "custom", "customType": "openclaw.cache-ttl"},
        {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": "call_0",
                "toolName": "read",
                "content": [{"type": "text", "text": "fruit,count"}],
                "isError": False,
            },
        },
        {"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}},
    ]
    dump = "".join(json.dumps({"seq": n, "event": e}) + "\n" for n, e in enumerate(events)) + "not json\n"
    assert read_transcript(dump.encode()) == [
        {"role": "user", "content": "Count the fruit"},
        {
            "role": "assistant",
            "content": "Looking.",
            "reasoning": "csv first",
            "tool_calls": [{"id": "call_0", "name": "read", "arguments": {"path": "fruit.csv"}}],
        },
        {"role": "tool", "tool_call_id": "call_0", "name": "read", "content": "fruit,count", "is_error": False},
        {"role": "assistant", "content": "Done."},
    ]
    assert read_transcript(None) == []


@pytest.mark.parametrize(
    "agent, envelope, log, expected",
    [
        ({"returncode": 0}, {"status": "ok"}, "", ("completed", "")),
        ({"returncode": 2}, {"status": "timeout"}, "", ("timeout", "OpenClaw stopped at its deadline")),
        # What OpenClaw said about its error is its own account (own_words), not ClawGym's reason.
        (
            {"returncode": 1},
            {"status": "error", "error": {"message": "model said 400"}},
            "",
            ("error", "OpenClaw exited 1"),
        ),
        ({"returncode": 1}, {}, "boom\nlast words\n", ("error", "OpenClaw exited 1")),
        # V8 aborting on its heap (exit 133, SIGTRAP) says so on stderr: out of memory, not a crash.
        ({"returncode": 133, "signal": None}, {}, "Fatal process out of memory: CodeRange", ("oom", OOM)),
        ({"returncode": None, "signal": 9}, {}, "std::bad_alloc\n", ("oom", OOM)),
        ({"returncode": None, "signal": 9}, {}, "", ("crashed", "OpenClaw died (exit None)")),
        # Killed at its deadline by the driver: a timeout, whatever it printed on the way (what the driver saw first).
        ({"returncode": None, "timed_out": True, "seconds": 630}, {}, "", ("timeout", KILLED_AT_630)),
        (
            {"returncode": -9, "timed_out": True, "seconds": 630},
            {},
            "JavaScript heap out of memory",
            ("timeout", KILLED_AT_630),
        ),
    ],
)
def test_openclaw_exit_reasons(agent, envelope, log, expected):
    assert exit_reason(agent, envelope, log) == expected


def test_openclaw_own_words_are_its_error_message_or_its_last_log_line():
    assert own_words({"error": {"message": "model said 400"}}, "boom\n") == "model said 400"
    assert own_words({}, "boom\nlast words\n") == "last words"
    assert own_words({}, "") == ""


def test_the_builtin_agent_state_is_its_own_account_and_a_dead_agent_is_a_crash(tmp_path):
    (tmp_path / "out").mkdir()
    files = AgentFiles(tmp_path / "out")
    state = {
        "exit_reason": "completed",
        "final_message": "ok",
        "turns": 2,
        "tool_calls": 1,
        "tools_used": {"ls": 1},
        "usage": {"input": 5, "output": 2},
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "error: nope"},
        ],
    }
    (tmp_path / "out" / "agent.json").write_text(json.dumps(state))
    outcome = BuiltinHarness().collect(TASK, files, {"returncode": 0, "timed_out": False})
    account = outcome.account
    assert (outcome.exit_reason, outcome.detail) == ("completed", "")
    assert (account.exit_reason, account.final_message, account.turns, account.tools_used) == (
        "completed",
        "ok",
        2,
        {"ls": 1},
    )
    assert account.transcript == [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "ls", "arguments": {"path": "."}}]},
        {"role": "tool", "content": "error: nope", "tool_call_id": "c1", "is_error": True},
    ]
    (tmp_path / "out" / "agent.json").write_text(json.dumps({**state, "exit_reason": "running"}))
    (tmp_path / "out" / "agent.log").write_text("Traceback …\nKeyError: 'x'\n")
    crashed = BuiltinHarness().collect(TASK, files, {"returncode": 1, "timed_out": False})
    assert (crashed.exit_reason, crashed.detail) == ("crashed", "the agent died (exit 1)")
    assert crashed.log_tail.endswith("KeyError: 'x'\n") and crashed.account.exit_reason == "running"

    # Its words on an error are its own; ClawGym says only that it stopped on one.
    (tmp_path / "out" / "agent.json").write_text(json.dumps({**state, "exit_reason": "error", "detail": "=cmd|x"}))
    erred = BuiltinHarness().collect(TASK, files, {"returncode": 1, "timed_out": False})
    assert (erred.exit_reason, erred.detail, erred.account.detail) == (
        "error",
        "the agent stopped on an error",
        "=cmd|x",
    )


def test_the_output_folder_is_read_without_following_links_or_opening_fifos(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text('{"final_message": "host file"}')
    (out / "agent.json").symlink_to(secret)
    (out / "agent.log").symlink_to(secret)
    os.mkfifo(out / "transcript.jsonl")  # opening it for reading would wait for a writer for ever
    (out / "big.json").write_text(json.dumps({"x": "y" * 100}))
    files = AgentFiles(out)
    assert files.json("agent.json", 1024) is None and files.tail("agent.log") == ""
    assert files.read("transcript.jsonl", 1024) is None
    assert files.read("missing", 1024) is None
    assert files.json("big.json", 50) is None and files.json("big.json", 1024) == {"x": "y" * 100}
    assert files.tail("big.json", chars=5) == 'yyy"}'

    # The folder itself replaced by a link (to another folder of this host) is not read either.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "agent.json").write_text("{}")
    os.rename(out, tmp_path / "out.real")
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    assert AgentFiles(tmp_path / "out").json("agent.json", 1024) is None


@pytest.mark.django_db(transaction=True)
def test_a_harness_that_cannot_run_fails_the_rollout_retryably(fruit_task, agent_endpoint, settings, tmp_path):
    settings.CLAWGYM_HARNESS_DIR = tmp_path  # nothing installed there
    [missing] = create_rollouts(fruit_task, agent_endpoint, harness="openclaw", user=None)
    missing = execute_rollout(missing.pk)
    assert (missing.status, missing.exit_reason) == (Rollout.Status.FAILED, "harness_unavailable")
    assert "make harness" in missing.error and missing.retryable and missing.score is None
    assert not missing.proxy_session.is_open

    agent_endpoint.api_style = "responses"
    agent_endpoint.save()
    [wrong_api] = create_rollouts(fruit_task, agent_endpoint, harness="builtin", user=None)
    wrong_api = execute_rollout(wrong_api.pk)
    assert wrong_api.exit_reason == "harness_unavailable" and "chat completions API only" in wrong_api.error
