"""Preference tuning: the DPO loss (Rafailov et al. 2023, "Direct Preference Optimization")
over packed pairs.

A row of a preference batch holds whole pairs (data/loader.py `Packing`): pair j's chosen
conversation is segment 2j, its rejected one segment 2j + 1, and only the replies' targets are
counted (targets < 0 elsewhere). A reply's log-probability is the sum of its counted targets'
log-probabilities. With the policy's and the frozen reference's log-probabilities,

    chosen reward   = beta * (log pi(chosen) - log ref(chosen))
    rejected reward = beta * (log pi(rejected) - log ref(rejected))
    loss            = -log sigmoid(chosen reward - rejected reward)

averaged over the step's complete pairs (both replies with a counted target: a row's padding is
a segment with none), plus, with train.dpo_sft_weight = alpha > 0, alpha x the chosen reply's
negative log-likelihood per token (RPO, Pang et al. 2024, "Iterative Reasoning Preference
Optimization"; TRL's rpo_alpha): pure DPO only widens the gap and can make the chosen reply less
likely too. Metrics: the mean margin (chosen - rejected reward), the share of pairs whose margin
is above 0 (accuracy), the mean rewards, the chosen replies' NLL per token, the pairs counted.
"""

from __future__ import annotations

from functools import partial
from typing import List, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import Config, ConfigError, ModelConfig, preference_data
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.loss import token_losses
from spmdgpt.model.params import Params

Array = jax.Array


def _by_segment(rules: Rules, values: Array, segment_ids: Array) -> tuple[Array, Array]:
    """Per row, sums of values [b, t] by segment -> (even segments, odd segments), [b, ceil(t/2)]
    each: pair j's chosen and rejected sums (each row whole on its devices: [b, t] is small)."""
    n = values.shape[1] + values.shape[1] % 2
    rows = rules.spec("batch", None)
    values, segment_ids = (jax.sharding.reshard(a, rows) for a in (values, segment_ids))
    sums = jax.vmap(partial(jax.ops.segment_sum, num_segments=n))(values, segment_ids)
    return sums[:, 0::2], sums[:, 1::2]


def reply_lengths(rules: Rules, targets: Array, segment_ids: Array) -> tuple[Array, Array]:
    """(counted targets of each pair's chosen reply, of its rejected one), [b, ceil(t/2)] float32."""
    return _by_segment(rules, (targets >= 0).astype(jnp.float32), segment_ids)


def complete_pairs(rules: Rules, targets: Array, segment_ids: Array) -> Array:
    """[b, ceil(t/2)] bool: pair j of each row has counted targets in both replies."""
    chosen, rejected = reply_lengths(rules, targets, segment_ids)
    return (chosen > 0) & (rejected > 0)


def pair_count(rules: Rules, targets: Array, segment_ids: Array) -> Array:
    """The batch's complete pairs, float32 (DPO's denominator)."""
    return jnp.sum(complete_pairs(rules, targets, segment_ids), dtype=jnp.float32)


def reply_logps(cfg: ModelConfig, rules: Rules, params: Params, inputs: Array, targets: Array,
                segment_ids: Array, positions: Optional[Array]) -> tuple[Array, Array]:
    """(log-probabilities of each pair's chosen reply, of its rejected reply), [b, ceil(t/2)]
    float32 each (0 for the pairs a row does not hold)."""
    logps = -token_losses(cfg, rules, params, inputs, targets, segment_ids, positions)  # (0 where not counted)
    return _by_segment(rules, logps, segment_ids)


def dpo_objective(cfg: ModelConfig, rules: Rules, beta: float, params: Params, reference: Params, inputs: Array,
                  targets: Array, segment_ids: Array, positions: Optional[Array] = None,
                  denominator: Optional[Array] = None, sft_weight: float = 0.0) -> tuple[Array, dict]:
    """(the DPO loss: the sum over complete pairs / denominator (default: their count, at least
    1), its metrics {"loss", "dpo/margin", "dpo/accuracy", "dpo/chosen", "dpo/rejected",
    "dpo/chosen_nll"}), float32 scalars; differentiable in `params` (the reference gets no
    gradient). sft_weight > 0 adds that weight x the chosen reply's negative log-likelihood per
    token (RPO, Pang et al. 2024), which keeps the chosen reply likely while the margin widens."""
    chosen_len, rejected_len = reply_lengths(rules, targets, segment_ids)
    complete = ((chosen_len > 0) & (rejected_len > 0)).astype(jnp.float32)
    if denominator is None:
        denominator = jnp.maximum(jnp.sum(complete), 1.0)
    pc, pr = reply_logps(cfg, rules, params, inputs, targets, segment_ids, positions)
    rc, rr = reply_logps(cfg, rules, jax.lax.stop_gradient(reference), inputs, targets, segment_ids, positions)
    chosen, rejected = beta * (pc - rc), beta * (pr - rr)
    margin = chosen - rejected

    def mean(x):
        return jnp.sum(x * complete) / denominator

    nll = mean(-pc / jnp.maximum(chosen_len, 1.0))
    loss = mean(-jax.nn.log_sigmoid(margin)) + (sft_weight * nll if sft_weight else 0.0)
    return loss, {"loss": loss, "dpo/margin": mean(margin), "dpo/accuracy": mean((margin > 0).astype(jnp.float32)),
                  "dpo/chosen": mean(chosen), "dpo/rejected": mean(rejected), "dpo/chosen_nll": nll}


# ----------------------------------------------------------------------------- configuration checks


def config_errors(cfg: Config) -> List[str]:
    """What DPO (preference data) does not combine with yet, one line each."""
    try:
        if not preference_data(cfg.data):
            return []
    except ConfigError:  # (reported by the data checks)
        return []
    t, m, errs = cfg.train, cfg.model, []
    if not t.dpo_beta > 0:
        errs.append(f"train.dpo_beta={t.dpo_beta} must be > 0 (e.g. 0.1)")
    if t.dpo_sft_weight < 0:
        errs.append(f"train.dpo_sft_weight={t.dpo_sft_weight} must be >= 0 (0 = pure DPO; RPO uses 1)")
    for bad, what in ((cfg.mesh.stage > 1, f"mesh.stage={cfg.mesh.stage}: pipeline stages"),
                      (m.moe.num_experts > 0, "model.moe.num_experts: mixture-of-experts layers (their balancing "
                                              "losses)"),
                      (t.time_budget is not None, "train.time_budget (its calibration times the language-model step)"),
                      (t.stats_every > 0, "train.stats_every (the statistics differentiate the language-model loss)")):
        if bad:
            errs.append(f"preference data (DPO) does not work with {what} yet; leave it out")
    return errs
