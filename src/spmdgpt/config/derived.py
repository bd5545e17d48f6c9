"""Values computed from a config's fields (widths, windows, the RoPE scalings' parameters, mesh
shapes, the logical axes' sizes). A leaf module beside the schema: it imports nothing from
spmdgpt but the schema and its choices."""

from __future__ import annotations

import dataclasses
import math
from typing import Dict

from spmdgpt.config.choices import MlpType
from spmdgpt.config.schema import ModelConfig


def head_dim(m: ModelConfig) -> int:
    """The width of each attention head: model.head_dim, default d_model / num_heads."""
    return m.d_model // max(m.num_heads, 1) if m.head_dim is None else m.head_dim


# the parameters of model.rope_scaling, by the scalings that read them
ROPE_SCALING_FIELDS = {"linear": ("rope_factor",),
                       "llama3": ("rope_factor", "rope_original_max_len", "rope_low_freq_factor",
                                  "rope_high_freq_factor"),
                       "yarn": ("rope_factor", "rope_original_max_len", "rope_beta_fast", "rope_beta_slow",
                                "rope_attention_factor", "rope_mscale", "rope_mscale_all_dim", "rope_truncate")}
ROPE_SCALING_PARAMS = tuple(dict.fromkeys(n for names in ROPE_SCALING_FIELDS.values() for n in names))  # (all of them)
# their values when no scaling reads them (ModelConfig's defaults)
ROPE_SCALING_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name in ROPE_SCALING_PARAMS}


def mesh_axes_of(value) -> tuple:
    """The mesh axes of a rule table's value: none (None), one name, or a list of names."""
    if value is None:
        return ()
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def layer_windows(m: ModelConfig) -> tuple:
    """Each layer's window, from model.window_pattern (repeated over the layers): in its L layers
    model.sliding_window, or minus model.attention_chunk (a chunk, as a negative window, so that
    every path that carries a layer's window carries it: `kernels.window_mask`); 0 in its G layers
    (global attention), and in every layer of a model with neither."""
    local = m.sliding_window if m.sliding_window > 0 else -max(m.attention_chunk, 0)
    if not local or not m.window_pattern:
        return (0,) * m.num_layers
    return tuple(local if m.window_pattern[i % len(m.window_pattern)] == "L" else 0 for i in range(m.num_layers))


def compress_kinds(m: ModelConfig) -> tuple:
    """Each layer's kind of DeepSeek-V4 attention, from model.csa.pattern repeated over the layers: "S"
    (the sliding branch alone), "C" (compressed sparse attention) or "H" (heavily compressed); every
    layer "S" without model.csa (q_rank 0)."""
    pattern = m.csa.pattern if m.csa.q_rank else "S"
    return tuple(pattern[i % len(pattern)] if pattern else "S" for i in range(m.num_layers))


def indexer_warmup(m: ModelConfig) -> bool:
    """Whether training is the lightning indexer's dense warm-up (model.mla.index_train=dense with DeepSeek Sparse
    Attention, or model.csa.index_train=dense with DeepSeek-V4's C layers): the indexer alone learns, by its KL
    loss; every other parameter, and the state set between steps (MoE's balancing bias), stays as it is."""
    return bool((m.mla.kv_rank and m.mla.index_heads and m.mla.index_train == "dense")
                or (m.csa.q_rank and "C" in compress_kinds(m) and m.csa.index_train == "dense"))


def global_stack(m: ModelConfig) -> bool:
    """Whether the G layers' attention has a geometry of its own (model.global_head_dim, global_kv_heads
    other than the model's, or global_k_eq_v): they are then a parameter stack of their own ("blocks"),
    the L layers another ("local_blocks"), run as groups of len(window_pattern) - 1 local layers and one
    global (Gemma 4)."""
    return bool(m.global_k_eq_v or (m.global_head_dim is not None and m.global_head_dim != head_dim(m))
                or (m.global_kv_heads is not None and m.global_kv_heads != kv_heads(m)))


def local_layers(m: ModelConfig) -> tuple:
    """Which layers are in the local stack of a model with a global one (`global_stack`; True: an
    L layer of model.window_pattern); none without it."""
    if not global_stack(m) or not m.window_pattern:
        return (False,) * m.num_layers
    return tuple(m.window_pattern[i % len(m.window_pattern)] == "L" for i in range(m.num_layers))


def kv_shared(m: ModelConfig) -> tuple:
    """Which layers read an earlier layer's keys and values (True: the last model.kv_shared_layers)."""
    return tuple(i >= m.num_layers - m.kv_shared_layers for i in range(m.num_layers))


def stack_config(m: ModelConfig, stack: str) -> ModelConfig:
    """The model config as the layers of parameter stack `stack` see it: with a global stack
    (`global_stack`), the G layers ("blocks") with model.head_dim and num_kv_heads their own
    (global_head_dim, global_kv_heads) and values from keys where global_k_eq_v says so; the L
    layers ("local_blocks") without global_k_eq_v. The layers that read an earlier layer's keys and
    values ("shared_blocks", "shared_local_blocks": model.kv_shared_layers) as their kind's, their MLP
    twice as wide with model.kv_shared_wide_mlp. An MoE model's two stacks ("blocks", "dense_blocks")
    with DeepSeek-V4's attention: model.csa.pattern spelt out over the stack's own layers (a stack of one
    kind of layer has no other kind's compressors and picks none by layer). Otherwise m itself."""
    if stack.startswith("shared_"):
        m = stack_config(m, stack[len("shared_"):])
        return dataclasses.replace(m, mlp_factor=2 * m.mlp_factor, kv_shared_wide_mlp=False) \
            if m.kv_shared_wide_mlp else m
    moe = moe_layers(m)
    if m.csa.q_rank and stack in ("blocks", "dense_blocks") and any(moe) and not all(moe):
        mine = [k for k, e in zip(compress_kinds(m), moe, strict=True) if e == (stack == "blocks")]
        m = dataclasses.replace(m, csa=dataclasses.replace(m.csa, pattern="".join(mine)))
    if not global_stack(m):
        return m
    plain = dict(global_head_dim=None, global_kv_heads=None)
    if stack == "blocks":
        return dataclasses.replace(m, head_dim=m.global_head_dim or head_dim(m),
                                   num_kv_heads=m.global_kv_heads or kv_heads(m), **plain)
    return dataclasses.replace(m, global_k_eq_v=False, **plain)


def moe_layers(m: ModelConfig) -> tuple:
    """Which layers have the mixture-of-experts MLP (True) and which the dense one: after
    model.moe.first_dense_layers dense ones, every model.moe.interleave_step-th layer (the
    last of each group of interleave_step); none in a dense model."""
    e = m.moe
    if not e.num_experts:
        return (False,) * m.num_layers
    return moe_layer_pattern(m.num_layers, e.first_dense_layers, e.interleave_step)


def moe_layer_pattern(layers: int, first_dense: int, step: int) -> tuple:
    """(`moe_layers`) Of `layers` layers, the MoE ones: after first_dense dense layers, the last
    of each group of `step`."""
    step = max(step, 1)
    return tuple(i >= first_dense and (i - first_dense + 1) % step == 0 for i in range(layers))


def rotary_dims(m: ModelConfig, h: int) -> int:
    """The dimensions RoPE rotates in a head of width h: h x model.rope_fraction, rounded down to an
    even number (transformers: int(head_dim x partial_rotary_factor))."""
    return h if m.rope_fraction >= 1.0 else int(h * m.rope_fraction) // 2 * 2


def linear_layers(m: ModelConfig) -> tuple:
    """Which layers are Gated DeltaNet layers (True) and which softmax attention: in every group of
    model.deltanet.full_attention_interval layers all but the last, and in a last group of num_layers mod
    k layers too (Kimi-Linear-48B-A3B's 27 layers: 6 groups of 4, then 2 + 1); none when it is 0."""
    k, n = m.deltanet.full_attention_interval, m.num_layers
    return tuple(bool(k) and (i + 1) % k != 0 and i != n - 1 for i in range(n))


def deltanet_dims(m: ModelConfig) -> tuple:
    """Gated DeltaNet's widths (model.deltanet): (key heads, value heads, key width, value width)."""
    d = m.deltanet
    return (d.key_heads, d.value_heads or d.key_heads, d.key_dim, d.value_dim or d.key_dim)


def gated(m: ModelConfig) -> bool:
    """Whether model.mlp has a gate projection (SwiGLU, GeGLU)."""
    return m.mlp in (MlpType.swiglu, MlpType.geglu, MlpType.swiglu_clamped, MlpType.swiglu_clip)


def mla_dims(m: ModelConfig) -> tuple:
    """Multi-head latent attention's widths (model.mla): (kv latent R, query latent (0: none),
    unrotated q/k dimensions per head, RoPE dimensions, value dimensions per head)."""
    a, h = m.mla, head_dim(m)
    return (a.kv_rank, a.q_rank, h if a.nope_dim is None else a.nope_dim, a.rope_dim, h if a.v_dim is None else a.v_dim)


def attention_widths(m: ModelConfig) -> tuple:
    """(each head's query/key width, its value width): head_dim twice, or MLA's nope + rope and v."""
    if m.mla.kv_rank:
        _, _, nope, rope, v = mla_dims(m)
        return nope + rope, v
    return head_dim(m), head_dim(m)


def kv_heads(m: ModelConfig) -> int:
    """Key/value heads: model.num_kv_heads, default num_heads (multi-head attention)."""
    return m.num_heads if m.num_kv_heads is None else m.num_kv_heads


def mlp_hidden(m: ModelConfig) -> int:
    return int(round(m.mlp_factor * m.d_model))


def expert_hidden(m: ModelConfig) -> int:
    """Each expert's MLP width (model.moe.mlp_factor, default model.mlp_factor, times d_model)."""
    factor = m.mlp_factor if m.moe.mlp_factor is None else m.moe.mlp_factor
    return int(round(factor * m.d_model))


def mesh_axes(mesh) -> tuple:
    """The mesh axis names of a MeshConfig (instance or class), in mesh order."""
    return tuple(f.name for f in dataclasses.fields(mesh))


def mesh_sizes(mesh) -> Dict[str, int]:
    """{axis: size as configured} (-1 where the axis takes the remaining devices)."""
    return {a: getattr(mesh, a) for a in mesh_axes(mesh)}


def resolve_mesh_shape(mesh, num_devices: int) -> Dict[str, int]:
    """{axis: size} with -1 filled in from the device count. Assumes validate() passed."""
    sizes = mesh_sizes(mesh)
    fixed = math.prod(v for v in sizes.values() if v > 0)
    return {a: (num_devices // fixed if v == -1 else v) for a, v in sizes.items()}


def logical_dim_sizes(cfg: ModelConfig) -> dict:
    """Logical axis -> [(config field that sets it, size), ...] (an MoE model with dense layers
    has two MLP widths): for divisibility checks."""
    kinds = moe_layers(cfg)
    mlp = [("model.moe.mlp_factor*model.d_model", expert_hidden(cfg))] if any(kinds) else []
    qk, v = attention_widths(cfg)
    mla_widths = [("model.mla.nope_dim+model.mla.rope_dim", qk), ("model.mla.v_dim", v)]
    if not all(kinds):
        mlp.append(("model.mlp_factor*model.d_model", mlp_hidden(cfg)))
    return {
        "embed": [("model.d_model", cfg.d_model)],
        "heads": [("model.num_heads", cfg.num_heads)] + ([
            ("model.deltanet.key_heads", deltanet_dims(cfg)[0]), ("model.deltanet.value_heads", deltanet_dims(cfg)[1])]
            if any(linear_layers(cfg)) else []),
        "kv_heads": [("model.num_kv_heads", kv_heads(cfg))],
        "head_dim": mla_widths if cfg.mla.kv_rank else [("model.head_dim", head_dim(cfg))],
        "per_layer": [("model.per_layer_dim", cfg.per_layer_dim)] if cfg.per_layer_dim else [],
        "latent": [(f"model.mla.{name}", getattr(cfg.mla, name)) for name in ("kv_rank", "q_rank")
                   if cfg.mla.kv_rank and getattr(cfg.mla, name)],
        "mlp": mlp,
        "experts": [("model.moe.num_experts", cfg.moe.num_experts)],
        "vocab": [("model.vocab_size", cfg.vocab_size)],
        "layers": [("model.num_layers", cfg.num_layers)],
    }


def seq_axes(s) -> list:
    """The mesh axes each sequence is split over (context parallelism) under rule table s."""
    return [a for a in mesh_axes_of(s.compute.get("seq")) if a not in mesh_axes_of(s.compute.get("batch"))]
