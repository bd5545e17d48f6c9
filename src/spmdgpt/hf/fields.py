"""config.json -> model fields, for import: what a Hugging Face config determines of a spmdgpt
model (`model_fields`), per family, with every config.json field that no spmdgpt model
represents refused by name; and the RoPE parameters' keys, which export writes back."""

from __future__ import annotations

from spmdgpt.config import ConfigError, moe_layer_pattern
from spmdgpt.hf.tables import (
    ARCHITECTURES,
    DEEPSEEK_V3,
    DEEPSEEK_V4,
    DEEPSEEK_V32,
    GEMMA3,
    GEMMA4,
    GPT_OSS,
    KIMI_LINEAR,
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
)

TANH_GELUS = ("gelu_pytorch_tanh", "gelu_new")  # both: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))


# transformers' rope_parameters keys of the rope_* fields
ROPE_KEYS = {"rope_factor": "factor", "rope_original_max_len": "original_max_position_embeddings",
             "rope_low_freq_factor": "low_freq_factor", "rope_high_freq_factor": "high_freq_factor",
             "rope_beta_fast": "beta_fast", "rope_beta_slow": "beta_slow", "rope_attention_factor": "attention_factor",
             "rope_mscale": "mscale", "rope_mscale_all_dim": "mscale_all_dim", "rope_truncate": "truncate"}


def _rope_fields(rope: dict, hf: dict, need) -> dict:
    """The rope_* model fields of a config.json's RoPE parameters (`need` records what is refused)."""
    kind = rope.get("rope_type", rope.get("type", "default"))
    need(
        "rope_type",
        kind in ("default", "linear", "llama3", "yarn"),
        "default, linear, llama3 or yarn (the RoPE scalings spmdgpt computes)",
    )
    out = {"rope_scaling": kind if kind in ("linear", "llama3", "yarn") else "none",
           "rope_theta": float(rope["rope_theta"])}
    if kind == "linear":
        out["rope_factor"] = float(rope.get("factor", 1.0))
    elif kind == "llama3":
        out.update({name: type(default)(rope.get(ROPE_KEYS[name], default)) for name, default in  # (Llama 3.1's)
                    (("rope_factor", 8.0), ("rope_original_max_len", 8192), ("rope_low_freq_factor", 1.0),
                     ("rope_high_freq_factor", 4.0))})
    elif kind == "yarn":
        out.update(rope_mscale=float(rope.get("mscale") or 0.0),
                   rope_mscale_all_dim=float(rope.get("mscale_all_dim") or 0.0),
                   rope_truncate=bool(rope.get("truncate", True)))
        original = int(rope.get("original_max_position_embeddings") or hf["max_position_embeddings"])
        out.update(rope_factor=float(rope.get("factor") or hf["max_position_embeddings"] / original),
                   rope_original_max_len=original, rope_beta_fast=float(rope.get("beta_fast") or 32),
                   rope_beta_slow=float(rope.get("beta_slow") or 1), rope_attention_factor=rope.get("attention_factor"))
    return out


def _windows(types: list, layers: int, window, need) -> dict:
    """model.sliding_window and window_pattern of config.json's layer_types (each layer
    sliding_attention or full_attention; `window` the sliding layers' width, none: no windows),
    `need` recording a layer_types of other kinds or another length."""
    need("layer_types", set(types) <= {"sliding_attention", "full_attention"} and len(types) == layers,
         f"{layers} of sliding_attention / full_attention")
    if not window or "sliding_attention" not in types:
        return {}
    return {"sliding_window": window,
            "window_pattern": "".join("L" if t == "sliding_attention" else "G" for t in types)}


def _rope(hf: dict) -> dict:
    """The RoPE parameters of config.json (of its global layers, where each layer type has its own)."""
    rope = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    if isinstance(rope.get("full_attention"), dict):  # (Gemma 3: per layer type)
        rope = dict(rope["full_attention"])
    rope.setdefault("rope_theta", hf.get("rope_theta", hf.get("rotary_emb_base", 10000.0)))
    if "rotary_pct" in hf:
        rope.setdefault("partial_rotary_factor", hf["rotary_pct"])
    return rope


# config.json's architectures -> the model_type import reads
IMPORTS = {a.name: a.model_type for a in ARCHITECTURES}
# multimodal classes whose language model is one of the tables': its config.json's text_config and
# its model.language_model.* weights are read, the vision tower left out
LANGUAGE_MODELS = {"Qwen3_5ForConditionalGeneration": "Qwen3_5ForCausalLM",
                   "Qwen3_5MoeForConditionalGeneration": "Qwen3_5MoeForCausalLM",
                   "Gemma3ForConditionalGeneration": "Gemma3ForCausalLM",
                   "Gemma4ForConditionalGeneration": "Gemma4ForCausalLM",
                   "Llama4ForConditionalGeneration": "Llama4ForCausalLM"}


def language_model(hf: dict) -> dict:
    """config.json of a multimodal class in `LANGUAGE_MODELS` -> its language model's (text_config,
    as that text class, with the outer tie_word_embeddings); any other config.json as it is."""
    arch = (hf.get("architectures") or [None])[0]
    if arch not in LANGUAGE_MODELS or not isinstance(hf.get("text_config"), dict):
        return hf
    text = dict(hf["text_config"])
    text["architectures"] = [LANGUAGE_MODELS[arch]]
    if "tie_word_embeddings" in hf:  # (else the text config's own, or its class's default)
        text["tie_word_embeddings"] = hf["tie_word_embeddings"]
    return text


def model_fields(hf: dict, where: str) -> dict:
    """The spmdgpt model fields a Hugging Face config determines (the parameters' shapes and the
    computation), or a ConfigError naming every HF field that no spmdgpt model represents (one
    line for a field of the wrong type or missing: never a traceback). A multimodal class's
    config reads as its language model's (`language_model`)."""
    try:
        fields = _model_fields(hf, where)
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as e:
        raise ConfigError([f"{where}: config.json cannot be read ({type(e).__name__}: {str(e).splitlines()[0][:120]}); "
                           "check that field against the class's config in transformers"]) from None
    _typed(fields, language_model(hf), where)
    return fields


def _typed(fields: dict, hf: dict, where: str) -> None:
    """A ConfigError naming the config.json key (and the model field) of a value that is not of the
    field's type (a string for a number, say), where the config would otherwise fail to build."""
    from omegaconf.errors import OmegaConfBaseException

    from spmdgpt.config import model_config_from_dict

    arch = next((a for a in ARCHITECTURES if a.name == (hf.get("architectures") or [None])[0]), None)

    def said(path: str, value) -> str:
        key = arch.fields.get(path) if arch is not None else None
        return f"{key}={hf[key]!r} (model.{path})" if key in hf else f"model.{path}={value!r}"

    # a number given as a string ("32"): OmegaConf would convert it without a word, transformers keeps the string
    for path, value in _leaves(fields):
        if isinstance(value, str) and _number_field(path) and _parses(value):
            raise ConfigError([f"{where}: config.json has {said(path, value)}: a string where a number belongs; "
                               "write the number without quotes"])
    try:
        model_config_from_dict(fields)
    except OmegaConfBaseException as e:
        raise ConfigError([f"{where}: config.json has {said(e.full_key, e.value)}: {str(e).splitlines()[0]}; check "
                           "that field against the class's config in transformers"]) from None


def _parses(text: str) -> bool:
    """Whether `text` reads as a number (float() takes it)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _leaves(tree: dict, prefix: str = ""):
    """(dotted path, value) of a nested dict's leaves."""
    for k, v in tree.items():
        if isinstance(v, dict):
            yield from _leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def _number_field(path: str) -> bool:
    """Whether the model field at dotted `path` holds an int or a float (or null)."""
    import types
    import typing

    from spmdgpt.config.load import field_type

    t = field_type(["model", *path.split(".")])
    kinds = typing.get_args(t) if typing.get_origin(t) in (typing.Union, types.UnionType) else (t,)
    return any(k in (int, float) for k in kinds)


def _model_fields(hf: dict, where: str) -> dict:
    hf = language_model(hf)
    arch = (hf.get("architectures") or [None])[0]
    kind = hf.get("model_type") if hf.get("model_type") in IMPORTS.values() else IMPORTS.get(arch)
    for key in ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size")[:4 if kind else 0]:
        value = hf.get(key)
        if type(value) is not int or value < 1:  # (a string, a float, true, a missing key: one line, not a traceback)
            said = f"has {key}={value!r}" if key in hf else f"has no {key}"
            raise ConfigError([f"{where}: config.json {said}; spmdgpt needs a whole number >= 1"])
    errs = []

    def need(key, ok, want):
        if not ok:
            errs.append(f"{where}: config.json has {key}={hf.get(key, _rope(hf).get(key))!r}; spmdgpt needs {want}")

    d, heads = hf.get("hidden_size"), hf.get("num_attention_heads")
    rope = _olmo3_ropes(hf)[0] if kind == OLMO3.model_type else _rope(hf)
    if kind == GEMMA4.model_type:  # (its global layers' proportional RoPE: model.rope_global_fraction)
        need("rope_parameters", rope.get("rope_type", "default") in ("default", "proportional")
             and float(rope.get("factor", 1.0)) == 1.0, "the full_attention layers' RoPE default or proportional, "
             "unscaled (factor 1)")
        rope = {**rope, "rope_type": "default"}
    rope_fields = _rope_fields(rope, hf, need)
    if kind == NEOX.model_type:
        need("hidden_act", hf.get("hidden_act") in TANH_GELUS, f"the tanh GELU ({' or '.join(TANH_GELUS)})")
        need("use_parallel_residual", hf.get("use_parallel_residual", True) is False, "false (a sequential residual)")
        need("partial_rotary_factor", float(rope.get("partial_rotary_factor", 0.25)) == 1.0, "1.0 (full rotary)")
        fields = {"norm": "layernorm", "mlp": "gelu", "norm_eps": hf.get("layer_norm_eps", 1e-5),
                  "bias": bool(hf.get("attention_bias", True))}
    elif kind == DEEPSEEK_V3.model_type:
        fields = _deepseek_v3(hf, need)
    elif kind == DEEPSEEK_V32.model_type:
        fields = _deepseek_v32(hf, need)
    elif kind == DEEPSEEK_V4.model_type:
        fields = _deepseek_v4(hf, need)
    elif kind == GEMMA3.model_type:
        fields = _gemma3(hf, need)
    elif kind == GEMMA4.model_type:
        fields = _gemma4(hf, need)
    elif kind == QWEN3_5.model_type:
        fields = _qwen3_5(hf, rope, need)
    elif kind in (QWEN3_NEXT.model_type, QWEN3_5_MOE.model_type):
        fields = {**_qwen3_5(hf, rope, need), "moe": _hybrid_experts(hf, kind, need)}
    elif kind == GPT_OSS.model_type:
        fields = _gpt_oss(hf, need)
    elif kind in (OLMO2.model_type, OLMO3.model_type):
        fields = _olmo(hf, kind, need)
    elif kind == NANOCHAT.model_type:
        fields = _nanochat(hf, need)
    elif kind == LLAMA4.model_type:
        fields = _llama4(hf, need)
    elif kind == KIMI_LINEAR.model_type:
        fields = _kimi_linear(hf, need)
    elif kind is not None:  # the Llama family
        need("hidden_act", hf.get("hidden_act", "silu") == "silu", "silu (SwiGLU)")
        kv, hd = hf.get("num_key_value_heads") or heads, hf.get("head_dim") or d // heads
        fields = {"norm": "rmsnorm", "mlp": "swiglu", "norm_eps": hf.get("rms_norm_eps", 1e-6),
                  "num_kv_heads": None if kv == heads else kv, "head_dim": None if hd * heads == d else hd}
        if kind == "llama":
            need("mlp_bias", bool(hf.get("mlp_bias", False)) == bool(hf.get("attention_bias", False)),
                 "mlp_bias == attention_bias (model.bias sets both)")
            fields["bias"] = bool(hf.get("attention_bias", False))
        elif kind in (MISTRAL.model_type, MIXTRAL.model_type):  # (transformers' default window: Mistral's 4096)
            window = hf.get("sliding_window", 4096 if kind == MISTRAL.model_type else None)
            fields.update(sliding_window=window or 0, window_pattern="L")
        elif kind == QWEN3_MOE.model_type:  # (no windows)
            fields["moe"] = _qwen3_moe_layers(hf, need)
            need("use_sliding_window", not hf.get("use_sliding_window"), "false (no sliding windows with experts)")
            need("attention_bias", not hf.get("attention_bias", False), "false (no attention biases)")
            fields.update(qk_norm=True, qk_norm_scale=True)
        else:  # Qwen2: q/k/v biases; Qwen3: QK-norm with its scales, no biases; both: windows per layer
            layers, window = hf["num_hidden_layers"], hf.get("sliding_window") if hf.get("use_sliding_window") else None
            types = hf.get("layer_types") or ["sliding_attention" if window and i >= hf.get("max_window_layers", layers)
                                              else "full_attention" for i in range(layers)]
            fields.update(_windows(types, layers, window, need))
            if kind == QWEN3.model_type:
                need("attention_bias", not hf.get("attention_bias", False), "false (no attention biases)")
                fields.update(qk_norm=True, qk_norm_scale=True)
            else:
                fields["qkv_bias"] = True
    else:
        raise ConfigError([f"{where}: architecture {arch or hf.get('model_type')!r} is not supported; spmdgpt imports "
                           f"{', '.join(IMPORTS)} checkpoints"])
    if errs:
        raise ConfigError(errs)
    if kind in (MIXTRAL.model_type, QWEN3_MOE.model_type):  # (softmax routing, no shared experts)
        experts = hf.get("num_experts", hf.get("num_local_experts"))
        fields["moe"] = {
            "first_dense_layers": 0,
            "interleave_step": 1,
            **fields.get("moe", {}),
            "num_experts": experts,
            "top_k": hf.get("num_experts_per_tok", 2),
            "shared_experts": 0,
            "router": "softmax",
            "normalize_top_k": kind == MIXTRAL.model_type or bool(hf.get("norm_topk_prob", False)),
            "mlp_factor": hf["moe_intermediate_size"] / d if kind == QWEN3_MOE.model_type else None,
        }
    tied = bool(hf.get("tie_word_embeddings", kind in (GEMMA3.model_type, GEMMA4.model_type)))  # (Gemma's: tied)
    width = hf.get("intermediate_size") or hf.get("moe_intermediate_size")  # (Qwen3.5-MoE has no dense MLP)
    out = dict(num_layers=hf["num_hidden_layers"], num_heads=heads, d_model=d, mlp_factor=width / d,
               vocab_size=hf["vocab_size"], bias=False, tie_embeddings=tied, **rope_fields)
    # every other field that changes the computation: what this checkpoint has, else off (never the
    # run's own value: a QK-norm in the run's experiment would change what the checkpoint computes)
    return {**out, **NOT_IN_CHECKPOINT, **fields}


def _gemma3(hf: dict, need) -> dict:
    """The model fields of a Gemma3ForCausalLM (text) config.json."""
    heads, layers, d = hf["num_attention_heads"], hf["num_hidden_layers"], hf["hidden_size"]
    act = hf.get("hidden_activation", hf.get("hidden_act", "gelu_pytorch_tanh"))
    need("hidden_activation", act in TANH_GELUS, f"the tanh GELU ({' or '.join(TANH_GELUS)})")
    for key in ("final_logit_softcapping", "attn_logit_softcapping"):
        need(key, hf.get(key) is None, "null (Gemma 2's soft-capping is not in Gemma 3)")
    need("attention_bias", not hf.get("attention_bias", False), "false (no attention biases)")
    need("use_bidirectional_attention", not hf.get("use_bidirectional_attention"), "false (causal attention)")
    every = hf.get("sliding_window_pattern", 6)
    types = hf.get("layer_types") or ["sliding_attention" if (i + 1) % every else "full_attention"
                                      for i in range(layers)]
    windows = _windows(types, layers, hf.get("sliding_window") or 4096, need)
    rope = hf.get("rope_parameters") or {}
    local = rope.get("sliding_attention") if isinstance(rope.get("sliding_attention"), dict) else {
        "rope_type": "default", "rope_theta": hf.get("rope_local_base_freq", 10000.0)}
    need("rope_parameters", local.get("rope_type", "default") == "default",
         "the sliding layers' RoPE unscaled (rope_type default)")
    kv, hd = hf.get("num_key_value_heads") or heads, hf.get("head_dim") or d // heads
    fields = {"norm": "rmsnorm", "mlp": "geglu", "norm_eps": hf.get("rms_norm_eps", 1e-6),
              "num_kv_heads": None if kv == heads else kv, "head_dim": None if hd * heads == d else hd,
              "qk_norm": True, "qk_norm_scale": True, "norm_plus_one": True, "post_norms": True, "embed_scale": True,
              "query_pre_attn_scalar": int(hf.get("query_pre_attn_scalar", 256)),
              "rope_local_theta": float(local.get("rope_theta", 10000.0)), **windows}
    return fields


def _period(pattern: str) -> str:
    """The shortest pattern that repeats to `pattern` ("LGLG" -> "LG")."""
    n = len(pattern)
    return next(pattern[:p] for p in range(1, n + 1) if n % p == 0 and pattern[:p] * (n // p) == pattern)


def _gemma4(hf: dict, need) -> dict:
    """The model fields of a Gemma4ForCausalLM (text) config.json: Gemma 3's layers with plain norm scales,
    unscaled scores, value norms and a scalar per layer; the full_attention layers' own head width and
    key/value heads (per_layer_config, transformers 5.24's, else global_head_dim, default 512, and with
    attention_k_eq_v num_global_key_value_heads), values from keys (attention_k_eq_v), proportional RoPE.
    With enable_moe_block (26B-A4B) experts beside the dense MLP (model.moe.dense_mlp, router_scales).
    E2B's and E4B's per-layer input embeddings (hidden_size_per_layer_input: model.per_layer_dim) and
    layers that read an earlier layer's keys and values (num_kv_shared_layers, use_double_wide_mlp)."""
    heads, layers, d = hf["num_attention_heads"], hf["num_hidden_layers"], hf["hidden_size"]
    act = hf.get("hidden_activation", hf.get("hidden_act", "gelu_pytorch_tanh"))
    need("hidden_activation", act in TANH_GELUS, f"the tanh GELU ({' or '.join(TANH_GELUS)})")
    need("attention_bias", not hf.get("attention_bias", False), "false (no attention biases)")
    need("use_bidirectional_attention", not hf.get("use_bidirectional_attention"), "null (causal attention)")
    whole = lambda key, default, what: _whole(hf, key, default, need, what)  # noqa: E731
    for key in ("enable_moe_block", "use_double_wide_mlp", "attention_k_eq_v"):
        need(key, type(hf.get(key, False)) is bool, "true or false")
    per_layer = whole("hidden_size_per_layer_input", 256, "0: no per-layer inputs; E2B, E4B: 256")  # (per_layer_dim)
    need("vocab_size_per_layer_input", not per_layer or hf.get("vocab_size_per_layer_input", 262_144) == hf[
        "vocab_size"], f"vocab_size ({hf['vocab_size']}: the per-layer inputs' table as many rows as the embedding's)")
    types = list(hf.get("layer_types") or ["sliding_attention" if (i + 1) % 6 else "full_attention"
                                           for i in range(layers)])
    if types:  # (transformers makes the last layer global whatever layer_types says)
        types[-1] = "full_attention"
    windows = _windows(types, layers, hf.get("sliding_window") or 512, need)
    if windows:
        windows["window_pattern"] = _period(windows["window_pattern"])
    kv, hd = hf.get("num_key_value_heads") or heads, hf.get("head_dim") or d // heads
    k_eq_v = hf.get("attention_k_eq_v", False) is True
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    given = hf.get("per_layer_config")
    if given is not None:  # ({layer: {head_dim, num_key_value_heads}}: the full_attention layers', all alike)
        overrides = {int(i): dict(v) for i, v in given.items()}
        first = overrides.get(full[0], {}) if full else {}
        need("per_layer_config", set(overrides) <= set(full) and all(overrides.get(i, {}) == first for i in full)
             and set(first) <= {"head_dim", "num_key_value_heads"}, "the same head_dim / num_key_value_heads in "
             "every full_attention layer and nothing else (the G layers' own geometry)")
        global_hd, global_kv = first.get("head_dim", hd), first.get("num_key_value_heads", kv)
    else:
        global_hd = hf.get("global_head_dim") or 512
        global_kv = (hf.get("num_global_key_value_heads") or kv) if k_eq_v else kv
    rope = hf.get("rope_parameters") or {}
    local = rope.get("sliding_attention") if isinstance(rope.get("sliding_attention"), dict) else {}
    need("rope_parameters", local.get("rope_type", "default") == "default",
         "the sliding layers' RoPE unscaled (rope_type default)")
    glob = rope.get("full_attention") if isinstance(rope.get("full_attention"), dict) else {}
    fraction = float(glob.get("partial_rotary_factor", 1.0)) if glob.get("rope_type") == "proportional" else 1.0
    moe = {"num_experts": 0, "dense_mlp": False, "router_scales": False}
    if hf.get("enable_moe_block", False) is True:  # (26B-A4B: experts beside the dense MLP in every layer, its router)
        # (false: transformers builds no experts, whatever num_experts says; a dense model here too)
        keys = ("num_experts", "top_k_experts", "moe_intermediate_size")
        bad = [f"{key}={hf.get(key)!r}" for key in keys if not (type(hf.get(key)) is int and hf[key] >= 1)]
        need("enable_moe_block", not bad, f"{', '.join(keys)} whole numbers >= 1 beside it (the experts it adds; "
             f"now {', '.join(bad)}), or false")
        if not bad:
            moe = {"num_experts": hf["num_experts"], "top_k": hf.get("top_k_experts"), "mlp_factor":
                   hf["moe_intermediate_size"] / d, "shared_experts": 0, "shared_gate": False, "router": "softmax",
                   "normalize_top_k": True, "weight_input": False, "groups": 1, "top_groups": 1, "route_scale": 1.0,
                   "first_dense_layers": 0, "interleave_step": 1, "dense_mlp": True, "router_scales": True}
    # (E2B, E4B: model.kv_shared_layers; use_double_wide_mlp widens only their MLPs, in transformers too: without
    # them it changes nothing and is accepted as it is)
    shared = whole("num_kv_shared_layers", 0, "the last layers that read an earlier layer's keys and values; 0: none")
    return {"moe": moe, "per_layer_dim": per_layer, "kv_shared_layers": shared,
            "kv_shared_wide_mlp": bool(shared) and hf.get("use_double_wide_mlp") is True, "norm": "rmsnorm",
            "mlp": "geglu",
            "norm_eps": hf.get("rms_norm_eps", 1e-6),
            "num_kv_heads": None if kv == heads else kv, "head_dim": None if hd * heads == d else hd,
            "qk_norm": True, "qk_norm_scale": True, "post_norms": True, "embed_scale": True,
            "query_pre_attn_scalar": 1, "v_norm": True, "layer_scale": True,
            "global_head_dim": global_hd if full else None, "global_kv_heads": global_kv if full and k_eq_v else None,
            "global_k_eq_v": k_eq_v and bool(full), "rope_global_fraction": fraction if full else 1.0,
            "rope_local_theta": float(local.get("rope_theta", 10000.0)),
            "logit_softcap": float(hf.get("final_logit_softcapping") or 0.0), **windows}


def _whole(hf: dict, key: str, default: int, need, what: str) -> int:
    """config.json's `key` (`default` where it is missing, 0 where null), a whole number >= 0; any other value
    recorded by `need` in one line naming the key (then 0)."""
    value = hf.get(key, default)
    ok = value is None or (type(value) is int and value >= 0)
    need(key, ok, f"a whole number >= 0 ({what})")
    return (value or 0) if ok else 0


def _nanochat(hf: dict, need) -> dict:
    """The model fields of a NanoChatForCausalLM config.json: RMSNorms without parameters (the
    embedding's too), QK-norm without scales, a squared-ReLU MLP, soft-capped logits."""
    heads, d = hf["num_attention_heads"], hf["hidden_size"]
    need("hidden_act", hf.get("hidden_act", "relu2") == "relu2", "relu2 (the squared ReLU)")
    need("attention_bias", not hf.get("attention_bias", False), "false (no attention biases)")
    kv, hd = hf.get("num_key_value_heads") or heads, hf.get("head_dim") or d // heads
    return {"norm": "rmsnorm", "mlp": "relu2", "norm_eps": hf.get("rms_norm_eps", 1e-6),
            "num_kv_heads": None if kv == heads else kv, "head_dim": None if hd * heads == d else hd,
            "qk_norm": True, "qk_norm_scale": False, "norm_scale": False, "embed_norm": True,
            "logit_softcap": float(hf.get("final_logit_softcapping") or 0.0)}


OLMO3_THETA = 500000.0  # transformers' Olmo3Config.default_theta


def _olmo3_ropes(hf: dict) -> tuple:
    """(the full layers' RoPE parameters, the sliding layers') of an Olmo3ForCausalLM config.json,
    read as transformers' Olmo3Config reads them: per layer type where rope_parameters holds
    full_attention / sliding_attention, else the full layers take rope_scaling (4.x's form); the
    full layers' base is their own, else the top-level rope_theta, else 500,000; the sliding
    layers' their own, else 500,000 (the top-level rope_theta is not theirs; a flat
    rope_parameters is not read)."""
    given = hf.get("rope_parameters")
    if isinstance(given, dict) and any(isinstance(given.get(k), dict) for k in ("full_attention", "sliding_attention")):
        full = dict(given.get("full_attention") or {"rope_type": "default"})
        sliding = dict(given.get("sliding_attention") or {"rope_type": "default"})
    else:
        full = {"rope_type": "default", **(hf.get("rope_scaling") or {})} if given is None else {"rope_type": "default"}
        sliding = {"rope_type": "default"}
    full.setdefault("rope_theta", hf["rope_theta"] if hf.get("rope_theta") is not None else OLMO3_THETA)
    sliding.setdefault("rope_theta", OLMO3_THETA)
    return full, sliding


def _olmo(hf: dict, kind: str, need) -> dict:
    """The model fields of an Olmo2ForCausalLM or Olmo3ForCausalLM config.json: norms on the
    branches' outputs only, QK-norms over the whole projection; OLMo 3's sliding and full layers
    (layer_types; three sliding to one full by default) with the sliding ones' own RoPE base."""
    heads, layers, d = hf["num_attention_heads"], hf["num_hidden_layers"], hf["hidden_size"]
    need("hidden_act", hf.get("hidden_act", "silu") == "silu", "silu (SwiGLU)")
    need("attention_bias", not hf.get("attention_bias", False), "false (no attention biases)")
    kv, hd = hf.get("num_key_value_heads") or heads, hf.get("head_dim") or d // heads
    fields = {"norm": "rmsnorm", "mlp": "swiglu", "norm_eps": hf.get("rms_norm_eps", 1e-5),
              "num_kv_heads": None if kv == heads else kv, "head_dim": None if hd * heads == d else hd,
              "qk_norm": True, "qk_norm_scale": True, "qk_norm_whole": True, "post_norms": True, "pre_norms": False}
    if kind == OLMO3.model_type:
        types = hf.get("layer_types") or ["sliding_attention" if (i + 1) % 4 else "full_attention"
                                          for i in range(layers)]
        fields.update(_windows(types, layers, hf.get("sliding_window", 4096), need))
        local = _olmo3_ropes(hf)[1]
        need("rope_parameters", local.get("rope_type", "default") == "default",
             "the sliding layers' RoPE unscaled (rope_type default)")
        if fields.get("sliding_window"):
            fields["rope_local_theta"] = float(local["rope_theta"])
    return fields


def _qwen3_5(hf: dict, rope: dict, need) -> dict:
    """The model fields of a Qwen3_5ForCausalLM (text) config.json: Gated DeltaNet layers with one
    softmax-attention layer in every full_attention_interval (gated, QK-normed, partial RoPE,
    grouped keys and values), every norm (1 + w)."""
    heads, layers, d = hf["num_attention_heads"], hf["num_hidden_layers"], hf["hidden_size"]
    need("hidden_act", hf.get("hidden_act", "silu") == "silu", "silu (SwiGLU)")
    need("attention_bias", not hf.get("attention_bias", False), "false (no attention biases)")
    kv, hd = hf.get("num_key_value_heads") or heads, hf.get("head_dim") or d // heads
    need("num_key_value_heads", kv < heads, f"fewer than num_attention_heads={heads} (grouped keys and values: "
         "spmdgpt's Qwen3.5 table holds the gated queries beside grouped ones)")
    types = hf.get("layer_types") or []
    k = types.index("full_attention") + 1 if "full_attention" in types else 0
    need("layer_types", k >= 2 and len(types) == layers and all(  # (a last group of layers mod k: `linear_layers`)
        t == ("full_attention" if (i + 1) % k == 0 or i == layers - 1 else "linear_attention")
        for i, t in enumerate(types)),
        f"{layers} layers in groups of k - 1 linear_attention and one full_attention, the last group of layers "
        "mod k alike (k >= 2; model.deltanet.full_attention_interval)")
    return {"norm": "rmsnorm", "mlp": "swiglu", "norm_eps": hf.get("rms_norm_eps", 1e-6), "num_kv_heads": kv,
            "head_dim": None if hd * heads == d else hd, "qk_norm": True, "qk_norm_scale": True,
            "norm_plus_one": True, "attention_gate": True,
            "rope_fraction": float(rope.get("partial_rotary_factor", 0.25)),
            "deltanet": {"full_attention_interval": k, "key_heads": hf["linear_num_key_heads"],
                         "value_heads": hf["linear_num_value_heads"], "key_dim": hf["linear_key_head_dim"],
                         "value_dim": hf["linear_value_head_dim"], "conv": hf.get("linear_conv_kernel_dim", 4)}}


def _hybrid_experts(hf: dict, kind: str, need) -> dict:
    """model.moe of a Qwen3-Next or Qwen3.5-MoE config.json: softmax-routed experts in every
    layer beside one shared expert (a whole number of experts wide) whose output a sigmoid gates."""
    width, shared = hf["moe_intermediate_size"], hf.get("shared_expert_intermediate_size") or 0
    need("shared_expert_intermediate_size", shared > 0 and shared % width == 0,
         f"a positive multiple of moe_intermediate_size={width} (model.moe.shared_experts experts wide)")
    need("num_experts", hf.get("num_experts", 0) > 0, "> 0 (experts in every layer)")
    if kind == QWEN3_NEXT.model_type:  # (a hybrid's MLPs are all MoE or all dense)
        need("mlp_only_layers", not hf.get("mlp_only_layers"), "[] (an MoE in every layer of a hybrid)")
        need("decoder_sparse_step", hf.get("decoder_sparse_step", 1) == 1, "1 (an MoE in every layer of a hybrid)")
    return {"num_experts": hf.get("num_experts", 0), "top_k": hf.get("num_experts_per_tok", 8),
            "mlp_factor": width / hf["hidden_size"], "shared_experts": shared // width, "shared_gate": True,
            "router": "softmax",
            "normalize_top_k": kind == QWEN3_5_MOE.model_type or bool(hf.get("norm_topk_prob", True)),
            "first_dense_layers": 0, "interleave_step": 1}


def _gpt_oss(hf: dict, need) -> dict:
    """The model fields of a GptOssForCausalLM config.json: grouped attention with biases and
    sinks, sliding windows by layer_types, an MoE of clamped-SwiGLU experts in every layer."""
    heads, layers, d = hf["num_attention_heads"], hf["num_hidden_layers"], hf["hidden_size"]
    need("attention_bias", hf.get("attention_bias", True), "true (gpt-oss's biased projections)")
    kv, hd = hf.get("num_key_value_heads") or heads, hf.get("head_dim") or d // heads
    types = hf.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    windows = _windows(types, layers, hf.get("sliding_window") or 128, need)
    return {"norm": "rmsnorm", "mlp": "swiglu_clamped", "norm_eps": hf.get("rms_norm_eps", 1e-5),
            "num_kv_heads": None if kv == heads else kv, "head_dim": None if hd * heads == d else hd, "bias": True,
            "attention_sinks": True, "glu_limit": float(hf.get("swiglu_limit", 7.0)),
            "glu_alpha": float(hf.get("swiglu_alpha", 1.702)),
            "moe": {"num_experts": hf["num_local_experts"], "top_k": hf.get("num_experts_per_tok", 4),
                    "shared_experts": 0, "router": "softmax", "normalize_top_k": True, "first_dense_layers": 0,
                    "interleave_step": 1, "mlp_factor": None}, **windows}


def _deepseek_v3(hf: dict, need) -> dict:
    """The model fields of a DeepseekV3ForCausalLM config.json: MLA, and its MoE (the router's
    bias then moves as DeepSeek-V3 trained it, moe.bias_update_rate = 0.001, when a run trains on)."""
    heads, layers = hf["num_attention_heads"], hf["num_hidden_layers"]
    need("hidden_act", hf.get("hidden_act", "silu") == "silu", "silu (SwiGLU)")
    need("attention_bias", not hf.get("attention_bias", False), "false (no attention biases)")
    need("rope_interleave", hf.get("rope_interleave", True), "true (interleaved RoPE pairs, DeepSeek's checkpoints)")
    need("num_key_value_heads", (hf.get("num_key_value_heads") or heads) == heads,
         f"{heads} (one key and value per head, from the shared latent)")
    first_dense = hf.get("first_k_dense_replace", 0)
    need("first_k_dense_replace", 0 <= first_dense < layers, f"fewer than num_hidden_layers={layers} (an MoE layer)")
    need("topk_method", hf.get("topk_method", "noaux_tc") == "noaux_tc", "noaux_tc (DeepSeek-V3's routing)")
    need("moe_layer_freq", hf.get("moe_layer_freq", 1) == 1, "1 (every layer after the dense ones MoE)")
    d = hf["hidden_size"]
    return {"norm": "rmsnorm", "mlp": "swiglu", "norm_eps": hf.get("rms_norm_eps", 1e-6),
            "mla": {"kv_rank": hf["kv_lora_rank"], "q_rank": hf.get("q_lora_rank") or 0,
                    "rope_dim": hf["qk_rope_head_dim"], "nope_dim": hf["qk_nope_head_dim"], "v_dim": hf["v_head_dim"],
                    "index_heads": 0, "index_dim": 128, "index_topk": 2048},
            "moe": {"num_experts": hf["n_routed_experts"], "top_k": hf["num_experts_per_tok"],
                    "mlp_factor": hf["moe_intermediate_size"] / d, "shared_experts": hf.get("n_shared_experts") or 0,
                    "router": "sigmoid", "normalize_top_k": bool(hf.get("norm_topk_prob", True)),
                    "first_dense_layers": first_dense, "interleave_step": 1, "groups": hf.get("n_group") or 1,
                    "top_groups": hf.get("topk_group") or 1, "route_scale": float(hf.get("routed_scaling_factor", 1.0)),
                    "bias_update_rate": 0.001}}


def _deepseek_v32(hf: dict, need) -> dict:
    """The model fields of a DeepseekV32ForCausalLM config.json: DeepSeek-V3's (its main attention's RoPE
    always interleaved, a query latent always), every layer with the lightning indexer (index_n_heads,
    index_head_dim, index_topk; layer_types all indexed_attention), the dense layers first (mlp_layer_types
    or first_k_dense_replace, transformers' DeepseekV32Config defaults where a field is absent)."""
    layers = hf["num_hidden_layers"]
    first_dense = hf.get("first_k_dense_replace", 3)
    kinds = hf.get("mlp_layer_types") or ["dense"] * min(first_dense, layers) + ["sparse"] * (layers - first_dense)
    n = kinds.count("dense")
    need("mlp_layer_types", kinds == ["dense"] * n + ["sparse"] * (layers - n) and 0 <= n < layers,
         f"{layers} of dense then sparse, at least one sparse (the dense layers first: model.moe.first_dense_layers)")
    types = hf.get("layer_types") or ["indexed_attention"] * layers
    need("layer_types", types == ["indexed_attention"] * layers, f"{layers} of indexed_attention")
    need("q_lora_rank", bool(hf.get("q_lora_rank", 1536)), "> 0 (the indexer's queries come from the query latent)")
    heads, dim, topk = hf.get("index_n_heads", 64), hf.get("index_head_dim", 128), hf.get("index_topk", 2048)
    rope = hf.get("qk_rope_head_dim", 64)
    need("index_n_heads", type(heads) is int and heads > 0, "a whole number > 0")
    need("index_head_dim", type(dim) is int and dim >= rope and dim % 2 == 0,
         f"an even whole number >= qk_rope_head_dim={rope} (its first qk_rope_head_dim dimensions rotate)")
    need("index_topk", type(topk) is int and topk > 0, "a whole number > 0")
    v3 = {k: v for k, v in hf.items() if k not in ("rope_interleave", "first_k_dense_replace")}
    fields = _deepseek_v3({**v3, "first_k_dense_replace": n, "q_lora_rank": hf.get("q_lora_rank", 1536),
                           "n_group": hf.get("n_group", 8), "topk_group": hf.get("topk_group", 4)}, need)
    need("rope_interleave", hf.get("rope_interleave", True) is True, "absent or true (DeepSeek-V3.2's main attention "
         "rotates interleaved pairs)")
    fields["mla"].update(index_heads=heads, index_dim=dim, index_topk=topk)
    return fields


V4_KINDS = {"sliding_attention": "S", "compressed_sparse_attention": "C", "heavily_compressed_attention": "H"}


def _deepseek_v4(hf: dict, need) -> dict:
    """The model fields of a DeepseekV4ForCausalLM config.json (a key it leaves out: transformers'
    DeepseekV4Config default, its legacy keys as it reads them): model.csa (layer_types: the pattern; compress_rates;
    rope_parameters' main as model.rope_theta unscaled, compress as csa.compress_theta with model.rope_scaling),
    the hyper-connections, the MoE of every layer (sqrt-softplus scores; the hash_moe layers first: the router's
    bias then moves as DeepSeek-V3's does, moe.bias_update_rate = 0.001, when a run trains on)."""
    layers, d = hf["num_hidden_layers"], hf["hidden_size"]
    need("hidden_act", hf.get("hidden_act", "silu") == "silu", "silu (SwiGLU)")
    for key in ("attention_bias", "mlp_bias"):
        need(key, not hf.get(key, False), "false (no biases)")
    need("num_key_value_heads", (hf.get("num_key_value_heads") or 1) == 1, "1 (one shared key/value head)")
    need("scoring_func", hf.get("scoring_func", "sqrtsoftplus") == "sqrtsoftplus",
         "sqrtsoftplus (model.moe.router=sqrtsoftplus)")
    types = hf.get("layer_types")
    if types is None and hf.get("compress_ratios") is not None:
        types = [{0: "sliding_attention", 4: "compressed_sparse_attention"}.get(r, "heavily_compressed_attention")
                 for r in hf["compress_ratios"]]
    if types is None:  # (transformers' default: two H layers, then C and H by turns)
        types = (["heavily_compressed_attention"] * min(layers, 2)
                 + ["compressed_sparse_attention" if i % 2 else "heavily_compressed_attention"
                    for i in range(max(layers - 2, 0))])
    need("layer_types", len(types) == layers and set(types) <= set(V4_KINDS),
         f"{layers} of {', '.join(V4_KINDS)}")
    rates = {"compressed_sparse_attention": hf.get("compress_rate_csa", 4),
             "heavily_compressed_attention": hf.get("compress_rate_hca", 128), **(hf.get("compress_rates") or {})}
    need("compress_rates", set(rates) <= set(V4_KINDS) - {"sliding_attention"}
         and all(type(r) is int and r >= 2 for r in rates.values()),
         "whole numbers >= 2 for compressed_sparse_attention and heavily_compressed_attention")
    hashed = hf.get("num_hash_layers", 3)
    mlps = hf.get("mlp_layer_types") or ["hash_moe"] * min(layers, hashed) + ["moe"] * max(layers - hashed, 0)
    n = mlps.count("hash_moe")
    need("mlp_layer_types", mlps == ["hash_moe"] * n + ["moe"] * (layers - n),
         f"{layers} of hash_moe then moe (the hash-routed layers first: model.moe.hash_layers)")
    rope = hf.get("rope_parameters") or {}
    nested = isinstance(rope.get("main"), dict) and isinstance(rope.get("compress"), dict)
    main = dict(rope["main"]) if nested else {"rope_type": "default", "rope_theta": hf.get("rope_theta", 10000.0)}
    compress = dict(rope["compress"]) if nested else {**{k: v for k, v in rope.items() if k not in ("main",
                                                                                                    "compress")}}
    compress.setdefault("rope_theta", hf.get("compress_rope_theta", 160000.0))
    need("rope_parameters", main.get("rope_type", "default") == "default",
         "its main (sliding layers') RoPE unscaled (rope_type default)")
    need("rope_parameters", float(compress.get("attention_factor") or 1.0) == 1.0,
         "its compress RoPE without YaRN's attention factor (attention_factor 1.0, transformers' default here)")
    scaled = _rope_fields(compress, hf, need)
    head = hf.get("head_dim", 512)
    fraction = hf.get("partial_rotary_factor") or (hf["qk_rope_head_dim"] / head if hf.get("qk_rope_head_dim")
                                                   else 64 / 512)
    return {"norm": "rmsnorm", "mlp": "swiglu_clip", "norm_eps": hf.get("rms_norm_eps", 1e-6), "num_kv_heads": 1,
            "head_dim": head, "sliding_window": hf.get("sliding_window", 128), "window_pattern": "L",
            "glu_limit": float(hf.get("swiglu_limit", 10.0)), "hyper_connections": hf.get("hc_mult", 4),
            "hyper_sinkhorn_iters": hf.get("hc_sinkhorn_iters", 20), "hyper_eps": float(hf.get("hc_eps", 1e-6)),
            **{**scaled, "rope_theta": float(main.get("rope_theta", hf.get("rope_theta", 10000.0))),
               "rope_attention_factor": None},
            "csa": {"q_rank": hf.get("q_lora_rank", 1024), "rope_dim": int(head * fraction),
                    "out_groups": hf.get("o_groups", 8), "out_rank": hf.get("o_lora_rank", 1024),
                    "pattern": "".join(V4_KINDS.get(t, "?") for t in types),
                    "sparse_rate": rates["compressed_sparse_attention"],
                    "heavy_rate": rates["heavily_compressed_attention"],
                    "compress_theta": float(compress["rope_theta"]), "index_heads": hf.get("index_n_heads", 64),
                    "index_dim": hf.get("index_head_dim", 128), "index_topk": hf.get("index_topk", 512)},
            "moe": {"num_experts": hf.get("n_routed_experts", 256), "top_k": hf.get("num_experts_per_tok", 6),
                    "mlp_factor": hf.get("moe_intermediate_size", 2048) / d,
                    "shared_experts": hf.get("n_shared_experts", 1), "router": "sqrtsoftplus",
                    "normalize_top_k": True, "route_scale": float(hf.get("routed_scaling_factor", 1.5)),
                    "hash_layers": n, "first_dense_layers": 0, "interleave_step": 1, "groups": 1, "top_groups": 1,
                    "shared_gate": False, "weight_input": False, "bias_update_rate": 0.001}}


def _qwen3_moe_layers(hf: dict, need) -> dict:
    """model.moe.first_dense_layers and interleave_step of a Qwen3-MoE config.json: its MoE layers
    (i not in mlp_only_layers, (i + 1) % decoder_sparse_step == 0) as `_moe_pattern`."""
    layers, step = hf["num_hidden_layers"], hf.get("decoder_sparse_step", 1)
    kinds = tuple(i not in (hf.get("mlp_only_layers") or []) and (i + 1) % step == 0 for i in range(layers))
    return _moe_pattern(kinds, "mlp_only_layers" if hf.get("mlp_only_layers") else "decoder_sparse_step", need)


def _moe_pattern(kinds: tuple, key: str, need) -> dict:
    """model.moe.first_dense_layers and interleave_step of the layers' kinds (True: MoE): the first N
    layers dense, then every k-th layer MoE (`need` records, under config.json's `key`, a pattern that
    is not of that form)."""
    moe = [i for i, m in enumerate(kinds) if m]
    k = moe[1] - moe[0] if len(moe) > 1 else 1
    n = moe[0] - (k - 1) if moe else -1
    need(key, n >= 0 and kinds == moe_layer_pattern(len(kinds), n, k),
         "MoE layers laid out as the first N layers dense, then every k-th layer MoE, the last layer MoE "
         "(model.moe.first_dense_layers, interleave_step)")
    return {"first_dense_layers": max(n, 0), "interleave_step": k}


def _llama4(hf: dict, need) -> dict:
    """The model fields of a Llama4ForCausalLM (text) config.json (a field it leaves out: transformers'
    Llama4TextConfig default): chunked attention in the chunked_attention layers (layer_types), the
    others full, RoPE (no_rope_layers 1) and the QK-norm (use_qk_norm) in the chunked ones, the
    others NoPE with the attention temperature (attn_temperature_tuning, attn_scale, floor_scale);
    its MoE layers (moe_layers, else every interleave_moe_layer_step-th) of sigmoid-routed experts
    whose weight scales their input, beside a shared expert as wide; dense layers of
    intermediate_size_mlp."""
    heads, layers, d = hf["num_attention_heads"], hf["num_hidden_layers"], hf["hidden_size"]
    need("hidden_act", hf.get("hidden_act", "silu") == "silu", "silu (SwiGLU)")
    need("attention_bias", not hf.get("attention_bias", False), "false (no attention biases)")
    kv, hd = hf.get("num_key_value_heads", 8) or heads, hf.get("head_dim", 128) or d // heads
    interval = hf.get("no_rope_layer_interval", 4)
    rope = [bool(r) for r in (hf.get("no_rope_layers") or [(i + 1) % interval for i in range(layers)])][:layers]
    types = hf.get("layer_types") or ["chunked_attention" if r else "full_attention" for r in rope]
    need("layer_types", set(types) <= {"chunked_attention", "full_attention"} and len(types) == layers,
         f"{layers} of chunked_attention / full_attention")
    chunked = [t == "chunked_attention" for t in types]
    chunk = hf.get("attention_chunk_size", 8192)
    need("attention_chunk_size", bool(chunk) or not any(chunked), "a chunk size for the chunked_attention layers")
    need("no_rope_layers", len(rope) == layers and (all(rope) or rope == chunked),
         f"{layers} flags, RoPE (1) in exactly the chunked_attention layers or in every layer (spmdgpt's NoPE "
         "layers are its global ones, model.global_nope)")
    step = hf.get("interleave_moe_layer_step", 1)
    moe_layers = hf.get("moe_layers")
    moe_layers = list(range(step - 1, layers, step)) if moe_layers is None else moe_layers
    kinds = tuple(i in moe_layers for i in range(layers))
    need("moe_layers", any(kinds), "at least one MoE layer (spmdgpt's Llama 4 has experts)")
    nope = not all(rope)
    tuned = nope and bool(hf.get("attn_temperature_tuning", True))
    return {"norm": "rmsnorm", "mlp": "swiglu", "norm_eps": hf.get("rms_norm_eps", 1e-5),
            "num_kv_heads": None if kv == heads else kv, "head_dim": None if hd * heads == d else hd,
            "mlp_factor": hf.get("intermediate_size_mlp", 16384) / d, "qk_norm": bool(hf.get("use_qk_norm", True)),
            "attention_chunk": chunk if any(chunked) else 0,
            "window_pattern": "".join("L" if c else "G" for c in chunked) if any(chunked) else "L",
            "global_nope": nope, "attn_temperature": float(hf.get("attn_scale", 0.1)) if tuned else 0.0,
            "attn_temperature_floor": int(hf.get("floor_scale", 8192)),
            "moe": {"num_experts": hf.get("num_local_experts", 16), "top_k": hf.get("num_experts_per_tok", 1),
                    "mlp_factor": hf.get("intermediate_size", 8192) / d, "shared_experts": 1, "shared_gate": False,
                    "router": "sigmoid", "normalize_top_k": False, "weight_input": True, "groups": 1,
                    "top_groups": 1, "route_scale": 1.0, **_moe_pattern(kinds, "moe_layers", need)}}


def _kimi_linear(hf: dict, need) -> dict:
    """The model fields of a KimiLinearForCausalLM config.json (a key it leaves out: transformers'
    KimiLinearConfig default; the checkpoint's linear_attn_config as transformers reads it):
    layer_types in groups of k - 1 linear_attention (Kimi Delta Attention: model.deltanet with
    gate=channel) and one full_attention (MLA without RoPE: model.mla, model.global_nope), a last
    group of num_hidden_layers mod k alike (the published 27 layers: 6 groups of 4, then 2 + 1);
    mlp_layer_types (or first_k_dense_replace, transformers' default 1) the first N dense, the others
    sparse (experts, sigmoid-routed as DeepSeek-V3's: the router's bias then moves as DeepSeek-V3's
    does, moe.bias_update_rate = 0.001, when a run trains on; N = model.moe.first_dense_layers, at
    most k - 1: Kimi Delta Attention layers of the first group, the published 48B-A3B's 1), or all
    dense."""
    heads, layers, d = hf["num_attention_heads"], hf["num_hidden_layers"], hf["hidden_size"]
    need("hidden_act", hf.get("hidden_act", "silu") == "silu", "silu (SwiGLU)")
    need("attention_bias", not hf.get("attention_bias", False), "false (no attention biases)")
    need("num_key_value_heads", (hf.get("num_key_value_heads") or heads) == heads,
         f"{heads} (one key and value per head, from the shared latent)")
    linear = dict(hf.get("linear_attn_config") or {})
    types = hf.get("layer_types")
    if types is None and {"full_attn_layers", "kda_layers"} <= set(linear):  # (1-based, the checkpoint's)
        full = set(linear["full_attn_layers"])
        types = ["full_attention" if i + 1 in full else "linear_attention" for i in range(layers)]
    elif types is None:  # (transformers' default)
        types = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(layers)]
    k = types.index("full_attention") + 1 if "full_attention" in types else 0
    need("layer_types", k >= 2 and len(types) == layers and all(  # (a last group of layers mod k: the published
        t == ("full_attention" if (i + 1) % k == 0 or i == layers - 1 else "linear_attention")  # 48B-A3B's 2 + 1)
        for i, t in enumerate(types)),
        f"{layers} layers in groups of k - 1 linear_attention and one full_attention, the last group of layers "
        "mod k alike (k >= 2; model.deltanet.full_attention_interval)")
    mlps = hf.get("mlp_layer_types") or ["dense" if i < hf.get("first_k_dense_replace", 1) else "sparse"
                                         for i in range(layers)]
    dense = mlps.index("sparse") if "sparse" in mlps else len(mlps)  # (the dense first layers)
    need("mlp_layer_types" if hf.get("mlp_layer_types") else "first_k_dense_replace",
         len(mlps) == layers and mlps == ["dense"] * dense + ["sparse"] * (layers - dense)
         and (dense == layers or dense <= max(k - 1, 0)),
         f"the {layers} layers' MLPs all dense, or the first N dense and the others sparse with N from 0 to "
         f"{max(k - 1, 0)} (Kimi Delta Attention layers of the first group of {k}: model.moe.first_dense_layers)")
    need("moe_router_activation_func", hf.get("moe_router_activation_func", "sigmoid") == "sigmoid",
         "sigmoid (Kimi Linear's router)")
    width, dim = hf.get("linear_num_heads", 32), hf.get("linear_head_dim", 128)
    fields = {"norm": "rmsnorm", "mlp": "swiglu", "norm_eps": hf.get("rms_norm_eps", 1e-5), "global_nope": True,
              "tie_embeddings": False,  # (transformers' class ties nothing, whatever tie_word_embeddings says)
              "mla": {"kv_rank": hf.get("kv_lora_rank", 512), "q_rank": hf.get("q_lora_rank") or 0,
                      "rope_dim": hf.get("qk_rope_head_dim", 64), "nope_dim": hf.get("qk_nope_head_dim", 128),
                      "v_dim": hf.get("v_head_dim") or 128},
              "deltanet": {"full_attention_interval": k, "gate": "channel",
                           "key_heads": linear.get("num_heads", width), "value_heads": linear.get("num_heads", width),
                           "key_dim": linear.get("head_dim", dim), "value_dim": linear.get("head_dim", dim),
                           "conv": linear.get("short_conv_kernel_size", hf.get("linear_conv_kernel_dim", 4))}}
    if "sparse" in mlps:
        pick = lambda *keys, default=None: next((hf[key] for key in keys if hf.get(key) is not None), default)  # noqa
        fields["moe"] = {
            "num_experts": pick("num_experts", "num_local_experts", default=256),
            "top_k": pick("num_experts_per_token", "num_experts_per_tok", default=8),
            "mlp_factor": hf.get("moe_intermediate_size", 1024) / d,
            "shared_experts": pick("num_shared_experts", "n_shared_experts", default=1), "router": "sigmoid",
            "normalize_top_k": bool(pick("moe_renormalize", "norm_topk_prob", default=True)),
            "first_dense_layers": dense, "interleave_step": 1,
            "groups": pick("num_expert_group", "n_group", default=1),
            "top_groups": pick("topk_group", default=1), "shared_gate": False, "weight_input": False,
            "route_scale": float(pick("routed_scaling_factor", default=2.446)), "bias_update_rate": 0.001}
    return fields


# model fields no imported architecture turns on unless its config.json says so
NOT_IN_CHECKPOINT = {"num_kv_heads": None, "head_dim": None, "qkv_bias": False, "qk_norm": False,
                     "qk_norm_scale": False, "logit_softcap": 0.0, "sliding_window": 0, "window_pattern": "L",
                     "moe": {"num_experts": 0, "dense_mlp": False, "router_scales": False}, "mla": {"kv_rank": 0},
                     "norm_plus_one": False, "post_norms": False,
                     "embed_scale": False, "query_pre_attn_scalar": None, "rope_local_theta": None,
                     "deltanet": {"full_attention_interval": 0}, "attention_gate": False, "rope_fraction": 1.0,
                     "attention_sinks": False, "pre_norms": True, "qk_norm_whole": False, "norm_scale": True,
                     "embed_norm": False, "attention_chunk": 0, "global_nope": False, "attn_temperature": 0.0,
                     "attn_temperature_floor": 8192, "global_head_dim": None, "global_kv_heads": None,
                     "global_k_eq_v": False, "rope_global_fraction": 1.0, "v_norm": False, "layer_scale": False,
                     "per_layer_dim": 0, "kv_shared_layers": 0, "kv_shared_wide_mlp": False}
