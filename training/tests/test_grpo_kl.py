"""The KL term of an RL run (beta > 0, TRL's): ClawGymGRPOTrainer (a real TRL 1.16 GRPOTrainer on the tiny Qwen3, in
this process) keeps a copy of the run's base model as its reference (from an SFT checkpoint: the SFT policy), logs
the KL of the policy from it as the step's metric (0 before the policy has moved, above 0 once it has; none with
beta 0), pays for it with one forward of the reference, without gradient, over the step's rows, and the term pulls
the policy back toward the reference."""

import json

import pytest

from training.rl.rollout_func import StepState
from training.testing import make_trainer, reference_model, step_generations
from training.trainers.grpo import event_callback

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # TRL's experimental rollout_func and the like


def metric_events(capsys) -> list[dict]:
    """The trainer's metric events (training.trainers.grpo's JSON lines on stdout), one per optimizer step."""
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith('{"event"')]
    return [event for event in map(json.loads, lines) if event.get("event") == "metric"]


def trained(path, tmp_path, generations, **config):
    """A trainer that ran TRL's own loop (train()) for config's max_steps, its metric events going to stdout."""
    state = StepState()
    trainer = make_trainer(
        path,
        tmp_path,
        generations,
        rl_state=state,
        callbacks=[event_callback(state)],
        num_iterations=1,  # on-policy, as every RL run (training.trainers.grpo.grpo_config)
        logging_steps=1,
        **config,
    )
    trainer.train()
    return trainer


def distance(model, reference) -> float:
    """The squared distance between two models' weights."""
    import torch

    others = dict(reference.named_parameters())
    with torch.no_grad():
        return float(sum(((p - others[name]) ** 2).sum() for name, p in model.named_parameters()))


def test_with_beta_0_there_is_no_reference_and_no_kl(tiny_model_path, tmp_path, capsys):
    trainer = trained(tiny_model_path, tmp_path, step_generations(), max_steps=2, learning_rate=1e-2)
    assert trainer.ref_model is None
    events = metric_events(capsys)
    assert [e["step"] for e in events] == [1, 2] and all("kl" not in e for e in events)


def test_the_kl_is_0_before_the_policy_moves_and_above_0_after(tiny_model_path, tmp_path, capsys):
    import torch

    # One sample a rollout (the builtin harness's): the step's rows are its generations.
    generations = [{**g, "samples": g["samples"][:1]} for g in step_generations()]
    forwards = []
    state = StepState()
    trainer = make_trainer(
        tiny_model_path,
        tmp_path,
        generations,
        rl_state=state,
        callbacks=[event_callback(state)],
        num_iterations=1,
        logging_steps=1,
        max_steps=2,
        learning_rate=1e-2,
        beta=0.1,
    )
    # The reference is the run's base model (the model's own path), loaded beside the policy.
    assert trainer.ref_model is not None and distance(trainer.model, trainer.ref_model) == 0.0
    original = trainer._get_per_token_logps_and_entropies

    def counted(model, *args, **kwargs):
        rows = args[0].size(0)
        forwards.append(("reference" if model is trainer.ref_model else "policy", torch.is_grad_enabled(), rows))
        return original(model, *args, **kwargs)

    trainer._get_per_token_logps_and_entropies = counted
    trainer.train()
    events = metric_events(capsys)
    assert [e["step"] for e in events] == [1, 2]
    first, second = (e["kl"] for e in events)
    assert first < 1e-6  # the policy is the reference until its first update
    assert second > 1e-4  # the first update moved it away
    # What beta costs a step: the reference's forwards over its rows, without gradient, beside the policy's own.
    step = forwards[: len(forwards) // 2]
    reference_rows = sum(rows for who, grad, rows in step if who == "reference" and not grad)
    policy_rows = sum(rows for who, grad, rows in step if who == "policy" and grad)
    assert not any(who == "reference" and grad for who, grad, _ in forwards)
    assert reference_rows == policy_rows == 6


def test_the_kl_term_pulls_the_policy_toward_the_reference(tiny_model_path, tmp_path, capsys):
    """Every group's rewards equal: no advantage, so the KL term is the whole loss. A policy moved off its reference
    comes back toward it with beta > 0 (its KL from the reference falls step by step), and stays where it is with
    beta 0."""
    import torch

    alike = [0.5, 0.5, None, 0.25, 0.25, 0.25]
    reference = reference_model(tiny_model_path)
    moved, kl = {}, {}
    for beta in (0.0, 1.0):
        state = StepState()
        trainer = make_trainer(
            tiny_model_path,
            tmp_path / f"beta-{beta}",
            step_generations(alike),
            rl_state=state,
            callbacks=[event_callback(state)],
            num_iterations=1,
            logging_steps=1,
            max_steps=3,
            learning_rate=1e-3,
            beta=beta,
        )
        generator = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for parameter in trainer.model.parameters():
                parameter.add_(0.02 * torch.randn(parameter.shape, generator=generator))
        before = distance(trainer.model, reference)
        trainer.train()
        moved[beta] = (before, distance(trainer.model, reference))
        kl[beta] = [e.get("kl") for e in metric_events(capsys)]
    (before_0, after_0), (before_1, after_1) = moved[0.0], moved[1.0]
    assert before_0 == before_1 > 0
    assert after_0 == before_0 and kl[0.0] == [None] * 3  # no advantage and no KL: nothing moves
    # The KL term alone moves it, and its KL from the reference falls step by step (0.077, 0.017, 0.013 here): the
    # policy's answers come back to the reference's, though not every weight does (Adam moves what the KL hardly sees).
    assert after_1 != before_1
    first, second, third = kl[1.0]
    assert first > 1e-3 and third < second < first and third < 0.5 * first
