"""Every main-chain sample of a rollout is trained: ClawGymGRPOTrainer (a real TRL 1.16 GRPOTrainer on the tiny
Qwen3, in this process) flattens a hand-made step whose generations hold 3, 1, 0, 2, 1 and 1 samples, each extra
sample a row carrying its generation's advantage, and its loss and gradients equal a slow reference: a plain torch
loop over the samples, per-token probability ratios, the clipped surrogate, and DAPO's normalisation (the sum over
every trained token of the step over their number)."""

import math
import statistics

import pytest

from training.rl.rollout_func import EXTRA_SAMPLES, trl_output
from training.testing import (
    EPSILON,
    EPSILON_HIGH,
    TEMPERATURE,
    make_trainer,
    reference_model,
    step_generations,
    step_inputs,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # TRL's experimental rollout_func and the like


def advantages(generations, group_size: int) -> list[float]:
    """GRPO's advantage by hand: (reward − the group's mean) / (its sample std + 1e-4); no reward, 0."""
    out = []
    for start in range(0, len(generations), group_size):
        rewards = [g["reward"] for g in generations[start : start + group_size]]
        known = [r for r in rewards if r is not None]
        mean, std = statistics.fmean(known), statistics.stdev(known)
        out += [0.0 if r is None else (r - mean) / (std + 1e-4) for r in rewards]
    return out


def old_logprob(token: int, position: int) -> float:
    """Hand-made sampling-time logprobs around the random tiny model's ~ −ln(vocabulary): ratios up to e^±0.45, on
    both sides of the clip range."""
    return -6.6 + 0.15 * ((token * 7 + position) % 7 - 3)


def reference_loss(model, generations, group_size: int, old=None):
    """The step's loss the slow way: sample by sample, token by token."""
    import torch

    total = sum(sum(s["env_mask"]) for g in generations for s in g["samples"])
    loss = torch.zeros(())
    for generation, advantage in zip(generations, advantages(generations, group_size), strict=True):
        for s in generation["samples"]:
            prompt, completion = s["prompt_ids"], s["completion_ids"]
            logits = model(input_ids=torch.tensor([prompt + completion])).logits[0]
            for t, (token, trained) in enumerate(zip(completion, s["env_mask"], strict=True)):
                if not trained:
                    continue
                logprob = torch.log_softmax(logits[len(prompt) - 1 + t] / TEMPERATURE, dim=-1)[token]
                before = logprob.detach() if old is None else old(token, t)
                ratio = torch.exp(logprob - before)
                clipped = torch.clamp(ratio, 1 - EPSILON, 1 + EPSILON_HIGH)
                loss = loss - torch.min(ratio * advantage, clipped * advantage)
    return loss / total


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    from training.tiny_model import tiny_model

    return tiny_model(tmp_path_factory.mktemp("every-sample") / "model")


def test_every_sample_is_a_row_with_its_rollouts_advantage_and_the_loss_is_the_reference(tiny_path, tmp_path):
    import torch
    from trl.trainer.utils import shuffle_sequence_dict, split_tensor_dict

    generations = step_generations()
    seen = []
    trainer = make_trainer(tiny_path, tmp_path, generations, seen=seen)
    trainer.model.train()
    batch = trainer._generate_and_score_completions(step_inputs())

    # The reward functions got the rollout_func's fields but not the extra samples (the trainer's alone).
    assert seen and all("rollout_id" in keys and EXTRA_SAMPLES not in keys for keys in seen)
    # 6 generations (one a placeholder) + 3 extra samples, and a filler row for 2 equal micro-batches.
    samples = [(s, a) for g, a in zip(generations, advantages(generations, 3)) for s in g["samples"]]
    assert batch["advantages"].shape == (10,) and len(samples) == 8
    assert sorted(batch["advantages"].tolist()).count(0.0) == 2  # the placeholder and the filler
    rows = {}
    for r in range(10):
        prompt = batch["prompt_ids"][r][batch["prompt_mask"][r].bool()].tolist()
        length = int(batch["completion_mask"][r].sum())
        rows[(tuple(prompt), tuple(batch["completion_ids"][r][:length].tolist()))] = r
    for s, advantage in samples:
        r = rows[(tuple(s["prompt_ids"]), tuple(s["completion_ids"]))]
        assert batch["advantages"][r].item() == pytest.approx(advantage, abs=1e-4)
        assert batch["tool_mask"][r][: len(s["env_mask"])].tolist() == s["env_mask"]
    assert int(batch["num_items_in_batch"]) == sum(sum(s["env_mask"]) for s, _ in samples)

    # num_iterations=2: TRL scores the rows before the step (old logprobs); the flattened rows are all scored.
    reference = reference_model(tiny_path)
    with torch.no_grad():
        for s, _ in samples:
            r = rows[(tuple(s["prompt_ids"]), tuple(s["completion_ids"]))]
            logits = reference(input_ids=torch.tensor([s["prompt_ids"] + s["completion_ids"]])).logits[0]
            expected = torch.log_softmax(logits[len(s["prompt_ids"]) - 1 : -1] / TEMPERATURE, dim=-1)
            expected = expected.gather(1, torch.tensor(s["completion_ids"]).unsqueeze(1)).squeeze(1)
            assert torch.allclose(batch["old_per_token_logps"][r][: len(expected)], expected, atol=1e-5)

    # Ratios away from 1 (hand-made sampling logprobs), clipped on both sides, then the step's micro-batches as
    # TRL's _prepare_inputs cuts them: their losses add up to the reference.
    ids = batch["completion_ids"]
    positions = torch.arange(ids.size(1)).expand_as(ids)
    batch["old_per_token_logps"] = -6.6 + 0.15 * ((ids * 7 + positions) % 7 - 3).float()
    loss = sum(trainer.compute_loss(trainer.model, part) for part in split_tensor_dict(shuffle_sequence_dict(batch), 2))
    expected = reference_loss(reference, generations, 3, old=old_logprob)
    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)
    assert trainer._metrics["train"]["clip_ratio/region_mean"][-1] > 0  # the clipping took part
    # Training only each rollout's first sample (TRL alone) would give another loss.
    assert (
        abs(
            loss.item()
            - reference_loss(
                reference, [{**g, "samples": g["samples"][:1]} for g in generations], 3, old=old_logprob
            ).item()
        )
        > 1e-3
    )


def test_a_training_step_moves_the_weights_as_the_reference_gradient(tiny_path, tmp_path):
    """Through TRL's own micro-batching (_prepare_inputs: generate, shuffle, split; 9 rows made 10 by a filler)
    and backward: the loss and every parameter's gradient equal the reference's (ratio 1 on the first step)."""
    import torch

    generations = step_generations()
    trainer = make_trainer(tiny_path, tmp_path, generations)
    model = trainer.accelerator.unwrap_model(trainer.model)
    model.zero_grad()
    inputs = step_inputs()
    losses = [trainer.training_step(trainer.model, inputs, None) for _ in range(2)]  # gradient_accumulation_steps
    assert [len(part["advantages"]) for part in trainer._buffered_inputs] == [5, 5]

    reference = reference_model(tiny_path)
    expected = reference_loss(reference, generations, 3)
    expected.backward()
    assert sum(losses).item() == pytest.approx(expected.item(), abs=1e-5)
    grads = dict(reference.named_parameters())
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, name
        assert torch.allclose(parameter.grad, grads[name].grad, rtol=1e-3, atol=1e-6), name


def test_the_trainer_takes_dapo_normalisation_only(tiny_path, tmp_path):
    # A run's config refuses any other loss_type before it gets here (training_jobs/tests/test_rl_groups.py).
    with pytest.raises(ValueError, match="normalises the loss per token over the step"):
        make_trainer(tiny_path, tmp_path, step_generations(), loss_type="grpo")


def test_the_job_answer_becomes_one_completion_per_generation_and_the_rest_extra():
    generations = step_generations()
    out = trl_output(generations, 99)
    assert len(out["prompt_ids"]) == len(out[EXTRA_SAMPLES]) == 6
    assert [len(extra) for extra in out[EXTRA_SAMPLES]] == [2, 0, 0, 1, 0, 0]
    assert out["completion_ids"][0] == generations[0]["samples"][0]["completion_ids"]
    assert out[EXTRA_SAMPLES][0][1]["env_mask"] == generations[0]["samples"][2]["env_mask"]
    # No sample (no reward): a placeholder that trains nothing.
    assert (out["prompt_ids"][2], out["completion_ids"][2], out["env_mask"][2]) == ([99], [99], [0])
    assert out["checker_reward"] == [1.0, 0.0, None, 0.8, 0.0, 1.0] and out["rollout_id"] == list(range(6))
    assert math.isclose(sum(advantages(generations, 3)[:3]), 0.0, abs_tol=1e-9)


def test_an_on_policy_step_finds_its_logprob_mismatch_in_its_loss_forwards(tiny_path, tmp_path):
    """No old logprobs (one iteration a generation): the step's mismatch between the sampled logprobs (−1.0 on every
    policy token here) and the trainer's comes from the loss's own forwards, one a micro-batch, and is the
    reference's: no extra pass over the step's rows."""
    import torch

    generations = step_generations()
    trainer = make_trainer(tiny_path, tmp_path, generations, num_iterations=1)
    forwards = []
    original = trainer._get_per_token_logps_and_entropies

    def counted(*args, **kwargs):
        forwards.append(torch.is_grad_enabled())
        return original(*args, **kwargs)

    trainer._get_per_token_logps_and_entropies = counted
    inputs = step_inputs()
    for _ in range(2):  # gradient_accumulation_steps
        trainer.training_step(trainer.model, inputs, None)
    assert forwards == [True, True]  # the two micro-batches' loss forwards, nothing else

    reference = reference_model(tiny_path)
    differences = []
    with torch.no_grad():
        for generation in generations:
            for s in generation["samples"]:
                logits = reference(input_ids=torch.tensor([s["prompt_ids"] + s["completion_ids"]])).logits[0]
                logps = torch.log_softmax(logits[len(s["prompt_ids"]) - 1 : -1] / TEMPERATURE, dim=-1)
                logps = logps.gather(1, torch.tensor(s["completion_ids"]).unsqueeze(1)).squeeze(1)
                differences += [
                    abs(lp - sampled)
                    for lp, sampled, trained in zip(logps.tolist(), s["logprobs"], s["env_mask"], strict=True)
                    if trained
                ]
    mismatch = trainer.rl_state.metrics[1]["logprob_mismatch"]
    assert mismatch == pytest.approx(statistics.fmean(differences), abs=1e-4)


def test_on_cpu_the_loss_forward_projects_the_completion_tokens_only(tiny_path, tmp_path):
    """TRL's fused LM head without Triton projects every position of a row, prompt and padding included, and again
    in its backward; the CPU head (sft.head_on_labelled_tokens at the sampling temperature) projects each
    micro-batch's completion tokens once. The two tests above check its loss and gradients against the reference."""
    generations = step_generations()
    trainer = make_trainer(tiny_path, tmp_path, generations, num_iterations=1)
    projected = []
    head = trainer.accelerator.unwrap_model(trainer.model).get_output_embeddings()
    hook = head.register_forward_hook(lambda module, args, out: projected.append(args[0].shape[0]))
    try:
        inputs = step_inputs()
        for _ in range(2):  # gradient_accumulation_steps
            trainer.training_step(trainer.model, inputs, None)
    finally:
        hook.remove()
    parts = trainer._buffered_inputs
    completions = [int(part["completion_mask"].sum()) for part in parts]
    widths = [
        part["prompt_ids"].size(0) * (part["prompt_ids"].size(1) + part["completion_ids"].size(1)) for part in parts
    ]
    assert projected == completions  # one projection a micro-batch, of its completion tokens
    assert all(c < w // 2 for c, w in zip(completions, widths, strict=True))  # TRL's head would project every position
