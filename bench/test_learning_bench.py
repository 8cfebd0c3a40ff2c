"""The learning bench's own logic, without the loop it drives (that is the bench's to run: see README): the subsets
it takes hold every kind, the runs it goes on from are parsed as given, and the scripted expert answers a
conversation with its task's plan step by step, then says it is done."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import learning_bench  # noqa: E402


def test_a_subset_takes_every_kind_in_turn():
    ids = [f"curriculum-s0-train-{kind}-{n:03d}" for kind in ("write", "copy", "sort") for n in (1, 2, 3)]
    assert learning_bench.spread(ids, 4) == [
        "curriculum-s0-train-write-001",
        "curriculum-s0-train-copy-001",
        "curriculum-s0-train-sort-001",
        "curriculum-s0-train-write-002",
    ]
    assert sorted(learning_bench.spread(ids, 99)) == sorted(ids)


def test_earlier_runs_are_given_as_held_then_unseen():
    assert learning_bench.run_pair("12,13") == (12, 13)
    with pytest.raises(ValueError):
        learning_bench.run_pair("12")


def test_the_expert_plays_its_tasks_plan_then_stops(tmp_path):
    task = tmp_path / "t1"
    (task / "input_files").mkdir(parents=True)
    (task / "input_files" / "a.txt").write_text("one\n")
    (task / "solution").mkdir()
    (task / "solution" / "a.txt").write_text("one\n")
    (task / "solution" / "b.txt").write_text("two\n")
    (task / "data_entry.json").write_text(json.dumps({"user_query": "Copy a.txt to b.txt, then write two."}))
    server = learning_bench.start_expert([task])
    try:
        conversation = [{"role": "user", "content": "Copy a.txt to b.txt, then write two."}]
        answers = []
        for _ in range(3):
            reply = server.responder({"messages": conversation})
            answers.append(reply)
            conversation.append({"role": "assistant", "content": ""})
        unknown = server.responder({"messages": [{"role": "user", "content": "something else"}]})
    finally:
        server.stop()
    calls = [(a.tool_calls[0]["name"], json.loads(a.tool_calls[0]["arguments"])) for a in answers[:2]]
    assert calls == [("read", {"path": "a.txt"}), ("write", {"path": "b.txt", "content": "two\n"})]
    assert not answers[2].tool_calls and answers[2].content == "Done."
    assert unknown.content == "I do not know this task."
