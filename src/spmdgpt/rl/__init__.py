"""Reinforcement learning with verifiable rewards: prompts with answers (`prompts`), rewards
(`rewards`), and the rollouts GRPO trains on (`rollouts`; the loss: spmdgpt.model.grpo)."""
