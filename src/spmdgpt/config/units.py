"""The sections of the model's optional units: a mixture of experts for the MLP (model.moe),
multi-head latent attention (model.mla) and Gated DeltaNet layers (model.deltanet)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from spmdgpt.config.choices import GroupedMatmul, MoeDispatch, Router
from spmdgpt.config.section import Section, changed_fields


@dataclass
class MoeConfig(Section):
    """A mixture-of-experts MLP (model.moe): each token goes through top_k of num_experts expert
    MLPs (of model.mlp's kind), weighted by the router; num_experts = 0: the dense MLP."""

    num_experts: int = 0  # routed experts in each MoE layer's MLP (Mixtral: 8; Qwen3-30B-A3B: 128); 0 = dense
    first_dense_layers: int = 0  # layers with the dense MLP (model.mlp_factor) before the first MoE layer
    # (DeepSeek-V3: 3, its first_k_dense_replace; MaxText: first_num_dense_layers)
    interleave_step: int = 1  # after those, every this-many-th layer is MoE, the others dense (Qwen3-MoE's
    # decoder_sparse_step, Llama 4's interleave_moe_layer_step); 1 = every layer
    top_k: int = 2  # experts each token is routed to (Mixtral: 2; Qwen3 MoE: 8)
    mlp_factor: Optional[float] = None  # each expert's hidden width = this * d_model; default model.mlp_factor
    shared_experts: int = 0  # experts' widths of a dense MLP every token also goes through (DeepSeek's shared experts)
    shared_gate: bool = False  # the shared experts' output times sigmoid(x w), a learned [d_model] w: one scalar per
    # token (Qwen2-MoE's, Qwen3-Next's and Qwen3.5-MoE's shared_expert_gate); needs shared_experts > 0
    router: Router = Router.softmax  # softmax | sigmoid | sqrtsoftplus (DeepSeek-V4: sqrt(softplus(logit)))
    normalize_top_k: bool = True  # the k weights rescaled to sum to 1 (Mixtral, DeepSeek-V3's norm_topk_prob: yes)
    weight_input: bool = False  # each routed copy's weight multiplies the token going into its expert instead of the
    # expert's output (Llama 4: sigmoid of the chosen logit, the token scaled by it before its SwiGLU expert)
    dispatch: MoeDispatch = MoeDispatch.dropless  # dropless | capacity
    grouped: GroupedMatmul = GroupedMatmul.auto  # dropless's grouped product: auto | ragged | blocks | pallas
    # (auto: pallas on GPUs where the widths are multiples of 16, else blocks; model/grouped.py); auto with capacity
    capacity_factor: Optional[float] = None  # capacity mode: each expert takes ceil(factor * tokens * top_k /
    # num_experts) of a device's tokens (e.g. 1.25; past num_experts / top_k, inf too: every token), the rest pass the
    # layer by the residual alone; null with dropless
    load_balance_loss: float = 0.01  # weight of the load-balancing loss E * sum_e f_e p_e (Switch, GShard); 0 = off
    router_z_loss: float = 0.0  # weight of the router z-loss mean(logsumexp(router logits)^2) (ST-MoE: 0.001)
    bias_update_rate: float = 0.0  # auxiliary-loss-free balancing (DeepSeek-V3): a per-expert bias on the router's
    # scores for the top-k choice only, moved by this much after every step toward even loads; 0 = off (DeepSeek-V3:
    # 0.001)
    groups: int = 1  # grouped routing (DeepSeek-V3's n_group): the experts in this many equal groups, each scored by
    # the sum of its two best (biased) scores; a token's top_k come from its top_groups best groups; 1 = off
    top_groups: int = 1  # groups a token's experts may come from (DeepSeek-V3's topk_group; with groups > 1)
    route_scale: float = 1.0  # the routed experts' weights times this (DeepSeek-V3's routed_scaling_factor: 2.5)
    hash_layers: int = 0  # the first this-many MoE layers choose a token's top_k experts by a frozen table of its id
    # (DeepSeek-V4's hash routing, tid2eid; num_hash_layers: 3), weighted by the router's scores of them; 0 = off;
    # needs num_experts > 0 (as dense_mlp and router_scales do)
    dense_mlp: bool = False  # a dense MLP (model.mlp_factor wide) beside the experts in every layer: the dense one on
    # the block's MLP norm, the experts on a norm of their own of the residual stream, each output normed and the two
    # summed before the block's post-MLP norm (Gemma 4 26B-A4B's enable_moe_block)
    router_scales: bool = False  # the router reads its input RMS-normalised times a learned [d_model] scale and
    # d_model^-0.5, and each chosen expert's weight is times a learned per-expert scale (Gemma 4's router)

    def __str__(self) -> str:  # (in messages: the fields that differ from the defaults)
        return changed_fields(self)


@dataclass
class MlaConfig(Section):
    """Multi-head latent attention (model.mla, DeepSeek-V2/V3): keys and values from one shared
    low-rank latent per token (what the KV cache holds), queries through their own low-rank
    latent, and a few RoPE dimensions per head beside the unrotated ones, their key shared by
    every head. kv_rank = 0: off (the attention of model.num_kv_heads)."""

    kv_rank: int = 0  # the key/value latent's width (kv_lora_rank; DeepSeek-V3: 512); > 0 turns MLA on
    q_rank: int = 0  # the query latent's width (q_lora_rank; DeepSeek-V3: 1536); 0 = a full query projection
    rope_dim: int = 64  # RoPE dimensions of each query head and of the shared RoPE key (qk_rope_head_dim)
    nope_dim: Optional[int] = None  # unrotated query/key dimensions per head (qk_nope_head_dim); default model.head_dim
    v_dim: Optional[int] = None  # value (and output) dimensions per head (v_head_dim); default model.head_dim
    # DeepSeek Sparse Attention (DeepSeek-V3.2, `spmdgpt.model.mla`): a lightning indexer scores the past tokens and
    # each query attends to its index_topk best; index_heads 0 = off
    index_heads: int = 0  # the indexer's heads (index_n_heads; DeepSeek-V3.2: 64)
    index_dim: int = 128  # the indexer's query/key width per head, its first rope_dim rotated (index_head_dim)
    index_topk: int = 2048  # keys each query attends to (index_topk)
    index_train: str = "sparse"  # "sparse": attention over the top-k, the indexer learning by its KL loss over them;
    # "dense": the paper's warm-up, dense attention, the indexer alone learning (KL against the whole distribution)
    index_kl: float = 1.0  # the indexer's KL loss weight in the objective (aux/indexer_kl)

    def __str__(self) -> str:
        return changed_fields(self)


@dataclass
class CsaConfig(Section):
    """DeepSeek-V4's attention (model.csa, `spmdgpt.model.csa`), its parts without compressors: shared
    key/value multi-query attention (one head of model.head_dim, its keys its values), partial RoPE on
    each head's last rope_dim dimensions, a sink per head, the grouped low-rank output projection.
    q_rank = 0: off."""

    q_rank: int = 0  # the query latent's width (q_lora_rank; DeepSeek-V4-Flash: 1024); > 0 turns the unit on
    rope_dim: int = 64  # the last dimensions of each head RoPE rotates, in interleaved pairs (qk_rope_head_dim)
    out_groups: int = 8  # the output projection's head groups, each projected on its own (o_groups)
    out_rank: int = 1024  # each group's projected width before the mix to d_model (o_lora_rank)
    pattern: str = "S"  # the layers' kinds, repeated over the layers (layer_types): S = the sliding branch alone
    # (sliding_attention), C = compressed sparse attention (compressed_sparse_attention: entries of sparse_rate tokens,
    # the indexer's top-k of them), H = heavily compressed attention (heavily_compressed_attention: every entry of
    # heavy_rate tokens); DeepSeek-V4-Flash: "SSCHCHCH..." given whole
    sparse_rate: int = 4  # C layers: tokens per compressed entry, in overlapping windows of twice this (compress_rates)
    heavy_rate: int = 128  # H layers: tokens per compressed entry (compress_rates)
    compress_theta: float = 160000.0  # the C and H layers' RoPE base (compress_rope_theta), with model.rope_scaling
    # (the S layers' is model.rope_theta, unscaled)
    index_heads: int = 64  # C layers: the lightning indexer's heads (index_n_heads)
    index_dim: int = 128  # ... their width, >= rope_dim (index_head_dim)
    index_topk: int = 512  # ... the compressed entries each query attends to (index_topk; all while there are fewer)
    index_train: str = "sparse"  # "sparse": attention over the top-k entries, the indexer learning by its KL loss
    # over them; "dense": the warm-up, attention over every visible entry, the indexer alone learning (KL over all)
    index_kl: float = 1.0  # the C layers' indexer KL loss weight in the objective (aux/indexer_kl)

    def __str__(self) -> str:
        return changed_fields(self)


@dataclass
class DeltaNetConfig(Section):
    """Gated DeltaNet layers (model.deltanet; Qwen3-Next, Qwen3.5): linear attention whose state is
    a [key_dim, value_dim] matrix per value head, decayed by a gate and written by the delta rule,
    after a short causal convolution (`spmdgpt.model.deltanet`). full_attention_interval = k > 0
    makes a hybrid: in every group of k layers the first k - 1 are Gated DeltaNet layers and the
    last one softmax attention (model.num_heads, num_kv_heads, ...); 0: off."""

    full_attention_interval: int = 0  # k: one softmax-attention layer in every k (Qwen3-Next / 3.5: 4); 0 = off
    key_heads: int = 4  # query/key heads (linear_num_key_heads; Qwen3.5-2B: 16)
    value_heads: Optional[int] = None  # value heads, a multiple of key_heads, each group of value_heads / key_heads
    # consecutive ones sharing a key head (linear_num_value_heads); default key_heads
    key_dim: int = 64  # query/key width per head (linear_key_head_dim; Qwen3.5: 128)
    value_dim: Optional[int] = None  # value width per head (linear_value_head_dim); default key_dim
    conv: int = 4  # the causal depthwise convolution's width over q, k and v (linear_conv_kernel_dim)
    chunk: int = 64  # training's chunkwise parallel form: tokens per chunk (a matmul-sized [chunk, chunk] system)
    gate: str = "head"  # "head": Gated DeltaNet's decay, one rate per value head, and its SiLU output gate; "channel":
    # Kimi Delta Attention's (Kimi Linear), one rate per head and key channel from a low-rank projection (rank
    # key_dim) and a low-rank sigmoid output gate (rank value_dim)

    def __str__(self) -> str:
        return changed_fields(self)
