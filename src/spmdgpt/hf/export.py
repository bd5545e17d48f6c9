"""Export by the architecture tables: a model config's config.json (`hf_config`, with
`rope_parameters`) and its parameters as {transformers name: array} (`to_hf` by the config's
own architecture, `to_tensors` by any table). `convert.py` holds what import and export share
(which table a config is, the tensor layouts, which leaf and layer each name is)."""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import numpy as np

from spmdgpt.config import (
    ROPE_SCALING_FIELDS,
    ConfigError,
    ModelConfig,
    RopeScaling,
    compress_kinds,
    deltanet_dims,
    expert_hidden,
    head_dim,
    kv_heads,
    layer_windows,
    linear_layers,
    mla_dims,
    mlp_hidden,
    moe_layers,
)
from spmdgpt.hf.convert import (
    _dims,
    _hf_shape,
    _layers_of,
    _leaf,
    _leaf_at,
    _names,
    _present,
    _rearrange,
    architecture,
    reorder,
)
from spmdgpt.hf.fields import ROPE_KEYS, TANH_GELUS
from spmdgpt.hf.tables import (
    DEEPSEEK_V3,
    DEEPSEEK_V4,
    DEEPSEEK_V32,
    GEMMA3,
    GEMMA4,
    GPT_OSS,
    KIMI_LINEAR,
    LLAMA,
    LLAMA4,
    MISTRAL,
    MIXTRAL,
    NANOCHAT,
    NEOX,
    OLMO2,
    OLMO3,
    QWEN3,
    QWEN3_5,
    QWEN3_5_MOE,
    QWEN3_MOE,
    QWEN3_NEXT,
    Architecture,
)


def hf_config(cfg: ModelConfig, eos_id: Optional[int], bos_id: Optional[int] = None,
              name: Optional[str] = None) -> dict:
    """config.json of the exported model (as class `name` where that table represents it,
    `architecture`)."""
    arch = architecture(cfg, name)
    common = {
        "architectures": [arch.name],
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "intermediate_size": mlp_hidden(cfg),
        "max_position_embeddings": cfg.max_seq_len,
        "tie_word_embeddings": cfg.tie_embeddings,
        "rope_parameters": rope_parameters(cfg),
        "rope_theta": cfg.rope_theta,
        "attention_dropout": 0.0,
        "initializer_range": cfg.init_std,
        "bos_token_id": bos_id if bos_id is not None else eos_id,
        "eos_token_id": eos_id,
        "torch_dtype": "float32",
        "use_cache": True,
    }
    if cfg.rope_scaling != RopeScaling.none:  # (what transformers 4.x reads; 5.x reads either)
        common["rope_scaling"] = rope_parameters(cfg)
    if arch is NEOX:
        common["rope_parameters"]["partial_rotary_factor"] = 1.0
        return {**common, "model_type": arch.model_type, "hidden_act": TANH_GELUS[0], "layer_norm_eps": cfg.norm_eps,
                "attention_bias": cfg.bias, "use_parallel_residual": False, "rotary_pct": 1.0,
                "rotary_emb_base": cfg.rope_theta, "hidden_dropout": 0.0, "classifier_dropout": 0.0}
    llama = {**common, "model_type": arch.model_type, "hidden_act": "silu", "rms_norm_eps": cfg.norm_eps,
             "num_key_value_heads": kv_heads(cfg), "head_dim": head_dim(cfg)}
    if arch is LLAMA:
        return {**llama, "attention_bias": cfg.bias, "mlp_bias": cfg.bias, "pretraining_tp": 1}
    windows = layer_windows(cfg)
    moe = cfg.moe  # (Mixtral, Qwen3-MoE: the experts; the auxiliary loss weight recorded)
    experts = {"num_experts_per_tok": moe.top_k, "router_aux_loss_coef": moe.load_balance_loss,
               "output_router_logits": False}
    if arch is DEEPSEEK_V32:  # (DeepSeek-V3's fields, its main attention's RoPE always interleaved; the indexer's)
        v3 = hf_config(dataclasses.replace(cfg, mla=dataclasses.replace(cfg.mla, index_heads=0)), eos_id, bos_id)
        del v3["rope_interleave"], v3["num_nextn_predict_layers"]
        a = cfg.mla
        return {**v3, "architectures": [arch.name], "model_type": arch.model_type, "index_n_heads": a.index_heads,
                "index_head_dim": a.index_dim, "index_topk": a.index_topk,
                "mlp_layer_types": ["dense" if i < moe.first_dense_layers else "sparse" for i in range(cfg.num_layers)],
                "layer_types": ["indexed_attention"] * cfg.num_layers}
    if arch is DEEPSEEK_V4:  # (every layer MoE; intermediate_size is the experts' width by attribute_map, left out)
        return deepseek_v4_config(cfg, {k: v for k, v in llama.items() if k not in ("intermediate_size",
                                                                                     "rope_scaling")})
    if arch is DEEPSEEK_V3:
        kv_rank, q_rank, nope, rope, v = mla_dims(cfg)
        return {**llama, "num_experts_per_tok": moe.top_k, "num_key_value_heads": cfg.num_heads, "head_dim": rope,
                "kv_lora_rank": kv_rank, "q_lora_rank": q_rank or None, "qk_rope_head_dim": rope,
                "qk_nope_head_dim": nope, "v_head_dim": v, "qk_head_dim": nope + rope, "rope_interleave": True,
                "n_routed_experts": moe.num_experts, "n_shared_experts": moe.shared_experts,
                "moe_intermediate_size": expert_hidden(cfg), "first_k_dense_replace": moe.first_dense_layers,
                "n_group": moe.groups, "topk_group": moe.top_groups, "routed_scaling_factor": moe.route_scale,
                "norm_topk_prob": moe.normalize_top_k, "attention_bias": False, "num_nextn_predict_layers": 0}
    if arch is KIMI_LINEAR:  # (MLA without RoPE, Kimi Delta Attention layers, all MLPs dense or the first
        # moe.first_dense_layers dense and the others MoE; a pad id inside the vocabulary: transformers' default,
        # 163,839, is past a small one)
        kv_rank, q_rank, nope, rope, v = mla_dims(cfg)
        kh, _, kd, _ = deltanet_dims(cfg)
        sparse = moe.num_experts > 0
        return {**llama, "num_key_value_heads": cfg.num_heads, "head_dim": rope, "pad_token_id": eos_id,
                "kv_lora_rank": kv_rank, "q_lora_rank": q_rank or None, "qk_rope_head_dim": rope,
                "qk_nope_head_dim": nope, "v_head_dim": v, "attention_bias": False,
                "layer_types": ["linear_attention" if lin else "full_attention" for lin in linear_layers(cfg)],
                "mlp_layer_types": ["sparse" if kind else "dense" for kind in moe_layers(cfg)],
                "linear_num_heads": kh, "linear_head_dim": kd, "linear_conv_kernel_dim": cfg.deltanet.conv,
                **({"num_experts": moe.num_experts, "num_experts_per_tok": moe.top_k,
                    "n_shared_experts": moe.shared_experts, "moe_intermediate_size": expert_hidden(cfg),
                    "n_group": moe.groups, "topk_group": moe.top_groups, "routed_scaling_factor": moe.route_scale,
                    "norm_topk_prob": moe.normalize_top_k} if sparse else {})}
    if arch is GEMMA3:  # (rope_parameters per layer type; rope_theta, rope_local_base_freq, rope_scaling: 4.x's)
        glob, local = _ropes_by_layer_type(cfg)
        gemma = {k: v for k, v in llama.items() if k != "hidden_act"}
        return {**gemma, "hidden_activation": TANH_GELUS[0], "attention_bias": False,
                "query_pre_attn_scalar": cfg.query_pre_attn_scalar or head_dim(cfg),
                "sliding_window": max(windows) or cfg.max_seq_len,
                "layer_types": layer_types(windows),
                "rope_parameters": {"full_attention": glob, "sliding_attention": local},
                "rope_local_base_freq": local["rope_theta"], "final_logit_softcapping": None,
                "attn_logit_softcapping": None, "use_bidirectional_attention": False}
    if arch is GEMMA4:  # (Google's form of the G layers' geometry: global_head_dim, num_global_key_value_heads)
        glob, local = _ropes_by_layer_type(cfg)
        if cfg.rope_global_fraction < 1.0:
            glob = {"rope_type": "proportional", "partial_rotary_factor": cfg.rope_global_fraction,
                    "rope_theta": cfg.rope_theta}
        gemma = {k: v for k, v in llama.items() if k not in ("hidden_act", "rope_theta")}
        return {**gemma, "hidden_activation": TANH_GELUS[0], "attention_bias": False,
                "sliding_window": max(windows) or cfg.max_seq_len, "layer_types": layer_types(windows),
                "rope_parameters": {"full_attention": glob, "sliding_attention": local},
                "global_head_dim": cfg.global_head_dim or head_dim(cfg), "attention_k_eq_v": cfg.global_k_eq_v,
                "num_global_key_value_heads": (cfg.global_kv_heads or kv_heads(cfg)) if cfg.global_k_eq_v else None,
                "final_logit_softcapping": cfg.logit_softcap or None, "use_bidirectional_attention": None,
                "hidden_size_per_layer_input": cfg.per_layer_dim, "vocab_size_per_layer_input": cfg.vocab_size,
                "num_kv_shared_layers": cfg.kv_shared_layers, "use_double_wide_mlp": cfg.kv_shared_wide_mlp,
                "enable_moe_block": moe.dense_mlp,
                **({"num_experts": moe.num_experts, "top_k_experts": moe.top_k,
                    "moe_intermediate_size": expert_hidden(cfg)} if moe.dense_mlp else {})}
    if arch in (QWEN3_5, QWEN3_5_MOE, QWEN3_NEXT):  # (the softmax layers' partial RoPE in rope_parameters; the
        kh, vh, kd, vd = deltanet_dims(cfg)  # Gated DeltaNet layers' widths; the experts and the gated shared one)
        hybrid = {} if arch is QWEN3_5 else {
            **experts, "num_experts": moe.num_experts, "moe_intermediate_size": expert_hidden(cfg),
            "shared_expert_intermediate_size": moe.shared_experts * expert_hidden(cfg),
            **({"norm_topk_prob": moe.normalize_top_k, "decoder_sparse_step": 1, "mlp_only_layers": []}
               if arch is QWEN3_NEXT else {})}
        return {**llama, **hybrid, "attention_bias": False,
                "rope_parameters": {**rope_parameters(cfg), "partial_rotary_factor": cfg.rope_fraction},
                "layer_types": ["linear_attention" if lin else "full_attention" for lin in linear_layers(cfg)],
                "linear_num_key_heads": kh,
                "linear_num_value_heads": vh, "linear_key_head_dim": kd, "linear_value_head_dim": vd,
                "linear_conv_kernel_dim": cfg.deltanet.conv}
    if arch is GPT_OSS:  # (every layer MoE; intermediate_size each expert's width)
        return {**llama, **experts, "num_local_experts": moe.num_experts, "intermediate_size": expert_hidden(cfg),
                "attention_bias": True, "swiglu_limit": cfg.glu_limit, "swiglu_alpha": cfg.glu_alpha,
                "sliding_window": max(windows) or cfg.max_seq_len,
                "layer_types": layer_types(windows)}
    if arch is LLAMA4:  # (each layer's kind: chunked with RoPE, or full, NoPE under model.global_nope; MoE layers by
        # index; intermediate_size each expert's width and its shared expert's)
        return {**llama, **experts, "attention_bias": False, "num_local_experts": moe.num_experts,
                "intermediate_size": expert_hidden(cfg), "intermediate_size_mlp": mlp_hidden(cfg),
                "moe_layers": [i for i, m in enumerate(moe_layers(cfg)) if m],
                "interleave_moe_layer_step": moe.interleave_step, "use_qk_norm": cfg.qk_norm,
                "attention_chunk_size": -min(*windows, 0) or cfg.max_seq_len,
                "layer_types": ["chunked_attention" if w else "full_attention" for w in windows],
                "no_rope_layers": [int(bool(w) or not cfg.global_nope) for w in windows],
                "attn_temperature_tuning": cfg.attn_temperature > 0, "attn_scale": cfg.attn_temperature,
                "floor_scale": cfg.attn_temperature_floor, "router_jitter_noise": 0.0}
    if arch is NANOCHAT:  # (soft-capped logits; RMSNorms without parameters, none stored)
        return {**llama, "hidden_act": "relu2", "attention_bias": False,
                "final_logit_softcapping": cfg.logit_softcap or None}
    if arch is OLMO2:
        return {**llama, "attention_bias": False}
    if arch is OLMO3:  # (rope_parameters per layer type, as Gemma 3's)
        glob, local = _ropes_by_layer_type(cfg)
        return {**llama, "attention_bias": False, "sliding_window": max(windows) or cfg.max_seq_len,
                "layer_types": layer_types(windows), "rope_parameters": {"full_attention": glob,
                                                                         "sliding_attention": local}}
    if arch is MISTRAL:
        return {**llama, "sliding_window": windows[0]}
    if arch is MIXTRAL:
        return {**llama, **experts, "sliding_window": windows[0] or None, "num_local_experts": moe.num_experts,
                "intermediate_size": expert_hidden(cfg), "router_jitter_noise": 0.0}
    # Qwen2 / Qwen3: which layers have the sliding window
    qwen = {**llama, "use_sliding_window": any(windows), "sliding_window": max(windows) or None,
            "max_window_layers": cfg.num_layers,
            "layer_types": layer_types(windows)}
    if arch is QWEN3_MOE:  # (layer i MoE: i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0)
        n, k = moe.first_dense_layers, moe.interleave_step
        dense = {"decoder_sparse_step": k, "mlp_only_layers": list(range(n))} if n % k == 0 else \
            {"decoder_sparse_step": 1, "mlp_only_layers": [i for i, m in enumerate(moe_layers(cfg)) if not m]}
        return {**qwen, **experts, **dense, "attention_bias": False, "num_experts": moe.num_experts,
                "moe_intermediate_size": expert_hidden(cfg), "norm_topk_prob": moe.normalize_top_k}
    return {**qwen, "attention_bias": False} if arch is QWEN3 else qwen


V4_KINDS = {"S": "sliding_attention", "C": "compressed_sparse_attention", "H": "heavily_compressed_attention"}


def deepseek_v4_config(cfg: ModelConfig, llama: dict) -> dict:
    """DeepseekV4ForCausalLM's config.json: model.csa's layer kinds (layer_types), rates, RoPE (rope_parameters'
    main: the S layers' model.rope_theta unscaled; compress: csa.compress_theta with model.rope_scaling, YaRN's
    attention factor 1, transformers' default for it), indexer and output groups; the hyper-connections; the MoE
    (sqrt-softplus, always renormalised; the first moe.hash_layers layers hash_moe)."""
    c, moe, H = cfg.csa, cfg.moe, head_dim(cfg)
    fraction = c.rope_dim / H
    compress = {**rope_parameters(dataclasses.replace(cfg, rope_theta=c.compress_theta)),
                "partial_rotary_factor": fraction}
    if cfg.rope_scaling == RopeScaling.yarn:
        compress["attention_factor"] = 1.0
    return {**llama, "num_key_value_heads": 1, "head_dim": H, "attention_bias": False, "mlp_bias": False,
            "q_lora_rank": c.q_rank, "partial_rotary_factor": fraction, "o_groups": c.out_groups,
            "o_lora_rank": c.out_rank, "layer_types": [V4_KINDS[k] for k in compress_kinds(cfg)],
            "compress_rates": {V4_KINDS["C"]: c.sparse_rate, V4_KINDS["H"]: c.heavy_rate},
            "compress_rope_theta": c.compress_theta, "index_n_heads": c.index_heads, "index_head_dim": c.index_dim,
            "index_topk": c.index_topk, "sliding_window": cfg.sliding_window,
            "rope_parameters": {"main": {"rope_type": "default", "rope_theta": cfg.rope_theta,
                                         "partial_rotary_factor": fraction}, "compress": compress},
            "hc_mult": cfg.hyper_connections, "hc_sinkhorn_iters": cfg.hyper_sinkhorn_iters, "hc_eps": cfg.hyper_eps,
            "n_routed_experts": moe.num_experts, "num_experts_per_tok": moe.top_k,
            "moe_intermediate_size": expert_hidden(cfg), "n_shared_experts": moe.shared_experts,
            "scoring_func": "sqrtsoftplus", "norm_topk_prob": True, "routed_scaling_factor": moe.route_scale,
            "swiglu_limit": cfg.glu_limit, "router_aux_loss_coef": moe.load_balance_loss, "output_router_logits": False,
            "mlp_layer_types": ["hash_moe" if i < moe.hash_layers else "moe" for i in range(cfg.num_layers)],
            "num_nextn_predict_layers": 0}


def _ropes_by_layer_type(cfg: ModelConfig) -> tuple:
    """(the full layers' rope_parameters, the sliding ones': model.rope_local_theta unscaled, or the
    full layers' where it is None)."""
    glob = rope_parameters(cfg)
    return glob, glob if cfg.rope_local_theta is None else {"rope_type": "default", "rope_theta": cfg.rope_local_theta}


def layer_types(windows) -> list:
    """config.json's layer_types of the layers' windows (`layer_windows`): sliding_attention where
    a layer has one, full_attention where it has none."""
    return ["sliding_attention" if w else "full_attention" for w in windows]


def rope_parameters(cfg: ModelConfig) -> dict:
    """config.json's rope_parameters: the base, and the scaling with the parameters it reads."""
    if cfg.rope_scaling == RopeScaling.none:
        return {"rope_type": "default", "rope_theta": cfg.rope_theta}
    out = {"rope_type": cfg.rope_scaling.value, "rope_theta": cfg.rope_theta}
    for name in ROPE_SCALING_FIELDS[cfg.rope_scaling.value]:
        value = getattr(cfg, name)  # (unset mscales and the default truncate: not written)
        if value is not None and not (name.startswith("rope_mscale") and not value) and not (
                name == "rope_truncate" and value):
            out[ROPE_KEYS[name]] = value
    return out


def to_hf(cfg: ModelConfig, params, name: Optional[str] = None) -> Dict[str, np.ndarray]:
    """spmdgpt parameters (a Params of host arrays) -> {transformers name: array}, by the
    architecture's table (class `name`'s where it represents the model, `architecture`)."""
    return to_tensors(cfg, params, architecture(cfg, name))


def to_tensors(cfg: ModelConfig, params, arch: Architecture) -> Dict[str, np.ndarray]:
    """spmdgpt parameters (host arrays) -> {name: array} by any table (e.g. tables.TORCH_GPT, the
    web page's); a ConfigError naming any parameter leaf that no row of the table names. Under
    model.parametrization=mup / completep the forward's multipliers are folded into the weights
    first (`parametrization.folded`): the tensors compute what the run computed."""
    import jax

    from spmdgpt.model import param_info
    from spmdgpt.model.parametrization import folded

    params = folded(cfg, params)  # (μP / CompleteP's forward multipliers into the weights: what the table reads)
    info = param_info(cfg)
    leaves = {".".join(k.name for k in path) for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]}
    # (multi-token prediction's modules, which transformers' classes do not run, and FP8's amax histories:
    # training only, left out)
    leaves = {n for n in leaves if not n.startswith("mtp.") and not n.endswith(".fp8_amax")}
    missing = sorted(leaves - {_leaf_at(t, cfg, i)[0] for t in arch.tensors for i in _layers_of(t, cfg)})
    if missing:
        raise ConfigError([f"parameter(s) {', '.join(missing)}: the {arch.name} table (spmdgpt/hf/tables.py) has no "
                           "row for them; add one there, or refuse the field that creates them"])
    dtype = np.asarray(params.embed).dtype
    out: Dict[str, np.ndarray] = {}
    rows = [(t, set(_layers_of(t, cfg))) for t in arch.tensors if t.per_layer]  # (each row's layers, once)
    for i in range(cfg.num_layers):
        out.update(_tensors(cfg, [t for t, layers in rows if i in layers], params, info, _dims(cfg, i), i, dtype))
    out.update(_tensors(cfg, [t for t in arch.tensors if not t.per_layer], params, info, _dims(cfg), None, dtype))
    return out


def _tensors(cfg, tensors, params, info, dims, layer, dtype) -> Dict[str, np.ndarray]:
    out = {}
    for t in tensors:
        if not _present(t, cfg, info, layer):
            continue
        names = _names(t, cfg, layer)
        path, index = _leaf_at(t, cfg, layer)
        value = None if t.leaf is None else _leaf(params, path)
        if value is None:
            out.update({n: np.full(_hf_shape(t, dims), t.fill or 0.0, dtype) for n in names})
            continue
        value = np.asarray(value if index is None else value[index])  # (a leaf without a layer axis: whole)
        a = _rearrange(value, t.layout, dims)
        if t.dtype is not None:  # (DeepSeek-V4's tid2eid: int64 ids)
            a = a.astype(t.dtype)
        if t.order is not None:  # (interleaved RoPE pairs: DeepSeek's, Llama 4's)
            a = reorder(a, t.order(cfg))
        if t.sign is not None:  # (nanochat's q and k rows, `tables._rope_flip`)
            a = (a * t.sign(cfg)).astype(a.dtype)
        if t.within is not None:  # (its rows of a tensor that several leaves share, along t.within_axis)
            rows, length = t.within(cfg)
            shape = a.shape[:t.within_axis] + (length,) + a.shape[t.within_axis + 1:]
            whole = out.setdefault(names[0], np.zeros(shape, a.dtype))
            whole[(slice(None),) * t.within_axis + (rows,)] = a
            continue
        out.update(zip(names, a) if t.split else [(names[0], a)])
    return {n: np.ascontiguousarray(a) for n, a in out.items()}
