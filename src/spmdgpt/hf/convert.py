"""Import by the architecture tables (spmdgpt.hf.tables), the same code for every architecture,
and what import and export (`export.py`) share: which table a model config is
(`architecture`), each tensor's layout, leaf and layers; config.json to model fields
(`model_fields`), tensors to parameters (`layer_values`), and what an import must find
(`expected_shapes`, `check_weights`)."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Dict, List, Optional

import numpy as np

from spmdgpt.config import (
    ROPE_SCALING_DEFAULTS,
    ROPE_SCALING_FIELDS,
    ConfigError,
    ModelConfig,
    MoeConfig,
    expert_hidden,
    head_dim,
    kv_heads,
    layer_windows,
    mlp_hidden,
    moe_layer_pattern,
    moe_layers,
)
from spmdgpt.hf.tables import (
    ARCHITECTURES,
    MISTRAL,
    MIXTRAL,
    NEOX,
    QWEN3,
    QWEN3_MOE,
    TRAINING_ONLY,
    Architecture,
    Tensor,
)

TANH_GELUS = ("gelu_pytorch_tanh", "gelu_new")  # both: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))


def canonical(cfg: ModelConfig) -> ModelConfig:
    """cfg with the fields that restate a default set to it (as many key/value heads as heads:
    num_kv_heads None; a head width of d_model / num_heads: head_dim None; Q/K/V biases under
    model.bias: qkv_bias False; the rope_* parameters a scaling does not read: their defaults; the
    windows: sliding_window their largest, window_pattern "L" unless local and global layers mix,
    then spelt out per layer; a dense model's moe section: the defaults), so the tables compare one
    spelling of each model."""
    kv = None if kv_heads(cfg) == cfg.num_heads else cfg.num_kv_heads
    hd = None if cfg.head_dim is not None and cfg.head_dim * cfg.num_heads == cfg.d_model else cfg.head_dim
    used = ROPE_SCALING_FIELDS.get(cfg.rope_scaling.value, ())  # (the other rope_* fields: their defaults)
    unused = {name: default for name, default in ROPE_SCALING_DEFAULTS.items() if name not in used}
    windows = layer_windows(cfg)  # (window_pattern: "L" when every layer is local or there is no window,
    # else the pattern spelt out over the layers)
    pattern = "L" if all(windows) or not any(windows) else "".join("L" if w else "G" for w in windows)
    moe = cfg.moe if cfg.moe.num_experts else MoeConfig()
    return dataclasses.replace(cfg, num_kv_heads=kv, head_dim=hd, qkv_bias=cfg.qkv_bias and not cfg.bias, **unused,
                               sliding_window=max(windows), window_pattern=pattern, moe=moe)


def field_names(cfg) -> list:
    """The model fields as the tables name them (of a ModelConfig or its class): each top-level
    field, and each field of a nested section as "moe.top_k"."""
    out = []
    for f in dataclasses.fields(cfg):
        nested = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        out += (
            [f"{f.name}.{g.name}" for g in dataclasses.fields(nested)] if dataclasses.is_dataclass(nested) else [f.name]
        )
    return out


def field_value(cfg: ModelConfig, name: str):
    """cfg's value of a field as the tables name it ("moe.top_k")."""
    for part in name.split("."):
        cfg = getattr(cfg, part)
    return cfg


def with_field(cfg: ModelConfig, name: str, value) -> ModelConfig:
    """cfg with one field (as the tables name it) set to value."""
    if "." not in name:
        return dataclasses.replace(cfg, **{name: value})
    section, rest = name.split(".", 1)
    return dataclasses.replace(cfg, **{section: with_field(getattr(cfg, section), rest, value)})


def architecture(cfg: ModelConfig) -> Architecture:
    """The table of the `transformers` class that computes what this model computes, or a
    ConfigError naming the fields that it cannot represent."""
    same = canonical(cfg)
    kinds = [a for a in ARCHITECTURES if (a.norm, a.mlp) == (cfg.norm, cfg.mlp)]
    if not kinds:
        raise ConfigError([
            f"model.norm={cfg.norm.value} with model.mlp={cfg.mlp.value} has no Hugging Face architecture that "
            "computes the same thing; exportable: norm=rmsnorm + mlp=swiglu (Llama, Mistral, Qwen2, Qwen3) or "
            "norm=layernorm + mlp=gelu (GPT-NeoX)"])
    arch = next((a for a in kinds if all(v(field_value(same, k)) if callable(v) else field_value(same, k) == v
                                         for k, v in a.picks.items())), kinds[-1])
    refused, unknown = refusals(arch, cfg)
    if refused:
        shown = [f"model.{n}={getattr(field_value(same, n), 'value', field_value(same, n))}" for n in refused]
        raise ConfigError([f"{', '.join(shown)}: {arch.name} (the Hugging "
                           f"Face architecture of this model.norm and model.mlp) does not compute that, so the model "
                           "cannot be exported (train without it to export)"])
    if unknown:
        raise ConfigError([f"model.{', model.'.join(unknown)}: the {arch.name} table (spmdgpt/hf/tables.py) does not "
                           "say how to represent it; map it to config.json there, or refuse it"])
    return arch


def refusals(arch: Architecture, cfg: ModelConfig) -> tuple[list, list]:
    """(the fields whose value the table refuses, in cfg's canonical spelling; the fields the table
    neither maps nor refuses, and that are not training-only: a new field, never exported silently)."""
    same = canonical(cfg)
    refused = [name for name, value in arch.refused.items() if field_value(same, name) != value]
    unknown = [name for name in field_names(cfg)
               if name not in TRAINING_ONLY and name not in arch.fields and name not in arch.refused]
    return refused, unknown


def _dims(cfg: ModelConfig) -> dict:
    """The layout axes' sizes (see tables.py)."""
    return {"d": cfg.d_model, "c": 3, "n": cfg.num_heads, "k": kv_heads(cfg), "kv": 2, "h": head_dim(cfg),
            "f": mlp_hidden(cfg), "v": cfg.vocab_size, "e": cfg.moe.num_experts, "m": expert_hidden(cfg)}


def _side(layout: str, theirs: bool = True) -> str:
    return layout.split("->")[-1 if theirs else 0].strip()


def _hf_shape(t: Tensor, dims: dict) -> tuple:
    """The shape of one of t's Hugging Face tensors: its layout's right side, the first axis
    left out when several names split it."""
    groups = re.findall(r"\(([^)]*)\)|(\w+)", _side(t.layout))
    shape = tuple(math.prod(dims[a] for a in (g or s).split()) for g, s in groups)
    return shape[1:] if t.split else shape


def _rearrange(a: np.ndarray, pattern: str, dims: dict) -> np.ndarray:
    import einops

    used = set(re.findall(r"\w+", pattern))
    return np.ascontiguousarray(einops.rearrange(a, pattern, **{k: v for k, v in dims.items() if k in used}))


def _leaf(tree, path: str):
    """tree's value at a dotted leaf path ("blocks.attn.w_qkv"), None where the model has none."""
    for name in path.split("."):
        tree = getattr(tree, name, None) if tree is not None else None
    return tree


def _stack_of(cfg: ModelConfig, layer: int) -> tuple:
    """(the stack that holds model layer `layer`: "blocks", or an MoE model's "dense_blocks" for a
    dense layer; the layer's index in it)."""
    kinds = moe_layers(cfg)
    if all(kinds) or not any(kinds):
        return "blocks", layer
    return "blocks" if kinds[layer] else "dense_blocks", kinds[:layer].count(kinds[layer])


def _stack_layers(cfg: ModelConfig, stack: str) -> list:
    """The model layers a stack holds, in order."""
    return [i for i in range(cfg.num_layers) if _stack_of(cfg, i)[0] == stack]


def _layers_of(t: Tensor, cfg: ModelConfig) -> list:
    """The model layers that have row t (`Tensor.layers`; [None]: a row outside the blocks)."""
    if not t.per_layer:
        return [None]
    kinds = moe_layers(cfg)
    return [i for i in range(cfg.num_layers) if t.layers == "every" or (t.layers == "moe") == kinds[i]]


def _leaf_at(t: Tensor, cfg: ModelConfig, layer: Optional[int]) -> tuple:
    """(row t's spmdgpt leaf path in the stack of `layer`, the layer's index there) (the leaf and
    None for a leaf without a layer axis)."""
    if not t.stacked or layer is None:
        return t.leaf, None
    stack, index = _stack_of(cfg, layer)
    return stack + t.leaf[len("blocks"):], index


def _present(t: Tensor, cfg: ModelConfig, info, layer: Optional[int] = None) -> bool:
    """Whether the model has row t (in `layer`; None: in its first layer that can have it)."""
    layers = _layers_of(t, cfg) if layer is None else [layer]
    if not layers:
        return False
    if t.leaf is None:
        return t.when(cfg)
    return t.fill is not None or _leaf(info, _leaf_at(t, cfg, layers[0])[0]) is not None


def _names(t: Tensor, cfg: ModelConfig, layer: Optional[int]) -> list:
    """t's Hugging Face names in one layer ("{j}": one per expert)."""
    experts = range(cfg.moe.num_experts) if "{j}" in t.names[0] else [None]
    return [n.format(i=layer, j=j) for n in t.names for j in experts]


def _all_names(t: Tensor, cfg: ModelConfig) -> list:
    """t's Hugging Face names in every layer (or its one set, for a tensor outside the blocks)."""
    return [n for layer in _layers_of(t, cfg) for n in _names(t, cfg, layer)]


# transformers' rope_parameters keys of the rope_* fields
ROPE_KEYS = {"rope_factor": "factor", "rope_original_max_len": "original_max_position_embeddings",
             "rope_low_freq_factor": "low_freq_factor", "rope_high_freq_factor": "high_freq_factor",
             "rope_beta_fast": "beta_fast", "rope_beta_slow": "beta_slow", "rope_attention_factor": "attention_factor"}


def _rope_fields(rope: dict, hf: dict, need) -> dict:
    """The rope_* model fields of a config.json's RoPE parameters (`need` records what is refused)."""
    kind = rope.get("rope_type", rope.get("type", "default"))
    need(
        "rope_type",
        kind in ("default", "llama3", "yarn"),
        "default, llama3 or yarn (the RoPE scalings spmdgpt computes)",
    )
    out = {"rope_scaling": kind if kind in ("llama3", "yarn") else "none", "rope_theta": float(rope["rope_theta"])}
    if kind == "llama3":
        out.update({name: type(default)(rope.get(ROPE_KEYS[name], default)) for name, default in  # (Llama 3.1's)
                    (("rope_factor", 8.0), ("rope_original_max_len", 8192), ("rope_low_freq_factor", 1.0),
                     ("rope_high_freq_factor", 4.0))})
    elif kind == "yarn":
        need("mscale", not rope.get("mscale") and not rope.get("mscale_all_dim"),
             "no mscale / mscale_all_dim (DeepSeek's YaRN variant is not supported)")
        need("truncate", rope.get("truncate", True), "true (integer correction bounds)")
        original = int(rope.get("original_max_position_embeddings") or hf["max_position_embeddings"])
        out.update(rope_factor=float(rope.get("factor") or hf["max_position_embeddings"] / original),
                   rope_original_max_len=original, rope_beta_fast=float(rope.get("beta_fast") or 32),
                   rope_beta_slow=float(rope.get("beta_slow") or 1), rope_attention_factor=rope.get("attention_factor"))
    return out


def _rope(hf: dict) -> dict:
    rope = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    rope.setdefault("rope_theta", hf.get("rope_theta", hf.get("rotary_emb_base", 10000.0)))
    if "rotary_pct" in hf:
        rope.setdefault("partial_rotary_factor", hf["rotary_pct"])
    return rope


# config.json's architectures -> the model_type import reads
IMPORTS = {a.name: a.model_type for a in ARCHITECTURES}


def model_fields(hf: dict, where: str) -> dict:
    """The spmdgpt model fields a Hugging Face config determines (the parameters' shapes and the
    computation), or a ConfigError naming every HF field that no spmdgpt model represents."""
    arch = (hf.get("architectures") or [None])[0]
    kind = hf.get("model_type") if hf.get("model_type") in IMPORTS.values() else IMPORTS.get(arch)
    errs = []

    def need(key, ok, want):
        if not ok:
            errs.append(f"{where}: config.json has {key}={hf.get(key, _rope(hf).get(key))!r}; spmdgpt needs {want}")

    d, heads = hf.get("hidden_size"), hf.get("num_attention_heads")
    rope = _rope(hf)
    rope_fields = _rope_fields(rope, hf, need)
    if kind == NEOX.model_type:
        need("hidden_act", hf.get("hidden_act") in TANH_GELUS, f"the tanh GELU ({' or '.join(TANH_GELUS)})")
        need("use_parallel_residual", hf.get("use_parallel_residual", True) is False, "false (a sequential residual)")
        need("partial_rotary_factor", float(rope.get("partial_rotary_factor", 0.25)) == 1.0, "1.0 (full rotary)")
        fields = {"norm": "layernorm", "mlp": "gelu", "norm_eps": hf.get("layer_norm_eps", 1e-5),
                  "bias": bool(hf.get("attention_bias", True))}
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
            need("layer_types", set(types) <= {"sliding_attention", "full_attention"} and len(types) == layers,
                 f"{layers} of sliding_attention / full_attention")
            if window and "sliding_attention" in types:
                fields.update(sliding_window=window, window_pattern="".join(
                    "L" if t == "sliding_attention" else "G" for t in types))
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
    out = dict(num_layers=hf["num_hidden_layers"], num_heads=heads, d_model=d, mlp_factor=hf["intermediate_size"] / d,
               vocab_size=hf["vocab_size"], bias=False, tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
               **rope_fields)
    # every other field that changes the computation: what this checkpoint has, else off (never the
    # run's own value: a QK-norm in the run's experiment would change what the checkpoint computes)
    return {**out, **NOT_IN_CHECKPOINT, **fields}


def _qwen3_moe_layers(hf: dict, need) -> dict:
    """model.moe.first_dense_layers and interleave_step of a Qwen3-MoE config.json: its MoE layers
    (i not in mlp_only_layers, (i + 1) % decoder_sparse_step == 0) as the first N dense layers,
    then every k-th layer (`need` records a pattern that is not of that form)."""
    layers, step = hf["num_hidden_layers"], hf.get("decoder_sparse_step", 1)
    kinds = tuple(i not in (hf.get("mlp_only_layers") or []) and (i + 1) % step == 0 for i in range(layers))
    moe = [i for i, m in enumerate(kinds) if m]
    k = moe[1] - moe[0] if len(moe) > 1 else 1
    n = moe[0] - (k - 1) if moe else -1
    need("mlp_only_layers" if hf.get("mlp_only_layers") else "decoder_sparse_step",
         n >= 0 and kinds == moe_layer_pattern(layers, n, k),
         "MoE layers laid out as the first N layers dense, then every k-th layer MoE, the last layer MoE "
         "(model.moe.first_dense_layers, interleave_step)")
    return {"first_dense_layers": max(n, 0), "interleave_step": k}


# model fields no imported architecture turns on unless its config.json says so
NOT_IN_CHECKPOINT = {"num_kv_heads": None, "head_dim": None, "qkv_bias": False, "qk_norm": False,
                     "qk_norm_scale": False, "logit_softcap": 0.0, "sliding_window": 0, "window_pattern": "L",
                     "moe": {"num_experts": 0}}


def expected_shapes(cfg: ModelConfig) -> Dict[str, tuple]:
    """{transformers name: shape} of a model exported from `cfg` (what an import must find),
    from the architecture's table, without allocating anything."""
    from spmdgpt.model import param_info

    arch, dims, info = architecture(cfg), _dims(cfg), param_info(cfg)
    out = {}
    for t in arch.tensors:
        if _present(t, cfg, info):
            out.update({n: _hf_shape(t, dims) for n in _all_names(t, cfg)})
    return out


def _absent_leaves(cfg: ModelConfig) -> List[Tensor]:
    """The table rows an export fills with a constant (no spmdgpt leaf behind them)."""
    from spmdgpt.model import param_info

    arch, info = architecture(cfg), param_info(cfg)
    return [t for t in arch.tensors if _present(t, cfg, info)
            and (t.leaf is None or _leaf(info, _leaf_at(t, cfg, _layers_of(t, cfg)[0])[0]) is None)]


def check_weights(cfg: ModelConfig, files) -> None:
    """ConfigError naming every tensor that is missing or has another shape than `cfg` gives, and
    every tensor that spmdgpt's model (which has no parameter there) would drop: a bias that is
    not zero, a scale that is not one."""
    errs = []
    aliases = architecture(cfg).aliases
    for name, shape in expected_shapes(cfg).items():
        name = name if name in files.weight_map else aliases.get(name, name)
        if name not in files.weight_map:
            errs.append(f"{files.where}: tensor {name} is missing")
        elif files.shape(name) != shape:
            errs.append(f"{files.where}: tensor {name} has shape {list(files.shape(name))}, the model config "
                        f"gives {list(shape)}")
    if errs:
        raise ConfigError(errs[:5] + ([f"... and {len(errs) - 5} more"] if len(errs) > 5 else []))
    for t in _absent_leaves(cfg):
        fill = t.fill or 0.0
        wrong = [n for n in _all_names(t, cfg) if np.any(files.get(n) != fill)]
        if wrong:
            raise ConfigError([f"{files.where}: tensor {wrong[0]} is not {'zero' if fill == 0 else 'all ' + str(fill)} "
                               f"({len(wrong)} such tensor(s)), and spmdgpt's model has no parameter there; it cannot "
                               "be imported exactly"])


def layer_values(cfg: ModelConfig, files):
    """Params-shaped tree of functions: stacked leaves `f(i) -> the value of the stack's i-th layer`, the
    others `f() -> the value`, in spmdgpt's layout (float32): what `to_hf` wrote, inverted by
    the architecture's table (an alias, e.g. GPT-NeoX's lm_head.weight, read where the name is
    missing)."""
    import jax

    from spmdgpt.model import is_info, param_info

    arch, dims, info = architecture(cfg), _dims(cfg), param_info(cfg)
    by_leaf = {_leaf_at(t, cfg, i)[0]: t for t in arch.tensors if t.leaf is not None for i in _layers_of(t, cfg)}

    def get(name):
        return files.get(name if name in files.weight_map else arch.aliases.get(name, name))

    def reader(path, _):
        leaf = ".".join(k.name for k in path)
        t, layers = by_leaf[leaf], _stack_layers(cfg, leaf.split(".")[0])
        back = f"{_side(t.layout)} -> {_side(t.layout, theirs=False)}"

        def read(index=None):  # (index: the layer's in its stack)
            names = _names(t, cfg, None if index is None else layers[index])
            return _rearrange([get(n) for n in names] if t.split else get(names[0]), back, dims)

        return read

    return jax.tree_util.tree_map_with_path(reader, info, is_leaf=is_info)
