"""RL run presets: the whole config an RL run stores (and the trainer is given), before edits.

"paper" is the reference setup (ClawGym-Agents on slime + SGLang): GRPO with ε-clip 0.2/0.28 (DAPO's clip-higher),
no KL, lr 1e-6, temperature 0.7, 8,192 response tokens, 65,536 context, 8 prompts × 8 samples a step (64 sandboxes at
once), groups with fewer than 4 surviving samples dropped. "tiny-cpu" is two steps of a tiny model on a CPU (tests,
trying the path out). Plain data: runs.build_rl_config checks edits against it.
"""

PAPER = {
    "prompts_per_step": 8,  # groups a step (distinct tasks drawn)
    "num_generations": 8,  # rollouts a group
    "max_steps": 200,
    "min_group_survivors": 4,
    "learning_rate": 1e-6,
    "epsilon": 0.2,
    "epsilon_high": 0.28,
    # The KL term's weight (TRL's beta) against the run's base model, a copy of which the trainer then keeps beside
    # the policy: from an SFT checkpoint, the SFT policy. 0: no KL, no reference copy (the paper's setup).
    "beta": 0.0,
    # The share of each step's prompts drawn from the run's mix tasks (training.rl.task_mix): other tasks kept in
    # every step so that the policy does not drift on them. 0: no mix (a run given mix tasks needs a share).
    "mix_share": 0.0,
    "loss_type": "dapo",
    "temperature": 0.7,
    "max_completion_length": 8192,  # per model call (max_tokens) and per trained sample
    "max_context": 65536,  # prompt + completion of a trained sample
    "reward": "code",  # "code": the checker's score; "hybrid": λ·code + (1−λ)·rubric (the task's score)
    "harness": "builtin",
    "max_turns": 40,
    "rollout_timeout": 1800,  # seconds a rollout may take (the sandbox's deadline)
    "batch_timeout": 7200,  # seconds a step's rollouts may take all together
    "save_steps": 10,
    "save_total_limit": 0,  # 0: keep every checkpoint (each one is evaluated)
    "bf16": True,
    "gradient_checkpointing": True,
    "seed": 42,
    # live: a policy server in the trainer process serves its live model (small models, CPU); vllm: a vLLM server
    # started with weight transfer (`VLLM_SERVER_DEV_MODE=1 vllm serve … --weight-transfer-config '{"backend":
    # "nccl"}'`), synced by the trainer before each rollout batch.
    # served_model_name: the name vLLM serves the model under ("": the base model's path, vLLM's default).
    # vllm_url is where the trainer syncs weights (vLLM's dev-mode routes: keep it on loopback); endpoint_url, where
    # the proxy reaches its OpenAI routes when that is elsewhere (an authenticating front, training.serving_front; "":
    # vllm_url), with the key in the variable api_key_env names (vLLM's --api-key; "": none). The live server has a
    # key of its own, made for each attempt.
    "policy": {
        "backend": "vllm",
        "host": "127.0.0.1",
        "port": 0,
        "vllm_url": "http://127.0.0.1:8000",
        "served_model_name": "",
        "endpoint_url": "",
        "api_key_env": "",
    },
    "distributed": {"deepspeed": None, "fsdp": None, "gpus": 1},
}

TINY_CPU = {
    **PAPER,
    "prompts_per_step": 2,
    "num_generations": 2,
    "max_steps": 2,
    "min_group_survivors": 1,
    "learning_rate": 1e-3,
    "temperature": 1.0,
    "max_completion_length": 32,
    "max_context": 4096,
    "max_turns": 2,
    "rollout_timeout": 120,
    "batch_timeout": 600,
    "save_steps": 1,
    "bf16": False,
    "gradient_checkpointing": False,
    "policy": {**PAPER["policy"], "backend": "live"},
    "distributed": {"deepspeed": None, "fsdp": None, "gpus": 0},
}

RL_PRESETS = {"paper": PAPER, "tiny-cpu": TINY_CPU}

RL_CHOICES = {
    "reward": ("code", "hybrid"),
    "harness": ("builtin", "openclaw"),
    # DAPO's per-token normalisation over the step is the one that stays exact when every sample of a rollout is a
    # row of its own (training.trainers.grpo); TRL's others count rows or a micro-batch's tokens.
    "loss_type": ("dapo",),
    "policy.backend": ("live", "vllm"),
    "distributed.deepspeed": (None, "zero2", "zero3"),
    "distributed.fsdp": (None, "fsdp2"),
}
