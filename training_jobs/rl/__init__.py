"""RL (GRPO) on sandboxed rollouts, the job's side: a step's rollout batches and the samples built from the proxy's
exact tokens. The trainer's side (the policy server, the rollout_func, groups and rewards, the presets) is the
training library's: training.rl."""
