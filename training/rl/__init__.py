"""RL (GRPO), the trainer's side: the live policy server, the rollout_func, groups and rewards, the presets. The job's
side (rollout batches, samples from the proxy's exact tokens) is the app's: training_jobs.rl."""
