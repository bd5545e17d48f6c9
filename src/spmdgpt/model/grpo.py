"""Group relative policy optimisation (GRPO; Shao et al. 2024, "DeepSeekMath"): the loss of a
batch of sampled completions.

For each prompt the sampler draws G completions (`rl.group_size`), each gets a reward r_i, and
its advantage is the reward's standing in its group (`spmdgpt.rl.rollouts.group_advantages`):

    A_i = (r_i - mean(r_1..G)) / (std(r_1..G) + 1e-4)          (population std; equal rewards: 0)

A batch row holds one prompt and one of its completions; only the completion's tokens are
targets (the prompt's are < 0: no loss, as in supervised fine-tuning). Per completion token,
with the policy's log-probability logp, the sampling policy's old_logp (the parameters that
sampled the batch; the same as the policy on a batch's first update) and the frozen
reference's ref_logp, all three of the tempered distribution softmax(logits / rl.temperature)
the rollouts sample from (as TRL and verl take them; with rl.top_p < 1 the ratio is still of
the tempered, untruncated distributions, as there):

    ratio   = exp(logp - old_logp)
    clipped = min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)           (eps: rl.clip)
    kl      = exp(ref_logp - logp) - (ref_logp - logp) - 1                 (the k3 estimator, >= 0)
    loss    = -clipped + beta * kl                                          (beta: rl.kl_beta)

summed over the step's completion tokens and divided by their count (every token of the step
weighs the same, DAPO's token-level mean; Dr. GRPO divides by a constant instead, and the
paper's mean per completion first weighs short completions' tokens more). Metrics: the loss,
the mean kl, the share of tokens the clip held (`rl/clip_fraction`: ratio past 1 + eps with
A > 0, or past 1 - eps with A < 0).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import ModelConfig
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.loss import token_losses
from spmdgpt.model.params import Params

Array = jax.Array


def token_logps(cfg: ModelConfig, rules: Rules, params: Params, inputs: Array, targets: Array,
                temperature: float = 1.0, vocab_limit: Optional[int] = None) -> Array:
    """log p(target) of every counted target under softmax(logits / temperature), float32 [b, t]
    (0 where targets < 0); over the ids below `vocab_limit` (the tokenizer's, which the rollouts
    sample from) when given."""
    return -token_losses(cfg, rules, params, inputs, targets, temperature=temperature, vocab_limit=vocab_limit)


def logp_temperature(temperature: float) -> float:
    """The temperature GRPO's log-probabilities are taken at: the rollouts' sampling temperature
    (rl.temperature; 0, greedy, has no distribution of its own: 1)."""
    return temperature if temperature > 0 else 1.0


class Clip(NamedTuple):
    """The surrogate's settings (rl.*): the clip range [1 - low, 1 + high], the ratio's level
    ("token" or "sequence", GSPO's), the normaliser ("token", "sequence", "constant") and, for
    "constant", the tokens a completion may have (rl.max_new_tokens)."""

    low: float = 0.2
    high: float = 0.2
    ratio: str = "token"
    norm: str = "token"
    max_tokens: int = 1


def grpo_terms(logp: Array, old_logp: Array, ref_logp: Array, advantages: Array, eps, beta: float,
               counted: Optional[Array] = None):
    """Per token (loss, kl, clipped): the module docstring's terms, float32 [b, t]; advantages
    [b] (one per completion) or [b, t]; eps: the clip's half-width, or a `Clip`. With
    Clip.ratio="sequence" (GSPO) every token of a completion carries its completion's term: the
    ratio exp(mean over its counted tokens of logp - old_logp), clipped once (counted [b, t]:
    the completion tokens, needed then)."""
    clip = eps if isinstance(eps, Clip) else Clip(eps, eps)
    a = advantages if advantages.ndim == logp.ndim else advantages[:, None]
    log_ratio = logp - old_logp
    if clip.ratio == "sequence":
        n = jnp.maximum(jnp.sum(counted, axis=-1, keepdims=True), 1.0)
        log_ratio = jnp.broadcast_to(jnp.sum(log_ratio * counted, axis=-1, keepdims=True) / n, logp.shape)
    ratio = jnp.exp(log_ratio)
    surrogate = jnp.minimum(ratio * a, jnp.clip(ratio, 1.0 - clip.low, 1.0 + clip.high) * a)
    d = ref_logp - logp
    kl = jnp.exp(d) - d - 1.0
    clipped = ((a > 0) & (ratio > 1.0 + clip.high)) | ((a < 0) & (ratio < 1.0 - clip.low))
    return -surrogate + beta * kl, kl, clipped


def token_weights(counted: Array, clip: Clip) -> Array:
    """Each completion token's weight in the step's sum (its denominator apart, `grpo_count`): 1
    (token, constant), or 1 / its completion's tokens (sequence: each completion weighs one)."""
    if clip.norm == "sequence":
        return counted / jnp.maximum(jnp.sum(counted, axis=-1, keepdims=True), 1.0)
    return counted


def grpo_count(targets: Array, clip: Clip) -> Array:
    """What the step's sum is divided by: its completion tokens (token), its completions
    (sequence), or its completions x rl.max_new_tokens (constant)."""
    counted = targets >= 0
    if clip.norm == "sequence":
        return jnp.sum(jnp.any(counted, axis=-1), dtype=jnp.float32)
    if clip.norm == "constant":
        return jnp.asarray(targets.shape[0] * clip.max_tokens, jnp.float32)
    return jnp.sum(counted, dtype=jnp.float32)


def grpo_objective(cfg: ModelConfig, rules: Rules, eps, beta: float, params: Params, inputs: Array,
                   targets: Array, advantages: Array, old_logp: Array, ref_logp: Array,
                   denominator: Optional[Array] = None, temperature: float = 1.0,
                   vocab_limit: Optional[int] = None) -> tuple[Array, dict]:
    """(the GRPO loss: the weighted sum over the completion tokens (`token_weights`) /
    denominator (default: `grpo_count`, at least 1), its metrics {"loss", "rl/kl",
    "rl/clip_fraction"} on the same weights); eps: the clip's half-width or a `Clip`; the
    policy's log-probabilities at `temperature` over the ids below `vocab_limit` (old_logp and
    ref_logp taken at the same: the distribution the rollouts sampled from)."""
    clip = eps if isinstance(eps, Clip) else Clip(eps, eps)
    counted = (targets >= 0).astype(jnp.float32)
    if denominator is None:
        denominator = jnp.maximum(grpo_count(targets, clip), 1.0)
    logp = token_logps(cfg, rules, params, inputs, targets, temperature, vocab_limit)
    loss, kl, clipped = grpo_terms(logp, old_logp, ref_logp, advantages, clip, beta, counted)
    weights = token_weights(counted, clip)
    mean = lambda x: jnp.sum(x * weights) / denominator  # noqa: E731
    total = mean(loss)
    return total, {"loss": total, "rl/kl": mean(kl), "rl/clip_fraction": mean(clipped.astype(jnp.float32))}
