"""The Hugging Face architectures a spmdgpt model can be: one declarative table each.

A table says, for one `transformers` class, everything export and import need:

- `tensors`: every Hugging Face tensor, its name ("{i}" is the layer), the spmdgpt leaf it holds
  and the einops layout from one layer of that leaf to it ("d c n h -> c (n h) d": axes
  d = d_model, c = q/k/v, n = heads, k = key/value heads, kv = key/value, h = head_dim,
  f = MLP width, v = vocabulary, e = experts, m = each expert's width). Several names split
  the Hugging Face side's first axis among them (Llama's q/k/v projections of the fused w_qkv),
  and so does a name with "{j}", once per expert (Mixtral's experts.{j}.w1 of the stacked
  [E, D, F] w_gate). A tensor whose leaf this model does not
  have is absent, or, with `fill`, stored as that constant (and required to be it on import):
  GPT-NeoX always has LayerNorm and MLP biases, Qwen3 always has QK-norm scales. Rows of leaves
  that exclude each other (w_qkv, or w_q and w_kv under grouped-query attention) may share names.
  A stacked leaf ("blocks.mlp.w_up") is read in the stack that holds each layer: `blocks`, or an
  MoE model's `dense_blocks` for its dense layers, a hybrid's `linear_blocks` for its Gated DeltaNet
  layers; `layers="dense"` / `"moe"` (`"linear"` / `"full"`) keeps a row to one kind of layer
  (Qwen3-MoE's dense MLP and its experts both name the mlp leaves; Qwen3.5's two attentions).
  Several leaves may share one tensor (`within`: the rows each fills, on `within_axis`).
- `fields`: every `model.*` field that changes what the model computes, and the config.json key
  that carries it; `refused`: fields this architecture cannot represent, with the one value it
  can. A field that is in neither (nor in `TRAINING_ONLY`) is an error on export: a new model
  field can never export silently to a folder that computes something else (nor can a parameter
  leaf that no row names). `picks`: the field values that make export choose this table over the
  plain one of its norm and MLP kinds.

Facts the tables rest on (read from transformers 5.23's modeling code, and true of 4.x):
- RoPE: all rotate the pairs (x[i], x[i + h/2]) of each head (`rotate_half`), with inverse
  frequencies theta^(-2i/h): spmdgpt's `layers.rope` pairing, so q/k rows need no permutation.
- Linear weights are [out, in] (spmdgpt's are [in, out]). Llama's q/k/v_proj rows are
  (head, head_dim), k/v_proj with num_key_value_heads heads, query head i reading key/value head
  i // (heads / kv heads) (`repeat_kv`); GPT-NeoX's fused `query_key_value` rows are interleaved
  per head: q, k, v of head 0, then of head 1, ... (the output is viewed as [.., heads,
  3 * head_dim] and chunked).
- GPT-NeoX always has biases in its MLP and LayerNorms (`attention_bias` governs only the
  attention's). Llama has `attention_bias` (q, k, v, o) and `mlp_bias` (gate, up, down);
  spmdgpt has no gate bias, so a biased model stores zeros there. Qwen2 has biases on q, k and
  v always, on nothing else; Qwen3 has `attention_bias` (q, k, v, o), no MLP bias, and q_norm /
  k_norm: RMSNorm (eps rms_norm_eps, a [head_dim] weight) of each head's queries and keys, before
  RoPE. Mistral is Llama without biases, with `sliding_window` in every layer; Qwen2/3 mark the
  sliding layers in `layer_types` (when `use_sliding_window`). A window of W: key j is visible
  from query i when i - W < j <= i (masking_utils' `sliding_window_overlay`).
- Mixtral and Qwen3-MoE route as `moe.router=softmax`: softmax over the experts in float32,
  top-k of the probabilities, the k renormalised (Mixtral always, Qwen3-MoE with
  norm_topk_prob); their experts are SwiGLU MLPs without biases, gate_proj/w1, up_proj/w3,
  down_proj/w2 ([out, in] each, one per expert on the Hub: transformers 5 fuses them in memory
  and splits them again on save), the router `gate.weight` [E, D]. Mixtral has a sliding
  window in every layer when `sliding_window` is set (as Mistral). Qwen3-MoE's layer i is MoE
  when i is not in `mlp_only_layers` and (i + 1) % `decoder_sparse_step` == 0; its other layers
  have a dense SwiGLU MLP `intermediate_size` wide (mlp.gate_proj/up_proj/down_proj).
- The unembedding is `lm_head.weight` (Llama) / `embed_out.weight` (GPT-NeoX's name on the
  Hub, which transformers 5 renames to lm_head on load; import takes either); tied models omit it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np

from spmdgpt.config import (
    ROPE_SCALING_DEFAULTS,
    ROPE_SCALING_PARAMS,
    CsaConfig,
    DeltaNetConfig,
    MlaConfig,
    MlpType,
    ModelConfig,
    MoeConfig,
    NormType,
    RopeScaling,
    Router,
    deltanet_dims,
    expert_hidden,
    head_dim,
    kv_heads,
    layer_windows,
    mla_dims,
)

# model fields that change how a model is trained or run, never the function it computes
# (init_std too: Hugging Face's config.json records it as initializer_range, the page's does not; the
# multi-token prediction modules: trained beside the model, never run by inference, left out of exports).
# A nested section's fields are named "moe.top_k". moe.dispatch: capacity mode drops token copies
# only past an expert's capacity in a batch; an export computes dropless, as every Hugging Face
# MoE class does (and the auxiliary losses' weights are recorded, as router_aux_loss_coef).
TRAINING_ONLY = ("attention", "context_attention", "collective_matmul", "pipeline_repeats", "pipeline_remat", "remat",
                 "scan_unroll", "attention_block", "param_dtype", "compute_dtype", "matmul_dtype", "fp8_scaling",
                 "fp8_history", "fp8_head", "logits_dtype", "z_loss", "zero_init_out", "dropout", "attention_dropout",
                 "loss_block", "init_std", "mtp_depth", "mtp_weight",
                 # (μP / CompleteP: their forward multipliers are folded into the exported weights)
                 "parametrization", "base_width", "base_depth", "base_head_dim", "depth_alpha",
                 "size",  # (model.size: the fields it sets are spelt out in the config)
                 "moe.dispatch", "moe.grouped", "moe.capacity_factor", "moe.load_balance_loss", "moe.router_z_loss",
                 "deltanet.chunk", "mla.index_train", "mla.index_kl", "csa.index_train",
                 "csa.index_kl")
# a dense model's moe.* fields (what a table without experts refuses: the defaults)
DENSE = {f"moe.{f.name}": f.default for f in dataclasses.fields(MoeConfig) if f"moe.{f.name}" not in TRAINING_ONLY}
# a model without multi-head latent attention: the mla.* defaults
NO_MLA = {f"mla.{f.name}": f.default for f in dataclasses.fields(MlaConfig) if f"mla.{f.name}" not in TRAINING_ONLY}
# MLA without DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3's, Kimi Linear's)
NO_INDEXER = {name: NO_MLA[name] for name in ("mla.index_heads", "mla.index_dim", "mla.index_topk")}
# a model without Gated DeltaNet layers: the deltanet.* defaults; nor Qwen3.5's gated softmax attention
# and partial RoPE
NO_DELTANET = {**{f"deltanet.{f.name}": f.default for f in dataclasses.fields(DeltaNetConfig)
                  if f"deltanet.{f.name}" not in TRAINING_ONLY}, "attention_gate": False, "rope_fraction": 1.0}
# a model without gpt-oss's attention sinks (and its clamped SwiGLU's constants at their defaults: what another
# MLP kind reads, `convert.canonical`)
NO_SINKS = {"attention_sinks": False, "glu_limit": 7.0, "glu_alpha": 1.702}
# a model with pre-norms and per-head QK-norms (not OLMo's)
NO_OLMO = {"pre_norms": True, "qk_norm_whole": False}
# a model whose norms have scales, none on the embedding (not nanochat's)
NO_NANOCHAT = {"norm_scale": True, "embed_norm": False}
# a model without Llama 4's attention: no chunks, RoPE and the QK-norm in every layer, no attention temperature
NO_LLAMA4 = {"attention_chunk": 0, "global_nope": False, "attn_temperature": 0.0, "attn_temperature_floor": 8192}
# a model without Gemma 4's attention and layers: the G layers as the others, full RoPE, no value norm, no layer scale
NO_GEMMA4 = {"global_head_dim": None, "global_kv_heads": None, "global_k_eq_v": False, "rope_global_fraction": 1.0,
             "v_norm": False, "layer_scale": False, "per_layer_dim": 0, "kv_shared_layers": 0,
             "kv_shared_wide_mlp": False}
# a model without DeepSeek-V4's units: one residual stream (no hyper-connections), no hash-routed layers, not its
# attention
NO_DEEPSEEK_V4 = {"hyper_connections": 0, "hyper_sinkhorn_iters": 20, "hyper_eps": 1e-6, "moe.hash_layers": 0,
                  **{f"csa.{f.name}": f.default for f in dataclasses.fields(CsaConfig)
                     if f"csa.{f.name}" not in TRAINING_ONLY}}
# a model without Gemma's layer options: their defaults (Gemma 4's too)
NO_GEMMA = {"norm_plus_one": False, "post_norms": False, "embed_scale": False, "query_pre_attn_scalar": None,
            "rope_local_theta": None, **NO_GEMMA4}


@dataclasses.dataclass(frozen=True)
class Tensor:
    names: tuple  # Hugging Face names ("{i}": the layer, "{j}": the expert); several (or "{j}"): the
    # first HF axis split among them
    leaf: Optional[str]  # the spmdgpt parameter ("blocks.attn.w_qkv"); None: one spmdgpt never has
    layout: str  # einops, one layer: "spmdgpt axes -> Hugging Face axes" (leaf None: the HF axes)
    fill: Optional[float] = None  # stored as this constant when the model has no such leaf (else left
    # out), and required to be it on import: GPT-NeoX's LayerNorm biases (0), Qwen3's QK-norm scales (1)
    when: Optional[Callable[[ModelConfig], bool]] = None  # present only for these configs (a leaf that two rows
    # lay out differently: DeepSeek's q_proj or q_b_proj)
    layers: str = "every"  # "dense" | "moe" | "linear" | "full" | "local" | "global" | "own" | "shared" (model.
    # kv_shared_layers': the layers before them, theirs), "sparse" | "heavy" (DeepSeek-V4's C and H layers), "hash" |
    # "topk" (its hash-routed MoE layers, the others), or a tuple of them (every one's): a row of those layers only
    # (a dense model's layers are all dense; a hybrid's Gated DeltaNet layers are "linear", its softmax ones "full"; a
    # model with a global stack's local layers "local", its G layers "global", `config.global_stack`)
    order: Optional[Callable[[ModelConfig], "np.ndarray"]] = None  # the Hugging Face tensor's first axis holds
    # the rows of spmdgpt's layout in this order (DeepSeek's and Llama 4's interleaved RoPE pairs, `pair_rows`); of
    # a tensor that several names split: [names, rows], each name's rows (`convert.reorder`)
    within: Optional[Callable[[ModelConfig], tuple]] = None  # several leaves in one Hugging Face tensor: (the rows of
    # its first axis this leaf's layout fills, in order; that axis's length), each leaf a row of the table under the
    # same name (Qwen3.5's q_proj: each head's queries, then its output gate; in_proj_qkv: q and k, then v)
    within_axis: int = 0  # the axis `within`'s rows are on (gpt-oss's gate_up_proj: its last, gate and up interleaved)
    sign: Optional[Callable[[ModelConfig], "np.ndarray"]] = None  # +-1 multiplying the Hugging Face tensor (broadcast
    # against it; its own inverse, so import and export apply the same): nanochat's q and k rows, `_rope_flip`
    dtype: Optional[str] = None  # the Hugging Face tensor's dtype where it is not the parameters' (DeepSeek-V4's
    # tid2eid: int64 expert ids)

    @property
    def stacked(self) -> bool:
        """The spmdgpt leaf has a layer axis."""
        return self.leaf is not None and self.leaf.startswith("blocks.")

    @property
    def per_layer(self) -> bool:
        """One Hugging Face tensor (set) per layer (its names hold "{i}")."""
        return "{i}" in self.names[0]

    @property
    def split(self) -> bool:
        """The first axis of the Hugging Face side is split among several names (or experts)."""
        return len(self.names) > 1 or "{j}" in self.names[0]


@dataclasses.dataclass(frozen=True)
class Architecture:
    name: str  # the transformers class, config.json's "architectures"
    model_type: str
    norm: Optional[NormType]  # (None: any; the web page's table)
    mlp: Optional[MlpType]
    tensors: tuple
    fields: dict  # model field ("moe.top_k": a section's) -> the config.json key that carries it
    # (None: the tensors carry it)
    refused: dict  # model field -> the one value this architecture can represent
    aliases: dict = dataclasses.field(default_factory=dict)  # HF name -> another name import accepts ("{i}":
    # any layer's)
    requires: dict = dataclasses.field(default_factory=dict)  # model field -> (a test of its canonical value, what
    # it must be, in words): what the architecture needs beyond `refused`'s single values
    picks: dict = dataclasses.field(default_factory=dict)  # model field -> value (or a test of it):
    # export picks this table for a model with these values (and its norm and MLP kinds); the first
    # that fits wins
    check: Optional[Callable[[ModelConfig], list]] = None  # the one-line errors of what it cannot represent of a
    # model that no single field says (Gemma 4: the last layer global)


def _t(names, leaf, layout, **kw) -> Tensor:
    return Tensor((names,) if isinstance(names, str) else tuple(names), leaf, layout, **kw)


def _layer(prefix: str, tensors: list) -> list:
    return [dataclasses.replace(t, names=tuple(prefix + n for n in t.names)) for t in tensors]


COMMON_FIELDS = {"num_layers": "num_hidden_layers", "num_heads": "num_attention_heads", "d_model": "hidden_size",
                 "mlp_factor": "intermediate_size", "vocab_size": "vocab_size",
                 "max_seq_len": "max_position_embeddings", "tie_embeddings": "tie_word_embeddings",
                 "rope_theta": "rope_parameters", "bias": "attention_bias", "init_std": "initializer_range",
                 "norm": "architectures", "mlp": "architectures", "rope_scaling": "rope_parameters",
                 **{name: "rope_parameters" for name in ROPE_SCALING_PARAMS}}
# none of these architectures computes the first two; only Qwen3 has QK-norm (with its scales),
# only Qwen2 biases on q/k/v alone
REFUSED = {"logit_softcap": 0.0, "qk_norm": False, "qk_norm_scale": False, "qkv_bias": False,
           "sliding_window": 0, "window_pattern": "L", **DENSE, **NO_MLA, **NO_GEMMA, **NO_DELTANET, **NO_SINKS,
           **NO_OLMO, **NO_NANOCHAT, **NO_LLAMA4, **NO_DEEPSEEK_V4}
# sliding windows: every layer's (Mistral) or a per-layer pattern (Qwen's layer_types)
WINDOW_FIELDS = {"sliding_window": "sliding_window", "window_pattern": "layer_types"}

# The Llama family's decoder layer (Llama, Mistral, Qwen2, Qwen3): q/k/v projections from the
# fused w_qkv (as many key/value heads as heads) or from GroupedAttention's w_q and w_kv.
LLAMA_ATTENTION = [
    _t("input_layernorm.weight", "blocks.ln1.scale", "d -> d"),
    _t("post_attention_layernorm.weight", "blocks.ln2.scale", "d -> d"),
    _t([f"self_attn.{c}_proj.weight" for c in "qkv"], "blocks.attn.w_qkv", "d c n h -> c (n h) d"),
    _t([f"self_attn.{c}_proj.bias" for c in "qkv"], "blocks.attn.b_qkv", "c n h -> c (n h)"),
    _t("self_attn.q_proj.weight", "blocks.attn.w_q", "d n h -> (n h) d"),
    _t("self_attn.q_proj.bias", "blocks.attn.b_q", "n h -> (n h)"),
    _t([f"self_attn.{c}_proj.weight" for c in "kv"], "blocks.attn.w_kv", "d kv k h -> kv (k h) d"),
    _t([f"self_attn.{c}_proj.bias" for c in "kv"], "blocks.attn.b_kv", "kv k h -> kv (k h)"),
    _t("self_attn.o_proj.weight", "blocks.attn.w_o", "n h d -> d (n h)"),
    _t("self_attn.o_proj.bias", "blocks.attn.b_o", "d -> d"),
]
LLAMA_LAYER = LLAMA_ATTENTION + [
    _t("mlp.gate_proj.weight", "blocks.mlp.w_gate", "d f -> f d"),
    _t("mlp.gate_proj.bias", None, "f", when=lambda cfg: cfg.bias),  # mlp_bias: spmdgpt's gate has none
    _t("mlp.up_proj.weight", "blocks.mlp.w_up", "d f -> f d"),
    _t("mlp.up_proj.bias", "blocks.mlp.b_up", "f -> f"),
    _t("mlp.down_proj.weight", "blocks.mlp.w_down", "f d -> d f"),
    _t("mlp.down_proj.bias", "blocks.mlp.b_down", "d -> d"),
]
LLAMA_OUTER = [
    _t("model.embed_tokens.weight", "embed", "v d -> v d"),
    _t("model.norm.weight", "ln_f.scale", "d -> d"),
    _t("lm_head.weight", "unembed", "d v -> v d"),
]
GQA_FIELDS = {"num_kv_heads": "num_key_value_heads", "head_dim": "head_dim", "norm_eps": "rms_norm_eps"}
# the Llama family's fields for the classes without model.bias (Mistral, Qwen2, Qwen3)
UNBIASED_FIELDS = {k: v for k, v in {**COMMON_FIELDS, **GQA_FIELDS}.items() if k != "bias"}

LLAMA = Architecture(
    name="LlamaForCausalLM", model_type="llama", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", LLAMA_LAYER) + LLAMA_OUTER),
    fields={**COMMON_FIELDS, **GQA_FIELDS},
    refused=REFUSED,
)

# Qwen2 (Qwen2.5): Llama with biases on q, k and v only (always); sliding windows per layer
QWEN2 = Architecture(
    name="Qwen2ForCausalLM", model_type="qwen2", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=LLAMA.tensors,
    fields={**UNBIASED_FIELDS, **WINDOW_FIELDS},
    refused={k: v for k, v in {**REFUSED, "qkv_bias": True, "bias": False}.items() if k not in WINDOW_FIELDS},
    picks={"qkv_bias": True},
)

# Mistral: Llama's tensors, without biases, with a sliding window in every layer
MISTRAL = Architecture(
    name="MistralForCausalLM", model_type="mistral", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=LLAMA.tensors,
    fields={**UNBIASED_FIELDS, "sliding_window": "sliding_window"},
    refused={**{k: v for k, v in REFUSED.items() if k != "sliding_window"}, "bias": False},
    picks={"sliding_window": lambda w: w > 0},
)

QK_NORM = [
    _t("self_attn.q_norm.weight", "blocks.attn.q_norm", "h -> h", fill=1.0),
    _t("self_attn.k_norm.weight", "blocks.attn.k_norm", "h -> h", fill=1.0),
]

# Qwen3: Llama with a learned RMSNorm of each head's queries and keys (over head_dim, before
# RoPE); a model without learned scales exports them as ones
QWEN3 = Architecture(
    name="Qwen3ForCausalLM", model_type="qwen3", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", LLAMA_LAYER + QK_NORM) + LLAMA_OUTER),
    fields={**UNBIASED_FIELDS, **WINDOW_FIELDS, "qk_norm": "architectures", "qk_norm_scale": None},
    refused={"logit_softcap": 0.0, "qkv_bias": False, "bias": False, **DENSE, **NO_MLA, **NO_GEMMA, **NO_DELTANET,
             **NO_SINKS, **NO_OLMO, **NO_NANOCHAT, **NO_LLAMA4, **NO_DEEPSEEK_V4},
    picks={"qk_norm": True},
)


def _experts(prefix: str, gate: str, up: str, down: str) -> list:
    """An MoE layer's rows: the router `{prefix}gate.weight` and each expert's three matrices."""
    return [
        _t(f"{prefix}gate.weight", "blocks.mlp.router", "d e -> e d"),
        _t(f"{prefix}experts.{{j}}.{gate}.weight", "blocks.mlp.w_gate", "e d m -> e m d"),
        _t(f"{prefix}experts.{{j}}.{up}.weight", "blocks.mlp.w_up", "e d m -> e m d"),
        _t(f"{prefix}experts.{{j}}.{down}.weight", "blocks.mlp.w_down", "e m d -> e d m"),
    ]


# what Mixtral and Qwen3-MoE compute: softmax routing, no shared experts, no balancing bias, no groups, the weights on
# the experts' outputs
MOE_REFUSED = {"moe.shared_experts": 0, "moe.shared_gate": False, "moe.router": Router.softmax,
               "moe.bias_update_rate": 0.0, "moe.groups": 1,
               "moe.top_groups": 1, "moe.route_scale": 1.0, "moe.weight_input": False,
               "moe.hash_layers": 0, "moe.dense_mlp": False, "moe.router_scales": False}
GEMMA4_MOE_FIELDS = ("moe.dense_mlp", "moe.router_scales")  # (Gemma 4's, `GEMMA4`)
MOE_PICK = {"moe.num_experts": lambda e: e > 0}

# Mixtral: Mistral's attention (a window in every layer, or none), an MoE in every layer whose
# k weights always sum to one; intermediate_size is each expert's width
MIXTRAL = Architecture(
    name="MixtralForCausalLM", model_type="mixtral", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", LLAMA_ATTENTION + _experts("block_sparse_moe.", "w1", "w3", "w2"))
                  + LLAMA_OUTER),
    fields={**UNBIASED_FIELDS, "sliding_window": "sliding_window", "moe.num_experts": "num_local_experts",
            "moe.top_k": "num_experts_per_tok", "moe.mlp_factor": "intermediate_size"},
    refused={**{k: v for k, v in REFUSED.items() if k not in ("sliding_window", *DENSE)}, "bias": False,
             **MOE_REFUSED, "moe.normalize_top_k": True, "moe.first_dense_layers": 0, "moe.interleave_step": 1},
    picks=MOE_PICK,
)

# Qwen3-MoE: Qwen3's attention (QK-norm; no windows here), MoE layers of moe_intermediate_size-wide
# experts and dense layers of intermediate_size-wide MLPs (mlp_only_layers, decoder_sparse_step)
QWEN3_MOE = Architecture(
    name="Qwen3MoeForCausalLM", model_type="qwen3_moe", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", LLAMA_ATTENTION + QK_NORM
                         + [dataclasses.replace(t, layers="dense") for t in LLAMA_LAYER[len(LLAMA_ATTENTION):]
                            if t.leaf in ("blocks.mlp.w_gate", "blocks.mlp.w_up", "blocks.mlp.w_down")]
                         + [dataclasses.replace(t, layers="moe")
                            for t in _experts("mlp.", "gate_proj", "up_proj", "down_proj")]) + LLAMA_OUTER),
    fields={**UNBIASED_FIELDS, "qk_norm": "architectures", "qk_norm_scale": None, "moe.num_experts": "num_experts",
            "moe.top_k": "num_experts_per_tok", "moe.mlp_factor": "moe_intermediate_size",
            "moe.normalize_top_k": "norm_topk_prob", "moe.first_dense_layers": "mlp_only_layers",
            "moe.interleave_step": "decoder_sparse_step"},
    refused={"logit_softcap": 0.0, "qkv_bias": False, "bias": False, "sliding_window": 0, "window_pattern": "L",
             **MOE_REFUSED, **NO_MLA, **NO_GEMMA, **NO_DELTANET, **NO_SINKS, **NO_OLMO, **NO_NANOCHAT, **NO_LLAMA4,
             **NO_DEEPSEEK_V4},
    picks={**MOE_PICK, "qk_norm": True},
)

def rope_rows(cfg: ModelConfig, heads: int, width: int, start: int) -> np.ndarray:
    """DeepSeek's RoPE rows in the order its checkpoints hold them (rope_interleave): `pair_rows`
    of its rope_dim rotated dimensions."""
    return pair_rows(heads, width, start, mla_dims(cfg)[3])


def pair_rows(heads: int, width: int, start: int, r: int) -> np.ndarray:
    """RoPE rows as checkpoints that rotate interleaved pairs hold them (DeepSeek's, Llama 4's): in
    each of `heads` blocks of `width` rows, the r rotated dimensions from `start` come as pairs
    (x0, x1), (x2, x3), ... where spmdgpt's `layers.rope` pairs (x_i, x_{i + r/2}): Hugging Face's
    row 2i holds spmdgpt's rotated row i, its row 2i + 1 spmdgpt's row r/2 + i."""
    block = np.arange(width)
    block[start:start + r] = start + np.stack([np.arange(r // 2), r // 2 + np.arange(r // 2)], axis=1).reshape(-1)
    return (np.arange(heads)[:, None] * width + block[None]).reshape(-1)


def _query_rows(cfg: ModelConfig) -> np.ndarray:
    _, _, n, r, _ = mla_dims(cfg)
    return rope_rows(cfg, cfg.num_heads, n + r, n)


def _latent_rows(cfg: ModelConfig) -> np.ndarray:
    R, _, _, r, _ = mla_dims(cfg)
    return rope_rows(cfg, 1, R + r, R)


# DeepSeek-V3 (and the models on its architecture): multi-head latent attention (q_a/q_b or a full
# q_proj; kv_a_proj_with_mqa = the latent and the shared RoPE key; kv_b_proj = each head's unrotated
# key and value), the first first_k_dense_replace layers with a dense SwiGLU MLP, the others an MoE
# of sigmoid-routed experts (grouped, bias-corrected choice, routed_scaling_factor) beside shared ones
MLA_ATTENTION = [
    _t("input_layernorm.weight", "blocks.ln1.scale", "d -> d"),
    _t("post_attention_layernorm.weight", "blocks.ln2.scale", "d -> d"),
    _t("self_attn.q_a_proj.weight", "blocks.attn.w_dq", "d s -> s d"),
    _t("self_attn.q_a_layernorm.weight", "blocks.attn.q_latent_norm", "s -> s"),
    _t("self_attn.q_b_proj.weight", "blocks.attn.w_q", "s n q -> (n q) s", when=lambda cfg: cfg.mla.q_rank > 0,
       order=_query_rows),
    _t("self_attn.q_proj.weight", "blocks.attn.w_q", "d n q -> (n q) d", when=lambda cfg: not cfg.mla.q_rank,
       order=_query_rows),
    _t("self_attn.kv_a_proj_with_mqa.weight", "blocks.attn.w_dkv", "d p -> p d", order=_latent_rows),
    _t("self_attn.kv_a_layernorm.weight", "blocks.attn.kv_latent_norm", "l -> l"),
    _t("self_attn.kv_b_proj.weight", "blocks.attn.w_ukv", "l n u -> (n u) l"),
    _t("self_attn.o_proj.weight", "blocks.attn.w_o", "n o d -> d (n o)"),
]
DEEPSEEK_V3 = Architecture(
    name="DeepseekV3ForCausalLM", model_type="deepseek_v3", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", MLA_ATTENTION
                         + [dataclasses.replace(t, layers="dense") for t in LLAMA_LAYER[len(LLAMA_ATTENTION):]
                            if t.leaf in ("blocks.mlp.w_gate", "blocks.mlp.w_up", "blocks.mlp.w_down")]
                         + [dataclasses.replace(t, layers="moe")
                            for t in _experts("mlp.", "gate_proj", "up_proj", "down_proj") + [
                                _t("mlp.gate.e_score_correction_bias", "blocks.mlp.router_bias", "e -> e", fill=0.0),
                                _t("mlp.shared_experts.gate_proj.weight", "blocks.mlp.shared.w_gate", "d g -> g d"),
                                _t("mlp.shared_experts.up_proj.weight", "blocks.mlp.shared.w_up", "d g -> g d"),
                                _t("mlp.shared_experts.down_proj.weight", "blocks.mlp.shared.w_down", "g d -> d g")]])
                  + LLAMA_OUTER),
    fields={**{k: v for k, v in COMMON_FIELDS.items() if k != "bias"}, "norm_eps": "rms_norm_eps",
            "mla.kv_rank": "kv_lora_rank", "mla.q_rank": "q_lora_rank", "mla.rope_dim": "qk_rope_head_dim",
            "mla.nope_dim": "qk_nope_head_dim", "mla.v_dim": "v_head_dim", "moe.num_experts": "n_routed_experts",
            "moe.top_k": "num_experts_per_tok", "moe.mlp_factor": "moe_intermediate_size",
            "moe.shared_experts": "n_shared_experts", "moe.normalize_top_k": "norm_topk_prob",
            "moe.first_dense_layers": "first_k_dense_replace", "moe.groups": "n_group", "moe.top_groups": "topk_group",
            "moe.route_scale": "routed_scaling_factor", "moe.bias_update_rate": None},
    refused={"logit_softcap": 0.0, "qk_norm": False, "qk_norm_scale": False, "qkv_bias": False, "bias": False,
             "sliding_window": 0, "window_pattern": "L", "num_kv_heads": None, "head_dim": None,
             "moe.router": Router.sigmoid, "moe.interleave_step": 1, "moe.shared_gate": False,
             "moe.dense_mlp": False, "moe.router_scales": False, "moe.weight_input": False, **NO_GEMMA, **NO_INDEXER,
             **NO_DELTANET, **NO_SINKS, **NO_OLMO, **NO_NANOCHAT, **NO_LLAMA4, **NO_DEEPSEEK_V4},
    picks={"mla.kv_rank": lambda r: r > 0},
)

# DeepSeek-V3.2 (DeepseekV32ForCausalLM): DeepSeek-V3 with DeepSeek Sparse Attention's lightning indexer in every
# layer (`model.mla`: index_heads, index_dim, index_topk); its queries from the query latent (indexer.wq_b: always a
# q_lora_rank), its key and head weights from the layer's input (wk, weights_proj), the key LayerNorm-ed (k_norm,
# weight and bias); its RoPE rotates half-split pairs of the first qk_rope_head_dim dimensions (no row order), the
# main attention's interleaved ones as DeepSeek-V3's (always: no rope_interleave field)
INDEXER = [
    _t("self_attn.indexer.wq_b.weight", "blocks.attn.w_iq", "s ni i -> (ni i) s"),
    _t("self_attn.indexer.wk.weight", "blocks.attn.w_ik", "d i -> i d"),
    _t("self_attn.indexer.k_norm.weight", "blocks.attn.ik_scale", "i -> i"),
    _t("self_attn.indexer.k_norm.bias", "blocks.attn.ik_bias", "i -> i"),
    _t("self_attn.indexer.weights_proj.weight", "blocks.attn.w_iw", "d ni -> ni d"),
]
DEEPSEEK_V32 = Architecture(
    name="DeepseekV32ForCausalLM", model_type="deepseek_v32", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", INDEXER)) + DEEPSEEK_V3.tensors,
    fields={**DEEPSEEK_V3.fields, "mla.index_heads": "index_n_heads", "mla.index_dim": "index_head_dim",
            "mla.index_topk": "index_topk"},
    refused={k: v for k, v in DEEPSEEK_V3.refused.items() if k not in NO_INDEXER},
    requires={"mla.index_heads": (lambda h: h > 0, "the lightning indexer (model.mla.index_heads > 0)"),
              "mla.q_rank": (lambda q: q > 0, "a query latent (model.mla.q_rank > 0; q_lora_rank)"),
              "moe.num_experts": (lambda e: e > 0, "experts (model.moe.num_experts > 0)")},
    picks={"mla.index_heads": lambda h: h > 0},
)

# Gemma 3 (text): the Llama family's projections with QK-norm, sandwich norms (post_attention_layernorm
# is the attention output's norm here; pre/post_feedforward_layernorm the MLP's), every norm (1 + w),
# GeGLU with the tanh GELU, the embedding x sqrt(d), scores x query_pre_attn_scalar^-0.5, sliding
# and full layers (layer_types) with their own RoPE (rope_parameters per layer type)
GEMMA_NORMS = [
    _t("input_layernorm.weight", "blocks.ln1.scale", "d -> d"),
    _t("post_attention_layernorm.weight", "blocks.ln_post_attn.scale", "d -> d"),
    _t("pre_feedforward_layernorm.weight", "blocks.ln2.scale", "d -> d"),
    _t("post_feedforward_layernorm.weight", "blocks.ln_post_mlp.scale", "d -> d"),
]
GEMMA3 = Architecture(
    name="Gemma3ForCausalLM", model_type="gemma3_text", norm=NormType.rmsnorm, mlp=MlpType.geglu,
    tensors=tuple(_layer("model.layers.{i}.", [
        *GEMMA_NORMS,
        *LLAMA_ATTENTION[2:], *[dataclasses.replace(t, fill=0.0) for t in QK_NORM],  # (1 + 0: no learned scale)
        *LLAMA_LAYER[len(LLAMA_ATTENTION):]]) + LLAMA_OUTER),
    fields={**UNBIASED_FIELDS, **WINDOW_FIELDS, "qk_norm_scale": None,
            "query_pre_attn_scalar": "query_pre_attn_scalar", "rope_local_theta": "rope_parameters"},
    refused={"logit_softcap": 0.0, "qkv_bias": False, "bias": False, "qk_norm": True, "norm_plus_one": True,
             "post_norms": True, "embed_scale": True, **DENSE, **NO_MLA, **NO_DELTANET, **NO_SINKS, **NO_OLMO,
             **NO_NANOCHAT, **NO_LLAMA4, **NO_DEEPSEEK_V4, **NO_GEMMA4},
)

def _gemma4_check(cfg: ModelConfig) -> list:
    """What Gemma 4's config.json cannot say: its last layer is global (transformers makes it so), and the G
    layers' own key/value heads come with values from keys only (num_global_key_value_heads is read with
    attention_k_eq_v)."""
    errs = []
    if layer_windows(cfg)[-1]:
        errs.append(f"model.window_pattern={cfg.window_pattern}: Gemma4ForCausalLM's last layer is global "
                    "(full_attention; transformers makes it so), this model's is local; end the pattern with G")
    if not cfg.global_k_eq_v and cfg.global_kv_heads is not None and cfg.global_kv_heads != kv_heads(cfg):
        errs.append(f"model.global_kv_heads={cfg.global_kv_heads}: Gemma4ForCausalLM gives the G layers key/value "
                    "heads of their own only with values from keys; set model.global_k_eq_v=true or leave "
                    "global_kv_heads unset")
    moe = cfg.moe
    if bool(moe.num_experts) != moe.dense_mlp or bool(moe.num_experts) != moe.router_scales:
        errs.append(f"model.moe.num_experts={moe.num_experts}, dense_mlp={moe.dense_mlp}, router_scales="
                    f"{moe.router_scales}: Gemma4ForCausalLM's experts (enable_moe_block) come beside the dense MLP "
                    "with its router's scales; set all three (experts > 0, true, true) or none")
    return errs


# Gemma 4 (text; Gemma4ForCausalLM): Gemma 3's layers with plain norm scales (w, not 1 + w), scores unscaled
# (scaling 1: query_pre_attn_scalar=1), values RMS-normed without a scale (v_norm), a scalar per layer times the
# residual stream after it (layer_scalar, a buffer in the files), the global (full_attention) layers with a head
# width and key/value heads of their own (global_head_dim, num_global_key_value_heads; transformers 5.24 writes
# them as per_layer_config), their values the keys' projection (attention_k_eq_v: no v_proj) and proportional
# RoPE (rope_type proportional, partial_rotary_factor), soft-capped logits; with enable_moe_block (26B-A4B) experts
# beside the dense MLP in every layer (model.moe.dense_mlp: the dense MLP normed by post_feedforward_layernorm_1; the
# router (proj, its input scale, per_expert_scale: model.moe.router_scales) on the residual stream, the experts on
# pre_feedforward_layernorm_2 of it, their gate and up projections one [E, 2F, D] tensor, the gate's rows first,
# normed by post_feedforward_layernorm_2); E2B's and E4B's per-layer inputs (hidden_size_per_layer_input: model.
# per_layer_dim; embed_tokens_per_layer [V, L P] and per_layer_model_projection [L P, D] with its norm, each layer's
# per_layer_input_gate, per_layer_projection and post_per_layer_input_norm) and the last num_kv_shared_layers layers
# without keys and values of their own (model.kv_shared_layers: q_proj, q_norm and o_proj alone; their MLPs twice as
# wide with use_double_wide_mlp)
_KV_EQ = lambda cfg: cfg.global_k_eq_v  # noqa: E731
GEMMA4_MOE = [dataclasses.replace(t, layers="moe") for t in [
    _t("mlp.gate_proj.weight", "blocks.mlp.dense.w_gate", "d f -> f d"),
    _t("mlp.up_proj.weight", "blocks.mlp.dense.w_up", "d f -> f d"),
    _t("mlp.down_proj.weight", "blocks.mlp.dense.w_down", "f d -> d f"),
    _t("post_feedforward_layernorm_1.weight", "blocks.mlp.ln_dense.scale", "d -> d"),
    _t("pre_feedforward_layernorm_2.weight", "blocks.mlp.ln_in.scale", "d -> d"),
    _t("post_feedforward_layernorm_2.weight", "blocks.mlp.ln_out.scale", "d -> d"),
    _t("router.proj.weight", "blocks.mlp.router", "d e -> e d"),
    _t("router.scale", "blocks.mlp.router_scale", "d -> d"),
    _t("router.per_expert_scale", "blocks.mlp.expert_scale", "e -> e"),
    _t("experts.gate_up_proj", "blocks.mlp.w_gate", "e d m -> e m d", within=lambda cfg: _halves(0)(cfg),
       within_axis=1),
    _t("experts.gate_up_proj", "blocks.mlp.w_up", "e d m -> e m d", within=lambda cfg: _halves(1)(cfg),
       within_axis=1),
    _t("experts.down_proj", "blocks.mlp.w_down", "e m d -> e d m")]]
GEMMA4_PER_LAYER = [
    _t("per_layer_input_gate.weight", "blocks.per_layer.w_gate", "d pd -> pd d"),
    _t("per_layer_projection.weight", "blocks.per_layer.w_out", "pd d -> d pd"),
    _t("post_per_layer_input_norm.weight", "blocks.per_layer.norm.scale", "d -> d")]
GEMMA4 = Architecture(
    name="Gemma4ForCausalLM", model_type="gemma4_text", norm=NormType.rmsnorm, mlp=MlpType.geglu,
    tensors=tuple(_layer("model.layers.{i}.", [
        *GEMMA_NORMS,
        *[t for t in LLAMA_ATTENTION[2:] if t.leaf not in ("blocks.attn.w_kv", "blocks.attn.b_kv")],
        dataclasses.replace(LLAMA_ATTENTION[6], when=lambda cfg: not cfg.global_k_eq_v, layers="own"),
        dataclasses.replace(LLAMA_ATTENTION[6], when=_KV_EQ, layers=("local", "own")),
        _t("self_attn.k_proj.weight", "blocks.attn.w_kv", "d kv k h -> (kv k h) d", when=_KV_EQ,
           layers=("global", "own")),
        QK_NORM[0], dataclasses.replace(QK_NORM[1], layers="own"),  # (the KV-shared layers: no keys, no k_norm)
        _t("layer_scalar", "blocks.layer_scale", " -> ()", fill=1.0),
        *[dataclasses.replace(t, layers="dense") for t in LLAMA_LAYER[len(LLAMA_ATTENTION):]], *GEMMA4_MOE,
        *GEMMA4_PER_LAYER]) + LLAMA_OUTER + [
        _t("model.embed_tokens_per_layer.weight", "per_layer.embed", "v ly pd -> v (ly pd)"),
        _t("model.per_layer_model_projection.weight", "per_layer.proj", "d ly pd -> (ly pd) d"),
        _t("model.per_layer_projection_norm.weight", "per_layer.norm", "pd -> pd")]),
    fields={**{k: v for k, v in UNBIASED_FIELDS.items() if k not in ("rope_scaling", *ROPE_SCALING_PARAMS)},
            **WINDOW_FIELDS, "qk_norm_scale": None, "rope_local_theta": "rope_parameters",
            "logit_softcap": "final_logit_softcapping", "global_head_dim": "global_head_dim",
            "global_kv_heads": "num_global_key_value_heads", "global_k_eq_v": "attention_k_eq_v",
            "rope_global_fraction": "rope_parameters", "moe.num_experts": "num_experts", "moe.top_k": "top_k_experts",
            "moe.mlp_factor": "moe_intermediate_size", "moe.dense_mlp": "enable_moe_block",
            "moe.router_scales": "enable_moe_block", "per_layer_dim": "hidden_size_per_layer_input",
            "kv_shared_layers": "num_kv_shared_layers", "kv_shared_wide_mlp": "use_double_wide_mlp"},
    refused={"qkv_bias": False, "bias": False, "qk_norm": True, "norm_plus_one": False, "post_norms": True,
             "embed_scale": True, "query_pre_attn_scalar": 1, "v_norm": True, "layer_scale": True,
             "rope_scaling": RopeScaling.none, **{n: ROPE_SCALING_DEFAULTS[n] for n in ROPE_SCALING_PARAMS},
             **{k: v for k, v in MOE_REFUSED.items() if k not in GEMMA4_MOE_FIELDS}, "moe.normalize_top_k": True,
             "moe.first_dense_layers": 0, "moe.interleave_step": 1,
             **NO_MLA, **NO_DELTANET, **NO_SINKS, **NO_OLMO, **NO_NANOCHAT, **NO_LLAMA4, **NO_DEEPSEEK_V4},
    picks={"v_norm": True},
    check=_gemma4_check,
)

# OLMo 2 and 3: the Llama family's projections and SwiGLU without pre-norms (post_attention_layernorm and
# post_feedforward_layernorm norm each branch's output before the add), q_norm and k_norm RMSNorms of a token's
# whole query (key) projection (model.qk_norm_whole); OLMo 3 with sliding and full layers (layer_types) and their
# own RoPE (rope_parameters per layer type)
OLMO_LAYER = [
    _t("post_attention_layernorm.weight", "blocks.ln_post_attn.scale", "d -> d"),
    _t("post_feedforward_layernorm.weight", "blocks.ln_post_mlp.scale", "d -> d"),
    *LLAMA_ATTENTION[2:],
    _t("self_attn.q_norm.weight", "blocks.attn.q_norm", "n h -> (n h)"),
    _t("self_attn.k_norm.weight", "blocks.attn.k_norm", "k h -> (k h)"),
    *LLAMA_LAYER[len(LLAMA_ATTENTION):],
]
OLMO_REFUSED = {"logit_softcap": 0.0, "qkv_bias": False, "bias": False, "qk_norm": True, "qk_norm_scale": True,
                "qk_norm_whole": True, "post_norms": True, "pre_norms": False, "norm_plus_one": False,
                "embed_scale": False, "query_pre_attn_scalar": None, **DENSE, **NO_MLA, **NO_DELTANET, **NO_SINKS,
                **NO_NANOCHAT, **NO_LLAMA4, **NO_DEEPSEEK_V4, **NO_GEMMA4}
OLMO3 = Architecture(
    name="Olmo3ForCausalLM", model_type="olmo3", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", OLMO_LAYER) + LLAMA_OUTER),
    fields={**UNBIASED_FIELDS, **WINDOW_FIELDS, "rope_local_theta": "rope_parameters"},
    refused=OLMO_REFUSED,
    picks={"qk_norm_whole": True, "sliding_window": lambda w: w > 0},
)
OLMO2 = Architecture(
    name="Olmo2ForCausalLM", model_type="olmo2", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=OLMO3.tensors,
    fields=UNBIASED_FIELDS,
    refused={**OLMO_REFUSED, "sliding_window": 0, "window_pattern": "L", "rope_local_theta": None},
    picks={"qk_norm_whole": True},
)

def _projections(key: str, make) -> list:
    """The Llama family's q/k/v projection rows without biases (from w_qkv; w_q and w_kv) with `key`
    (Tensor.sign or Tensor.order) set to make(the parts each holds): a RoPE convention of another
    checkpoint's rows (nanochat's, Llama 4's)."""
    return [dataclasses.replace(LLAMA_ATTENTION[i], **{key: make(parts)}) for i, parts in ((2, "qkv"), (4, "q"),
                                                                                          (6, "kv"))]


def _rope_flip(parts: str):
    """The sign of each row of a q/k/v projection ("q", "kv", "qkv": its parts stacked on the first
    axis) that makes spmdgpt's RoPE compute nanochat's: nanochat rotates each pair (x_i, x_{i+h/2}) the
    other way (rotate_half gives (x2, -x1)), which is the usual rotation of the vector with its
    second half negated, negated back after (a sign the dot products of q and k, and an RMS norm,
    never see): so q's and k's second halves are stored negated, v's as they are."""
    def sign(cfg: ModelConfig) -> np.ndarray:
        h = head_dim(cfg)
        per_head = np.concatenate([np.ones(h // 2), -np.ones(h - h // 2)])
        rows = [np.tile(per_head if c in "qk" else np.ones(h), cfg.num_heads if c == "q" else kv_heads(cfg))
                for c in parts]
        return (np.stack(rows) if len(parts) > 1 else rows[0])[..., None]  # [(parts,) rows, 1]
    return sign


# nanochat (Karpathy's; transformers' NanoChatForCausalLM): the Llama family's projections without biases, RMSNorms
# without parameters (before each branch, at the end, and on the embedding), QK-norm without scales after RoPE (the
# same as before it: a rotation keeps a head's RMS) of the opposite rotation (`_rope_flip`), a squared-ReLU MLP
# (fc1, fc2), soft-capped logits, untied embeddings
NANOCHAT = Architecture(
    name="NanoChatForCausalLM", model_type="nanochat", norm=NormType.rmsnorm, mlp=MlpType.relu2,
    tensors=tuple(_layer("model.layers.{i}.", [
        *_projections("sign", _rope_flip),
        _t("self_attn.o_proj.weight", "blocks.attn.w_o", "n h d -> d (n h)"),
        _t("mlp.fc1.weight", "blocks.mlp.w_up", "d f -> f d"),
        _t("mlp.fc2.weight", "blocks.mlp.w_down", "f d -> d f"),
    ]) + [_t("model.embed_tokens.weight", "embed", "v d -> v d"), _t("lm_head.weight", "unembed", "d v -> v d")]),
    fields={**UNBIASED_FIELDS, "logit_softcap": "final_logit_softcapping"},
    refused={"qkv_bias": False, "bias": False, "qk_norm": True, "qk_norm_scale": False, "norm_scale": False,
             "embed_norm": True, "sliding_window": 0, "window_pattern": "L", **DENSE,
             **NO_MLA, **NO_GEMMA, **NO_DELTANET, **NO_SINKS, **NO_OLMO, **NO_LLAMA4, **NO_DEEPSEEK_V4},
    picks={"embed_norm": True},
)

NEOX = Architecture(
    name="GPTNeoXForCausalLM", model_type="gpt_neox", norm=NormType.layernorm, mlp=MlpType.gelu,
    tensors=tuple(_layer("gpt_neox.layers.{i}.", [
        _t("input_layernorm.weight", "blocks.ln1.scale", "d -> d"),
        _t("input_layernorm.bias", "blocks.ln1.bias", "d -> d", fill=0.0),
        _t("post_attention_layernorm.weight", "blocks.ln2.scale", "d -> d"),
        _t("post_attention_layernorm.bias", "blocks.ln2.bias", "d -> d", fill=0.0),
        _t("attention.query_key_value.weight", "blocks.attn.w_qkv", "d c n h -> (n c h) d"),
        _t("attention.query_key_value.bias", "blocks.attn.b_qkv", "c n h -> (n c h)"),
        _t("attention.dense.weight", "blocks.attn.w_o", "n h d -> d (n h)"),
        _t("attention.dense.bias", "blocks.attn.b_o", "d -> d"),
        _t("mlp.dense_h_to_4h.weight", "blocks.mlp.w_up", "d f -> f d"),
        _t("mlp.dense_h_to_4h.bias", "blocks.mlp.b_up", "f -> f", fill=0.0),
        _t("mlp.dense_4h_to_h.weight", "blocks.mlp.w_down", "f d -> d f"),
        _t("mlp.dense_4h_to_h.bias", "blocks.mlp.b_down", "d -> d", fill=0.0),
    ]) + [
        _t("gpt_neox.embed_in.weight", "embed", "v d -> v d"),
        _t("gpt_neox.final_layer_norm.weight", "ln_f.scale", "d -> d"),
        _t("gpt_neox.final_layer_norm.bias", "ln_f.bias", "d -> d", fill=0.0),
        _t("embed_out.weight", "unembed", "d v -> v d"),
    ]),
    fields={**COMMON_FIELDS, "norm_eps": "layer_norm_eps"},
    refused={**REFUSED, "num_kv_heads": None, "head_dim": None},  # (GPT-NeoX: neither grouped nor other widths)
    aliases={"embed_out.weight": "lm_head.weight"},
)

def _head_halves(cfg: ModelConfig, half: int) -> tuple:
    """Qwen3.5's q_proj rows: per head its head_dim query rows, then head_dim output-gate rows; the
    queries' rows (half 0) or the gate's (half 1), and the tensor's row count."""
    n, h = cfg.num_heads, head_dim(cfg)
    return (np.arange(n)[:, None] * 2 * h + half * h + np.arange(h)[None]).reshape(-1), 2 * n * h


def _qkv_rows(cfg: ModelConfig, part: int) -> tuple:
    """Qwen3.5's in_proj_qkv (and conv1d) rows: q and k (2 x key heads x key width), then v (value
    heads x value width); part 0 (q and k) or 1 (v), and the tensor's row count."""
    hk, hv, dk, dv = deltanet_dims(cfg)
    qk, v = 2 * hk * dk, hv * dv
    return (np.arange(qk) if part == 0 else qk + np.arange(v)), qk + v


def _linear(t: Tensor) -> Tensor:
    return dataclasses.replace(t, layers="linear")


def _full(t: Tensor) -> Tensor:
    return dataclasses.replace(t, layers="full")


def _interleaved(part: int):
    """gpt-oss's gate_up_proj: the gate's columns (part 0) and the up projection's (1) alternate."""
    return lambda cfg: (2 * np.arange(expert_hidden(cfg)) + part, 2 * expert_hidden(cfg))


# gpt-oss (GptOssForCausalLM): grouped attention with biases and a sink logit per head, every other layer a
# sliding window (layer_types), an MoE in every layer: a biased router, softmax over the top k, experts of
# the clamped SwiGLU whose gate and up projections are one tensor, columns interleaved, with their biases
GPT_OSS = Architecture(
    name="GptOssForCausalLM", model_type="gpt_oss", norm=NormType.rmsnorm, mlp=MlpType.swiglu_clamped,
    tensors=tuple(_layer("model.layers.{i}.", LLAMA_ATTENTION + [
        _t("self_attn.sinks", "blocks.attn.sinks", "n -> n"),
        _t("mlp.router.weight", "blocks.mlp.router", "d e -> e d"),
        _t("mlp.router.bias", "blocks.mlp.b_router", "e -> e"),
        _t("mlp.experts.gate_up_proj", "blocks.mlp.w_gate", "e d m -> e d m", within=_interleaved(0), within_axis=2),
        _t("mlp.experts.gate_up_proj", "blocks.mlp.w_up", "e d m -> e d m", within=_interleaved(1), within_axis=2),
        _t("mlp.experts.gate_up_proj_bias", "blocks.mlp.b_gate", "e m -> e m", within=_interleaved(0),
           within_axis=1),
        _t("mlp.experts.gate_up_proj_bias", "blocks.mlp.b_up", "e m -> e m", within=_interleaved(1), within_axis=1),
        _t("mlp.experts.down_proj", "blocks.mlp.w_down", "e m d -> e m d"),
        _t("mlp.experts.down_proj_bias", "blocks.mlp.b_down", "e d -> e d")]) + LLAMA_OUTER),
    fields={**UNBIASED_FIELDS, **WINDOW_FIELDS, "moe.num_experts": "num_local_experts",
            "moe.top_k": "num_experts_per_tok", "moe.mlp_factor": "intermediate_size", "glu_limit": "swiglu_limit",
            "glu_alpha": "swiglu_alpha"},
    refused={"logit_softcap": 0.0, "qk_norm": False, "qk_norm_scale": False, "qkv_bias": False, "bias": True,
             "attention_sinks": True, **MOE_REFUSED, "moe.normalize_top_k": True, "moe.first_dense_layers": 0,
             "moe.interleave_step": 1, **NO_MLA, **NO_GEMMA, **NO_DELTANET, **NO_OLMO, **NO_NANOCHAT, **NO_LLAMA4,
             **NO_DEEPSEEK_V4},
    requires={"moe.num_experts": (lambda e: e > 0, "experts in every layer (model.moe.num_experts)")},
)


QWEN3_5_ATTENTION = list(map(_full, [  # (q_proj: each head's queries, then its output gate)
    _t("self_attn.q_proj.weight", "blocks.attn.w_q", "d n h -> (n h) d", within=lambda c: _head_halves(c, 0)),
    _t("self_attn.q_proj.weight", "blocks.attn.w_gate", "d n h -> (n h) d", within=lambda c: _head_halves(c, 1)),
    LLAMA_ATTENTION[6], LLAMA_ATTENTION[8],  # (k_proj, v_proj; o_proj)
    *[dataclasses.replace(t, fill=0.0) for t in QK_NORM]]))  # (1 + 0: no learned scale)
# the Gated DeltaNet rows past the input projections: the convolution over q, k, v, the decay, the norm, out_proj
DELTANET_REST = list(map(_linear, [
    _t("linear_attn.conv1d.weight", "blocks.attn.conv_qk", "cw two kh kd -> (two kh kd) () cw",
       within=lambda c: _qkv_rows(c, 0)),
    _t("linear_attn.conv1d.weight", "blocks.attn.conv_v", "cw vh vd -> (vh vd) () cw",
       within=lambda c: _qkv_rows(c, 1)),
    _t("linear_attn.A_log", "blocks.attn.a_log", "vh -> vh"),
    _t("linear_attn.dt_bias", "blocks.attn.dt_bias", "vh -> vh"),
    _t("linear_attn.norm.weight", "blocks.attn.norm", "vd -> vd"),
    _t("linear_attn.out_proj.weight", "blocks.attn.w_o", "vh vd d -> d (vh vd)")]))
# Qwen3.5's input projections: in_proj_qkv = q, k, v (each over all heads); z, b, a each a tensor of its own
QWEN3_5_PROJECTIONS = list(map(_linear, [
    _t("linear_attn.in_proj_qkv.weight", "blocks.attn.w_qk", "d two kh kd -> (two kh kd) d",
       within=lambda c: _qkv_rows(c, 0)),
    _t("linear_attn.in_proj_qkv.weight", "blocks.attn.w_v", "d vh vd -> (vh vd) d", within=lambda c: _qkv_rows(c, 1)),
    _t("linear_attn.in_proj_z.weight", "blocks.attn.w_z", "d vh vd -> (vh vd) d"),
    _t(["linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight"], "blocks.attn.w_ab", "d two vh -> two vh d")]))


def _grouped_rows(cfg: ModelConfig, part: str) -> tuple:
    """Qwen3-Next's in_proj_qkvz / in_proj_ba rows, grouped by key head: for each key head its
    query, key, then its r = value heads / key heads value heads' values, then their z (qkvz); its
    r heads' b, then their a (ba). The rows of spmdgpt's w_qk ("qk": q then k, each over all key
    heads), w_v ("v"), w_z ("z") or w_ab ("ab": a then b, each over all value heads), and the
    tensor's row count."""
    hk, hv, dk, dv = deltanet_dims(cfg)
    r = hv // hk
    group = 2 * dk + 2 * r * dv  # (one key head's rows of in_proj_qkvz)
    if part == "ab":  # (a: each group's second r rows; b: its first r)
        head = np.arange(hv)
        start = (head // r) * 2 * r + head % r
        return np.concatenate([start + r, start]), 2 * hv
    if part == "qk":
        two, h, i = np.meshgrid(np.arange(2), np.arange(hk), np.arange(dk), indexing="ij")
        return (h * group + two * dk + i).reshape(-1), hk * group
    head, i = np.meshgrid(np.arange(hv), np.arange(dv), indexing="ij")
    offset = 2 * dk + (0 if part == "v" else r * dv)
    return ((head // r) * group + offset + (head % r) * dv + i).reshape(-1), hk * group


# Qwen3-Next's input projections: in_proj_qkvz and in_proj_ba, their rows grouped by key head
QWEN3_NEXT_PROJECTIONS = list(map(_linear, [
    _t("linear_attn.in_proj_qkvz.weight", "blocks.attn.w_qk", "d two kh kd -> (two kh kd) d",
       within=lambda c: _grouped_rows(c, "qk")),
    _t("linear_attn.in_proj_qkvz.weight", "blocks.attn.w_v", "d vh vd -> (vh vd) d",
       within=lambda c: _grouped_rows(c, "v")),
    _t("linear_attn.in_proj_qkvz.weight", "blocks.attn.w_z", "d vh vd -> (vh vd) d",
       within=lambda c: _grouped_rows(c, "z")),
    _t("linear_attn.in_proj_ba.weight", "blocks.attn.w_ab", "d two vh -> (two vh) d",
       within=lambda c: _grouped_rows(c, "ab"))]))
# Qwen2-MoE's, Qwen3-Next's and Qwen3.5-MoE's MoE layer: the routed experts (as Qwen3-MoE's), and one shared
# expert of shared_expert_intermediate_size whose output a sigmoid gate scales per token
SHARED_GATED_EXPERTS = _experts("mlp.", "gate_proj", "up_proj", "down_proj") + [
    _t("mlp.shared_expert.gate_proj.weight", "blocks.mlp.shared.w_gate", "d g -> g d"),
    _t("mlp.shared_expert.up_proj.weight", "blocks.mlp.shared.w_up", "d g -> g d"),
    _t("mlp.shared_expert.down_proj.weight", "blocks.mlp.shared.w_down", "g d -> d g"),
    _t("mlp.shared_expert_gate.weight", "blocks.mlp.shared_gate", "d -> () d")]

# Qwen3.5 (text; Qwen3_5ForCausalLM): every layer_types' full_attention_interval-th layer softmax attention with an
# output gate (q_proj holds each head's queries, then its gate), QK-norm, partial RoPE, grouped keys and values;
# the others Gated DeltaNet (linear_attn: in_proj_qkv = q, k, v; z, b, a; a depthwise conv1d over q, k, v; A_log,
# dt_bias; the gated RMSNorm's plain weight; out_proj); every other norm (1 + w); SwiGLU MLPs
QWEN3_5_FIELDS = {**UNBIASED_FIELDS, "qk_norm_scale": None, "rope_fraction": "rope_parameters",
                  "deltanet.full_attention_interval": "layer_types", "deltanet.key_heads": "linear_num_key_heads",
                  "deltanet.value_heads": "linear_num_value_heads", "deltanet.key_dim": "linear_key_head_dim",
                  "deltanet.value_dim": "linear_value_head_dim", "deltanet.conv": "linear_conv_kernel_dim"}
QWEN3_5_REFUSED = {"logit_softcap": 0.0, "qkv_bias": False, "bias": False, "sliding_window": 0, "window_pattern": "L",
                   "deltanet.gate": "head",
                   "qk_norm": True, "norm_plus_one": True, "attention_gate": True, "post_norms": False,
                   "embed_scale": False, "query_pre_attn_scalar": None, "rope_local_theta": None, **NO_MLA,
                   **NO_SINKS, **NO_OLMO, **NO_NANOCHAT, **NO_LLAMA4, **NO_DEEPSEEK_V4, **NO_GEMMA4}
QWEN3_5_REQUIRES = {"num_kv_heads": (lambda k: k is not None, "fewer key/value heads than heads (model.num_kv_heads: "
                                     "the table holds the gated queries beside grouped keys)")}
QWEN3_5 = Architecture(
    name="Qwen3_5ForCausalLM", model_type="qwen3_5_text", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", [*LLAMA_ATTENTION[:2], *QWEN3_5_ATTENTION, *QWEN3_5_PROJECTIONS,
                                               *DELTANET_REST, *LLAMA_LAYER[len(LLAMA_ATTENTION):][::2]])
                  + LLAMA_OUTER),  # (the MLP's gate, up, down: their weights)
    fields=QWEN3_5_FIELDS,
    refused={**QWEN3_5_REFUSED, **DENSE},
    requires=QWEN3_5_REQUIRES,
    picks={"deltanet.full_attention_interval": lambda k: k > 0},
)
# the hybrids with experts in every layer (Qwen3-Next's and Qwen3.5-MoE's): softmax routing, one gated shared expert
HYBRID_MOE_FIELDS = {**QWEN3_5_FIELDS, "moe.num_experts": "num_experts", "moe.top_k": "num_experts_per_tok",
                     "moe.mlp_factor": "moe_intermediate_size", "moe.shared_experts": "shared_expert_intermediate_size"}
HYBRID_MOE_REFUSED = {**QWEN3_5_REFUSED, **{k: v for k, v in MOE_REFUSED.items() if k != "moe.shared_experts"},
                      "moe.shared_gate": True, "moe.first_dense_layers": 0, "moe.interleave_step": 1}
HYBRID_MOE_REQUIRES = {**QWEN3_5_REQUIRES,
                       "moe.num_experts": (lambda e: e > 0, "experts in every layer (model.moe.num_experts)"),
                       "moe.shared_experts": (lambda s: s > 0, "a shared expert (model.moe.shared_experts >= 1, "
                                                               "with model.moe.shared_gate=true)")}
HYBRID_MOE_PICKS = {"deltanet.full_attention_interval": lambda k: k > 0, "moe.num_experts": lambda e: e > 0}

# Qwen3.5-MoE (text; Qwen3_5MoeForCausalLM): Qwen3.5's layers with an MoE in every layer (the k weights always
# renormalised) beside a gated shared expert
QWEN3_5_MOE = Architecture(
    name="Qwen3_5MoeForCausalLM", model_type="qwen3_5_moe_text", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", [*LLAMA_ATTENTION[:2], *QWEN3_5_ATTENTION, *QWEN3_5_PROJECTIONS,
                                               *DELTANET_REST, *SHARED_GATED_EXPERTS]) + LLAMA_OUTER),
    fields=HYBRID_MOE_FIELDS,
    refused={**HYBRID_MOE_REFUSED, "moe.normalize_top_k": True},
    requires=HYBRID_MOE_REQUIRES,
    picks=HYBRID_MOE_PICKS,
)

# Qwen3-Next (Qwen3NextForCausalLM): Qwen3.5-MoE's computation (norm_topk_prob a choice) with the Gated DeltaNet's
# input projections fused and grouped by key head (in_proj_qkvz, in_proj_ba). Export writes it for a model that
# Qwen3.5-MoE cannot hold (the k weights not renormalised) or when asked by name (`spmdgpt export hf_class=`)
QWEN3_NEXT = Architecture(
    name="Qwen3NextForCausalLM", model_type="qwen3_next", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", [*LLAMA_ATTENTION[:2], *QWEN3_5_ATTENTION, *QWEN3_NEXT_PROJECTIONS,
                                               *DELTANET_REST, *SHARED_GATED_EXPERTS]) + LLAMA_OUTER),
    fields={**HYBRID_MOE_FIELDS, "moe.normalize_top_k": "norm_topk_prob"},
    refused=HYBRID_MOE_REFUSED,
    requires=HYBRID_MOE_REQUIRES,
    picks=HYBRID_MOE_PICKS,
)

def _pairs(parts: str):
    """The order of Llama 4's q/k/v projection rows ("q", "kv", "qkv": its parts, as the names split
    it): each head's queries and keys as interleaved RoPE pairs (`pair_rows`; Llama 4 rotates
    (x_2i, x_2i+1)), its values as they are. Permuting every head's q and k rows alike leaves the
    NoPE layers' scores, and the QK-norm, unchanged."""
    def order(cfg: ModelConfig) -> np.ndarray:
        h = head_dim(cfg)
        rows = [pair_rows(cfg.num_heads if c == "q" else kv_heads(cfg), h, 0, h if c in "qk" else 0) for c in parts]
        return rows[0] if len(parts) == 1 else np.stack(rows)
    return order


def _halves(part: int):
    """Llama 4's gate_up_proj: the gate's columns (part 0), then the up projection's (1)."""
    return lambda cfg: (part * expert_hidden(cfg) + np.arange(expert_hidden(cfg)), 2 * expert_hidden(cfg))


# Llama 4 (text; Llama4ForCausalLM): grouped attention without biases, RoPE on interleaved pairs (`_pairs`) with a
# QK-norm without parameters (after the rotation: the same) in the chunked layers (attention_chunk_size,
# layer_types), the others NoPE (no_rope_layers 0) with the attention temperature (attn_scale, floor_scale);
# MoE layers (moe_layers) of a sigmoid router over the top k's logits whose weight scales each token going into its
# expert, the experts' gate and up projections one [E, D, 2F] tensor (gate_up_proj: the gate's columns first), beside
# a shared expert of intermediate_size; dense layers of intermediate_size_mlp
LLAMA4 = Architecture(
    name="Llama4ForCausalLM", model_type="llama4_text", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", [
        *LLAMA_ATTENTION[:2],
        *_projections("order", _pairs),
        LLAMA_ATTENTION[8],  # (o_proj)
        *[dataclasses.replace(t, names=(t.names[0].replace("mlp.", "feed_forward."),), layers="dense")
          for t in LLAMA_LAYER[len(LLAMA_ATTENTION):] if t.leaf in ("blocks.mlp.w_gate", "blocks.mlp.w_up",
                                                                      "blocks.mlp.w_down")],
        *[dataclasses.replace(t, layers="moe") for t in [
            _t("feed_forward.router.weight", "blocks.mlp.router", "d e -> e d"),
            _t("feed_forward.experts.gate_up_proj", "blocks.mlp.w_gate", "e d m -> e d m", within=_halves(0),
               within_axis=2),
            _t("feed_forward.experts.gate_up_proj", "blocks.mlp.w_up", "e d m -> e d m", within=_halves(1),
               within_axis=2),
            _t("feed_forward.experts.down_proj", "blocks.mlp.w_down", "e m d -> e m d"),
            _t("feed_forward.shared_expert.gate_proj.weight", "blocks.mlp.shared.w_gate", "d g -> g d"),
            _t("feed_forward.shared_expert.up_proj.weight", "blocks.mlp.shared.w_up", "d g -> g d"),
            _t("feed_forward.shared_expert.down_proj.weight", "blocks.mlp.shared.w_down", "g d -> d g")]]])
        + LLAMA_OUTER),
    fields={**UNBIASED_FIELDS, "mlp_factor": "intermediate_size_mlp", "qk_norm": "use_qk_norm",
            "window_pattern": "layer_types", "attention_chunk": "attention_chunk_size", "global_nope": "no_rope_layers",
            "attn_temperature": "attn_scale", "attn_temperature_floor": "floor_scale",
            "moe.num_experts": "num_local_experts", "moe.top_k": "num_experts_per_tok",
            "moe.mlp_factor": "intermediate_size", "moe.first_dense_layers": "moe_layers",
            "moe.interleave_step": "moe_layers"},
    refused={"logit_softcap": 0.0, "qkv_bias": False, "bias": False, "qk_norm_scale": False, "sliding_window": 0,
             "moe.shared_experts": 1, "moe.shared_gate": False, "moe.router": Router.sigmoid,
             "moe.normalize_top_k": False, "moe.dense_mlp": False, "moe.router_scales": False,
             "moe.weight_input": True, "moe.bias_update_rate": 0.0, "moe.groups": 1,
             "moe.top_groups": 1, "moe.route_scale": 1.0, **NO_MLA, **NO_GEMMA, **NO_DELTANET, **NO_SINKS, **NO_OLMO,
             **NO_NANOCHAT, **NO_DEEPSEEK_V4},
    requires={"moe.num_experts": (lambda e: e > 0, "experts (model.moe.num_experts > 0; Llama 4 Scout: 16)")},
    picks={"moe.weight_input": True},
)

def _kimi_check(cfg: ModelConfig) -> list:
    """What KimiLinearForCausalLM's config.json cannot say: one head count and one width for the
    linear layers' queries, keys and values (linear_num_heads, linear_head_dim); a router other
    than the sigmoid one (with experts)."""
    hk, hv, kd, vd = deltanet_dims(cfg)
    errs = []
    if (hk, kd) != (hv, vd):
        errs.append(f"model.deltanet.value_heads={hv}, value_dim={vd}: KimiLinearForCausalLM's linear layers have as "
                    f"many value heads as key heads ({hk}) and values as wide as keys ({kd}); leave them null")
    if cfg.moe.num_experts and cfg.moe.router != Router.sigmoid:
        errs.append(f"model.moe.router={cfg.moe.router.value}: KimiLinearForCausalLM routes by sigmoid scores; "
                    "set model.moe.router=sigmoid")
    return errs


# Kimi Linear (KimiLinearForCausalLM), as its checkpoints store it (transformers renames and fuses on load): in every
# group of full_attention_interval layers (layer_types), the first ones Kimi Delta Attention (q, k, v projections and
# a depthwise convolution each; f_a, f_b, dt_bias: the decay per head and key channel, A_log per head; b_proj; the
# output gate's g_a, g_b and the gated norm o_norm; o_proj: model.deltanet.gate=channel), the last multi-head latent
# attention without RoPE (DeepSeek-V3's projections, the rotary part left unrotated: model.global_nope); MLPs all
# dense SwiGLU, or the first N dense (model.moe.first_dense_layers: Kimi Delta Attention layers, `dense_blocks`) and
# the others MoE (both under block_sparse_moe; the MoE: a sigmoid router with the bias-corrected, grouped
# choice and routed_scaling_factor; experts w1 / w3 / w2 as Mixtral's; shared experts)
KIMI_DELTA = list(map(_linear, [
    _t(["self_attn.q_proj.weight", "self_attn.k_proj.weight"], "blocks.attn.w_qk", "d two kh kd -> two (kh kd) d"),
    _t("self_attn.v_proj.weight", "blocks.attn.w_v", "d vh vd -> (vh vd) d"),
    _t(["self_attn.q_conv1d.weight", "self_attn.k_conv1d.weight"], "blocks.attn.conv_qk",
       "cw two kh kd -> two (kh kd) () cw"),
    _t("self_attn.v_conv1d.weight", "blocks.attn.conv_v", "cw vh vd -> (vh vd) () cw"),
    _t("self_attn.A_log", "blocks.attn.a_log", "vh -> () () vh ()"),
    _t("self_attn.dt_bias", "blocks.attn.dt_bias", "vh kd -> (vh kd)"),
    _t("self_attn.f_a_proj.weight", "blocks.attn.w_fa", "d kr -> kr d"),
    _t("self_attn.f_b_proj.weight", "blocks.attn.w_fb", "kr vh kd -> (vh kd) kr"),
    _t("self_attn.b_proj.weight", "blocks.attn.w_b", "d vh -> vh d"),
    _t("self_attn.g_a_proj.weight", "blocks.attn.w_ga", "d vr -> vr d"),
    _t("self_attn.g_b_proj.weight", "blocks.attn.w_gb", "vr vh vd -> (vh vd) vr"),
    _t("self_attn.o_norm.weight", "blocks.attn.norm", "vd -> vd"),
    _t("self_attn.o_proj.weight", "blocks.attn.w_o", "vh vd d -> d (vh vd)")]))
KIMI_LINEAR = Architecture(
    name="KimiLinearForCausalLM", model_type="kimi_linear", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", [
        *MLA_ATTENTION[:2], *KIMI_DELTA,
        *[dataclasses.replace(t, layers="full", order=None) for t in MLA_ATTENTION[2:]],  # (NoPE: no pairs to order)
        *[dataclasses.replace(t, names=(t.names[0].replace("mlp.", "block_sparse_moe."),), layers="dense")
          for t in LLAMA_LAYER[len(LLAMA_ATTENTION):] if t.leaf in ("blocks.mlp.w_gate", "blocks.mlp.w_up",
                                                                      "blocks.mlp.w_down")],
        *[dataclasses.replace(t, layers="moe") for t in _experts("block_sparse_moe.", "w1", "w3", "w2") + [
            _t("block_sparse_moe.gate.e_score_correction_bias", "blocks.mlp.router_bias", "e -> e", fill=0.0),
            _t("block_sparse_moe.shared_experts.gate_proj.weight", "blocks.mlp.shared.w_gate", "d g -> g d"),
            _t("block_sparse_moe.shared_experts.up_proj.weight", "blocks.mlp.shared.w_up", "d g -> g d"),
            _t("block_sparse_moe.shared_experts.down_proj.weight", "blocks.mlp.shared.w_down", "g d -> d g")]]])
        + LLAMA_OUTER),
    fields={**{k: v for k, v in COMMON_FIELDS.items() if k not in ("bias", "tie_embeddings")},
            "norm_eps": "rms_norm_eps",
            "mla.kv_rank": "kv_lora_rank", "mla.q_rank": "q_lora_rank", "mla.rope_dim": "qk_rope_head_dim",
            "mla.nope_dim": "qk_nope_head_dim", "mla.v_dim": "v_head_dim", "global_nope": None,
            "deltanet.full_attention_interval": "layer_types", "deltanet.key_heads": "linear_num_heads",
            "deltanet.value_heads": None, "deltanet.key_dim": "linear_head_dim",  # (the values' heads and width:
            "deltanet.value_dim": None, "deltanet.conv": "linear_conv_kernel_dim",  # the keys', `_kimi_check`)
            "moe.num_experts": "num_experts", "moe.top_k": "num_experts_per_tok",
            "moe.mlp_factor": "moe_intermediate_size", "moe.shared_experts": "n_shared_experts",
            "moe.normalize_top_k": "norm_topk_prob", "moe.groups": "n_group", "moe.top_groups": "topk_group",
            "moe.route_scale": "routed_scaling_factor", "moe.bias_update_rate": None,
            "moe.first_dense_layers": "mlp_layer_types",  # (the first N dense: Kimi Delta Attention layers)
            "moe.router": None},  # (sigmoid with experts, `_kimi_check`; a dense model's default unused)
    refused={"logit_softcap": 0.0, "qk_norm": False, "qk_norm_scale": False, "qkv_bias": False, "bias": False,
             "sliding_window": 0, "window_pattern": "L", "num_kv_heads": None, "head_dim": None,
             "tie_embeddings": False,  # (transformers' class ties nothing: lm_head is always its own)
             "deltanet.gate": "channel", "attention_gate": False, "rope_fraction": 1.0,
             "moe.interleave_step": 1,
             "moe.shared_gate": False, "moe.dense_mlp": False, "moe.router_scales": False, "moe.weight_input": False,
             **{k: v for k, v in NO_LLAMA4.items() if k != "global_nope"}, **NO_DEEPSEEK_V4,
             **NO_GEMMA, **NO_SINKS, **NO_OLMO, **NO_NANOCHAT, **NO_INDEXER},
    requires={"global_nope": (lambda n: n, "softmax layers without RoPE (model.global_nope=true)"),
              "mla.kv_rank": (lambda r: r > 0, "multi-head latent attention in the softmax layers "
                                               "(model.mla.kv_rank > 0)"),
              "deltanet.full_attention_interval": (lambda k: k > 0, "Kimi Delta Attention layers "
                                                                    "(model.deltanet.full_attention_interval > 0)")},
    # (a dense layer's MLP as Moonshot's published folders name it; transformers' save_pretrained writes it under
    # block_sparse_moe, as export does)
    aliases={f"model.layers.{{i}}.block_sparse_moe.{w}.weight": f"model.layers.{{i}}.mlp.{w}.weight"
             for w in ("gate_proj", "up_proj", "down_proj")},
    picks={"deltanet.gate": "channel"},
    check=_kimi_check,
)


def _deepseek_v4_check(cfg: ModelConfig) -> list:
    """What DeepseekV4ForCausalLM cannot say: a layer without the sliding window (every layer has the sliding
    branch, sliding_window > 0)."""
    if cfg.sliding_window <= 0:
        return [f"model.sliding_window={cfg.sliding_window}: DeepseekV4ForCausalLM's layers all have the sliding "
                "branch (sliding_window > 0; DeepSeek-V4: 128); set model.sliding_window"]
    return []


def _hyper(prefix: str, leaf: str, mixes: str = "hm", scales: str = "h3") -> list:
    """A hyper-connection's rows (`hyper.Hyper`: fn [m, n D], base, scale; {prefix}fn, ...; the head's: mixes "hq"
    (n), one scale "h1")."""
    return [_t(f"{prefix}fn", f"{leaf}.w", f"hs d {mixes} -> {mixes} (hs d)"),
            _t(f"{prefix}base", f"{leaf}.bias", f"{mixes} -> {mixes}"),
            _t(f"{prefix}scale", f"{leaf}.scale", f"{scales} -> {scales}")]


def _compressor(prefix: str, leaf: str, layers: str, width: str, c: str, rate: str) -> list:
    """A compressor's rows (`csa.Compressor`; c: "()" for an H layer's one series, "two" for a C layer's two, the
    first (the next window's) in the first rows)."""
    series = "" if c == "()" else "two "
    return [dataclasses.replace(t, layers=layers) for t in [
        _t(f"{prefix}wkv.weight", f"{leaf}.w_kv", f"d {c} {width} -> ({series}{width}) d"),
        _t(f"{prefix}wgate.weight", f"{leaf}.w_gate", f"d {c} {width} -> ({series}{width}) d"),
        _t(f"{prefix}ape", f"{leaf}.bias", f"{rate} {c} {width} -> {rate} ({series}{width})"),
        _t(f"{prefix}norm.weight", f"{leaf}.norm", f"{width} -> {width}")]]


# DeepSeek-V4 (DeepseekV4ForCausalLM, transformers 5.24), its tensors as DeepSeek's checkpoints name them (what
# transformers' save_pretrained writes; it renames them on load: attn -> self_attn, wq_a -> q_a_proj, ape ->
# position_bias, the experts' w1 / w3 -> gate_up_proj, ...): model.csa's attention in every layer (wq_a, q_norm,
# wq_b; wkv, norm: the one key/value head; wo_a [G O, N H / G], each group's block; wo_b; attn_sink) with the sliding
# window, its C layers (compressed_sparse_attention) a compressor of two series [2H, D] (the first H rows the series
# of the next window's entry) and the lightning indexer (its own compressor [2d, D], wq_b, weights_proj), its H
# layers (heavily_compressed_attention) one of one series [H, D]; RoPE on each head's last qk_rope_head_dim =
# head_dim x partial_rotary_factor dimensions in interleaved pairs, spmdgpt's own pairing there (no row order);
# manifold-constrained hyper-connections around both branches (hc_attn_fn [m, n D], _base, _scale; hc_ffn_*) and
# before the final norm (hc_head); an MoE in every layer (sqrt-softplus scores, the k weights always renormalised,
# x routed_scaling_factor; the first layers of mlp_layer_types hash_moe: gate.tid2eid [V, k] int64, the others the
# balancing bias gate.bias), experts w1 (gate), w3 (up), w2 (down) with the gate and up clamped at swiglu_limit, and
# one shared expert (n_shared_experts) of the experts' width, clamped alike (model.mlp=swiglu_clip)
DEEPSEEK_V4_LAYER = [
    _t("attn_norm.weight", "blocks.ln1.scale", "d -> d"),
    _t("ffn_norm.weight", "blocks.ln2.scale", "d -> d"),
    _t("attn.wq_a.weight", "blocks.attn.w_qa", "d cr -> cr d"),
    _t("attn.q_norm.weight", "blocks.attn.q_norm", "cr -> cr"),
    _t("attn.wq_b.weight", "blocks.attn.w_qb", "cr n h -> (n h) cr"),
    _t("attn.wkv.weight", "blocks.attn.w_kv", "d h -> h d"),
    _t("attn.norm.weight", "blocks.attn.kv_norm", "h -> h"),
    _t("attn.wo_a.weight", "blocks.attn.w_oa", "og gm h co -> (og co) (gm h)"),
    _t("attn.wo_b.weight", "blocks.attn.w_ob", "og co d -> d (og co)"),
    _t("attn.attn_sink", "blocks.attn.sinks", "n -> n"),
    *_compressor("attn.compressor.", "blocks.attn.heavy", "heavy", "h", "()", "hr"),
    *_compressor("attn.compressor.", "blocks.attn.sparse", "sparse", "h", "two", "sr"),
    *_compressor("attn.indexer.compressor.", "blocks.attn.index.keys", "sparse", "ci", "two", "sr"),
    _t("attn.indexer.wq_b.weight", "blocks.attn.index.w_q", "cr cni ci -> (cni ci) cr", layers="sparse"),
    _t("attn.indexer.weights_proj.weight", "blocks.attn.index.w_w", "d cni -> cni d", layers="sparse"),
    *_hyper("hc_attn_", "blocks.hc_attn"), *_hyper("hc_ffn_", "blocks.hc_mlp"),
    *_experts("ffn.", "w1", "w3", "w2"),
    _t("ffn.gate.tid2eid", "hash_experts", "v tk -> v tk", layers="hash", dtype="int64"),
    _t("ffn.gate.bias", "blocks.mlp.router_bias", "e -> e", fill=0.0, layers="topk"),
    _t("ffn.shared_experts.w1.weight", "blocks.mlp.shared.w_gate", "d g -> g d"),
    _t("ffn.shared_experts.w3.weight", "blocks.mlp.shared.w_up", "d g -> g d"),
    _t("ffn.shared_experts.w2.weight", "blocks.mlp.shared.w_down", "g d -> d g")]
DEEPSEEK_V4 = Architecture(
    name="DeepseekV4ForCausalLM", model_type="deepseek_v4", norm=NormType.rmsnorm, mlp=MlpType.swiglu_clip,
    tensors=tuple(_layer("model.layers.{i}.", DEEPSEEK_V4_LAYER) + LLAMA_OUTER[:2]
                  + [_t("head.weight", "unembed", "d v -> v d")] + _hyper("model.hc_head.hc_", "hc_head", "hq", "h1")),
    fields={**{k: v for k, v in COMMON_FIELDS.items() if k not in ("bias", "rope_attention_factor")},
            "mlp_factor": None, "norm_eps": "rms_norm_eps",
            "num_kv_heads": None, "head_dim": "head_dim", "sliding_window": "sliding_window",
            "glu_limit": "swiglu_limit", "hyper_connections": "hc_mult", "hyper_sinkhorn_iters": "hc_sinkhorn_iters",
            "hyper_eps": "hc_eps", "moe.num_experts": "n_routed_experts", "moe.top_k": "num_experts_per_tok",
            "moe.mlp_factor": "moe_intermediate_size", "moe.route_scale": "routed_scaling_factor",
            "moe.hash_layers": "mlp_layer_types",
            "moe.bias_update_rate": None, "csa.q_rank": "q_lora_rank", "csa.rope_dim": "partial_rotary_factor",
            "csa.out_groups": "o_groups", "csa.out_rank": "o_lora_rank", "csa.pattern": "layer_types",
            "csa.sparse_rate": "compress_rates", "csa.heavy_rate": "compress_rates",
            "csa.compress_theta": "compress_rope_theta", "csa.index_heads": "index_n_heads",
            "csa.index_dim": "index_head_dim", "csa.index_topk": "index_topk"},
    refused={"logit_softcap": 0.0, "qk_norm": False, "qk_norm_scale": False, "qkv_bias": False, "bias": False,
             "window_pattern": "L", "moe.router": Router.sqrtsoftplus, "moe.normalize_top_k": True,
             "moe.first_dense_layers": 0, "moe.interleave_step": 1, "moe.groups": 1, "moe.top_groups": 1,
             "moe.shared_gate": False, "moe.dense_mlp": False, "moe.router_scales": False, "moe.weight_input": False,
             "moe.shared_experts": 1,  # (transformers' one shared MLP of the experts' width, whatever n_shared_experts)
             "rope_attention_factor": None,  # (YaRN on the compressed RoPE without its attention factor: 1.0)
             "glu_alpha": 1.702, "attention_sinks": False, **NO_MLA, **NO_GEMMA, **NO_DELTANET, **NO_OLMO,
             **NO_NANOCHAT, **NO_LLAMA4},
    requires={"csa.q_rank": (lambda r: r > 0, "DeepSeek-V4's attention (model.csa.q_rank > 0; q_lora_rank)"),
              "hyper_connections": (lambda n: n > 0, "hyper-connections (model.hyper_connections > 0; hc_mult)"),
              "moe.num_experts": (lambda e: e > 0, "experts in every layer (model.moe.num_experts > 0)")},
    aliases={"head.weight": "lm_head.weight"},
    picks={"csa.q_rank": lambda r: r > 0},
    check=_deepseek_v4_check,
)


# in the order export tries them: a table with `picks` before the plain one of its kinds (and of two that compute
# the same models, the one export writes unless asked for the other by name: Qwen3.5-MoE before Qwen3-Next; Kimi
# Linear's hybrid before Qwen's, whose picks it meets too)
ARCHITECTURES = (KIMI_LINEAR, QWEN3_5_MOE, QWEN3_NEXT, QWEN3_5, GPT_OSS, LLAMA4, DEEPSEEK_V32, DEEPSEEK_V3, QWEN3_MOE,
                 MIXTRAL, QWEN3, QWEN2, MISTRAL, LLAMA, GEMMA4, GEMMA3, NEOX, OLMO3, OLMO2, NANOCHAT, DEEPSEEK_V4)

# Not a Hugging Face class: the PyTorch reference model of the CPU comparison
# (benchmarks/torch_gpt.py; pre-norm LayerNorm without bias, tanh GELU, tied embeddings), whose
# state dict the tests fill from spmdgpt's parameters to compare losses and gradients.
TORCH_GPT = Architecture(
    name="benchmarks/torch_gpt.py",
    model_type="torch_gpt",
    norm=NormType.layernorm,
    mlp=MlpType.gelu,
    tensors=tuple(
        _layer(
            "blocks.{i}.",
            [
                _t("ln1.weight", "blocks.ln1.scale", "d -> d"),
                _t("qkv.weight", "blocks.attn.w_qkv", "d c n h -> (c n h) d"),
                _t("proj.weight", "blocks.attn.w_o", "n h d -> d (n h)"),
                _t("ln2.weight", "blocks.ln2.scale", "d -> d"),
                _t("up.weight", "blocks.mlp.w_up", "d f -> f d"),
                _t("down.weight", "blocks.mlp.w_down", "f d -> d f"),
            ],
        )
        + [
            _t("embed.weight", "embed", "v d -> v d"),
            _t("ln_f.weight", "ln_f.scale", "d -> d"),
        ]
    ),
    fields={
        "num_layers": "layers",
        "num_heads": "heads",
        "d_model": "d",
        "vocab_size": "vocab",
        "max_seq_len": "seq",
        "rope_theta": "theta",
    },
    refused={
        **REFUSED,
        "bias": False,
        "tie_embeddings": True,
        "mlp_factor": 4.0,
        "num_kv_heads": None,
        "head_dim": None,
    },
)

