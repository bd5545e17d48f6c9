"""The mixture-of-experts MLP unit (`model.moe.num_experts` > 0): a router sends each token to
top_k of E expert MLPs (of model.mlp's kind), and the unit's output is their outputs weighted
by the router.

Shapes (D = d_model, E experts, F = each expert's width, `expert_hidden`; the block stacks a
layer axis in front):

    router  [D, E]        the router's logits (computed in float32)
    w_up    [E, D, F], w_gate [E, D, F] (SwiGLU only), w_down [E, F, D] (residual)
    shared  a dense `Mlp` of width shared_experts x F that every token also goes through, or None
    shared_gate  [D] (moe.shared_gate: Qwen2-MoE's, Qwen3-Next's, Qwen3.5-MoE's) the shared expert's
            output times sigmoid(x shared_gate), one scalar per token
    router_bias  [E] (moe.bias_update_rate > 0) the auxiliary-loss-free balancing's per-expert
            bias, set between steps (`between_steps`), never by the optimizer
    with model.bias (gpt-oss): b_router [E] added to the router's logits, b_up / b_gate [E, F] and
            b_down [E, D] each expert's projections' biases (b_down applied outside the grouped
            products: once per routed copy, however the experts' width is split)
    router_scale [D], expert_scale [E] (moe.router_scales: Gemma 4's router) the router's input
            RMS-normalised times router_scale and D^-0.5; each chosen weight times its expert's scale
    dense, ln_dense, ln_in, ln_out (moe.dense_mlp: Gemma 4 26B-A4B) a dense `Mlp` (model.mlp_factor
            wide) on the block's MLP norm's output, normed by ln_dense; the router on the residual
            stream itself, the experts on ln_in of it, their sum normed by ln_out; the unit's output
            is the two normed outputs' sum

Routing runs on the whole (sharded) batch in plain SPMD: softmax then top-k (Mixtral, Qwen), or
sigmoid scores then top-k (DeepSeek-V3), or sqrt(softplus) scores (DeepSeek-V4's); the k weights
renormalised to sum to 1 with moe.normalize_top_k, then times moe.route_scale (DeepSeek-V3's
routed_scaling_factor); each multiplies its expert's output, or with moe.weight_input the token
going into it (Llama 4's experts). With moe.groups = G > 1 (DeepSeek-V3's node-limited routing:
n_group, topk_group) the experts form G equal groups, each scored by the sum of its two best choice
scores, and a token's k experts come only from its moe.top_groups best groups. With
moe.bias_update_rate > 0 (DeepSeek-V3's auxiliary-loss-free balancing, Wang et al. 2024) the top k
are chosen by score + router_bias and weighted by the scores alone, and after every step each
layer's bias moves by rate x sign(1/E - the expert's share of the step's copies): up for the experts
below an even share, down for those above.
With moe.hash_layers = H > 0 (DeepSeek-V4's hash routing) the first H MoE layers take a token's k
experts from a frozen table of its id (`params.hash_experts` [H, vocab, k], `hash_routes`: each
layer's row, -1 where the router's top k choose) instead of the top k, weighted by their scores
as any choice. The experts run per device inside `shard_map` on the device's own tokens:

- dropless (default): the device's token copies (k per token) sorted by expert, so that every
  token reaches its k experts, and multiplied group by group (moe.grouped): `ragged` by
  `jax.lax.ragged_dot` (TPUs' grouped GEMMs), `blocks` by padding each group to whole blocks of
  rows (`block_rows`) and one batched matmul over the blocks, each with its group's weights (on
  CPUs ragged_dot runs every group over every row: 4.8x slower, BENCHMARKS), `pallas` the same
  blocks by Pallas kernels that read each block's weights in place (`model.grouped`: GPUs, where
  XLA's ragged_dot is a masked product with all E experts), `tokamax` the sorted copies as
  `ragged` by tokamax's ragged_dot, Mosaic GPU kernels for its forward and backward (GPUs; the
  `gpu-kernels` extra; compiled for H100s, not yet timed on a GPU).
- capacity: each expert takes C = ceil(capacity_factor x tokens x k / E) of the device's copies
  into a fixed [E, C, D] buffer (first choices before second ones, GShard's priority), one
  batched matmul per projection; copies past C are dropped (the token keeps the residual and
  its other experts) and counted.

Expert parallelism (the `experts` rule: `mesh.expert` in every table): each device holds E / N
of the experts, and the batch is split over that axis too; each token copy goes to the device of
its expert and its output comes back over the axis (`_exchanged`: `ragged_all_to_all` on GPUs
and TPUs, only the rows; `all_to_all` of fixed buffers on CPUs; capacity mode exchanges the
[E, C, D] slots by `all_to_all`). Under tensor parallelism each device holds a slice of every
expert's width (the `mlp` rule) and the partial outputs are summed over that axis; under FSDP
the experts are all-gathered first, like every weight.

Auxiliary outputs (the block's aux channel, float32 scalars per layer, global over the batch):
`load_balance` = E x sum_e f_e p_e (f_e: expert e's share of the routed copies, p_e: its mean
router probability; 1 when even; Switch / GShard) and `router_z` = mean(logsumexp(logits)^2)
(ST-MoE) are losses, weighted by moe.load_balance_loss and moe.router_z_loss; `expert_share`
([E]: each expert's share f_e, only with the balancing bias, which it updates) is not logged; `expert_load`
(the busiest expert's share over the mean share, E max_e f_e: 1 = even, E = all on one),
`router_entropy` (nats, mean over tokens) and `dropped` (capacity mode: the share of copies
dropped; 0 dropless) are logged.
"""

from __future__ import annotations

import math
from functools import partial
from typing import List, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from spmdgpt.config import (
    ConfigError,
    GroupedMatmul,
    ModelConfig,
    MoeDispatch,
    Router,
    expert_hidden,
    gated,
    mesh_axes_of,
    moe_layers,
)
from spmdgpt.config.validate import positive, whole_width
from spmdgpt.mesh.sharding import Rules, platform
from spmdgpt.model.grouped import LEAST, grouped_matmul, unfit_widths
from spmdgpt.model.grouped import config_errors as grouped_errors
from spmdgpt.model.info import ParamInfo, matrix, out_init, residual_std, vector
from spmdgpt.model.kernels import load_tokamax, tokamax_missing
from spmdgpt.model.layers import Norm, norm, norm_info, rms_normalize
from spmdgpt.model.mlp import Mlp, activation, mlp, mlp_info

F32 = jnp.float32


class Moe(NamedTuple):
    LORA = {"up": ("w_up", None), "gate": ("w_gate", None), "down": ("w_down", None)}  # (every expert's)

    router: jax.Array
    w_up: jax.Array
    w_gate: Optional[jax.Array]
    w_down: jax.Array
    shared: Optional[Mlp]
    shared_gate: Optional[jax.Array] = None  # (moe.shared_gate)
    router_bias: Optional[jax.Array] = None
    b_router: Optional[jax.Array] = None  # (model.bias)
    b_up: Optional[jax.Array] = None
    b_gate: Optional[jax.Array] = None
    b_down: Optional[jax.Array] = None
    router_scale: Optional[jax.Array] = None  # (moe.router_scales)
    expert_scale: Optional[jax.Array] = None
    dense: Optional[Mlp] = None  # (moe.dense_mlp)
    ln_dense: Optional[Norm] = None
    ln_in: Optional[Norm] = None
    ln_out: Optional[Norm] = None


def moe_info(cfg: ModelConfig) -> Moe:
    D, E, F = cfg.d_model, cfg.moe.num_experts, expert_hidden(cfg)
    up = matrix((E, D, F), ("experts", "embed", "mlp"), ("embed",), ("mlp",), cfg.init_std)
    return Moe(
        router=matrix((D, E), ("embed", "router"), ("embed",), ("router",), cfg.init_std),
        w_up=up,
        w_gate=up if gated(cfg) else None,
        w_down=matrix((E, F, D), ("experts", "mlp", "embed"), ("mlp",), ("embed",), residual_std(cfg), out_init(cfg)),
        shared=mlp_info(cfg, cfg.moe.shared_experts * F) if cfg.moe.shared_experts else None,
        # (a [D] -> 1 projection: AdamW's, as a vector's, with weight decay)
        shared_gate=ParamInfo((D,), ("embed",), "normal", cfg.init_std, True, ("embed",), ()) if cfg.moe.shared_gate
        else None,
        router_bias=vector((E,), ("router",)) if cfg.moe.bias_update_rate else None,
        b_router=vector((E,), ("router",)) if cfg.bias else None,
        b_up=vector((E, F), ("experts", "mlp")) if cfg.bias else None,
        b_gate=vector((E, F), ("experts", "mlp")) if cfg.bias and gated(cfg) else None,
        b_down=vector((E, D), ("experts", "embed")) if cfg.bias else None,
        router_scale=vector((D,), ("embed",), "ones") if cfg.moe.router_scales else None,
        expert_scale=vector((E,), ("router",), "ones") if cfg.moe.router_scales else None,
        dense=mlp_info(cfg) if cfg.moe.dense_mlp else None,
        **{name: norm_info(cfg) if cfg.moe.dense_mlp else None for name in ("ln_dense", "ln_in", "ln_out")},
    )


def scores_of(cfg: ModelConfig, logits: jax.Array) -> jax.Array:
    """The router's scores of its float32 logits: softmax over the experts, or per expert
    sigmoid or sqrt(softplus) (DeepSeek-V4's), by moe.router."""
    if cfg.moe.router == Router.softmax:
        return jax.nn.softmax(logits, axis=-1)
    if cfg.moe.router == Router.sqrtsoftplus:
        return jnp.sqrt(jax.nn.softplus(logits))
    return jax.nn.sigmoid(logits)


def route(cfg: ModelConfig, rules: Rules, router: jax.Array, x: jax.Array, bias: Optional[jax.Array] = None,
          logit_bias: Optional[jax.Array] = None, routes: Optional[jax.Array] = None,
          input_scale: Optional[jax.Array] = None, expert_scale: Optional[jax.Array] = None):
    """x [tokens, D] -> (expert ids [tokens, k] int32, their weights [tokens, k] float32, the
    routing's auxiliary outputs). bias [E]: added to the scores for the choice only (the
    balancing's); logit_bias [E]: the router's own, added to its logits (b_router). routes
    [tokens, k] (moe.hash_layers, `hash_routes`): where >= 0, the experts chosen by the token's id
    instead of the top k (a hash-routed layer's), weighted by their scores all the same.
    input_scale [D], expert_scale [E] (moe.router_scales): x RMS-normalised times input_scale and
    D^-0.5 before the logits, and each chosen weight times its expert's scale after the
    renormalisation."""
    moe, E = cfg.moe, cfg.moe.num_experts
    w = rules.gather(router.astype(F32), ("embed", None))
    x = x.astype(F32)
    if input_scale is not None:
        x = rms_normalize(x, cfg.norm_eps) * (rules.gather(input_scale.astype(F32), ("embed",))
                                              * F32(x.shape[-1] ** -0.5))
    logits = jnp.einsum("td,de->te", x, w, out_sharding=rules.spec("tokens", None))
    if logit_bias is not None:
        logits = logits + logit_bias.astype(F32)
    scores = scores_of(cfg, logits)
    choice = scores if bias is None else scores + jax.lax.stop_gradient(bias.astype(F32))
    if moe.groups > 1:  # grouped routing: only the experts of each token's top_groups best groups may be chosen
        grouped = jnp.reshape(choice, choice.shape[:-1] + (moe.groups, E // moe.groups))
        best = jnp.sum(jax.lax.top_k(grouped, min(2, E // moe.groups))[0], axis=-1)  # [tokens, groups]
        allowed = jnp.sum(jax.nn.one_hot(jax.lax.top_k(best, moe.top_groups)[1], moe.groups, dtype=F32), axis=-2)
        choice = jnp.where(jnp.repeat(allowed, E // moe.groups, axis=-1) > 0, choice, -jnp.inf)
    top, ids = jax.lax.top_k(choice, moe.top_k)
    # (the chosen scores: top_k's own, unless a bias moved the choice: then picked by a select, exactly; a gather
    # of [tokens, k] from scores has no sharding JAX can infer for a batch of one token and k = 1, the engine's
    # decode row of a top-1 model)
    if routes is not None:  # (a hash-routed layer: the table's experts, the same in every layer's program)
        routes = jax.sharding.reshard(routes, rules.spec("tokens", None))
        ids = jnp.where(routes >= 0, routes, ids)
    weights = top if bias is None and routes is None else jnp.sum(
        jnp.where(ids[..., None] == jnp.arange(E), scores[:, None], 0.0), -1)
    if moe.normalize_top_k:
        weights = weights / (jnp.sum(weights, axis=-1, keepdims=True) + 1e-20)
    if moe.route_scale != 1.0:
        weights = weights * moe.route_scale
    if expert_scale is not None:  # (each chosen expert's scale, picked by a select as the biased weights are)
        scale = expert_scale.astype(F32)
        weights = weights * jnp.sum(jnp.where(ids[..., None] == jnp.arange(E), scale, 0.0), -1)
    probs = scores / jnp.sum(scores, axis=-1, keepdims=True)  # (softmax: the scores themselves)
    share = jnp.mean(jnp.sum(jax.nn.one_hot(ids, E, dtype=F32), axis=1), axis=0) / moe.top_k  # f_e [E]
    aux = {"load_balance": E * jnp.sum(share * jnp.mean(probs, axis=0)),
           "router_z": jnp.mean(jnp.square(jax.nn.logsumexp(logits, axis=-1))),
           "expert_load": E * jnp.max(share),
           "router_entropy": jnp.mean(jnp.sum(jax.scipy.special.entr(probs), axis=-1))}
    if bias is not None:
        aux["expert_share"] = share
    return ids.astype(jnp.int32), weights, aux


class Ep(NamedTuple):
    """The expert-parallel mesh axes (the `experts` rule's) and how many devices they span."""

    axes: tuple
    size: int


def capacity(cfg: ModelConfig, tokens: int) -> int:
    """Capacity mode's slots per expert for a device's `tokens` tokens (at most all of them: a
    factor past num_experts / top_k, inf included, is that)."""
    moe = cfg.moe
    factor = min(moe.capacity_factor, moe.num_experts / moe.top_k)
    return min(tokens, math.ceil(factor * tokens * moe.top_k / moe.num_experts))


def _expert_mlp(cfg: ModelConfig, x, w_up, w_gate, w_down, matmul, b_up=None, b_gate=None):
    """The experts' MLP on rows x grouped by expert; matmul(rows, [E, in, out] weights, [E, out]
    biases or None). (b_down: `experts` adds it, once per copy.)"""
    h = activation(cfg, matmul(x, w_up, b_up), None if w_gate is None else matmul(x, w_gate, b_gate))
    return matmul(h, w_down, None)


SORTED = (GroupedMatmul.ragged, GroupedMatmul.tokamax)  # the kinds that take the copies sorted by expert


def grouped_kind(cfg: ModelConfig, platform: str) -> GroupedMatmul:
    """moe.grouped resolved: `auto` is blocks on CPUs (where ragged_dot runs every group over
    every row: 12x a dense MLP of the same active width, benchmarks/BENCHMARKS.md), the Pallas
    kernels on GPUs (XLA's GPU ragged_dot is a masked product with all E experts: E x the
    FLOPs; blocks where the kernels' tiles do not divide the widths), ragged_dot on TPUs (a
    grouped GEMM there). An explicit `tokamax` off a GPU, or without the package: a ConfigError."""
    if cfg.moe.grouped == GroupedMatmul.tokamax:
        if platform != "gpu":
            raise ConfigError([f"model.moe.grouped=tokamax needs an NVIDIA GPU (this run's devices are {platform}); "
                               "use model.moe.grouped=auto"])
        if missing := tokamax_missing("model.moe.grouped"):
            raise ConfigError([missing])
    if cfg.moe.grouped != GroupedMatmul.auto:
        return cfg.moe.grouped
    if platform == "gpu":
        return GroupedMatmul.blocks if unfit_widths(cfg) else GroupedMatmul.pallas
    return GroupedMatmul.blocks if platform == "cpu" else GroupedMatmul.ragged


def block_rows(copies: int, experts: int) -> int:
    """The row block of the blocks product: a power of two near a quarter of an even group,
    8 to 128 (each group is padded to a multiple of it)."""
    even = max(copies // experts, 1)
    return int(min(128, max(8, 2 ** math.floor(math.log2(max(even // 4, 1))))))


def _blocks(sizes, n: int, B: int, kernel: bool = False):
    """n rows grouped by expert (sizes [E]) laid out as blocks of B rows, one group's rows each:
    (R, the padded rows' count (a static bound), each sorted row's place among them [n], and the
    product (padded rows [R, in], w [E, in, out]) -> [R, out]). Each group is padded to a multiple
    of B rows, so every block belongs to one group, whose weights it multiplies: a batched matmul
    of blocks, or with kernel=True the Pallas kernels (`grouped.grouped_matmul`, which read each
    block's weights in place)."""
    E = sizes.shape[0]
    padded = (sizes + B - 1) // B * B
    ends = jnp.cumsum(padded)
    starts, first = ends - padded, jnp.cumsum(sizes) - sizes
    group = jnp.repeat(jnp.arange(E), sizes, total_repeat_length=n)
    dest = starts[group] + jnp.arange(n) - first[group]  # each row's place among the padded rows
    R = (n + E * (B - 1) + B - 1) // B * B
    owner = jnp.minimum(jnp.searchsorted(ends, jnp.arange(R // B) * B, side="right"), E - 1)  # each block's group

    def biased(y, b):  # each block's group's bias
        if b is None:
            return y
        return jnp.reshape(jnp.reshape(y, (R // B, B, -1)) + b[owner][:, None].astype(y.dtype), (R, -1))

    def matmul(a, w, b=None):
        blocks = jnp.reshape(a, (R // B, B, a.shape[-1]))
        return biased(jnp.reshape(jnp.einsum("bnd,bdf->bnf", blocks, w[owner]), (R, w.shape[-1])), b)

    if kernel:  # (each group's first block and its count: the weight gradient's loop)
        count = (padded // B).astype(jnp.int32)
        used = jnp.arange(R // B) < ends[-1] // B  # (the blocks past the last group's: -1, skipped)
        args = (jnp.where(used, owner, -1).astype(jnp.int32), (starts // B).astype(jnp.int32), count, B,
                platform() == "cpu")
        return R, dest, lambda a, w, b=None: biased(grouped_matmul(a, w, *args), b)
    return R, dest, matmul


def _grouped_mlp(cfg: ModelConfig, rows, sizes, w_up, w_gate, w_down, kind: GroupedMatmul, order=None, b_up=None,
                 b_gate=None):
    """The experts' MLP on rows [n, D] -> [n, D]: rows sorted by expert (sizes [E] of them; rows
    past their sum are padding, whose outputs are garbage for the caller to drop), or (blocks and
    pallas) in any order with `order`, the permutation that sorts them, the outputs then in the
    rows' own order (each row scattered straight to its padded place and gathered back from it:
    no sorted copy). b_up, b_gate [E, F]: the experts' biases."""
    if kind in SORTED:  # (sorted rows only)
        group = jnp.repeat(jnp.arange(sizes.shape[0]), sizes, total_repeat_length=rows.shape[0])
        if kind == GroupedMatmul.tokamax:  # (its Mosaic GPU kernels, forward and backward; the gpu-kernels extra)
            product = partial(load_tokamax().ragged_dot, implementation="mosaic")
        else:
            product = jax.lax.ragged_dot

        def ragged(a, w, b=None):
            y = product(a, w, sizes)
            return y if b is None else y + b[group].astype(y.dtype)

        return _expert_mlp(cfg, rows, w_up, w_gate, w_down, ragged, b_up, b_gate)
    kernel = kind == GroupedMatmul.pallas
    B = block_rows(rows.shape[0], sizes.shape[0])
    R, dest, matmul = _blocks(sizes, rows.shape[0], max(B, LEAST) if kernel else B, kernel)
    if order is not None:
        dest = jnp.zeros_like(dest).at[order].set(dest, unique_indices=True)
    padded = jnp.zeros((R, rows.shape[1]), rows.dtype).at[dest].set(rows, unique_indices=True)  # (unique: a plain
    # scatter for the derivative too, not the one that finds which of equal indices won)
    return _expert_mlp(cfg, padded, w_up, w_gate, w_down, matmul, b_up, b_gate)[dest]


def _copies(x, k: int, which=None, scale=None):
    """The token copies going into the experts: copy c is token c // k's (all t x k in order, or
    those at `which`), times its routing weight with `scale` ([t, k], moe.weight_input)."""
    rows = jnp.repeat(x, k, axis=0) if which is None else x[which // k]
    if scale is None:
        return rows
    weight = jnp.reshape(scale, (-1,))
    return rows * (weight if which is None else weight[which])[:, None].astype(rows.dtype)


def _dropless(cfg: ModelConfig, x, ids, w_up, w_gate, w_down, kind: GroupedMatmul, ep: Ep, b_up=None, b_gate=None,
              scale=None):
    """[t, D] tokens, ids [t, k] -> (each copy's expert output [t, k, D], which copies were kept:
    all). scale [t, k]: each copy's input multiplied by it (moe.weight_input)."""
    t, k = ids.shape
    flat = jnp.reshape(ids, (-1,))
    order = jnp.argsort(flat, stable=True)  # the copies grouped by expert
    sizes = jnp.bincount(flat, length=cfg.moe.num_experts).astype(jnp.int32)
    kept = jnp.ones((t, k), bool)
    if ep.size == 1 and kind not in SORTED:  # (copy c is token c // k's)
        ys = _grouped_mlp(cfg, _copies(x, k, scale=scale), sizes, w_up, w_gate, w_down, kind, order, b_up, b_gate)
        return jnp.reshape(ys, (t, k, -1)), kept
    if ep.size == 1:
        ys = _grouped_mlp(cfg, _copies(x, k, order, scale), sizes, w_up, w_gate, w_down, kind, None, b_up, b_gate)
    else:
        ys = _exchanged(cfg, _copies(x, k, order, scale), flat[order], sizes, w_up, w_gate, w_down, kind, ep, b_up,
                        b_gate)
    return jnp.zeros_like(ys).at[order].set(ys, unique_indices=True).reshape(t, k, -1), kept


def ragged_exchange():
    """This platform's ragged all-to-all, or None where XLA lacks it (CPUs)."""
    return None if platform() == "cpu" else jax.lax.ragged_all_to_all


def _exchanged(cfg: ModelConfig, xs, sorted_ids, sizes, w_up, w_gate, w_down, kind: GroupedMatmul, ep: Ep, b_up=None,
               b_gate=None):
    """Expert parallelism, dropless: copies xs [n, D] sorted by expert go to the devices of the
    expert axis that hold their experts and their outputs come back. Each device receives into
    [ep, n, D] (the most any device can be sent), sender s's rows first in block s; by
    `ragged_all_to_all` (GPUs, TPUs: only the rows travel), or on CPUs (XLA:CPU lacks it) by
    `all_to_all` of fixed [ep, n, D] send buffers (`ragged_exchange`; the tests run the ragged
    path on a CPU through `ragged_by_all_to_all`, its documented semantics)."""
    n, local = xs.shape[0], w_up.shape[0]
    per_device = jnp.reshape(sizes, (ep.size, local))  # copies for each device's experts
    counts = jnp.sum(per_device, axis=1)
    starts = jnp.cumsum(counts) - counts  # (xs is sorted by expert, so by device)
    got_sizes = jax.lax.all_to_all(per_device, ep.axes, 0, 0)  # [ep, local]: by sender, by local expert
    received = jnp.sum(got_sizes, axis=1)
    ragged = ragged_exchange()
    if ragged is not None:
        me = jax.lax.axis_index(ep.axes)
        got = ragged(xs, jnp.zeros((ep.size * n, xs.shape[1]), xs.dtype), starts, counts,
                     jnp.full((ep.size,), me * n, jnp.int32), received, axis_name=ep.axes)
        got = jnp.reshape(got, (ep.size, n, -1))
    else:  # each copy's device and its row in the fixed buffer for that device
        device = sorted_ids // local
        slot = jnp.arange(n) - starts[device]
        send = jnp.zeros((ep.size, n, xs.shape[1]), xs.dtype).at[device, slot].set(xs, unique_indices=True)
        got = jax.lax.all_to_all(send, ep.axes, 0, 0)  # got[s]: what device s sent here, by local expert
    ends = jnp.cumsum(got_sizes, axis=1)
    expert = jax.vmap(lambda e: jnp.searchsorted(e, jnp.arange(n), side="right"))(ends)  # local: padding
    order = jnp.argsort(jnp.reshape(expert, (-1,)), stable=True)
    rows = jnp.reshape(got, (ep.size * n, -1))[order]
    ys = _grouped_mlp(cfg, rows, jnp.sum(got_sizes, axis=0), w_up, w_gate, w_down, kind, None, b_up, b_gate)
    back = jnp.reshape(jnp.zeros_like(ys).at[order].set(ys, unique_indices=True), (ep.size, n, -1))
    if ragged is not None:  # block s back to device s, where its rows started
        their_starts = jax.lax.all_to_all(starts, ep.axes, 0, 0)
        return ragged(jnp.reshape(back, (ep.size * n, -1)), jnp.zeros_like(xs), jnp.arange(ep.size) * n, received,
                      their_starts, counts, axis_name=ep.axes)
    return jax.lax.all_to_all(back, ep.axes, 0, 0)[device, slot]


def ragged_by_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *, axis_name):
    """`jax.lax.ragged_all_to_all` with one slice per device, by its documented semantics, from
    `all_to_all` of padded [devices, rows, D] buffers: slice d (operand[input_offsets[d]:][:
    send_sizes[d]]) is written into device d's output at output_offsets[d]. What runs the
    ragged exchange on XLA:CPU in the tests."""
    devices, rows = input_offsets.shape[0], operand.shape[0]
    index = jnp.arange(rows)
    take = input_offsets[:, None] + index[None, :]  # [devices, rows]
    blocks = jnp.where((index[None, :] < send_sizes[:, None])[..., None], operand[jnp.minimum(take, rows - 1)], 0)
    got = jax.lax.all_to_all(blocks, axis_name, 0, 0)  # got[s]: sender s's slice for this device
    at = jax.lax.all_to_all(output_offsets, axis_name, 0, 0)  # where sender s asked it written here
    where = jnp.where(index[None, :] < recv_sizes[:, None], at[:, None] + index[None, :], output.shape[0])
    return output.at[jnp.reshape(where, (-1,))].set(jnp.reshape(got, (devices * rows, -1)), mode="drop")


def _capacity(cfg: ModelConfig, x, ids, w_up, w_gate, w_down, ep: Ep, b_up=None, b_gate=None, scale=None):
    """As `_dropless` through [E, C, D] buffers: copies past an expert's C slots give zeros, and
    are not kept. Expert parallelism: each device's buffer rows go to the devices of their
    experts (all-to-all), which multiply [local experts, ep x C, D]."""
    t, k = ids.shape
    E, C, local = cfg.moe.num_experts, capacity(cfg, t), w_up.shape[0]
    flat = jnp.reshape(ids.T, (-1,))  # k-major: every token's first choice before any second one
    onehot = jax.nn.one_hot(flat, E, dtype=jnp.int32)
    slot = jnp.sum((jnp.cumsum(onehot, axis=0) - 1) * onehot, axis=1)  # rank among the expert's copies
    kept = slot < C
    rows = jnp.tile(jnp.arange(t), k)
    copies = x[rows] if scale is None else x[rows] * jnp.reshape(scale.T, (-1, 1)).astype(x.dtype)  # (weight_input)
    buf = jnp.zeros((E, C, x.shape[1]), x.dtype).at[flat, jnp.where(kept, slot, C)].set(copies, mode="drop")
    if ep.size > 1:  # [E, C, D] -> [local, ep x C, D]: every device's slots of this device's experts
        got = jax.lax.all_to_all(jnp.reshape(buf, (ep.size, local, C, -1)), ep.axes, 0, 0)
        buf = jnp.reshape(jnp.transpose(got, (1, 0, 2, 3)), (local, ep.size * C, -1))
    def matmul(a, w, b=None):
        y = jnp.einsum("ecd,edf->ecf", a, w)
        return y if b is None else y + b[:, None].astype(y.dtype)

    ybuf = _expert_mlp(cfg, buf, w_up, w_gate, w_down, matmul, b_up, b_gate)
    if ep.size > 1:
        back = jnp.transpose(jnp.reshape(ybuf, (local, ep.size, C, -1)), (1, 0, 2, 3))
        ybuf = jnp.reshape(jax.lax.all_to_all(back, ep.axes, 0, 0), (E, C, -1))
    y = ybuf[flat, jnp.minimum(slot, C - 1)] * kept[:, None].astype(ybuf.dtype)
    return jnp.transpose(jnp.reshape(y, (k, t, -1)), (1, 0, 2)), jnp.reshape(kept, (k, t)).T


def experts(cfg: ModelConfig, rules: Rules, p: Moe, x: jax.Array, ids: jax.Array, weights: jax.Array):
    """The routed experts' weighted output [tokens, D] (x's dtype) and the number of copies
    dropped (capacity mode), run per device inside `shard_map` on its own tokens and experts."""
    dt = x.dtype
    rows = rules.spec("tokens", None)
    specs = {"up": rules.spec("experts", None, "mlp"), "down": rules.spec("experts", "mlp", None),
             "bias": rules.spec("experts", "mlp"), "b_down": P()}
    w_up, w_down = (jax.sharding.reshard(w.astype(dt), specs[s]) for w, s in ((p.w_up, "up"), (p.w_down, "down")))
    w_gate = None if p.w_gate is None else jax.sharding.reshard(p.w_gate.astype(dt), specs["up"])
    b_up, b_gate, b_down = (None if b is None else jax.sharding.reshard(b.astype(dt), specs[s])
                            for b, s in ((p.b_up, "bias"), (p.b_gate, "bias"), (p.b_down, "b_down")))
    width_axes = mesh_axes_of(rules.spec("mlp")[0])  # (tensor parallelism: each device a slice of every expert)
    ep_axes = mesh_axes_of(specs["up"][0])  # (expert parallelism: each device some of the experts)
    ep = Ep(ep_axes, math.prod(rules.mesh.shape[a] for a in ep_axes))
    token_axes = rules.token_axes()
    kind = grouped_kind(cfg, platform())

    def local(x, ids, weights, w_up, w_gate, w_down, b_up, b_gate, b_down):
        scale = weights if cfg.moe.weight_input else None  # (Llama 4: the weights scale the copies going in)
        if cfg.moe.dispatch == MoeDispatch.capacity:
            y, kept = _capacity(cfg, x, ids, w_up, w_gate, w_down, ep, b_up, b_gate, scale)
        else:
            y, kept = _dropless(cfg, x, ids, w_up, w_gate, w_down, kind, ep, b_up, b_gate, scale)
        gate = weights if scale is None else kept.astype(F32)  # (each copy's output: weighted, or as it is)
        out = jnp.einsum("tkd,tk->td", y.astype(F32), gate)
        if width_axes:
            out = jax.lax.psum(out, width_axes)
        if b_down is not None:  # (after the sum over the experts' width: once per kept copy)
            out = out + jnp.einsum("tkd,tk->td", b_down[ids].astype(F32), jnp.where(kept, gate, 0))
        return out.astype(dt), jnp.sum(~kept).astype(jnp.int32)[None]

    x, ids, weights = (jax.sharding.reshard(a, rows) for a in (x, ids, weights))
    arrays = (x, ids, weights, w_up, w_gate, w_down, b_up, b_gate, b_down)
    in_specs = tuple(None if a is None else s for a, s in zip(arrays, (
        rows, rows, rows, specs["up"], specs["up"], specs["down"], specs["bias"], specs["bias"], specs["b_down"]),
        strict=True))
    out, dropped = jax.shard_map(  # (Pallas's kernels do not type their varying mesh axes, `model.grouped`)
        local, in_specs=in_specs, out_specs=(rows, P(token_axes or None)),
        check_vma=kind not in (GroupedMatmul.pallas, GroupedMatmul.tokamax))(*arrays)
    return out, jnp.sum(dropped)


def moe(cfg: ModelConfig, rules: Rules, p: Moe, x: jax.Array, routes: Optional[jax.Array] = None,
        residual: Optional[jax.Array] = None) -> tuple[jax.Array, dict]:
    """x: [stream, embed] -> ([stream, embed], the routing's auxiliary outputs and `dropped`).
    (A stream split over the tensor axis, model.collective_matmul, is gathered first: every
    device of the axis computes a slice of each expert for the same tokens.) routes [stream, k]:
    this layer's row of `hash_routes` (moe.hash_layers; -1: the top k). With moe.dense_mlp
    (Gemma 4) x is the block's MLP norm's output, the dense MLP's input, and `residual` the
    residual stream: the router's input, and through ln_in the experts'."""
    dense = None
    if p.dense is not None:
        dense = norm(cfg, rules, p.ln_dense, mlp(cfg, rules, p.dense, x)[0])
        router_in = jax.sharding.reshard(residual, rules.spec("tokens", "embed"))
        x = norm(cfg, rules, p.ln_in, router_in)
    x = jax.sharding.reshard(x, rules.spec("tokens", "embed"))
    ids, weights, aux = route(cfg, rules, p.router, x if dense is None else router_in, p.router_bias, p.b_router,
                              routes, p.router_scale, p.expert_scale)
    out, dropped = experts(cfg, rules, p, x, ids, weights)
    out = jax.sharding.reshard(out, rules.spec("stream", "embed"))
    if p.shared is not None:
        out = out + shared_expert(cfg, rules, p, x)
    if dense is not None:
        out = dense + norm(cfg, rules, p.ln_out, out)
    return out, {**aux, "dropped": dropped.astype(F32) / ids.size}


def every_expert(cfg: ModelConfig, rules: Rules, p: Moe, x: jax.Array, routes: Optional[jax.Array] = None
                 ) -> jax.Array:
    """What `moe` computes, the plain way: every expert on every token (E / k times the active
    FLOPs), each output weighted by the token's routing weight for that expert (zero off its top
    k). The reference the dispatch modes are tested against (tests/test_moe.py) and timed
    against (benchmarks/moe.py); one device."""
    if p.dense is not None:
        raise ValueError("every_expert: model.moe.dense_mlp's unit needs the residual stream; use `moe`")
    ids, weights, _ = route(cfg, rules, p.router, x, p.router_bias, p.b_router, routes, p.router_scale,
                            p.expert_scale)
    chosen = jax.nn.one_hot(ids, cfg.moe.num_experts)
    gate = jax.sharding.reshard(jnp.sum(chosen * weights[..., None], axis=1), P())  # [T, E]
    inputs = 1.0  # (moe.weight_input: each expert's input weighted, its output counted once where chosen)
    if cfg.moe.weight_input:
        inputs, gate = gate.T[..., None], jax.sharding.reshard(jnp.sum(chosen, axis=1), P())
    h = inputs * jnp.einsum("td,edf->etf", x, p.w_up) + (0 if p.b_up is None else p.b_up[:, None])
    g = None if p.w_gate is None else inputs * jnp.einsum("td,edf->etf", x, p.w_gate) + (
        0 if p.b_gate is None else p.b_gate[:, None])
    out = jnp.einsum("etf,efd,te->td", activation(cfg, h, g), p.w_down, gate)
    if p.b_down is not None:
        out = out + gate @ p.b_down
    return out if p.shared is None else out + shared_expert(cfg, rules, p, x)


def shared_expert(cfg: ModelConfig, rules: Rules, p: Moe, x: jax.Array) -> jax.Array:
    """The shared experts' output [stream, embed] of x [tokens, embed]: their MLP, times
    sigmoid(x shared_gate) per token with moe.shared_gate."""
    out = mlp(cfg, rules, p.shared, x)[0]
    if p.shared_gate is None:
        return out
    w = rules.gather(p.shared_gate.astype(F32), ("embed",))
    gate = jax.nn.sigmoid(jnp.einsum("td,d->t", x.astype(F32), w, out_sharding=rules.spec("stream")))
    return (gate[:, None] * out.astype(F32)).astype(out.dtype)


def hash_info(cfg: ModelConfig) -> Optional[ParamInfo]:
    """The hash-routed layers' table [moe.hash_layers, vocab, top_k] (expert ids stored as numbers
    in the parameters' dtype; its gradient is zero, it has no decay: it stays as set), or None."""
    H = cfg.moe.hash_layers if cfg.moe.num_experts else 0
    if not H:
        return None
    return ParamInfo((H, cfg.vocab_size, cfg.moe.top_k), ("hash_layers", "hash_vocab", "hash_k"), "expert_hash",
                     modulus=cfg.moe.num_experts)


def expert_hash(shape: tuple, experts: int) -> jax.Array:
    """The table's initial value: token t's experts in hash layer l are (t k + l + j) mod E, j < k
    (k different experts; even loads over an even mix of ids; a checkpoint's table replaces it)."""
    H, V, k = shape
    l, t, j = jnp.meshgrid(jnp.arange(H), jnp.arange(V), jnp.arange(k), indexing="ij")
    return ((t * k + l + j) % experts).astype(jnp.float32)


def hash_routes(cfg: ModelConfig, rules: Rules, table: Optional[jax.Array], tokens: jax.Array) -> Optional[jax.Array]:
    """Each layer's routes of the flattened tokens [stream] (in the residual stream's order):
    [layers, stream, top_k] int32, the table's experts of each token in the first moe.hash_layers MoE
    layers and -1 (the router's top k) in the others; None without a table."""
    if table is None:
        return None
    kinds = moe_layers(cfg) if cfg.moe.num_experts else []
    nth = np.cumsum(kinds) - 1  # each layer's place among the MoE layers
    row = np.where(np.asarray(kinds, bool) & (nth < table.shape[0]), nth, -1)  # [layers]: its table row or -1
    whole = jax.sharding.reshard(jnp.round(table.astype(F32)).astype(jnp.int32), P())
    spec = rules.spec(None, "stream", None)
    picked = whole[np.maximum(row, 0)].at[:, tokens].get(out_sharding=spec)  # [layers, stream, k]
    return jnp.where(jnp.asarray(row >= 0)[:, None, None], picked, -1)


def moe_losses(cfg: ModelConfig) -> dict:
    """The auxiliary losses with a weight (a zero weight: logged, not trained on)."""
    weights = {"load_balance": cfg.moe.load_balance_loss, "router_z": cfg.moe.router_z_loss}
    return {name: w for name, w in weights.items() if w}


def between_steps(cfg: ModelConfig, old: Moe, new: Moe, aux: dict) -> Moe:
    """The stacked MoE parameters after a step's optimizer update (`new`), with the balancing
    bias moved from its value before the step (`old`; the optimizer never changes it): by
    moe.bias_update_rate x sign(1/E - f_e), f_e from the step's aux outputs ([layers, E])."""
    if new.router_bias is None:
        return new
    step = cfg.moe.bias_update_rate * jnp.sign(1.0 / cfg.moe.num_experts - aux["expert_share"])
    return new._replace(router_bias=(old.router_bias.astype(F32) + step).astype(old.router_bias.dtype))


def moe_stats(cfg: ModelConfig, rules: Rules, p: Moe, x: jax.Array) -> dict:
    """Nothing beyond the routing's own outputs (`moe` reports them on every pass)."""
    return {}


# ----------------------------------------------------------------------------- configuration checks


def config_errors(m) -> List[str]:
    """model.moe.*: checked only for an MoE model (num_experts > 0)."""
    e = m.moe
    if e.num_experts < 0:
        return [f"model.moe.num_experts={e.num_experts} must be >= 0 (0 = the dense MLP)"]
    if not e.num_experts:  # (the units only an MoE layer has: set without one, nothing would read them)
        unread = [f"model.moe.{name}={str(getattr(e, name)).lower()}" for name in ("hash_layers", "dense_mlp",
                                                                                  "router_scales") if getattr(e, name)]
        return [f"{', '.join(unread)} set without experts (model.moe.num_experts=0); set model.moe.num_experts > 0 "
                "(Gemma 4 26B-A4B: 128; DeepSeek-V4: 256) or leave them at 0 / false"] if unread else []
    errs: List[str] = []
    if not 1 <= e.top_k <= e.num_experts:
        errs.append(f"model.moe.top_k={e.top_k} must be between 1 and model.moe.num_experts={e.num_experts} (each "
                    "token goes to top_k different experts)")
    elif e.groups < 1 or e.num_experts % e.groups or not 1 <= e.top_groups <= e.groups:
        errs.append(f"model.moe.groups={e.groups} must divide model.moe.num_experts={e.num_experts}, and "
                    f"model.moe.top_groups={e.top_groups} be between 1 and groups (DeepSeek-V3: 8 groups, 4 chosen)")
    elif e.top_groups * (e.num_experts // e.groups) < e.top_k:
        errs.append(f"model.moe.top_groups={e.top_groups} groups of {e.num_experts // e.groups} experts cannot hold "
                    f"model.moe.top_k={e.top_k} experts; choose more top_groups or fewer groups")
    if e.mlp_factor is not None:
        positive(errs, "model.moe.mlp_factor", e.mlp_factor)
        whole_width(errs, "model.moe.mlp_factor", e.mlp_factor, m.d_model, "expert")
    if e.interleave_step < 1:
        errs.append(f"model.moe.interleave_step={e.interleave_step} must be >= 1 (1 = every layer after "
                    "model.moe.first_dense_layers is MoE)")
    elif not 0 <= e.first_dense_layers < m.num_layers or (m.num_layers - e.first_dense_layers) % e.interleave_step:
        errs.append(f"model.moe.first_dense_layers={e.first_dense_layers} and model.moe.interleave_step="
                    f"{e.interleave_step} must leave model.num_layers={m.num_layers} minus the first a positive "
                    "multiple of the step (the layers after the dense ones run as groups of step - 1 dense + 1 MoE)")
    if e.shared_experts < 0:
        errs.append(f"model.moe.shared_experts={e.shared_experts} must be >= 0 (0 = none)")
    elif e.shared_gate and not e.shared_experts:
        errs.append("model.moe.shared_gate=true gates the shared experts' output: set model.moe.shared_experts >= 1 "
                    "(Qwen3-Next: 1), or shared_gate=false")
    if e.dispatch == MoeDispatch.capacity and (e.capacity_factor is None or not e.capacity_factor > 0):
        errs.append(f"model.moe.dispatch=capacity needs model.moe.capacity_factor > 0 (got {e.capacity_factor}), "
                    "e.g. 1.25: each expert then takes 1.25x its even share of the tokens")
    elif e.dispatch != MoeDispatch.capacity and e.capacity_factor is not None:  # (read by capacity mode alone)
        errs.append(f"model.moe.capacity_factor={e.capacity_factor} sizes capacity mode's slots; with "
                    f"model.moe.dispatch={e.dispatch.value} nothing reads it: set dispatch=capacity or leave "
                    "capacity_factor null")
    if e.dispatch == MoeDispatch.capacity and e.grouped.value != "auto":  # (dropless's product alone)
        errs.append(f"model.moe.grouped={e.grouped.value} is the dropless dispatch's grouped product; with "
                    "model.moe.dispatch=capacity nothing reads it: leave it at auto")
    for name in ("load_balance_loss", "router_z_loss", "bias_update_rate"):
        if getattr(e, name) < 0:
            errs.append(f"model.moe.{name}={getattr(e, name)} must be >= 0 (0 = off)")
    if e.hash_layers < 0 or e.hash_layers > sum(moe_layers(m)):
        errs.append(f"model.moe.hash_layers={e.hash_layers} must be between 0 and the model's {sum(moe_layers(m))} MoE "
                    "layers (the first ones route by the token's id; DeepSeek-V4: 3)")
    elif e.hash_layers and m.param_dtype.value != "float32" and e.num_experts > 256:
        errs.append(f"model.moe.hash_layers={e.hash_layers} with model.param_dtype={m.param_dtype.value} and "
                    f"{e.num_experts} experts: the table's expert ids are stored in the parameters' dtype, exact up to "
                    "256 in bfloat16; set model.param_dtype=float32")
    if not e.route_scale > 0:
        errs.append(f"model.moe.route_scale={e.route_scale} must be > 0 (1 = the router's weights as they are)")
    if e.dense_mlp and (e.first_dense_layers or e.interleave_step != 1 or not m.pre_norms):
        errs.append("model.moe.dense_mlp=true runs a dense MLP beside the experts in every layer on the block's MLP "
                    "norm: set model.moe.first_dense_layers=0, interleave_step=1 and model.pre_norms=true (now "
                    f"{e.first_dense_layers}, {e.interleave_step}, {m.pre_norms})")
    errs += grouped_errors(m)
    return errs
