"""The learning bench's own logic, without the loop it drives (that is the bench's to run: see README): the subsets
it takes hold every kind, the runs it goes on from are parsed as given, and the scripted expert answers a
conversation with its task's plan step by step, then says it is done."""

import argparse
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


def test_rl_trains_the_kinds_the_sft_checkpoint_solves_in_part():
    held = {
        "tasks": {
            "curriculum-s0-heldout-write-001": {"mean": 1.0},
            "curriculum-s0-heldout-write-002": {"mean": 1.0},
            "curriculum-s0-heldout-sort-001": {"mean": 0.25},
            "curriculum-s0-heldout-sort-002": {"mean": 0.5},
            "curriculum-s0-heldout-extract-001": {"mean": 0.5},
            "curriculum-s0-heldout-extract-002": {"mean": None},  # unscored: not counted
            "curriculum-s0-heldout-count-001": {"mean": 0.0},
            "curriculum-s0-heldout-folder-001": {"mean": 0.5},  # never trained on: never chosen
        }
    }
    train = [f"curriculum-s0-train-{kind}-{n:03d}" for kind in ("write", "sort", "extract", "count") for n in (1, 2, 3)]
    tasks, kinds = learning_bench.frontier(held, train, kinds=2, count=4)
    assert kinds == {"extract": 0.5, "sort": 0.375}
    assert tasks == [
        "curriculum-s0-train-sort-001",
        "curriculum-s0-train-extract-001",
        "curriculum-s0-train-sort-002",
        "curriculum-s0-train-extract-002",
    ]


def test_the_reward_curves_slope_skips_unknown_steps():
    assert learning_bench.slope([0.0, None, 0.5, 0.75]) == pytest.approx(0.25)
    assert learning_bench.slope([0.5, 0.5, 0.5]) == 0.0
    assert learning_bench.slope([None, 0.3]) is None


def test_earlier_runs_are_given_as_held_then_unseen():
    assert learning_bench.run_pair("12,13") == (12, 13)
    with pytest.raises(argparse.ArgumentTypeError):
        learning_bench.run_pair("12")
    with pytest.raises(ValueError):
        learning_bench.run_pair("12,x")


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


def test_figures_hold_every_split_and_the_kinds_means():
    def report(run, split, means):
        tasks = {f"curriculum-s0-{split}-{kind}-001": {"mean": mean} for kind, mean in means.items()}
        return {"run": run, "overall": {"mean": 0.5, "ci": [0.2, 0.8]}, "tasks": tasks}

    found = learning_bench.figures(
        report(1, "heldout", {"write": 1.0, "sort": 0.0}),
        report(2, "unseen-kind", {"folder": 0.5}),
        report(3, "heldout-lexical", {"write": 0.5, "sort": None}),
    )
    assert found["heldout_lexical"] == {"run": 3, "mean": 0.5, "ci": [0.2, 0.8]}
    assert found["by_kind"] == {
        "heldout": {"sort": 0.0, "write": 1.0},
        "unseen_kind": {"folder": 0.5},
        "heldout_lexical": {"write": 0.5},  # an unscored task is not counted
    }
    assert learning_bench.split_runs(found) == {"heldout": 1, "unseen_kind": 2, "heldout_lexical": 3}
    with pytest.raises(argparse.ArgumentTypeError):
        learning_bench.run_pair("1,2,3,4")
    assert learning_bench.run_pair("4,5,6") == (4, 5, 6)
