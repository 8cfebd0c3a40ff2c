"""The learning bench's own logic, without the loop it drives (that is the bench's to run: see README): the subsets
it takes hold every kind, the validation split it carves and the settings it chooses there, the RL run's task mix,
the aims' verdicts and the figures pooled over seeds, the runs it goes on from parsed as given, and the scripted expert
answering a conversation with its task's plan step by step, then saying it is done."""

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import learning_bench  # noqa: E402
import learning_protocol as protocol  # noqa: E402
import learning_steps  # noqa: E402


def test_a_subset_takes_every_kind_in_turn():
    ids = [f"curriculum-s0-train-{kind}-{n:03d}" for kind in ("write", "copy", "sort") for n in (1, 2, 3)]
    assert protocol.spread(ids, 4) == [
        "curriculum-s0-train-write-001",
        "curriculum-s0-train-copy-001",
        "curriculum-s0-train-sort-001",
        "curriculum-s0-train-write-002",
    ]
    assert sorted(protocol.spread(ids, 99)) == sorted(ids)


def test_the_validation_split_is_carved_from_train_a_few_tasks_a_kind():
    ids = [f"curriculum-s1-train-{kind}-{n:03d}" for kind in ("write", "sort") for n in (1, 2, 3, 4)]
    ids.remove("curriculum-s1-train-sort-001")  # a near-duplicate dropped before: the next one takes its place
    validation, rest = protocol.carve_validation(ids, 2)
    assert validation == [
        "curriculum-s1-train-write-001",
        "curriculum-s1-train-write-002",
        "curriculum-s1-train-sort-002",
        "curriculum-s1-train-sort-003",
    ]
    assert rest == ["curriculum-s1-train-write-003", "curriculum-s1-train-write-004", "curriculum-s1-train-sort-004"]


def test_rl_trains_the_kinds_the_sft_checkpoint_solves_in_part():
    held = {
        "tasks": {
            "curriculum-s0-train-write-001": {"mean": 1.0},
            "curriculum-s0-train-write-002": {"mean": 1.0},
            "curriculum-s0-train-sort-001": {"mean": 0.25},
            "curriculum-s0-train-sort-002": {"mean": 0.5},
            "curriculum-s0-train-extract-001": {"mean": 0.5},
            "curriculum-s0-train-extract-002": {"mean": None},  # unscored: not counted
            "curriculum-s0-train-count-001": {"mean": 0.0},
            "curriculum-s0-train-folder-001": {"mean": 0.5},  # no train task left of it: never chosen
        }
    }
    train = [f"curriculum-s0-train-{kind}-{n:03d}" for kind in ("write", "sort", "extract", "count") for n in (4, 5, 6)]
    tasks, kinds = learning_bench.frontier(held, train, kinds=2, count=4)
    assert kinds == {"extract": 0.5, "sort": 0.375}
    assert tasks == [
        "curriculum-s0-train-sort-004",
        "curriculum-s0-train-extract-004",
        "curriculum-s0-train-sort-005",
        "curriculum-s0-train-extract-005",
    ]


def test_rl_draws_other_tasks_of_its_kinds_at_each_step_and_mixes_the_rest():
    held = {"tasks": {"curriculum-s0-train-sort-001": {"mean": 0.5}, "curriculum-s0-train-write-001": {"mean": 1.0}}}
    fresh = [f"curriculum-s0-train-{kind}-{n:03d}" for kind in ("sort", "write", "count") for n in range(4, 24)]
    tasks, kinds, mix = learning_bench.rl_plan(held, fresh, kinds=1, per_step=4, steps=3, mix_share=0.33)
    assert kinds == {"sort": 0.5}
    assert tasks == [f"curriculum-s0-train-sort-{n:03d}" for n in range(4, 16)]  # 3 steps x 4, none drawn twice
    assert mix["own_per_step"] == 4 and mix["prompts_per_step"] == 6 and mix["share"] == pytest.approx(1 / 3, abs=1e-4)
    assert len(mix["tasks"]) == 6 and mix["kinds"] == ["count", "write"]  # 2 mix prompts a step, no RL task among them
    assert not set(mix["tasks"]) & set(tasks)
    few = [f"curriculum-s0-train-sort-{n:03d}" for n in (4, 5)]
    tasks, _, mix = learning_bench.rl_plan(held, few, kinds=1, per_step=4, steps=3, mix_share=0.33)
    assert tasks == few and mix == {"tasks": [], "prompts_per_step": 2, "own_per_step": 2, "share": 0.0, "kinds": []}


def test_the_settings_are_candidates_and_the_best_on_validation_is_chosen():
    assert protocol.parse_sft_grid("1e-4x2, 2e-4x3") == [
        {"learning_rate": 1e-4, "epochs": 2.0},
        {"learning_rate": 2e-4, "epochs": 3.0},
    ]
    assert protocol.parse_rl_grid("2e-5:0.04,2e-5:0") == [
        {"learning_rate": 2e-5, "beta": 0.04},
        {"learning_rate": 2e-5, "beta": 0.0},
    ]
    for bad in ("", "1e-4", "x2", "0x2", "1e-4x0", "1e-4x-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            protocol.parse_sft_grid(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        protocol.parse_rl_grid("2e-5:-0.1")
    assert protocol.choose([{"validation_mean": 0.4}, {"validation_mean": 0.6}, {"validation_mean": 0.6}]) == 1
    assert protocol.choose([{"validation_mean": None}, {"validation_mean": 0.1}]) == 1
    assert protocol.choose([{"validation_mean": None}]) == 0
    assert protocol.parse_seeds("1,2,3") == [1, 2, 3]
    for bad in ("", "1,1", "a", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            protocol.parse_seeds(bad)


def test_the_rl_mix_adds_a_share_of_other_kinds_to_each_step():
    assert protocol.mix_plan(4, 0.33) == (6, pytest.approx(1 / 3))
    assert protocol.mix_plan(4, 0.0) == (4, 0.0)
    assert protocol.mix_plan(4, 0.05) == (5, 0.2)  # at least one prompt of the mix, once there is a share


def test_each_aim_says_met_or_missed_and_why():
    met = protocol.verdict("sft_over_base", {"mean_difference": 0.452, "p_value": 0.0018, "tasks": 42})
    assert met["met"] is True and met["why"] == "met: +0.452 at p = 0.0018 over 42 tasks"
    weak = protocol.verdict("sft_over_base", {"mean_difference": 0.31, "p_value": 0.015, "tasks": 42})
    assert weak["met"] is False and weak["why"] == "missed: +0.310 at p = 0.0150 over 42 tasks: p not below 0.01"
    small = protocol.verdict("sft_over_base", {"mean_difference": 0.2, "p_value": 0.001, "tasks": 42})
    assert small["why"].endswith("the difference is not at least +0.25")
    fell = protocol.verdict("rl_over_sft_trained_kinds", {"mean_difference": -0.05, "p_value": 0.5, "tasks": 12})
    assert (
        fell["why"] == "missed: -0.050 at p = 0.5000 over 12 tasks: the difference is not above 0 and p not below 0.05"
    )
    kept = protocol.verdict("rl_keeps_unseen_kind", {"mean_difference": 0.0, "p_value": 1.0, "tasks": 16})
    assert kept["met"] is True
    lost = protocol.verdict("rl_keeps_unseen_kind", {"mean_difference": -0.208, "p_value": 0.03, "tasks": 16})
    assert lost["why"] == "missed: -0.208 at p = 0.0300 over 16 tasks: fell by 0.208"
    assert protocol.aims({})["rl_keeps_unseen_kind"] == {
        "aim": "RL not below SFT on the unseen kind",
        "met": None,
        "why": "not measured: no rl_vs_sft on the unseen_kind split",
    }


def test_the_pooled_figures_pair_every_seeds_tasks_together():
    from evaluation.stats import mean_with_ci, paired_difference

    def seed(run, pairs, kinds_pairs, met):
        models = {m: {"run": run + i} for i, m in enumerate(protocol.MODELS)}
        means = {m: {split: [0.5, 1.0] for split in protocol.SPLITS} for m in protocol.MODELS}
        aims = {name: {"met": met} for name in protocol.AIMS}
        return {
            "result": {**models, "aims": aims},
            "pairs": {
                "sft_vs_base": {"heldout": pairs},
                "rl_vs_sft": {"heldout": pairs, "unseen_kind": [(0.5, 0.5)]},
                "rl_vs_sft_trained_kinds": {"heldout": kinds_pairs},
            },
            "task_means": means,
        }

    one = [(1.0, 0.0), (0.5, 0.0), (1.0, 0.5)]
    two = [(0.5, 0.0), (0.0, 0.0), (1.0, 0.0), (1.0, 1.0)]
    found = protocol.pooled({1: seed(10, one, one[:1], True), 2: seed(20, two, two[:2], False)})
    both = one + two
    expected = paired_difference([a for a, _ in both], [b for _, b in both])
    assert found["sft_vs_base"]["tasks"] == 7 and found["sft_vs_base"]["p_value"] == round(expected["p_value"], 4)
    assert found["sft_vs_base"]["mean_difference"] == round(expected["mean_difference"], 4)
    assert found["comparisons"]["rl_vs_sft_trained_kinds"]["heldout"]["tasks"] == 3
    assert found["sft"]["runs"] == [12, 22] and found["sft"]["tasks"] == 4
    assert found["sft"]["mean"] == round(mean_with_ci([0.5, 1.0, 0.5, 1.0])["mean"], 4)
    assert found["rl"]["unseen_kind"]["tasks"] == 4
    aim = found["aims"]["sft_over_base"]
    assert aim["seeds_met"] == "1 of 2"  # seed 1 met it alone, seed 2 did not
    assert aim["why"] == "missed: +0.500 at p = 0.0625 over 7 tasks of 2 seeds: p not below 0.01"
    assert found["aims"]["rl_keeps_unseen_kind"]["met"] is True


def seed_line(seed: int, pairs: list, met: bool, **extra) -> dict:
    """One seed's line as the bench prints it, with the pooling data it carries (figures of no real run)."""
    models = {
        m: {"run": 10 * seed + i, "unseen_kind": {"run": 100 + 10 * seed + i}, "heldout_lexical": {"run": 200 + i}}
        for i, m in enumerate(protocol.MODELS)
    }
    return {
        "seed": seed,
        **models,
        "aims": {name: {"met": met} for name in protocol.AIMS},
        "serve_backend": "batched",
        "serve_backends_same": True,
        "seeds_independent": True,
        "train_tokens_per_s": 100.0 * seed,
        "pooling": {
            "pairs": {
                "sft_vs_base": {"heldout": pairs},
                "rl_vs_sft": {"heldout": pairs, "unseen_kind": [[0.5, 0.5]]},
                "rl_vs_sft_trained_kinds": {"heldout": pairs[:1]},
            },
            "task_means": {m: {split: [0.5, 1.0] for split in protocol.SPLITS} for m in protocol.MODELS},
        },
        **extra,
    }


def test_seeds_run_apart_pool_as_one_invocation_of_them_would(tmp_path):
    one, two, three = [[1.0, 0.0], [0.5, 0.0]], [[0.5, 0.0], [1.0, 1.0]], [[1.0, 0.0]]
    lines = {1: seed_line(1, one, True), 2: seed_line(2, two, False), 3: seed_line(3, three, True)}
    alone = tmp_path / "seed-1.json"
    alone.write_text(
        "stderr's last words\n"
        + json.dumps({**lines[1], "minutes": 90.0, "rl_step_vs_bare": 0.9, "train_speed_vs_bare": 1.1})
    )
    together = tmp_path / "seeds-2-3.json"
    together.write_text(json.dumps({"seeds": {"2": lines[2], "3": lines[3]}, "minutes": 170.5}))

    found = learning_bench.pool([alone, together])
    expected = protocol.pooled({seed: {"result": line, **line["pooling"]} for seed, line in lines.items()})
    for key in ("base", "sft", "rl", "sft_vs_base", "rl_vs_sft", "comparisons", "aims"):
        assert found[key] == expected[key], key
    assert found["sft_vs_base"]["tasks"] == 5 and found["aims"]["sft_over_base"]["seeds_met"] == "2 of 3"
    assert sorted(found["seeds"]) == ["1", "2", "3"] and "minutes" not in found["seeds"]["1"]
    assert found["minutes"] == 260.5 and found["rl_step_vs_bare"] == 0.9 and found["train_tokens_per_s"] == 200.0
    assert found["serve_backend"] == "batched" and found["serve_backends_same"] and found["seeds_independent"]
    assert [f["seeds"] for f in found["pooled_from"]] == [[1], [2, 3]]

    # The pooled line pools again (its "seeds"); a seed given twice, or a file without a line, is refused.
    again = tmp_path / "pooled.json"
    again.write_text(json.dumps(found))
    assert learning_bench.pool([again])["comparisons"] == found["comparisons"]
    with pytest.raises(learning_steps.BenchError, match="seed 1 is given twice"):
        learning_bench.pool([alone, again])
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(learning_steps.BenchError, match="no JSON line"):
        learning_bench.pool([tmp_path / "empty.json"])


def test_a_line_without_pooling_data_is_rebuilt_from_its_runs_or_refused(monkeypatch):
    line = seed_line(4, [[1.0, 0.0]], True, rl_kinds=["sort"])
    del line["pooling"]

    def missing(run_id):
        raise learning_steps.BenchError(f"eval_report {run_id}: no such run")

    monkeypatch.setattr(learning_bench, "seed_pairs", lambda models, kinds: {"kinds": sorted(kinds)})
    monkeypatch.setattr(learning_bench, "reported", missing)
    with pytest.raises(learning_steps.BenchError, match="seed 4's line carries no pooling data"):
        learning_bench.pooling_of(line)
    monkeypatch.setattr(
        learning_bench, "reported", lambda run_id: {"tasks": {"a": {"mean": run_id / 100}, "b": {"mean": None}}}
    )
    rebuilt = learning_bench.pooling_of(line)
    assert rebuilt["pairs"] == {"kinds": ["sort"]}
    assert rebuilt["task_means"]["sft"] == {"heldout": [0.42], "unseen_kind": [1.42], "heldout_lexical": [2.02]}


def test_the_pairs_of_a_comparison_are_its_tasks_of_the_kinds_asked():
    comparison = {
        "per_task": [
            {"task": "curriculum-s1-heldout-sort-001", "a": 1.0, "b": 0.5},
            {"task": "curriculum-s1-heldout-write-001", "a": 0.0, "b": 0.5},
        ]
    }
    assert protocol.pairs_of(comparison) == [(1.0, 0.5), (0.0, 0.5)]
    assert protocol.pairs_of(comparison, {"sort"}) == [(1.0, 0.5)]


def test_rls_aim_is_checked_on_the_held_out_tasks_of_its_kinds_with_more_rollouts_each():
    held_out = {
        "tasks": {
            "curriculum-s5-heldout-sort-002": {"mean": 0.5},
            "curriculum-s5-heldout-write-001": {"mean": 1.0},
            "curriculum-s5-heldout-sort-001": {"mean": None},  # unscored in the held-out run: still checked
            "curriculum-s5-heldout-extract-001": {"mean": 0.0},
        }
    }
    assert protocol.check_tasks(held_out, {"sort", "extract"}) == [
        "curriculum-s5-heldout-extract-001",
        "curriculum-s5-heldout-sort-001",
        "curriculum-s5-heldout-sort-002",
    ]
    assert protocol.check_tasks(held_out, set()) == []

    def report(run, mean):
        tasks = {f"curriculum-s5-heldout-sort-00{n}": {"mean": mean} for n in (1, 2)}
        return {"run": run, "repeats": 6, "tasks": tasks, "overall": {"mean": mean, "ci": [mean - 0.1, mean + 0.1]}}

    found = learning_bench.check_figures({"sft": report(7, 0.5), "rl": report(9, 0.75)}, [(1.0, 0.5), (0.5, 0.5)])
    assert found["tasks"] == 2 and found["repeats"] == 6
    assert found["sft"] == {"run": 7, "mean": 0.5, "ci": [0.4, 0.6]} and found["rl"]["run"] == 9
    assert found["held_out_runs"]["tasks"] == 2 and found["held_out_runs"]["mean_difference"] == pytest.approx(0.25)
    assert learning_bench.check_figures({}, []) is None
    assert learning_bench.parse_args([]).check_repeats == 6
    assert learning_bench.parse_args(["--check-repeats", "0"]).check_repeats == 0
    with pytest.raises(SystemExit):
        learning_bench.parse_args(["--check-repeats", "-1"])


def test_the_bench_runs_three_seeds_by_default_and_goes_on_from_an_earlier_run_with_one():
    args = learning_bench.parse_args([])
    assert args.seeds == [1, 2, 3] and args.validation == 3
    assert args.sizes == "train=40,heldout=6,unseen_kind=16,heldout_lexical=6"  # 6 held-out tasks a kind
    assert len(args.sft_grid) == 2 and {c["beta"] for c in args.rl_grid} == {0.04, 0.0}
    with pytest.raises(SystemExit):
        learning_bench.parse_args(["--seeds", "1,2", "--sft-runs", "4,5"])
    assert learning_bench.parse_args(["--seeds", "1", "--sft-runs", "4,5"]).sft_runs == (4, 5)


def test_the_reward_curves_slope_skips_unknown_steps():
    assert learning_steps.slope([0.0, None, 0.5, 0.75]) == pytest.approx(0.25)
    assert learning_steps.slope([0.5, 0.5, 0.5]) == 0.0
    assert learning_steps.slope([None, 0.3]) is None


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
    server = learning_steps.start_expert([task])
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

    found = learning_steps.figures(
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
    assert learning_steps.split_runs(found) == {"heldout": 1, "unseen_kind": 2, "heldout_lexical": 3}
    with pytest.raises(argparse.ArgumentTypeError):
        learning_bench.run_pair("1,2,3,4")
    assert learning_bench.run_pair("4,5,6") == (4, 5, 6)
