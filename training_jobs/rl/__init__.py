"""RL (GRPO) on sandboxed rollouts: samples from the proxy's exact tokens, groups and rewards, the rollout_func,
the policy server."""
