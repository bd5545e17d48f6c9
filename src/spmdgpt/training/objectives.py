"""Training objectives as values: what a step differentiates, chosen once from the config.

An `Objective` says how to score one microbatch (its loss and metrics), what the step counts to
average over (targets, or DPO's complete pairs), and whether it draws dropout or needs DPO's
frozen reference model. `training.step.step_gradients` is built from one, with no branch on its
kind; GRPO (reinforcement learning, `model.grpo`) is one more function here returning one.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax.numpy as jnp

from spmdgpt.config import Config, preference_data, prompts_data
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.attention import attention_dropout
from spmdgpt.model.grpo import Clip, grpo_count, grpo_objective, logp_temperature
from spmdgpt.model.loss import objective as next_token_objective
from spmdgpt.model.preference import dpo_objective, pair_count


class Objective(NamedTuple):
    """score(params, inputs, targets, *rest, reference, key, denominator) -> (what is minimised,
    {"loss", ...: float32 scalars}): one microbatch, its sums divided by `denominator`.
    count(targets, *rest) -> float32: what the step averages over (its metric `counted`)."""

    score: Callable
    count: Callable
    counted: str  # the count's metric name ("tokens", "pairs")
    dropout: bool  # draws dropout masks (model.dropout, attention dropout)
    reference: bool  # needs DPO's frozen reference parameters


def next_token(cfg: Config, rules: Rules, pipeline_microbatches: int = 1) -> Objective:
    """The cross-entropy of the next token (plus z-loss and the units' auxiliary losses,
    `model.loss.objective`), averaged over the targets >= 0. pipeline_microbatches: the
    microbatches that flow through pipeline stages inside the model."""
    m = cfg.model

    def score(params, *batch, reference=None, key=None, denominator=None):
        return next_token_objective(m, rules, params, *batch, key=key, microbatches=pipeline_microbatches,
                                    denominator=denominator)

    def count(targets, *rest):
        return jnp.sum(targets >= 0, dtype=jnp.float32)

    return Objective(score, count, "tokens", m.dropout > 0 or attention_dropout(m) > 0, False)


def dpo(cfg: Config, rules: Rules) -> Objective:
    """Direct preference optimisation (`model.preference`): the chosen reply's margin over the
    rejected one against the frozen reference, averaged over the complete pairs; no dropout."""
    def score(params, *batch, reference=None, key=None, denominator=None):
        return dpo_objective(cfg.model, rules, cfg.train.dpo_beta, params, reference, *batch,
                             denominator=denominator, sft_weight=cfg.train.dpo_sft_weight)

    def count(targets, segment_ids, *rest):
        return pair_count(rules, targets, segment_ids)

    return Objective(score, count, "pairs", False, True)


def grpo(cfg: Config, rules: Rules, vocab_limit: Optional[int] = None) -> Objective:
    """GRPO (`model.grpo`) on a batch of sampled completions: (inputs, targets, advantages [b],
    the sampling policy's and the reference's log-probabilities [b, t]), averaged over the
    completions' tokens (targets >= 0); no dropout (the sampling policy's log-probabilities
    were computed without it). Its log-probabilities are over the ids below `vocab_limit` (the
    tokenizer's: what the rollouts sample from), when given."""
    r = cfg.rl
    clip = Clip(r.clip if r.clip_low is None else r.clip_low, r.clip if r.clip_high is None else r.clip_high,
                r.ratio.value, r.loss_norm.value, r.max_new_tokens)

    def score(params, inputs, targets, advantages, old_logp, ref_logp, reference=None, key=None, denominator=None):
        return grpo_objective(cfg.model, rules, clip, r.kl_beta, params, inputs, targets, advantages, old_logp,
                              ref_logp, denominator=denominator, temperature=logp_temperature(r.temperature),
                              vocab_limit=vocab_limit)

    def count(targets, *rest):
        return grpo_count(targets, clip)

    return Objective(score, count, {"token": "tokens", "sequence": "completions", "constant": "token_budget"}[
        r.loss_norm.value], False, False)


def objective_of(cfg: Config, rules: Rules, vocab_limit: Optional[int] = None) -> Objective:
    """The objective of cfg's run: DPO on preference data, GRPO on prompts (vocab_limit: the
    tokenizer's vocabulary, which its log-probabilities are over), else the next token's."""
    if preference_data(cfg.data):
        return dpo(cfg, rules)
    if prompts_data(cfg.data):
        return grpo(cfg, rules, vocab_limit)
    staged = rules.stage_size() > 1  # (the microbatches then flow through the stages, `model.pipeline`)
    return next_token(cfg, rules, cfg.train.microbatches if staged else 1)

