"""Import by the architecture tables (spmdgpt.hf.tables), the same code for every architecture,
and what import and export (`export.py`) share: which table a model config is
(`architecture`), each tensor's layout, leaf and layers; tensors to parameters
(`layer_values`), and what an import must find (`expected_shapes`, `check_weights`).
config.json to model fields is `fields.py`."""

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
    DeltaNetConfig,
    MlaConfig,
    MlpType,
    ModelConfig,
    MoeConfig,
    compress_kinds,
    deltanet_dims,
    expert_hidden,
    head_dim,
    kv_heads,
    kv_shared,
    layer_windows,
    linear_layers,
    local_layers,
    mla_dims,
    mlp_hidden,
    moe_layers,
    stack_config,
)
from spmdgpt.hf.tables import (
    ARCHITECTURES,
    TRAINING_ONLY,
    Architecture,
    Tensor,
)


def canonical(cfg: ModelConfig) -> ModelConfig:
    """cfg with the fields that restate a default set to it (as many key/value heads as heads:
    num_kv_heads None; a head width of d_model / num_heads: head_dim None; Q/K/V biases under
    model.bias: qkv_bias False; the rope_* parameters a scaling does not read: their defaults; the
    windows: sliding_window their largest (attention_chunk, of chunks, too), window_pattern "L"
    unless local and global layers mix, then spelt out per layer; global_nope without global layers:
    False, attn_temperature without NoPE layers: 0, attn_temperature_floor without it: its default;
    a dense model's moe section: the defaults; MLA's widths spelt out, head_dim then None;
    query_pre_attn_scalar equal to head_dim: None; rope_local_theta without local layers, or equal
    to the global RoPE: None; glu_limit and glu_alpha of an MLP other than swiglu_clamped: their
    defaults), so the tables compare one spelling of each model."""
    kv = None if kv_heads(cfg) == cfg.num_heads else cfg.num_kv_heads
    hd = None if cfg.head_dim is not None and cfg.head_dim * cfg.num_heads == cfg.d_model else cfg.head_dim
    used = ROPE_SCALING_FIELDS.get(cfg.rope_scaling.value, ())  # (the other rope_* fields: their defaults)
    unused = {name: default for name, default in ROPE_SCALING_DEFAULTS.items() if name not in used}
    windows = layer_windows(cfg)  # (window_pattern: "L" when every layer is local or there is no window,
    # else the pattern spelt out over the layers)
    pattern = "L" if all(windows) or not any(windows) else "".join("L" if w else "G" for w in windows)
    moe = cfg.moe if cfg.moe.num_experts else MoeConfig()
    qpas = cfg.query_pre_attn_scalar
    qpas = None if qpas is not None and qpas == head_dim(cfg) else qpas
    nope_layers = cfg.global_nope and not all(windows)  # (no global layer: none is NoPE, nor has a temperature)
    temperature = cfg.attn_temperature if nope_layers else 0.0
    floor = cfg.attn_temperature_floor if temperature else ModelConfig.attn_temperature_floor
    local = cfg.rope_local_theta  # (no local layers, or their RoPE the global one's: None)
    if not any(windows) or (local == cfg.rope_theta and cfg.rope_scaling.value == "none"):
        local = None
    deltanet = DeltaNetConfig(chunk=cfg.deltanet.chunk)  # (no Gated DeltaNet layers: the section's defaults; else
    if cfg.deltanet.full_attention_interval:  # the value heads and width spelt out)
        _, hv, _, dv = deltanet_dims(cfg)
        deltanet = dataclasses.replace(cfg.deltanet, value_heads=hv, value_dim=dv)
    glu = {} if cfg.mlp == MlpType.swiglu_clamped else {f: getattr(ModelConfig, f) for f in ("glu_limit", "glu_alpha")}
    mla = MlaConfig()
    if cfg.mla.kv_rank:  # (MLA's widths spelt out; head_dim then only their default)
        kv_rank, q_rank, nope, rope, v = mla_dims(cfg)
        a = cfg.mla  # (the indexer's fields with its heads; without them, their defaults)
        index = dict(index_heads=a.index_heads, index_dim=a.index_dim, index_topk=a.index_topk) if a.index_heads else {}
        mla, kv, hd = MlaConfig(kv_rank, q_rank, rope, nope, v, **index), None, None
    return dataclasses.replace(cfg, num_kv_heads=kv, head_dim=hd, qkv_bias=cfg.qkv_bias and not cfg.bias, **unused,
                               sliding_window=max(*windows, 0), attention_chunk=-min(*windows, 0),
                               global_nope=nope_layers, attn_temperature=temperature, attn_temperature_floor=floor,
                               window_pattern=pattern, moe=moe, mla=mla,
                               query_pre_attn_scalar=qpas, rope_local_theta=local, deltanet=deltanet, **glu)


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


def architecture(cfg: ModelConfig, name: Optional[str] = None) -> Architecture:
    """The table of the `transformers` class that computes what this model computes, or a
    ConfigError naming the fields that it cannot represent. Among the tables of the model's norm
    and MLP kinds: the first whose `picks` fit and that represents the model (else the plain one
    of those kinds); `name` (a class, e.g. an imported folder's) first, where that table
    represents the model too: Qwen3-Next and Qwen3.5-MoE compute the same models."""
    same = canonical(cfg)
    kinds = [a for a in ARCHITECTURES if (a.norm, a.mlp) == (cfg.norm, cfg.mlp)]
    if not kinds:
        raise ConfigError([
            f"model.norm={cfg.norm.value} with model.mlp={cfg.mlp.value} has no Hugging Face architecture that "
            "computes the same thing; exportable: norm=rmsnorm + mlp=swiglu (Llama, Mistral, Qwen2, Qwen3, Mixtral, "
            "Qwen3-MoE, DeepSeek-V3, Qwen3.5, Qwen3.5-MoE, Qwen3-Next), norm=rmsnorm + mlp=geglu (Gemma 3), "
            "norm=rmsnorm + mlp=swiglu_clamped (gpt-oss) or norm=layernorm + mlp=gelu (GPT-NeoX)"])
    picked = [a for a in kinds if all(v(field_value(same, k)) if callable(v) else field_value(same, k) == v
                                      for k, v in a.picks.items())] or [kinds[-1]]
    named = [a for a in kinds if a.name == name]
    arch = next((a for a in named + picked if not _unfit(a, cfg)), (named + picked)[0])
    errs = _unfit(arch, cfg)
    if errs:
        raise ConfigError(errs)
    return arch


def _unfit(arch: Architecture, cfg: ModelConfig) -> list:
    """The one-line errors of what `arch` cannot represent of cfg (none: [])."""
    same = canonical(cfg)
    refused, unknown = refusals(arch, cfg)
    text = lambda v: getattr(v, "value", v)  # noqa: E731
    if refused:
        shown = [f"model.{n}={text(field_value(same, n))}" for n in refused]
        default = ModelConfig()  # (a refusal of an option the table needs on, not off, says which value it needs)
        needed = [f"model.{n}={text(arch.refused[n])}" for n in refused if arch.refused[n] != field_value(default, n)]
        fix = f"train with {', '.join(needed)} to export" if needed else "train without it to export"
        return [f"{', '.join(shown)}: {arch.name} (the Hugging "
                f"Face architecture of this model.norm and model.mlp) does not compute that, so the model "
                f"cannot be exported ({fix})"]
    unmet = [f"model.{n}={text(field_value(cfg, n))}: {arch.name} needs {what}" for n, (ok, what) in
             arch.requires.items() if not ok(field_value(same, n))] + (arch.check(cfg) if arch.check else [])
    if unmet:
        return unmet
    if unknown:
        return [f"model.{', model.'.join(unknown)}: the {arch.name} table (spmdgpt/hf/tables.py) does not "
                "say how to represent it; map it to config.json there, or refuse it"]
    return []


def refusals(arch: Architecture, cfg: ModelConfig) -> tuple[list, list]:
    """(the fields whose value the table refuses, in cfg's canonical spelling; the fields the table
    neither maps nor refuses, and that are not training-only: a new field, never exported silently)."""
    same = canonical(cfg)
    refused = [name for name, value in arch.refused.items() if field_value(same, name) != value]
    unknown = [name for name in field_names(cfg)
               if name not in TRAINING_ONLY and name not in arch.fields and name not in arch.refused]
    return refused, unknown


def _dims(cfg: ModelConfig, layer: Optional[int] = None) -> dict:
    """The layout axes' sizes (see tables.py; MLA's: l = kv_rank, s = q_rank, p = kv_rank + rope_dim,
    q = nope_dim + rope_dim, u = nope_dim + v_dim, o = v_dim; g = the shared experts' width; Gated
    DeltaNet's: kh, kd = key heads and width, vh, vd = value heads and width, cw = the convolution's
    width, kr, vr = Kimi Delta Attention's decay and output gate ranks (kd, vd), two = 2; ly, pd = the
    layers and the per-layer inputs' width, model.per_layer_dim; DeepSeek-V4's: cr = csa.q_rank, og, gm, co = the
    output groups, the heads in each, their rank, sr, hr = the C and H layers' rates, ci, cni = the indexer's width
    and heads, hs, hm, h3 = the hyper-connections' streams, mixes and scales, hq, h1 = the head's, tk = moe.top_k), in
    model
    layer `layer` (a global stack's G layers: their own head width and
    key/value heads, kv = 1 with values from keys; `config.stack_config`)."""
    if layer is not None:
        cfg = stack_config(cfg, _stack_of(cfg, layer)[0])
    kv_rank, q_rank, nope, rope, v = mla_dims(cfg)
    kh, vh, kd, vd = deltanet_dims(cfg)
    return {"d": cfg.d_model, "c": 3, "n": cfg.num_heads, "k": kv_heads(cfg), "kv": 1 if cfg.global_k_eq_v else 2,
            "h": head_dim(cfg),
            "f": mlp_hidden(cfg), "v": cfg.vocab_size, "e": cfg.moe.num_experts, "m": expert_hidden(cfg),
            "g": cfg.moe.shared_experts * expert_hidden(cfg), "l": kv_rank, "s": q_rank, "p": kv_rank + rope,
            "q": nope + rope, "u": nope + v, "o": v, "kh": kh, "kd": kd, "vh": vh, "vd": vd, "cw": cfg.deltanet.conv,
            "kr": kd, "vr": vd, "two": 2, "i": cfg.mla.index_dim, "ni": cfg.mla.index_heads, "ly": cfg.num_layers,
            "pd": cfg.per_layer_dim, "cr": cfg.csa.q_rank, "og": max(cfg.csa.out_groups, 1),
            "gm": cfg.num_heads // max(cfg.csa.out_groups, 1), "co": cfg.csa.out_rank, "sr": cfg.csa.sparse_rate,
            "hr": cfg.csa.heavy_rate, "ci": cfg.csa.index_dim, "cni": cfg.csa.index_heads,
            "hs": cfg.hyper_connections, "hm": (2 + cfg.hyper_connections) * cfg.hyper_connections, "h3": 3,
            "hq": cfg.hyper_connections, "h1": 1,
            "tk": cfg.moe.top_k}


def _side(layout: str, theirs: bool = True) -> str:
    return layout.split("->")[-1 if theirs else 0].strip()


def _hf_shape(t: Tensor, dims: dict, cfg: Optional[ModelConfig] = None) -> tuple:
    """The shape of one of t's Hugging Face tensors: its layout's right side, the first axis
    left out when several names split it, or the whole tensor's first axis when several leaves
    share it (`Tensor.within`, which needs cfg)."""
    groups = re.findall(r"\(([^)]*)\)|(\w+)", _side(t.layout))
    shape = tuple(math.prod(dims[a] for a in (g or s).split()) for g, s in groups)
    if t.within is not None:
        shape = shape[:t.within_axis] + (t.within(cfg)[1],) + shape[t.within_axis + 1:]
    return shape[1:] if t.split else shape


def _rearrange(a: np.ndarray, pattern: str, dims: dict) -> np.ndarray:
    import einops

    used = set(re.findall(r"\w+", pattern))
    out = einops.rearrange(a, pattern, **{k: v for k, v in dims.items() if k in used})
    return np.ascontiguousarray(out).reshape(np.shape(out))  # (a scalar stays one: ascontiguousarray makes it [1])


def reorder(a, order: np.ndarray, back: bool = False) -> np.ndarray:
    """a's rows (its first axis) in `order` (`Tensor.order`; back: that order undone); an order of
    [names, rows] reorders each name's rows of a tensor that several names split (a: [names, rows, ...])."""
    a = np.asarray(a)
    if order.ndim == 1:
        return a[np.argsort(order) if back else order]
    index = np.argsort(order, axis=1) if back else order
    return np.take_along_axis(a, index.reshape(index.shape + (1,) * (a.ndim - 2)), axis=1)


def _leaf(tree, path: str):
    """tree's value at a dotted leaf path ("blocks.attn.w_qkv"), None where the model has none."""
    for name in path.split("."):
        tree = getattr(tree, name, None) if tree is not None else None
    return tree


def _stack_of(cfg: ModelConfig, layer: int) -> tuple:
    """(the stack that holds model layer `layer`: "blocks", or an MoE model's "dense_blocks" for a
    dense layer, a hybrid's "linear_blocks" for a Gated DeltaNet layer, "dense_blocks" for one of its
    dense first layers; the layer's index in it)."""
    linear = linear_layers(cfg)
    if any(linear):
        n = cfg.moe.first_dense_layers if cfg.moe.num_experts else 0
        if layer < n:
            return "dense_blocks", layer
        return ("linear_blocks", linear[:layer].count(True) - n) if linear[layer] else \
            ("blocks", linear[:layer].count(False))
    local = local_layers(cfg)  # (a global stack: the local layers' own stack)
    if any(local):
        stack = "local_blocks" if local[layer] else "blocks"
        n = cfg.num_layers - cfg.kv_shared_layers  # (model.kv_shared_layers: the last layers' stacks of their own)
        if layer >= n:
            return "shared_" + stack, local[n:layer].count(local[layer])
        return stack, local[:layer].count(local[layer])
    kinds = moe_layers(cfg)
    if all(kinds) or not any(kinds):
        return "blocks", layer
    return "blocks" if kinds[layer] else "dense_blocks", kinds[:layer].count(kinds[layer])


def _stack_layers(cfg: ModelConfig, stack: str) -> list:
    """The model layers a stack holds, in order."""
    return [i for i in range(cfg.num_layers) if _stack_of(cfg, i)[0] == stack]


def _layers_of(t: Tensor, cfg: ModelConfig) -> list:
    """The model layers that have row t (`Tensor.layers`; [None]: a row outside the blocks; a tuple of
    kinds: the layers of every one of them)."""
    if not t.per_layer:
        return [None]
    if isinstance(t.layers, tuple):
        sets = [set(_layers_of(dataclasses.replace(t, layers=kind), cfg)) for kind in t.layers]
        return sorted(set.intersection(*sets))
    if t.layers in ("own", "shared"):  # (model.kv_shared_layers: the layers before them, or theirs)
        return [i for i, s in enumerate(kv_shared(cfg)) if s == (t.layers == "shared")]
    if t.layers in ("linear", "full"):
        return [i for i, linear in enumerate(linear_layers(cfg)) if linear == (t.layers == "linear")]
    if t.layers in ("local", "global"):
        return [i for i, local in enumerate(local_layers(cfg)) if local == (t.layers == "local")]
    if t.layers in ("sparse", "heavy"):  # (DeepSeek-V4's compressed layers: C, H of model.csa.pattern)
        return [i for i, k in enumerate(compress_kinds(cfg)) if k == ("C" if t.layers == "sparse" else "H")]
    if t.layers in ("hash", "topk"):  # (the hash-routed MoE layers, the others)
        hashed = hash_layers(cfg)
        return [i for i, m in enumerate(moe_layers(cfg)) if m and (i in hashed) == (t.layers == "hash")]
    kinds = moe_layers(cfg)
    return [i for i in range(cfg.num_layers) if t.layers == "every" or (t.layers == "moe") == kinds[i]]


def hash_layers(cfg: ModelConfig) -> list:
    """The model layers whose experts the hash table picks (the first model.moe.hash_layers MoE layers)."""
    return [i for i, m in enumerate(moe_layers(cfg)) if m][:cfg.moe.hash_layers]


def _leaf_at(t: Tensor, cfg: ModelConfig, layer: Optional[int]) -> tuple:
    """(row t's spmdgpt leaf path in the stack of `layer`, the layer's index there) (the leaf and
    None for a leaf without a layer axis; the hash table's row of a hash-routed layer: its index among them)."""
    if t.leaf == "hash_experts" and layer is not None:
        return t.leaf, hash_layers(cfg).index(layer)
    if not t.stacked or layer is None:
        return t.leaf, None
    stack, index = _stack_of(cfg, layer)
    return stack + t.leaf[len("blocks"):], index


def _present(t: Tensor, cfg: ModelConfig, info, layer: Optional[int] = None) -> bool:
    """Whether the model has row t (in `layer`; None: in its first layer that can have it)."""
    layers = _layers_of(t, cfg) if layer is None else [layer]
    if not layers or (t.when is not None and not t.when(cfg)):
        return False
    if t.leaf is None:
        return True
    return t.fill is not None or _leaf(info, _leaf_at(t, cfg, layers[0])[0]) is not None


def _names(t: Tensor, cfg: ModelConfig, layer: Optional[int]) -> list:
    """t's Hugging Face names in one layer ("{j}": one per expert)."""
    experts = range(cfg.moe.num_experts) if "{j}" in t.names[0] else [None]
    return [n.format(i=layer, j=j) for n in t.names for j in experts]


def _all_names(t: Tensor, cfg: ModelConfig) -> list:
    """t's Hugging Face names in every layer (or its one set, for a tensor outside the blocks)."""
    return [n for layer in _layers_of(t, cfg) for n in _names(t, cfg, layer)]




def expected_shapes(cfg: ModelConfig, name: Optional[str] = None) -> Dict[str, tuple]:
    """{transformers name: shape} of a model exported from `cfg` (as class `name`, where that
    table represents it: `architecture`) (what an import must find), from the architecture's
    table, without allocating anything."""
    from spmdgpt.model import param_info

    arch, info = architecture(cfg, name), param_info(cfg)
    out = {}
    for t in arch.tensors:  # (each layer where the row is present, as export writes them: a stack without the
        # leaf, say Gemma 4's global layers without w_qkv, has none of its names)
        out.update({n: _hf_shape(t, _dims(cfg, layer), cfg) for layer in _layers_of(t, cfg)
                    if _present(t, cfg, info, layer) for n in _names(t, cfg, layer)})
    return out


def _absent_leaves(cfg: ModelConfig, name: Optional[str]) -> List[Tensor]:
    """The table rows an export fills with a constant (no spmdgpt leaf behind them)."""
    from spmdgpt.model import param_info

    arch, info = architecture(cfg, name), param_info(cfg)
    return [t for t in arch.tensors if _present(t, cfg, info)
            and (t.leaf is None or _leaf(info, _leaf_at(t, cfg, _layers_of(t, cfg)[0])[0]) is None)]


# model fields that alone size a layout axis of some tensors (every size linear in them): a config.json value of one
# that the weights contradict shows in every one of those tensors, said in one line (`_one_field`)
SIZING_FIELDS = ("per_layer_dim", "moe.num_experts")


def _one_field(cfg: ModelConfig, files) -> Optional[str]:
    """The one-line error when the weights' shapes are all those of `cfg` with one of SIZING_FIELDS
    changed (to 0: its tensors absent; or to the value the first misshapen tensor implies), else None."""
    arch = getattr(files, "architecture", None)
    expected = expected_shapes(cfg, arch)
    for field in SIZING_FIELDS:
        now = field_value(cfg, field)
        if not now:
            continue
        values = {0}
        for name, shape in expected.items():
            got = tuple(files.shape(name)) if name in files.weight_map else None
            if got is not None and got != shape and len(got) == len(shape):
                values |= {a * now // b for a, b in zip(got, shape) if a != b and a * now % b == 0 and a * now // b}
                break
        for value in sorted(values):
            try:
                fits = expected_shapes(with_field(cfg, field, value), arch)
            except (ConfigError, ValueError, KeyError):
                continue
            if all(n in files.weight_map and tuple(files.shape(n)) == s for n, s in fits.items()) and not any(
                    n in files.weight_map for n in expected if n not in fits):  # (0: none of its tensors there)
                name = next(n for n, s in expected.items() if n not in fits or tuple(files.shape(n)) != s)
                seen = (f"has shape {list(files.shape(name))}, the model config gives {list(expected[name])}"
                        if name in files.weight_map else "is missing")
                key = architecture(cfg, arch).fields.get(field) or f"the field of model.{field}"
                return (f"{files.where}: config.json has {key}={now} (model.{field}), but the weights are those of "
                        f"{value} (tensor {name} {seen}); set {key} to {value} in config.json")
    return None


def aliased(arch: Architecture, name: str) -> str:
    """The other name import accepts for tensor `name` (`Architecture.aliases`; a key with "{i}" stands
    for every layer's), else name itself."""
    if name in arch.aliases:
        return arch.aliases[name]
    for key, other in arch.aliases.items():
        if "{i}" in key:
            found = re.fullmatch(re.escape(key).replace(re.escape("{i}"), r"(\d+)"), name)
            if found:
                return other.format(i=found.group(1))
    return name


def check_weights(cfg: ModelConfig, files) -> None:
    """ConfigError naming every tensor that is missing or has another shape than `cfg` gives, and
    every tensor that spmdgpt's model (which has no parameter there) would drop: a bias that is
    not zero, a scale that is not one."""
    errs = []
    arch = architecture(cfg, getattr(files, "architecture", None))
    for name, shape in expected_shapes(cfg, getattr(files, "architecture", None)).items():
        name = name if name in files.weight_map else aliased(arch, name)
        if name not in files.weight_map:
            errs.append(f"{files.where}: tensor {name} is missing")
        elif files.shape(name) != shape:
            errs.append(f"{files.where}: tensor {name} has shape {list(files.shape(name))}, the model config "
                        f"gives {list(shape)}")
    if errs:
        one = _one_field(cfg, files)
        raise ConfigError([one] if one else errs[:5] + ([f"... and {len(errs) - 5} more"] if len(errs) > 5 else []))
    for t in _absent_leaves(cfg, getattr(files, "architecture", None)):
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

    arch, info = architecture(cfg, getattr(files, "architecture", None)), param_info(cfg)
    by_leaf = {_leaf_at(t, cfg, i)[0]: t for t in arch.tensors if t.leaf is not None
               for i in _layers_of(t, cfg) if _present(t, cfg, info, i)}  # (the layers whose stack has the leaf)

    def get(name):
        return files.get(name if name in files.weight_map else aliased(arch, name))

    def reader(path, i):
        leaf = ".".join(k.name for k in path)
        t, layers = by_leaf[leaf], _stack_layers(cfg, leaf.split(".")[0])
        back = f"{_side(t.layout)} -> {_side(t.layout, theirs=False)}"
        covered = set(_layers_of(t, cfg))

        def read(index=None):  # (index: the layer's in its stack)
            layer = None if index is None else layers[index]
            if layer is not None and t.per_layer and layer not in covered:  # (a leaf of its stack that this layer
                return np.zeros(i.shape[1:], np.float32)  # does not use: DeepSeek-V4's other kinds' compressors)
            names, dims = _names(t, cfg, layer), _dims(cfg, layer)
            a = [get(n) for n in names] if t.split else get(names[0])
            if t.within is not None:  # (this leaf's rows of a tensor several leaves share)
                a = np.take(np.asarray(a), t.within(cfg)[0], axis=t.within_axis)
            if t.sign is not None:  # (nanochat's q and k rows, `tables._rope_flip`)
                a = (np.asarray(a) * t.sign(cfg)).astype(np.asarray(a).dtype)
            return _rearrange(a if t.order is None else reorder(a, t.order(cfg), back=True), back, dims)

        def read_at(layer):
            return _rearrange(get(_names(t, cfg, layer)[0]), back, _dims(cfg, layer))

        if leaf == "hash_experts":  # (one tensor per hash-routed layer, one leaf [layers, ...] without a layer axis)
            return lambda: np.stack([read_at(layer) for layer in hash_layers(cfg)])
        return read

    return jax.tree_util.tree_map_with_path(reader, info, is_leaf=is_info)
