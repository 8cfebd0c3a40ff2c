"""GRPOTrainer's rollout_func (trainer side; no Django): TRL 1.16 calls `rollout_func(prompts, trainer)` with this
process's prompts of the generation batch, each prompt repeated num_generations times in a row (RepeatSampler), and
wants one completion per prompt: {"prompt_ids", "completion_ids", "logprobs"} (lists per generation) plus extra
fields, which it forwards to the reward functions, except `env_mask` (TRL's tool_mask: 1 = a token the policy
sampled, trained; 0 = an environment token, in the context but not in the loss).

A prompt is a training task revision ("task-revision:<id>"). The step's rollouts are started and awaited by the
run's job (training_jobs.rl.batches, over loopback HTTP), which answers each generation's main-chain samples (the
rollout's exact tokens from the proxy) and reward. The first sample is the generation's TRL completion; the others
go in the `extra_samples` field (a list per generation), which ClawGym's trainer (training.trainers.grpo) takes
out before the reward functions see it and trains as rows of their own with the generation's advantage. A generation
without a sample (failed rollout, nothing recorded, no reward) trains on nothing: a one-token placeholder with
env_mask 0 and reward None (advantage 0).

On several GPUs each process asks the job for its own slice (whole groups, numbered after the earlier processes'),
a step is skipped by all processes or none, and the step's logged rollout metrics are the main process's groups'.
"""

import json
import urllib.error
import urllib.request

PROMPT_PREFIX = "task-revision:"
EXTRA_SAMPLES = "extra_samples"  # the generations' samples after their first, read by ClawGymGRPOTrainer


def prompt_for(revision_id: int) -> str:
    return f"{PROMPT_PREFIX}{int(revision_id)}"


def revision_of(prompt) -> int:
    text = prompt if isinstance(prompt, str) else str(prompt)
    if not text.startswith(PROMPT_PREFIX):
        raise ValueError(f"not an RL prompt (task-revision:<id>): {text[:80]!r}")
    return int(text[len(PROMPT_PREFIX) :])


class StepState:
    """What the rollout_func learned about the step it generated for: the trainer's callback merges its metrics into
    the step's metric event, and the trainer skips a step whose every group dropped."""

    def __init__(self):
        self.metrics: dict[int, dict] = {}
        self.skip: set[int] = set()
        self.sampling_logprobs: list | None = None


def request_step(
    bridge_url: str, token: str, step: int, prompts: list[int], policy_url: str, timeout: float, first_group: int = 0
) -> dict:
    data = json.dumps({"step": step, "prompts": prompts, "policy_url": policy_url, "first_group": first_group}).encode()
    request = urllib.request.Request(
        f"{bridge_url}/step", data, {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        try:
            why = json.load(exc).get("error", "")
        except ValueError:
            why = ""
        raise RuntimeError(f"the RL step {step} failed in the job ({exc.code}): {why}") from None


def make_rollout_func(
    *,
    bridge_url: str,
    token: str,
    policy_url: str,
    placeholder_id: int,
    state: StepState,
    timeout: float,
    log=print,
    waiting=None,
):
    """`waiting(work)`, when given, runs work() (the step's request to the job) and returns its answer: the live
    policy samples the step's rollouts in this thread meanwhile (LivePolicy.sampling_while)."""

    def rollout_func(prompts: list, trainer) -> dict:
        step = trainer.state.global_step + 1
        # Each process asks for its own slice (whole groups); its groups are numbered after the earlier processes'.
        first_group = trainer.accelerator.process_index * (len(prompts) // trainer.num_generations)
        revisions = [revision_of(p) for p in prompts]

        def work():
            return request_step(bridge_url, token, step, revisions, policy_url, timeout, first_group)

        answer = waiting(work) if waiting is not None else work()
        out = trl_output(answer["generations"], placeholder_id)
        if len(out["prompt_ids"]) != len(prompts):
            raise RuntimeError(f"the job answered {len(out['prompt_ids'])} generations for {len(prompts)} prompts")
        state.metrics[step] = answer["metrics"]
        if every_process(trainer, answer["skipped"]):
            state.skip.add(step)
        log(f"step {step}: {json.dumps(answer['metrics'])}")
        return out

    return rollout_func


def placeholder(token_id: int) -> dict:
    """A sample that trains nothing: one token of prompt, one of completion, env_mask 0."""
    return {"prompt_ids": [token_id], "completion_ids": [token_id], "logprobs": [0.0], "env_mask": [0]}


def trl_output(generations: list[dict], placeholder_id: int) -> dict:
    """The job's generations (run_step's answer) as TRL's rollout_func output: one completion per generation (its
    first sample, or a placeholder), its other samples in EXTRA_SAMPLES."""
    out = {
        "prompt_ids": [],
        "completion_ids": [],
        "logprobs": [],
        "env_mask": [],
        "checker_reward": [],
        "rollout_id": [],
        EXTRA_SAMPLES: [],
    }
    for generation in generations:
        first, *rest = generation["samples"] or [placeholder(placeholder_id)]
        for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask"):
            out[key].append(first[key])
        out[EXTRA_SAMPLES].append(
            [{key: s[key] for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask")} for s in rest]
        )
        out["checker_reward"].append(generation["reward"])
        out["rollout_id"].append(generation["rollout"])
    return out


def every_process(trainer, flag: bool) -> bool:
    """Whether `flag` holds on every process: a step is skipped by all of them or by none (a process skipping its
    backward alone would leave the others waiting in the gradient all-reduce)."""
    if trainer.accelerator.num_processes == 1:
        return bool(flag)
    import torch

    flags = trainer.accelerator.gather(torch.tensor([int(bool(flag))], device=trainer.accelerator.device))
    return bool(flags.min().item())


def checker_reward(prompts, completions, checker_reward, **kwargs) -> list:
    """The reward function: the rollout's score as the job read it (None: left out of the group's baseline)."""
    return list(checker_reward)
