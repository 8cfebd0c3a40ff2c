"""GRPO with TRL on sandboxed rollouts: `accelerate launch [--config_file ACC] -m training.trainers.grpo CONFIG.json`.

CONFIG.json is the RL run's stored config plus where things are (base_model_path, output_dir, resume_from_checkpoint,
cpu) and the job's rollout bridge (bridge_url, bridge_token). TRL's GRPOTrainer draws the prompts (task revisions,
each repeated num_generations times; with a task mix, in the order training.rl.task_mix lays out), our rollout_func
(training.rl.rollout_func) has the job run them as real rollouts and answers the exact sampled tokens with their
logprobs, env_mask and the checker's reward.

With `beta` above 0, TRL adds its KL term against a reference: a second copy of the run's base model (its config's
path), loaded beside the policy and scored without gradient once a step; the rows flattened below get its logprobs
too. The live policy server samples from the policy alone.

The policy the rollouts sample: `policy.backend` "live" starts training.rl.policy_server in this process on the
live model (always in sync); "vllm" uses a vLLM server started with weight transfer (`policy.vllm_url`), which TRL
syncs before each rollout batch (use_vllm, vllm_mode="server").

Every sample of a rollout is trained. A rollout whose calls do not chain (OpenClaw's internal-context message, a
compaction) has several main-chain samples (training_jobs.rl.samples); TRL 1.16 takes one completion per generation,
so the rollout_func answers the first and hands the others over in `extra_samples`. ClawGymGRPOTrainer lets TRL
compute the generations' rewards and advantages (per group, from the generations as TRL knows them), then flattens:
each extra sample becomes a row of its own carrying its generation's advantage, and the batch is re-counted (TRL's
`num_items_in_batch`; the old, reference and importance-sampling figures of the rows, when TRL uses them). Side
samples never reach the trainer.

The loss normalisation is DAPO's token-level one (loss_type "dapo", the only one the trainer takes): the step's loss
is the sum over every trained token (env_mask 1) of every sample of the step, on every process, of the clipped
surrogate −min(r·A, clip(r, 1−ε, 1+ε_high)·A) with r the token's probability ratio and A its rollout's advantage,
divided by the number of those tokens. Why this one:
- A rollout weighs by its policy tokens however its calls fall into samples: the builtin harness's rollout as one
  300-token chain and an OpenClaw rollout of three 100-token samples weigh the same. TRL's per-sequence mean
  ("grpo") would give the OpenClaw rollout three times the weight, and a rollout's weight would depend on where its
  chain broke. Averaging per rollout (its tokens' mean, then the mean over rollouts) would keep rollouts equal but
  make a token of a long rollout count less than one of a short one, which DAPO dropped for good reason (long bad
  rollouts barely penalised); it is also the paper's setup (presets.PAPER).
- It stays exact under flattening. The normaliser is counted once over the whole generation batch, so how the rows
  fall into micro-batches, the placeholder rows (env_mask 0, advantage 0) that make every micro-batch and every
  process the same size, and the number of GPUs change nothing. TRL's other normalisations count rows ("grpo",
  "dr_grpo") or a micro-batch's tokens ("bnpo"), which flattening and padding change.
A generation without a reward sends no sample at all (the job's Generation.trained): its tokens would weigh in the
count while teaching nothing. Memory: a micro-batch holds about 1/gradient_accumulation_steps of the step's rows, so
a step whose rollouts hold many samples forwards that many more rows at once (TRL forwards a micro-batch whole).

Events go to stdout as JSON lines (main process only), like SFT's:
    {"event": "start", "total_steps", "resumed_at", "policy_url"}
    {"event": "metric", "step", <training.rl.groups.METRICS>}      one per optimizer step
    {"event": "checkpoint", "step", "path"}
    {"event": "finished", "step"}
"""

import json
import os
import sys

from training.trainers.sft import _number, emit, head_on_labelled_tokens, load_model, report_to, watch_parent


class SkipStep(Exception):
    """Every group of the step was dropped: nothing is trained on (no backward, so no gradient: AdamW leaves every
    parameter as it is; the step still counts, so max_steps is steps taken, trained or not)."""


# TRL's batch keys by the side their rows are padded on, with the padding value (None: the tokenizer's pad token).
PROMPT_SIDE = {"prompt_ids": None, "prompt_mask": 0}
COMPLETION_SIDE = {"completion_ids": None, "completion_mask": 0, "tool_mask": 1, "sampling_per_token_logps": 0.0}
# What TRL computes from the rows with a model; recomputed over the flattened rows.
COMPUTED = ("old_per_token_logps", "ref_per_token_logps", "importance_sampling_ratio")
MULTIMODAL = (
    "pixel_values",
    "image_grid_thw",
    "pixel_attention_mask",
    "spatial_shapes",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
    "num_images",
)


def trainer_class():
    import math

    import torch
    from trl import GRPOTrainer
    from trl.trainer import grpo_trainer as trl_grpo  # the helpers TRL's own trainer uses
    from trl.trainer.utils import pad

    from training.rl.rollout_func import EXTRA_SAMPLES, placeholder

    def widen(tensor, width: int, value, left: bool):
        if tensor.size(1) >= width:
            return tensor
        fill = tensor.new_full((tensor.size(0), width - tensor.size(1)), value)
        return torch.cat([fill, tensor] if left else [tensor, fill], dim=1)

    class ClawGymGRPOTrainer(GRPOTrainer):
        """GRPO over a variable number of samples per generation (the module's docstring)."""

        rl_state = None
        _extra_samples = None
        _mismatch = None  # the step's logprob mismatch as its loss forwards find it: {"step", "sum", "tokens"}
        _loss_logps = None  # while _compute_loss runs: the logprobs its forward computed

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if self.loss_type != "dapo":
                raise ValueError(
                    f"ClawGym's GRPO trainer normalises the loss per token over the step (loss_type "
                    f"'dapo'), whatever the samples of a rollout; loss_type {self.loss_type!r} counts "
                    "rows, which training every sample changes"
                )
            self._head_on_completions()

        def _head_on_completions(self):
            """On CPU, the policy's (and the reference's) loss forwards project only the completion tokens through
            the LM head (sft.head_on_labelled_tokens, at the sampling temperature): without Triton, TRL's fused head
            projects every position, prompt included, and again in the backward. Profiled with SmolLM2-135M
            (bench/rl_step_bench.py) it took over a third of a step. The entropy it returns has no gradient, so
            TRL's head stays where the loss reads the entropy (an entropy bonus, a high-entropy token mask)."""
            if self.accelerator.device.type != "cpu" or self._entropy_bonus_enabled or self.top_entropy_quantile < 1.0:
                return
            for scorer in (self.model, self.ref_model):
                if scorer is None:
                    continue
                model = scorer.get_base_model() if hasattr(scorer, "get_base_model") else scorer
                if self.args.cast_lm_head_to_fp32 and model.get_output_embeddings().weight.dtype != torch.float32:
                    continue
                head_on_labelled_tokens(model, temperature=self.temperature)

        def _generate(self, prompts):
            generated = super()._generate(prompts)
            extra_fields = generated[5]  # the rollout_func's fields, before they reach the reward functions
            extra = extra_fields.pop(EXTRA_SAMPLES, None)
            self._extra_samples = list(extra) if extra is not None else [[] for _ in prompts]
            return generated

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            extra, self._extra_samples = self._extra_samples or [], None
            output = self._with_every_sample(output, extra)
            if self.model.training:
                step = self.state.global_step + 1
                if "old_per_token_logps" in output or output.get("sampling_per_token_logps") is None:
                    self.rl_state.metrics.setdefault(step, {})["logprob_mismatch"] = self._logprob_mismatch(output)
                else:  # on-policy: the loss's own forward has the policy's logprobs (_compute_loss), no extra pass
                    zero = torch.zeros((), device=self.accelerator.device)
                    self._mismatch = {"step": step, "sum": zero, "tokens": zero.clone()}
            return output

        def _with_every_sample(self, output: dict, extra: list) -> dict:
            """TRL's batch (one row per generation, its advantage computed per group) with a row for each extra
            sample, carrying its generation's advantage, and placeholder rows so that every process holds the same
            number of rows, a multiple of the micro-batches (split_tensor_dict cuts equal parts and drops the rest;
            the loss's metrics gather per-row tensors across processes)."""
            device = self.accelerator.device
            generations = output["advantages"].size(0)
            rows = [(index, sample) for index, samples in enumerate(extra) for sample in samples]
            counts = self.accelerator.gather(torch.tensor([generations + len(rows)], device=device))
            if int(counts.max()) == generations:  # one sample per generation on every process: TRL's batch as is
                return output
            if any(key in output for key in MULTIMODAL):
                raise ValueError("ClawGym's GRPO trainer trains text samples only")
            chunks = self.args.steps_per_generation if self.model.training else 1
            target = math.ceil(int(counts.max()) / chunks) * chunks
            fillers = target - generations - len(rows)
            samples = [sample for _, sample in rows] + [placeholder(self._tokenizer.pad_token_id)] * fillers
            # Each extra sample carries its generation's advantage; a placeholder row none.
            carried = output["advantages"][torch.tensor([index for index, _ in rows], dtype=torch.long, device=device)]
            advantages = torch.cat([output["advantages"], carried, output["advantages"].new_zeros(fillers)])
            block = self._rows_of(samples)
            if "tool_mask" not in output:  # no env_mask from the rollout_func: every completion token trained
                output["tool_mask"] = torch.ones_like(output["completion_mask"])
            merged = {**output, "advantages": advantages}
            for side, left in ((PROMPT_SIDE, True), (COMPLETION_SIDE, False)):
                first = next(iter(side))  # the ids: every key of a side is as wide (both padded to pad_to_multiple_of)
                width = max(output[first].size(1), block[first].size(1))
                for key, value in side.items():
                    if key not in output:
                        continue
                    value = self._tokenizer.pad_token_id if value is None else value
                    merged[key] = torch.cat(
                        [widen(output[key], width, value, left), widen(block[key], width, value, left)]
                    )
            mask = merged["completion_mask"] * merged["tool_mask"]
            merged["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
            if self.model.training:  # TRL counts what it saw; the extra samples' tokens were seen too
                seen = sum(len(s["prompt_ids"]) + sum(s["env_mask"]) for _, s in rows)
                self.state.num_input_tokens_seen += int(
                    self.accelerator.gather(torch.tensor([seen], device=device)).sum()
                )
            for key in COMPUTED:
                merged.pop(key, None)
            if "old_per_token_logps" in output:
                merged["old_per_token_logps"] = self._logps(merged, "policy")
            if "ref_per_token_logps" in output:
                merged["ref_per_token_logps"] = self._logps(merged, "reference")
            if "importance_sampling_ratio" in output:
                merged["importance_sampling_ratio"] = self._importance_sampling_ratio(
                    merged["old_per_token_logps"], merged["sampling_per_token_logps"], mask
                )
            return merged

        def _rows_of(self, samples: list[dict]) -> dict:
            """Samples as TRL pads its rows: prompts on the left, completions on the right; a None logprob (a
            re-tokenized call's) NaN, as TRL reads it; truncated completions masked when TRL masks them."""
            device, pad_id = self.accelerator.device, self._tokenizer.pad_token_id

            def padded(lists, value, side, dtype=None):
                tensors = [torch.tensor(values, dtype=dtype) for values in lists]
                return pad(
                    tensors, padding_value=value, padding_side=side, pad_to_multiple_of=self.pad_to_multiple_of
                ).to(device)

            prompts = [s["prompt_ids"] for s in samples]
            completions = [s["completion_ids"] for s in samples]
            block = {
                "prompt_ids": padded(prompts, pad_id, "left"),
                "prompt_mask": padded([[1] * len(p) for p in prompts], 0, "left"),
                "completion_ids": padded(completions, pad_id, "right"),
                "completion_mask": padded([[1] * len(c) for c in completions], 0, "right"),
                "tool_mask": padded([s["env_mask"] for s in samples], 1, "right"),
                "sampling_per_token_logps": padded(
                    [[math.nan if x is None else x for x in s["logprobs"]] for s in samples],
                    0.0,
                    "right",
                    torch.float32,
                ),
            }
            if self.mask_truncated_completions:
                ends = [*self.eos_token_ids, pad_id]
                kept = torch.tensor([c[-1] in ends for c in completions], device=device).unsqueeze(1).int()
                block["completion_mask"], block["tool_mask"] = (
                    block["completion_mask"] * kept,
                    block["tool_mask"] * kept,
                )
            return block

        def _logps(self, batch: dict, model: str):
            """The per-token logprobs of the batch's completions under the policy or the reference model, computed
            as TRL computes them before a step (no gradient, no checkpointing; the reference a PEFT model's
            adapter-free or "ref" weights when there is no reference model)."""
            ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
            attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
            keep, size = (
                batch["completion_ids"].size(1),
                (
                    self.args.per_device_train_batch_size
                    if self.model.training
                    else self.args.per_device_eval_batch_size
                ),
            )
            with (
                torch.no_grad(),
                trl_grpo.disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs),
            ):
                if model == "policy" or self.ref_model is not None:
                    scorer = self.model if model == "policy" else self.ref_model
                    return self._get_per_token_logps_and_entropies(scorer, ids, attention, keep, batch_size=size)[0]
                unwrapped = self.accelerator.unwrap_model(self.model)
                with trl_grpo.use_adapter(unwrapped, adapter_name="ref" if "ref" in unwrapped.peft_config else None):
                    return self._get_per_token_logps_and_entropies(self.model, ids, attention, keep, batch_size=size)[0]

        def _importance_sampling_ratio(self, old, sampled, mask):
            """TRL 1.16's vLLM importance-sampling correction (its _generate_and_score_completions), over the rows
            as flattened: a NaN sampling logprob gets ratio 1; per token or per sequence, truncated or masked."""
            diff = torch.nan_to_num((old - sampled) * mask, nan=0.0)
            mode = self.vllm_importance_sampling_mode
            if mode in ("sequence_mask", "sequence_truncate"):
                diff = diff.sum(dim=-1, keepdim=True)
            ratio = torch.exp(diff)
            low, high = self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max
            if mode in ("sequence_truncate", "token_truncate"):
                return torch.clamp(ratio, min=low, max=high)
            invalid = (ratio < (-math.inf if low is None else low)) | (ratio > (math.inf if high is None else high))
            return ratio.masked_fill(invalid, 0.0)

        def _logprob_mismatch(self, output) -> float | None:
            """Mean |policy logprob − trainer logprob| over the sampled (policy) tokens, right after the sync that
            precedes every rollout batch: ~0 when the tokens trained are exactly the ones sampled. An on-policy step
            (no old logprobs) gets it from its loss forwards instead (_compute_loss), which see the same weights."""
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
                trained = self._logps(output, "policy")
            diff = ((trained - sampled).abs() * mask).nan_to_num(0.0)
            return float(self.accelerator.gather(diff.sum()).sum() / self.accelerator.gather(mask.sum()).sum())

        def _prepare_inputs(self, generation_batch):
            inputs = super()._prepare_inputs(generation_batch)
            if self.model.training and (self.state.global_step + 1) in self.rl_state.skip:
                raise SkipStep()
            return inputs

        def training_step(self, model, inputs, num_items_in_batch):
            try:
                loss = super().training_step(model, inputs, num_items_in_batch)
            except SkipStep:
                self._step += 1  # GRPOTrainer's micro-step counter (its own training_step did not get there)
                loss = torch.zeros((), device=self.accelerator.device)
            if self._mismatch is not None and self._step % self.args.steps_per_generation == 0:
                self._finish_mismatch()
            return loss

        def _compute_loss(self, model, inputs):
            """TRL's loss; on an on-policy step it also adds the micro-batch's logprob mismatch (the loss forward's
            logprobs of the sampled tokens against the policy's, before any update of the step) to the step's."""
            if self._mismatch is None or inputs.get("sampling_per_token_logps") is None:
                return super()._compute_loss(model, inputs)
            self._loss_logps = []
            try:
                loss = super()._compute_loss(model, inputs)
                logps = self._loss_logps[0].detach()
            finally:
                self._loss_logps = None
            mask = (
                inputs["completion_mask"] * inputs["tool_mask"] if "tool_mask" in inputs else inputs["completion_mask"]
            )
            diff = ((logps - inputs["sampling_per_token_logps"]).abs() * mask).nan_to_num(0.0)
            self._mismatch["sum"] += diff.sum()
            self._mismatch["tokens"] += mask.sum()
            return loss

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            if self._loss_logps is not None:  # the loss's forward (_compute_loss)
                self._loss_logps.append(result[0])
            return result

        def _finish_mismatch(self):
            """The step's mismatch over every process, once its micro-batches are through (None: no token trained,
            as on a skipped step)."""
            mismatch, self._mismatch = self._mismatch, None
            total = self.accelerator.gather(mismatch["sum"].reshape(1)).sum()
            tokens = self.accelerator.gather(mismatch["tokens"].reshape(1)).sum()
            value = float(total / tokens) if tokens else None
            self.rl_state.metrics.setdefault(mismatch["step"], {})["logprob_mismatch"] = value

    return ClawGymGRPOTrainer


def grpo_config(config: dict):
    from trl import GRPOConfig

    gpus = max(int(config["distributed"]["gpus"]), 1) if not config.get("cpu") else 1
    prompts = int(config["prompts_per_step"])
    if prompts % gpus:
        raise SystemExit(
            f"prompts_per_step ({prompts}) must be a multiple of the GPUs ({gpus}): each process takes whole groups"
        )
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
        # A task mix lays out every step's prompts itself (prompts_dataset); TRL's shuffle would undo the shares.
        shuffle_dataset=not mixes_tasks(config),
        seed=config["seed"],
        data_seed=config["seed"],
        report_to=report_to(config),
        disable_tqdm=True,
        dataloader_num_workers=0,
        **extra,
    )


def mixes_tasks(config: dict) -> bool:
    """Whether the run mixes other tasks into its own (training.rl.task_mix): its prompts come in step order."""
    return bool(config.get("mix_tasks")) and float(config.get("mix_share") or 0) > 0


def prompts_dataset(config: dict):
    """The tasks as prompts ("task-revision:<id>"), repeated to fill at least one step (a step draws distinct
    prompts_per_step of them when there are that many). A run with a task mix gets every step's prompts in order
    instead (training.rl.task_mix: its share of mix tasks in each step), which the trainer walks unshuffled."""
    from datasets import Dataset

    from training.rl.rollout_func import prompt_for

    if mixes_tasks(config):
        from training.rl.task_mix import step_prompts

        mix = [int(t) for t in config["mix_tasks"]]
        if not set(mix) <= set(config["tasks"]):  # config["tasks"] is every task trained: the guard checked those
            raise SystemExit("mix_tasks must be among the run's tasks (training_jobs.kinds.rl stores them so)")
        own = [int(t) for t in config["tasks"] if t not in set(mix)]
        order = step_prompts(
            own,
            mix,
            share=float(config["mix_share"]),
            prompts_per_step=int(config["prompts_per_step"]),
            steps=int(config["max_steps"]),
            seed=int(config["seed"]),
        )
        return Dataset.from_list([{"prompt": prompt_for(t)} for t in order])
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
                step=step,
                loss=None if skipped else logs.get("loss"),
                learning_rate=logs.get("learning_rate"),
                clip_fraction=None if skipped else logs.get("clip_ratio/region_mean"),
                skipped=int(skipped),
                grad_norm=None if skipped else logs.get("grad_norm"),
                step_time=logs.get("step_time"),
            )
            if float(args.beta or 0) > 0 and not skipped:
                fields["kl"] = logs.get("kl")
            emit("metric", **{k: _number(v) for k, v in fields.items()})

        def on_save(self, args, state, control, **kwargs):
            path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            emit("checkpoint", step=state.global_step, path=os.path.abspath(path))

    return JsonEvents()


def start_policy_server(config: dict, holder: dict, tokenizer):
    from training.rl.policy_server import DEFAULT_MAX_BODY_BYTES, LivePolicy, PolicyServer

    policy = LivePolicy(
        lambda: holder["trainer"].accelerator.unwrap_model(holder["trainer"].model),
        tokenizer,
        temperature=config["temperature"],
        max_tokens=config["max_completion_length"],
        max_context=config["max_context"],
        own_tokens=True,  # the history's answers as sampled: a rollout's calls chain into one sample
    )
    # Its key is the job's (derived for this attempt; the endpoint the rollouts call names it), taken out of the
    # environment so that nothing this process starts inherits it.
    server = PolicyServer(
        policy,
        host=config["policy"]["host"],
        port=int(config["policy"]["port"]),
        api_key=os.environ.pop("CLAWGYM_POLICY_KEY", ""),
        max_body_bytes=int(config.get("policy_max_request_bytes") or DEFAULT_MAX_BODY_BYTES),
    )
    return server, server.start()


def main(argv: list[str]) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    with open(argv[0]) as fh:
        config = json.load(fh)
    watch_parent()
    from transformers import AutoTokenizer, set_seed

    from training.rl.rollout_func import StepState, checker_reward, make_rollout_func

    set_seed(config["seed"])
    tokenizer = AutoTokenizer.from_pretrained(config["base_model_path"], local_files_only=True)
    rl_state, holder = StepState(), {}
    server = None
    if config["policy"]["backend"] == "live" or config.get("cpu"):
        server, policy_url = start_policy_server(config, holder, tokenizer)
    else:  # where the proxy reaches vLLM's OpenAI routes: its authenticating front, or vLLM itself on one machine
        policy_url = (config["policy"].get("endpoint_url") or config["policy"]["vllm_url"]).rstrip("/") + "/v1"
    rollout_func = make_rollout_func(
        bridge_url=config["bridge_url"],
        token=config["bridge_token"],
        policy_url=policy_url,
        placeholder_id=tokenizer.eos_token_id,
        state=rl_state,
        timeout=float(config["batch_timeout"]) + 300,
        log=lambda text: print(text, flush=True),
        waiting=server.policy.sampling_while if server is not None else None,
    )
    model = load_model(config)
    if server is not None:  # the live policy merges and cuts the model's cache as it samples rows together
        from training.batched_sampling import BatchedSampler

        BatchedSampler.check_model(model)
    trainer = trainer_class()(
        model=model,
        reward_funcs=[checker_reward],
        args=grpo_config(config),
        train_dataset=prompts_dataset(config),
        processing_class=tokenizer,
        rollout_func=rollout_func,
        callbacks=[event_callback(rl_state)],
    )
    trainer.rl_state = rl_state
    holder["trainer"] = trainer
    emit("start", total_steps=config["max_steps"], policy_url=policy_url)
    try:
        trainer.train(resume_from_checkpoint=config.get("resume_from_checkpoint") or None)
    finally:
        if server is not None:
            server.stop()
            server.policy.stop()
    emit("finished", step=trainer.state.global_step)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
