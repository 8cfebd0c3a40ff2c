"""Rebuilding trajectories from recorded model calls: chains, branches, auxiliary prompts, Responses API, stats."""

import copy
import json

import pytest

from evaluation.testing import (
    A1,
    A2,
    A3,
    HEARTBEAT,
    SYSTEM,
    T1,
    T2,
    TASK,
    TOOLS,
    assistant,
    chat_call,
    tool,
    tool_call,
)
from evaluation.trajectories import (
    DEFAULT_SUPPORTED_TOOLS,
    TrajectoryData,
    TrajectoryRules,
    TrajectoryStats,
    rebuild_trajectories,
)
from evaluation.trajectory_stats import corpus_stats

LINEAR = [SYSTEM, TASK, A1, T1, A2, T2, A3]


def linear_calls():
    return [
        chat_call([SYSTEM, TASK], A1, usage=(100, 20)),
        chat_call([SYSTEM, TASK, A1, T1], A2, usage=(150, 15)),
        chat_call([SYSTEM, TASK, A1, T1, A2, T2], A3, usage=(180, 12)),
    ]


# --- chains ---------------------------------------------------------------------------------------------------


def test_linear_tool_calling_conversation_is_one_trajectory_with_its_stats():
    [trajectory] = rebuild_trajectories(linear_calls())
    assert trajectory.messages == LINEAR
    assert trajectory.call_indices == [0, 1, 2]
    assert trajectory.tools == TOOLS
    assert trajectory.model == "scripted"
    assert not trajectory.excluded and trajectory.exclusion_reason == ""
    assert trajectory.stats == TrajectoryStats(
        turns=3, prompt_tokens=430, completion_tokens=47, total_tokens=477, tool_calls=2, tool_types=["exec", "write"]
    )


def test_total_tokens_default_to_prompt_plus_completion_when_usage_omits_them():
    calls = [chat_call([SYSTEM, TASK], A3, usage=(7, 3), total=False)]
    assert rebuild_trajectories(calls)[0].stats.total_tokens == 10


def test_serialisation_differences_do_not_split_a_chain():
    # The harness re-sends history its own way: content parts, new tool call ids, re-dumped arguments,
    # whitespace, dropped reasoning, another key order.
    a1_resent = {
        "tool_calls": [
            {
                "type": "function",
                "id": "toolu_XYZ",
                "function": {"arguments": '{ "content": "hi",  "path": "hello.txt" }', "name": "write"},
            }
        ],
        "content": [{"type": "text", "text": "I'll write it.  "}],
        "role": "assistant",
    }
    t1_resent = {
        "role": "tool",
        "tool_call_id": "toolu_XYZ",
        "content": [{"type": "text", "text": "Wrote 2 bytes to hello.txt\n"}],
    }
    task_resent = {
        "role": "user",
        "content": [
            {"type": "text", "text": "Write hello.txt containing 'hi', "},
            {"type": "text", "text": "then check it."},
        ],
    }
    first_answer = {**A1, "reasoning_content": "The user wants a file."}
    calls = [chat_call([SYSTEM, TASK], first_answer), chat_call([SYSTEM, task_resent, a1_resent, t1_resent], A3)]
    [trajectory] = rebuild_trajectories(calls)
    assert trajectory.call_indices == [0, 1]
    # The conversation is what the last request sent (what the model saw), plus its answer.
    assert trajectory.messages == [SYSTEM, task_resent, a1_resent, t1_resent, A3]


def test_a_real_difference_in_history_does_split_the_chain():
    edited = assistant("I'll write it.", tool_call("call_1", "write", {"path": "hello.txt", "content": "HI"}))
    calls = [chat_call([SYSTEM, TASK], A1), chat_call([SYSTEM, TASK, edited, T1], A3)]
    trajectories = rebuild_trajectories(calls)
    assert [t.call_indices for t in trajectories] == [[0], [1]]


def test_a_failed_call_then_its_retry_keeps_only_the_answered_one():
    failed = {"request": chat_call([SYSTEM, TASK], A1)["request"], "response": None}
    error_body = {"request": chat_call([SYSTEM, TASK], A1)["request"], "response": {"error": {"message": "overloaded"}}}
    calls = [failed, error_body, *linear_calls()]
    [trajectory] = rebuild_trajectories(calls)
    assert trajectory.call_indices == [2, 3, 4]
    assert trajectory.messages == LINEAR


def test_an_identical_retry_with_the_same_answer_is_not_a_second_trajectory():
    first, second, third = linear_calls()
    [trajectory] = rebuild_trajectories([first, copy.deepcopy(first), second, third])
    assert trajectory.call_indices == [1, 2, 3]  # continued from the latest of the identical calls
    assert trajectory.stats.prompt_tokens == 430  # the duplicate is not counted

    # A duplicate that nobody continued is still contained in the other chain: one trajectory.
    [only] = rebuild_trajectories([first, copy.deepcopy(first)])
    assert only.call_indices == [1]


def test_branches_from_the_same_request_give_one_trajectory_each():
    other = assistant(None, tool_call("call_9", "exec", {"command": "echo hi > hello.txt"}))
    other_result = tool("call_9", "")
    calls = [
        chat_call([SYSTEM, TASK], A1),
        chat_call([SYSTEM, TASK], other),  # a retry that got another answer
        chat_call([SYSTEM, TASK, A1, T1], A3),
        chat_call([SYSTEM, TASK, other, other_result], A3),
    ]
    trajectories = rebuild_trajectories(calls)
    assert [t.call_indices for t in trajectories] == [[0, 2], [1, 3]]
    assert trajectories[0].messages == [SYSTEM, TASK, A1, T1, A3]
    assert trajectories[1].messages == [SYSTEM, TASK, other, other_result, A3]
    assert trajectories[1].stats.tool_types == ["exec"]


def test_an_abandoned_answer_is_its_own_short_trajectory():
    abandoned = assistant("Sure, which folder?")
    calls = [chat_call([SYSTEM, TASK], abandoned), *linear_calls()]
    trajectories = rebuild_trajectories(calls)
    assert [t.call_indices for t in trajectories] == [[0], [1, 2, 3]]
    assert trajectories[0].messages == [SYSTEM, TASK, abandoned]


def test_a_request_with_no_new_message_still_continues_its_predecessor():
    calls = [chat_call([SYSTEM, TASK], A1), chat_call([SYSTEM, TASK, A1], A3)]
    [trajectory] = rebuild_trajectories(calls)
    assert trajectory.call_indices == [0, 1]
    assert trajectory.messages == [SYSTEM, TASK, A1, A3]


def test_compaction_rewrites_history_and_starts_a_new_chain():
    summarise = [
        {"role": "system", "content": "Summarise the conversation so far."},
        {"role": "user", "content": json.dumps([TASK, A1, T1])},
    ]
    summary = assistant("The user wants hello.txt; it was written.")
    compacted = [SYSTEM, {"role": "user", "content": "Summary of earlier work: hello.txt was written."}, TASK]
    b1 = assistant(None, tool_call("call_5", "read", {"path": "hello.txt"}))
    calls = [
        chat_call([SYSTEM, TASK], A1),
        chat_call([SYSTEM, TASK, A1, T1], A2),
        chat_call(summarise, summary, tools=[]),
        chat_call(compacted, b1),
        chat_call([*compacted, b1, tool("call_5", "hi")], A3),
    ]
    trajectories = rebuild_trajectories(calls)
    assert [t.call_indices for t in trajectories] == [[0, 1], [2], [3, 4]]
    assert trajectories[1].messages == [*summarise, summary]
    assert trajectories[1].tools == []
    assert trajectories[2].messages == [*compacted, b1, tool("call_5", "hi"), A3]


def test_tools_are_taken_from_the_last_request_of_the_chain():
    fewer = TOOLS[:1]
    calls = [chat_call([SYSTEM, TASK], A1), chat_call([SYSTEM, TASK, A1, T1], A3, tools=fewer)]
    assert rebuild_trajectories(calls)[0].tools == fewer


def test_non_text_parts_are_compared_and_the_recorded_calls_left_untouched():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    with_image = {
        "role": "user",
        "content": [{"type": "text", "text": "<internal-context>x</internal-context>Look:"}, image],
    }
    other_image = {
        "role": "user",
        "content": [{"type": "text", "text": "Look:"}, {**image, "image_url": {"url": "data:image/png;base64,BBBB"}}],
    }
    calls = [
        chat_call([SYSTEM, with_image], A1),
        chat_call([SYSTEM, {"role": "user", "content": [{"type": "text", "text": "Look:"}, image]}, A1, T1], A3),
        chat_call([SYSTEM, other_image, A1, T1], A3),
    ]
    recorded = copy.deepcopy(calls)
    trajectories = rebuild_trajectories(calls)
    assert [t.call_indices for t in trajectories] == [[0, 1], [2]]
    assert trajectories[0].messages[1]["content"] == [{"type": "text", "text": "Look:"}, image]
    assert calls == recorded


def test_no_calls_no_trajectories_and_a_non_dict_call_is_refused():
    assert rebuild_trajectories([]) == []
    with pytest.raises(TypeError, match="call 1 must be a dict"):
        rebuild_trajectories([linear_calls()[0], "oops"])


# --- auxiliary prompts ----------------------------------------------------------------------------------------


def heartbeat_rollout():
    """A task, a heartbeat in its own session, a heartbeat inside the session (answered with a tool call),
    then the user's follow-up, whose history still holds the heartbeat exchange."""
    hb_read = assistant(None, tool_call("call_h", "read", {"path": "HEARTBEAT.md"}))
    hb_result = tool("call_h", "no such file")
    hb_ok = assistant("HEARTBEAT_OK")
    follow_up = {"role": "user", "content": "Now also add a newline."}
    history = [SYSTEM, TASK, A1, T1, A2, T2, A3]
    calls = [
        *linear_calls(),  # 0, 1, 2
        chat_call([SYSTEM, HEARTBEAT], hb_ok, usage=(50, 2)),  # 3: isolated heartbeat
        chat_call([*history, HEARTBEAT], hb_read),  # 4: heartbeat in the session
        chat_call([*history, HEARTBEAT, hb_read, hb_result], hb_ok),  # 5
        chat_call([*history, HEARTBEAT, hb_read, hb_result, hb_ok, follow_up], A1),  # 6
    ]
    return calls, [*history, follow_up, A1]


def test_heartbeats_are_removed_and_their_calls_dropped():
    calls, expected = heartbeat_rollout()
    [trajectory] = rebuild_trajectories(calls)
    assert trajectory.call_indices == [0, 1, 2, 6]
    assert trajectory.messages == expected
    assert trajectory.messages[0] == SYSTEM  # mentions HEARTBEAT_OK, but is no heartbeat
    assert trajectory.stats.turns == 4
    assert trajectory.stats.tool_types == ["exec", "write"]  # the heartbeat's read is not counted


def test_auxiliary_calls_can_be_kept_as_excluded_trajectories():
    calls, expected = heartbeat_rollout()
    trajectories = rebuild_trajectories(calls, rules=TrajectoryRules(drop_auxiliary_calls=False))
    assert [t.call_indices for t in trajectories] == [[0, 1, 2, 6], [3], [4], [5]]
    task, *auxiliary = trajectories
    assert task.messages == expected and not task.excluded
    assert all(t.excluded and t.exclusion_reason.startswith("auxiliary call: ") for t in auxiliary)
    assert "HEARTBEAT" in auxiliary[0].exclusion_reason
    # Kept as recorded, so the page shows what the harness actually sent.
    assert auxiliary[0].messages == [SYSTEM, HEARTBEAT, assistant("HEARTBEAT_OK")]


def test_cron_prompts_and_internal_context_blocks_are_stripped():
    cron = {"role": "user", "content": "[cron:daily-digest] Send the daily digest."}
    block = "<internal-context>\ncwd=/root/.openclaw/workspace\n</internal-context>\n"
    wrapped_task = {"role": "user", "content": block + TASK["content"]}
    context_only = {"role": "system", "content": '  <internal-context source="memory">nothing</internal-context> '}
    parts_result = {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": [
            {"type": "text", "text": "<internal-context>x</internal-context>"},
            {"type": "text", "text": T1["content"]},
        ],
    }
    cron_reply = assistant("Digest sent.")
    follow_up = {"role": "user", "content": "Thanks. Anything else?"}
    calls = [
        chat_call([SYSTEM, context_only, wrapped_task], A1),
        chat_call([SYSTEM, wrapped_task, A1, parts_result, cron, cron_reply, context_only, follow_up], A3),
    ]
    [trajectory] = rebuild_trajectories(calls)
    assert trajectory.call_indices == [0, 1]
    cleaned_result = {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": T1["content"]}]}
    assert trajectory.messages == [SYSTEM, TASK, A1, cleaned_result, follow_up, A3]


def test_injected_context_after_an_auxiliary_prompt_does_not_end_its_exchange():
    # A context-only message is no prompt of its own: the call still answers the cron nudge before it.
    cron = {"role": "user", "content": "[cron] Check the inbox."}
    context_only = {"role": "system", "content": "<internal-context>inbox: 0</internal-context>"}
    calls = [*linear_calls(), chat_call([*LINEAR, cron, context_only], assistant("Inbox empty."))]
    [trajectory] = rebuild_trajectories(calls)
    assert trajectory.call_indices == [0, 1, 2]


def test_a_call_answering_a_cron_prompt_is_auxiliary():
    cron = {"role": "user", "content": "[cron] Check the inbox."}
    assert rebuild_trajectories([chat_call([SYSTEM, cron], A3)]) == []
    # The same words inside a task are not a marker: the patterns are anchored at the start.
    task = {"role": "user", "content": "Explain what a [cron] marker is."}
    assert len(rebuild_trajectories([chat_call([SYSTEM, task], A3)])) == 1


def test_custom_auxiliary_patterns_replace_the_defaults():
    rules = TrajectoryRules(auxiliary_prompts=[r"^PING$"], injected_blocks=[])
    ping = {"role": "user", "content": "PING"}
    wrapped = {"role": "user", "content": "<internal-context>x</internal-context> go"}
    assert rebuild_trajectories([chat_call([SYSTEM, ping], A3)], rules=rules) == []
    heartbeat, kept = rebuild_trajectories(
        [chat_call([SYSTEM, HEARTBEAT], A3), chat_call([SYSTEM, wrapped], A3)], rules=rules
    )
    assert heartbeat.messages == [SYSTEM, HEARTBEAT, A3]  # the default heartbeat pattern was replaced
    assert kept.messages == [SYSTEM, wrapped, A3]  # no injected-block rule: left alone


# --- unsupported tools ----------------------------------------------------------------------------------------


def test_calling_an_unsupported_tool_excludes_the_trajectory_and_names_it():
    canvas = assistant(None, tool_call("c1", "canvas", {"action": "present"}), tool_call("c2", "message", {"to": "x"}))
    calls = [
        chat_call([SYSTEM, TASK], canvas),
        chat_call([SYSTEM, TASK, canvas, tool("c1", "ok"), tool("c2", "ok")], A3),
    ]
    [trajectory] = rebuild_trajectories(calls)
    assert trajectory.excluded
    assert trajectory.exclusion_reason == "calls unsupported tools: canvas, message"
    assert trajectory.stats.tool_types == ["canvas", "message"]

    allowed = TrajectoryRules(supported_tools=DEFAULT_SUPPORTED_TOOLS | {"canvas", "message"})
    assert not rebuild_trajectories(calls, rules=allowed)[0].excluded
    assert not rebuild_trajectories(calls, rules=TrajectoryRules(supported_tools=None))[0].excluded


def test_a_tool_offered_but_never_called_does_not_exclude():
    offered = [*TOOLS, {"type": "function", "function": {"name": "canvas"}}]
    calls = linear_calls()
    for call in calls:
        call["request"]["tools"] = offered
    [trajectory] = rebuild_trajectories(calls)
    assert not trajectory.excluded
    assert trajectory.tools == offered


# --- Responses API --------------------------------------------------------------------------------------------


def responses_call(instructions, items, output, *, response_id, previous=None, usage=(80, 8)):
    request = {
        "model": "scripted",
        "instructions": instructions,
        "input": copy.deepcopy(items),
        "stream": True,
        "tools": [
            {
                "type": "function",
                "name": "write",
                "description": "Write a file",
                "parameters": {"type": "object"},
                "strict": False,
            }
        ],
    }
    if previous:
        request["previous_response_id"] = previous
    return {
        "request": request,
        "response": {
            "id": response_id,
            "object": "response",
            "status": "completed",
            "output": output,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage)},
        },
    }


def text_output(text):
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


WRITE_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "write",
    "arguments": json.dumps({"path": "hello.txt", "content": "hi"}),
}
WRITE_OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "Wrote 2 bytes to hello.txt"}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}
EXPECTED_RESPONSES = [SYSTEM, TASK, A1, T1, A3]
RESPONSES_TOOLS = [
    {
        "type": "function",
        "function": {"name": "write", "description": "Write a file", "parameters": {"type": "object"}, "strict": False},
    }
]


def test_responses_api_calls_become_chat_trajectories():
    user = {"role": "user", "content": [{"type": "input_text", "text": TASK["content"]}]}
    calls = [
        responses_call(
            SYSTEM["content"],
            TASK["content"],
            [REASONING, text_output("I'll write it."), WRITE_CALL],
            response_id="resp_1",
        ),
        responses_call(
            SYSTEM["content"],
            [user, REASONING, text_output("I'll write it."), WRITE_CALL, WRITE_OUTPUT],
            [text_output(A3["content"])],
            response_id="resp_2",
        ),
    ]
    [trajectory] = rebuild_trajectories(calls)
    assert trajectory.call_indices == [0, 1]
    assert trajectory.stats == TrajectoryStats(
        turns=2, prompt_tokens=160, completion_tokens=16, total_tokens=176, tool_calls=1, tool_types=["write"]
    )
    assert trajectory.tools == RESPONSES_TOOLS
    messages = trajectory.messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[1]["content"] == [{"type": "text", "text": TASK["content"]}]
    assert messages[2] == A1
    assert messages[3] == T1
    assert messages[4] == A3


def test_responses_api_previous_response_id_continues_the_stored_conversation():
    calls = [
        responses_call(SYSTEM["content"], [TASK], [text_output("I'll write it."), WRITE_CALL], response_id="resp_1"),
        responses_call(
            SYSTEM["content"], [WRITE_OUTPUT], [text_output(A3["content"])], response_id="resp_2", previous="resp_1"
        ),
    ]
    [trajectory] = rebuild_trajectories(calls)
    assert trajectory.call_indices == [0, 1]
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert trajectory.messages[0] == SYSTEM  # the instructions are not repeated


def test_responses_api_failed_or_cut_off_responses_are_skipped():
    failed = responses_call("s", "hi", [], response_id="r1")
    failed["response"]["status"] = "failed"
    cut_off = {
        "request": failed["request"],
        "response": {"object": "response", "status": "incomplete_stream", "output_text": "par"},
    }
    assert rebuild_trajectories([failed, cut_off]) == []


# --- rules ----------------------------------------------------------------------------------------------------


def test_rules_from_a_dict_and_their_errors():
    rules = TrajectoryRules.from_dict({"supported_tools": ["read"], "drop_auxiliary_calls": False})
    assert rules.supported_tools == frozenset({"read"}) and rules.drop_auxiliary_calls is False
    assert rules.auxiliary_prompts == TrajectoryRules().auxiliary_prompts
    with pytest.raises(ValueError, match=r"unknown trajectory rule\(s\) \['heartbeat'\]"):
        TrajectoryRules.from_dict({"heartbeat": True})
    with pytest.raises(ValueError, match=r"auxiliary_prompts: bad regex '\[unclosed'"):
        TrajectoryRules(auxiliary_prompts=["[unclosed"])
    with pytest.raises(TypeError, match="injected_blocks must be a list"):
        TrajectoryRules(injected_blocks="<x>.*</x>")
    with pytest.raises(TypeError, match="supported_tools must be a list"):
        TrajectoryRules(supported_tools="read")


def test_rules_from_settings(settings):
    assert TrajectoryRules.from_settings() == TrajectoryRules()
    settings.CLAWGYM_TRAJECTORY_RULES = {"supported_tools": ["read", "canvas"]}
    assert TrajectoryRules.from_settings().supported_tools == {"read", "canvas"}


# --- storage and corpus statistics ----------------------------------------------------------------------------


def test_trajectory_round_trips_through_json():
    [trajectory] = rebuild_trajectories(linear_calls())
    stored = json.loads(json.dumps(trajectory.as_dict()))
    assert TrajectoryData.from_dict(stored) == trajectory


def make(turns, tool_calls, tool_types, total, *, excluded=False):
    stats = TrajectoryStats(
        turns=turns,
        prompt_tokens=total - turns,
        completion_tokens=turns,
        total_tokens=total,
        tool_calls=tool_calls,
        tool_types=tool_types,
    )
    reason = "calls unsupported tools: canvas" if excluded else ""
    return TrajectoryData([], [], [0], stats, excluded=excluded, exclusion_reason=reason)


def test_corpus_stats_means_distributions_and_exclusions():
    corpus = [
        make(1, 0, [], 500),
        make(3, 2, ["write"], 1500),
        make(8, 7, ["exec", "write"], 4000),
        make(70, 90, ["canvas"], 200000, excluded=True),
    ]
    stats = corpus_stats(iter(corpus))
    assert (stats["trajectories"], stats["included"], stats["excluded"]) == (4, 3, 1)
    assert stats["exclusion_reasons"] == [{"reason": "calls unsupported tools: canvas", "count": 1}]
    assert stats["metrics"]["turns"] == {"mean": 4, "median": 3, "min": 1, "max": 8}
    assert stats["metrics"]["tool_types"]["mean"] == 1
    assert stats["metrics"]["total_tokens"]["mean"] == 2000
    turns = {b["label"]: b["count"] for b in stats["histograms"]["turns"]}
    assert turns == {"0": 0, "1": 1, "2": 0, "3–4": 1, "5–8": 1, "9–16": 0, "17–32": 0, "33–64": 0, "65+": 0}
    tokens = {b["label"]: b["count"] for b in stats["histograms"]["total_tokens"]}
    assert tokens["<1k"] == 1 and tokens["1k–2k"] == 1 and tokens["4k–8k"] == 1 and tokens["128k+"] == 0
    assert stats["histograms"]["turns"][-1] == {"label": "65+", "low": 65, "high": None, "count": 0}
    assert stats["tool_usage"] == [{"tool": "write", "trajectories": 2}, {"tool": "exec", "trajectories": 1}]

    everything = corpus_stats(corpus, include_excluded=True)
    assert everything["metrics"]["turns"]["max"] == 70
    assert {b["label"]: b["count"] for b in everything["histograms"]["turns"]}["65+"] == 1
    assert {b["label"]: b["count"] for b in everything["histograms"]["total_tokens"]}["128k+"] == 1


def test_corpus_stats_of_nothing():
    stats = corpus_stats([])
    assert stats["trajectories"] == 0 and stats["tool_usage"] == [] and stats["exclusion_reasons"] == []
    assert stats["metrics"]["turns"] == {"mean": None, "median": None, "min": None, "max": None}
    assert all(b["count"] == 0 for buckets in stats["histograms"].values() for b in buckets)


def test_corpus_stats_from_rebuilt_trajectories():
    calls, _ = heartbeat_rollout()
    stats = corpus_stats(rebuild_trajectories(calls) + rebuild_trajectories(linear_calls()))
    assert stats["included"] == 2
    assert stats["metrics"]["turns"]["mean"] == 3.5
    assert stats["metrics"]["tool_calls"] == {"mean": 2.5, "median": 2.5, "min": 2, "max": 3}
