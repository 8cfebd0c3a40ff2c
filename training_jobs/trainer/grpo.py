"""GRPO with TRL on sandboxed rollouts: `accelerate launch [--config_file ACC] -m training_jobs.trainer.grpo CONFIG.json`.

CONFIG.json is the RL run's stored config plus where things are (base_model_path, output_dir, resume_from_checkpoint,
cpu) and the job's rollout bridge (bridge_url, bridge_token). TRL's GRPOTrainer draws the prompts (task revisions,
each repeated num_generations times), our rollout_func (training_jobs.rl.rollout_func) has the job run them as real
rollouts and answers the exact sampled tokens with their logprobs, env_mask and the checker's reward.

The policy the rollouts sample: `policy.backend` "live" starts training_jobs.rl.policy_server in this process on the
live model (always in sync); "vllm" uses a vLLM server started with weight transfer (`policy.vllm_url`), which TRL
syncs before each rollout batch (use_vllm, vllm_mode="server").

Events go to stdout as JSON lines (main process only), like SFT's:
    {"event": "start", "total_steps", "resumed_at", "policy_url"}
    {"event": "metric", "step", <training_jobs.rl.groups.METRICS>}      one per optimizer step
    {"event": "checkpoint", "step", "path"}
    {"event": "finished", "step"}
"""

import json
import os
import sys

from training_jobs.trainer.sft import _number, emit, load_model, watch_parent


class SkipStep(Exception):
    """Every group of the step was dropped: nothing is trained on (no backward, so no gradient: AdamW leaves every
    parameter as it is; the step still counts, so max_steps is steps taken, trained or not)."""


def trainer_class():
    import torch
    from trl import GRPOTrainer

    class ClawGymGRPOTrainer(GRPOTrainer):
        rl_state = None

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            if self.model.training:
                step = self.state.global_step + 1
                self.rl_state.metrics.setdefault(step, {})["logprob_mismatch"] = self._logprob_mismatch(output)
            return output

        def _logprob_mismatch(self, output) -> float | None:
            """Mean |policy logprob − trainer logprob| over the sampled (policy) tokens, right after the sync that
            precedes every rollout batch: ~0 when the tokens trained are exactly the ones sampled."""
            sampled = output.get("sampling_per_token_logps")
            if sampled is None:
                return None
            mask = (
                output["completion_mask"] * output["tool_mask"] if "tool_mask" in output else output["completion_mask"]
            )
            if not mask.sum():
                return None
            trained = output.get("old_per_token_logps")
            if trained is None:
                ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
                attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
                with torch.no_grad():
                    trained, _, _ = self._get_per_token_logps_and_entropies(
                        self.model, ids, attention, output["completion_ids"].size(1),
                        batch_size=self.args.per_device_train_batch_size,
                    )  # fmt: skip
            diff = ((trained - sampled).abs() * mask).nan_to_num(0.0)
            return float(self.accelerator.gather(diff.sum()).sum() / self.accelerator.gather(mask.sum()).sum())

        def _prepare_inputs(self, generation_batch):
            inputs = super()._prepare_inputs(generation_batch)
            if self.model.training and (self.state.global_step + 1) in self.rl_state.skip:
                raise SkipStep()
            return inputs

        def training_step(self, model, inputs, num_items_in_batch):
            try:
                return super().training_step(model, inputs, num_items_in_batch)
            except SkipStep:
                self._step += 1  # GRPOTrainer's micro-step counter (its own training_step did not get there)
                return torch.zeros((), device=self.accelerator.device)

    return ClawGymGRPOTrainer


def grpo_config(config: dict):
    from trl import GRPOConfig

    gpus = max(int(config["distributed"]["gpus"]), 1) if not config.get("cpu") else 1
    prompts = int(config["prompts_per_step"])
    if prompts % gpus:
        raise SystemExit(f"prompts_per_step ({prompts}) must be a multiple of the GPUs ({gpus}): each process "
                         "takes whole groups")  # fmt: skip
    policy = config["policy"]
    vllm = policy["backend"] == "vllm" and not config.get("cpu")
    extra = {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": policy["vllm_url"]} if vllm else {}
    return GRPOConfig(
        output_dir=config["output_dir"],
        learning_rate=config["learning_rate"],
        max_steps=config["max_steps"],
        # One group a micro-batch, the step's groups over gradient accumulation (and GPUs): a generation batch is
        # exactly one optimizer step's prompts_per_step × num_generations rollouts.
        per_device_train_batch_size=config["num_generations"],
        gradient_accumulation_steps=prompts // gpus,
        num_generations=config["num_generations"],
        epsilon=config["epsilon"],
        epsilon_high=config["epsilon_high"],
        beta=config["beta"],
        loss_type=config["loss_type"],
        temperature=config["temperature"],
        max_completion_length=config["max_completion_length"],
        bf16=bool(config["bf16"]) and not config.get("cpu"),
        use_cpu=bool(config.get("cpu")),
        gradient_checkpointing=bool(config["gradient_checkpointing"]),
        save_strategy="steps",
        save_steps=config["save_steps"],
        save_total_limit=config["save_total_limit"] or None,
        logging_steps=1,
        seed=config["seed"],
        data_seed=config["seed"],
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        **extra,
    )


def prompts_dataset(config: dict):
    """The tasks as prompts ("task-revision:<id>"), repeated to fill at least one step (a step draws distinct
    prompts_per_step of them when there are that many)."""
    from datasets import Dataset

    from training_jobs.rl.rollout_func import prompt_for

    tasks = [prompt_for(t) for t in config["tasks"]]
    rows = list(tasks)
    while len(rows) < int(config["prompts_per_step"]):
        rows += tasks
    return Dataset.from_list([{"prompt": p} for p in rows])


def event_callback(rl_state):
    from transformers import TrainerCallback

    class JsonEvents(TrainerCallback):
        """One metric event per optimizer step: the step's rollout figures (from the job) with TRL's logs."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = dict(logs or {})
            if "loss" not in logs:
                return  # the end-of-training summary
            step = state.global_step
            skipped = step in rl_state.skip
            fields = dict(rl_state.metrics.pop(step, {}))
            fields.update(
                step=step, loss=None if skipped else logs.get("loss"), learning_rate=logs.get("learning_rate"),
                clip_fraction=None if skipped else logs.get("clip_ratio/region_mean"), skipped=int(skipped),
                grad_norm=None if skipped else logs.get("grad_norm"), step_time=logs.get("step_time"),
            )  # fmt: skip
            if float(args.beta or 0) > 0 and not skipped:
                fields["kl"] = logs.get("kl")
            emit("metric", **{k: _number(v) for k, v in fields.items()})

        def on_save(self, args, state, control, **kwargs):
            path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            emit("checkpoint", step=state.global_step, path=os.path.abspath(path))

    return JsonEvents()


def start_policy_server(config: dict, holder: dict, tokenizer):
    from training_jobs.rl.policy_server import DEFAULT_MAX_BODY_BYTES, LivePolicy, PolicyServer

    policy = LivePolicy(
        lambda: holder["trainer"].accelerator.unwrap_model(holder["trainer"].model), tokenizer,
        temperature=config["temperature"], max_tokens=config["max_completion_length"],
        max_context=config["max_context"],
    )  # fmt: skip
    # Its key is the job's (derived for this attempt; the endpoint the rollouts call names it), taken out of the
    # environment so that nothing this process starts inherits it.
    server = PolicyServer(policy, host=config["policy"]["host"], port=int(config["policy"]["port"]),
                          api_key=os.environ.pop("CLAWGYM_POLICY_KEY", ""),
                          max_body_bytes=int(config.get("policy_max_request_bytes") or DEFAULT_MAX_BODY_BYTES))  # fmt: skip
    return server, server.start()


def main(argv: list[str]) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    with open(argv[0]) as fh:
        config = json.load(fh)
    watch_parent()
    from transformers import AutoTokenizer, set_seed

    from training_jobs.rl.rollout_func import StepState, checker_reward, make_rollout_func

    set_seed(config["seed"])
    tokenizer = AutoTokenizer.from_pretrained(config["base_model_path"], local_files_only=True)
    rl_state, holder = StepState(), {}
    server = None
    if config["policy"]["backend"] == "live" or config.get("cpu"):
        server, policy_url = start_policy_server(config, holder, tokenizer)
    else:  # where the proxy reaches vLLM's OpenAI routes: its authenticating front, or vLLM itself on one machine
        policy_url = (config["policy"].get("endpoint_url") or config["policy"]["vllm_url"]).rstrip("/") + "/v1"
    rollout_func = make_rollout_func(
        bridge_url=config["bridge_url"], token=config["bridge_token"], policy_url=policy_url,
        placeholder_id=tokenizer.eos_token_id, state=rl_state, timeout=float(config["batch_timeout"]) + 300,
        log=lambda text: print(text, flush=True),
    )  # fmt: skip
    trainer = trainer_class()(
        model=load_model(config), reward_funcs=[checker_reward], args=grpo_config(config),
        train_dataset=prompts_dataset(config), processing_class=tokenizer, rollout_func=rollout_func,
        callbacks=[event_callback(rl_state)],
    )  # fmt: skip
    trainer.rl_state = rl_state
    holder["trainer"] = trainer
    emit("start", total_steps=config["max_steps"], policy_url=policy_url)
    try:
        trainer.train(resume_from_checkpoint=config.get("resume_from_checkpoint") or None)
    finally:
        if server is not None:
            server.stop()
    emit("finished", step=trainer.state.global_step)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
