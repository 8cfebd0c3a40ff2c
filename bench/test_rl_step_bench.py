"""The RL step bench's own parts (the timing is the bench's to run, outside CI): its rollouts have an agent
conversation's shape, with rewards that differ within a group, and one small run trains both sides on the same steps."""

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rl_step_bench  # noqa: E402


def test_the_rollouts_are_the_same_on_both_sides_and_mask_the_tool_results():
    args = argparse.Namespace(prompt_tokens=20, completion_tokens=250)
    prompts = ["task-revision:1"] * 4
    first = rl_step_bench.rollouts(1, prompts, args, vocab=100, eos=2)
    assert first == rl_step_bench.rollouts(1, prompts, args, vocab=100, eos=2)
    assert first != rl_step_bench.rollouts(2, prompts, args, vocab=100, eos=2)
    mask = first["env_mask"][0]
    assert len(mask) == len(first["completion_ids"][0]) == len(first["logprobs"][0]) == 250
    # An agent turn trained, the tool's result after it not, and the last token the agent's end of turn.
    assert mask[:60] == [1] * 60 and mask[60:200] == [0] * 140 and mask[200:249] == [1] * 49
    assert first["completion_ids"][0][-1] == 2 and mask[-1] == 1
    assert len(set(first["checker_reward"])) > 1  # advantages that are not all zero


@pytest.mark.once
def test_one_small_run_times_both_sides_on_the_same_steps(capsys):
    code = rl_step_bench.main(
        ["--steps", "1", "--warmup", "1", "--prompts", "2", "--generations", "2"]
        + ["--prompt-tokens", "32", "--completion-tokens", "64", "--beta", "0.04"]
    )
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    assert report["steps"] == 1 and report["rows_per_step"] == 4 and report["tokens_per_step"] == 4 * 96
    assert report["trained_tokens_per_step"] == 4 * 61  # a 60-token turn, the tool's 4, and the end of turn
    assert report["clawgym_step_s"] > 0 and report["bare_step_s"] > 0 and report["rl_step_vs_bare"] > 0
    assert report["beta"] == 0.04  # ClawGym's side with the KL term and its reference copy: what the term costs
