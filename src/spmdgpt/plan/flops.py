"""FLOPs accounting and MFU.

FLOPs per token = 6 * N_matmul + 6 * L * T * N * (H_qk + H_v) (N heads of query/key width H_qk and value
width H_v: both head_dim, D / N by default; MLA's nope + rope and v_dim; L counts multi-token
prediction's modules too), the PaLM / nanoGPT convention:
N_matmul counts
every weight that takes part in a token's matmuls (all block matrices and the unembedding, tied or not;
of a mixture of experts, the active ones; the embedding lookup is free), 6 = 2 (multiply-add) x 3 (forward + two
backward matmuls), and
the attention term counts QK^T and AV over the full T x T score matrix (causal masking is not
subtracted, as in PaLM's appendix B). A hybrid's Gated DeltaNet layers count their chunkwise form
instead (`deltanet_mixing`). DeepSeek Sparse Attention (model.mla.index_heads = I, index_dim = d) adds its
lightning indexer's scores, 6 * L * T * I * (d + 1) (each query's I products of width d with every key and their
weighted sum, trained by its KL loss), and keeps the attention term over T x T: the masked dense form that runs
here computes every score (a sparse kernel would count index_topk keys instead of T). DeepSeek-V4's
compressed layers (model.csa.pattern C and H) attend over their T tokens and their E compressed entries
(E = T / csa.sparse_rate in a C layer, T / csa.heavy_rate in an H one), so their attention term counts
T x (T + E); a C layer's indexer scores every entry, 2 * E * I * (d + 1) a token (forward only: V4's indexer
is not trained here, so no backward runs through it); a layer's compressor matrices count in its own kind's
layers only (every layer of a mixed stack carries every kind's, `csa.compressed_info`).
"""

from __future__ import annotations

import math
from typing import Optional

import jax

from spmdgpt.config import (
    DType,
    ModelConfig,
    attention_widths,
    compress_kinds,
    deltanet_dims,
    global_stack,
    linear_layers,
    local_layers,
    stack_config,
)
from spmdgpt.model import is_info, param_info

# Dense peak FLOP/s per device (vendor data sheets). float32 matmuls on GPUs run as TF32 under
# JAX's default precision, hence the TF32 column.
PEAK_FLOPS = {
    # device_kind substring: (bf16/fp16, fp32/tf32)
    "H200": (989e12, 494e12),
    "H100": (989e12, 494e12),
    "A100": (312e12, 156e12),
    "L4": (121e12, 60e12),
    "A10G": (70e12, 35e12),
    "TPU v6 lite": (918e12, 918e12),
    "TPU v5p": (459e12, 459e12),
    "TPU v5 lite": (197e12, 197e12),
    "TPU v5": (459e12, 459e12),
    "TPU v4": (275e12, 275e12),
}


def matmul_params(cfg: ModelConfig) -> float:
    """Weights that take part in a token's matmuls, read off `param_info`: every block matrix
    (the leaves with a fan-in; norms and biases have none) and the V x D unembedding, tied or
    not. A mixture of experts counts its active parameters: top_k / num_experts of the
    experts' matrices (the leaves with an `experts` axis), the router, shared experts and dense
    layers whole. Multi-token prediction's modules (model.mtp_depth) are block leaves too, and
    each runs the output head once more; per-layer inputs (model.per_layer_dim) add the embedding's
    projection to every layer's input; DeepSeek-V4's compressors count in their own kind's layers."""
    info, moe = param_info(cfg), cfg.moe
    active = (
        (lambda i: moe.top_k / moe.num_experts if "experts" in i.logical else 1) if moe.num_experts else (lambda i: 1)
    )
    kinds = compress_kinds(cfg)  # (DeepSeek-V4's unit, `csa.Csa`: a compressor computes in its own kind's layers)
    used = {"heavy": kinds.count("H") / len(kinds), "sparse": kinds.count("C") / len(kinds),
            "index": kinds.count("C") / len(kinds)} if cfg.csa.q_rank else {}
    share = lambda path: next((used[k.name] for k in path if getattr(k, "name", None) in used), 1)  # noqa: E731
    blocks = sum(math.prod(i.shape) * active(i) * share(path)
                 for path, i in jax.tree_util.tree_leaves_with_path(info, is_leaf=is_info)
                 if i.fan_in and "layers" in i.logical)
    per_layer = 0 if info.per_layer is None else math.prod(info.per_layer.proj.shape)  # (its table lookup: free)
    return blocks + per_layer + math.prod(info.embed.shape) * (1 + cfg.mtp_depth)


def flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """Training FLOPs (forward + backward) per token."""
    qk, v = attention_widths(cfg)  # (QK^T over the query/key width, AV over the value width)
    linear = sum(linear_layers(cfg))
    layers = cfg.num_layers - linear + cfg.mtp_depth  # (each MTP module: one more block's attention)
    widths = layers * (qk + v)
    if global_stack(cfg):  # (the G layers' heads of their own width, `config.stack_config`)
        local = sum(local_layers(cfg))
        widths = local * sum(attention_widths(stack_config(cfg, "local_blocks"))) + \
            (layers - local) * sum(attention_widths(stack_config(cfg, "blocks")))
    index = entries = 0.0
    if cfg.mla.kv_rank and cfg.mla.index_heads:  # (the lightning indexer's scores in every softmax layer)
        index = 6.0 * layers * seq_len * cfg.mla.index_heads * (cfg.mla.index_dim + 1)
    if cfg.csa.q_rank:  # (DeepSeek-V4's compressed entries beside the tokens; a C layer's indexer over them)
        kinds, c = compress_kinds(cfg), cfg.csa
        sparse, heavy = kinds.count("C") * (seq_len // c.sparse_rate), kinds.count("H") * (seq_len // c.heavy_rate)
        entries = (sparse + heavy) * (qk + v)
        index = 2.0 * sparse * c.index_heads * (c.index_dim + 1)
    return 6.0 * matmul_params(cfg) + 6.0 * (widths * seq_len + entries) * cfg.num_heads + 6.0 * linear * \
        deltanet_mixing(cfg, seq_len) + index


def deltanet_mixing(cfg: ModelConfig, seq_len: int) -> float:
    """Multiply-adds per token of one Gated DeltaNet layer's chunkwise form, over its Hv value heads
    (each head's key width dk, value width dv, chunks of C = min(chunk, seq_len) tokens): Q K^T and
    K K^T inside the chunk (2 C dk), the intra-chunk product with the corrected values (C dv), the UT
    transform applied to the keys and the values (C (dk + dv)), and the state read twice and written
    once (3 dk dv). Counted over whole C x C blocks, as the attention term counts T x T."""
    _, Hv, dk, dv = deltanet_dims(cfg)
    C = min(cfg.deltanet.chunk, seq_len)
    return Hv * (2 * C * dk + C * dv + C * (dk + dv) + 3 * dk * dv)


def device_peak_flops(
    device: jax.Device, compute_dtype: DType, cpu_peak_flops: float, num_cpu_devices: int
) -> Optional[float]:
    """Peak FLOP/s of one device, or None when the kind is unknown."""
    if device.platform == "cpu":
        # Simulated CPU devices share the host's cores.
        return cpu_peak_flops / max(num_cpu_devices, 1)
    half = compute_dtype in (DType.bfloat16, DType.float16)
    for name, (p16, p32) in PEAK_FLOPS.items():
        if name in device.device_kind:
            return p16 if half else p32
    return None


def mfu(tokens_per_sec: float, flops_per_tok: float, total_peak: Optional[float]) -> Optional[float]:
    if not total_peak:
        return None
    return tokens_per_sec * flops_per_tok / total_peak
