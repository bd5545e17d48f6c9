"""Hugging Face interop: a model's parameters as a `transformers` checkpoint, and back.

Two architectures of `transformers` compute exactly what a spmdgpt model computes, so these are
the two an export can be (any other config is a one-line error naming the field, never a folder
that loads but computes something else):

    model.norm=rmsnorm,   model.mlp=swiglu  ->  LlamaForCausalLM
    model.norm=layernorm, model.mlp=gelu    ->  GPTNeoXForCausalLM, sequential residual
                                                (use_parallel_residual=false), full rotary
                                                (partial_rotary_factor=1), tanh GELU
                                                (hidden_act=gelu_pytorch_tanh)

Facts the mapping rests on (read from transformers 5.23's modeling code, and true of 4.x):
- RoPE: both rotate the pairs (x[i], x[i + h/2]) of each head (`rotate_half`), with inverse
  frequencies theta^(-2i/h): spmdgpt's `layers.rope` pairing, so q/k rows need no permutation.
  The base goes in `rope_parameters.rope_theta` (the current field; also written as the legacy
  top-level `rope_theta`, which older versions read).
- Linear weights are [out, in] (spmdgpt's are [in, out]). Llama's q/k/v_proj rows are
  (head, head_dim); GPT-NeoX's fused `query_key_value` rows are interleaved per head: q, k, v of
  head 0, then of head 1, ... (the output is viewed as [.., heads, 3 * head_dim] and chunked).
- GPT-NeoX always has biases in its MLP and LayerNorms (`attention_bias` governs only the
  attention's): a model without biases stores zeros there. Llama has `attention_bias` (q, k, v,
  o) and `mlp_bias` (gate, up, down); spmdgpt has no gate bias, so a biased model stores zeros.
- The unembedding is `lm_head.weight` (Llama) / `embed_out.weight` (GPT-NeoX's name on the
  Hub, which transformers 5 renames to lm_head on load); tied models omit it
  (`tie_word_embeddings=true`).
- The vocabulary keeps the model's padded size (`model.vocab_size` >= the tokenizer's, as
  Pythia's 50,304 rows for a 50,277-token tokenizer); padding ids are never a training target.

Tensors are numpy arrays keyed by their `transformers` names; `to_hf` and `from_hf` are exact
inverses (an import exported again gives byte-identical tensors).
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional

import numpy as np

from spmdgpt.config import ConfigError, MlpType, ModelConfig, NormType, head_dim, mlp_hidden

LLAMA, NEOX = "LlamaForCausalLM", "GPTNeoXForCausalLM"
TANH_GELUS = ("gelu_pytorch_tanh", "gelu_new")  # both: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))


def architecture(cfg: ModelConfig) -> str:
    """The `transformers` class that computes what this model computes, or a ConfigError naming
    the fields that no supported architecture represents."""
    unsupported = [f"model.{name}={getattr(cfg, name)}" for name, off in (("qk_norm", False), ("logit_softcap", 0.0))
                   if getattr(cfg, name) != off]
    if unsupported:
        raise ConfigError([f"{', '.join(unsupported)}: neither Llama nor GPT-NeoX computes that, so the model "
                           "cannot be exported to Hugging Face (train without it to export)"])
    if cfg.norm == NormType.rmsnorm and cfg.mlp == MlpType.swiglu:
        return LLAMA
    if cfg.norm == NormType.layernorm and cfg.mlp == MlpType.gelu:
        return NEOX
    raise ConfigError([
        f"model.norm={cfg.norm.value} with model.mlp={cfg.mlp.value} has no Hugging Face architecture that "
        "computes the same thing; exportable: norm=rmsnorm + mlp=swiglu (Llama) or norm=layernorm + "
        "mlp=gelu (GPT-NeoX)"])


def hf_config(cfg: ModelConfig, eos_id: Optional[int], bos_id: Optional[int] = None) -> dict:
    """config.json of the exported model."""
    arch = architecture(cfg)
    common = {
        "architectures": [arch],
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "intermediate_size": mlp_hidden(cfg),
        "max_position_embeddings": cfg.max_seq_len,
        "tie_word_embeddings": cfg.tie_embeddings,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
        "rope_theta": cfg.rope_theta,
        "attention_bias": cfg.bias,
        "attention_dropout": 0.0,
        "initializer_range": cfg.init_std,
        "bos_token_id": bos_id if bos_id is not None else eos_id,
        "eos_token_id": eos_id,
        "torch_dtype": "float32",
        "use_cache": True,
    }
    if arch == LLAMA:
        return {**common, "model_type": "llama", "hidden_act": "silu", "rms_norm_eps": cfg.norm_eps,
                "num_key_value_heads": cfg.num_heads, "head_dim": head_dim(cfg), "mlp_bias": cfg.bias,
                "pretraining_tp": 1}
    common["rope_parameters"]["partial_rotary_factor"] = 1.0
    return {**common, "model_type": "gpt_neox", "hidden_act": TANH_GELUS[0], "layer_norm_eps": cfg.norm_eps,
            "use_parallel_residual": False, "rotary_pct": 1.0, "rotary_emb_base": cfg.rope_theta,
            "hidden_dropout": 0.0, "classifier_dropout": 0.0}


def _t(w: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(w.T)


def to_hf(cfg: ModelConfig, params) -> Dict[str, np.ndarray]:
    """spmdgpt parameters (a Params of host arrays) -> {transformers name: array}."""
    arch = architecture(cfg)
    D, N, H, F = cfg.d_model, cfg.num_heads, head_dim(cfg), mlp_hidden(cfg)
    b = params.blocks
    out: Dict[str, np.ndarray] = {}
    zeros = lambda n: np.zeros((n,), np.asarray(b.mlp.w_up).dtype)  # noqa: E731
    for i in range(cfg.num_layers):
        w_qkv, w_o = np.asarray(b.attn.w_qkv[i]), np.asarray(b.attn.w_o[i])  # [D, 3, N, H], [N, H, D]
        if arch == LLAMA:
            p = f"model.layers.{i}."
            out[p + "input_layernorm.weight"] = np.asarray(b.ln1.scale[i])
            out[p + "post_attention_layernorm.weight"] = np.asarray(b.ln2.scale[i])
            for c, name in enumerate("qkv"):
                out[p + f"self_attn.{name}_proj.weight"] = _t(w_qkv[:, c].reshape(D, N * H))
                if cfg.bias:
                    out[p + f"self_attn.{name}_proj.bias"] = np.asarray(b.attn.b_qkv[i][c]).reshape(N * H)
            out[p + "self_attn.o_proj.weight"] = _t(w_o.reshape(N * H, D))
            out[p + "mlp.gate_proj.weight"] = _t(np.asarray(b.mlp.w_gate[i]))
            out[p + "mlp.up_proj.weight"] = _t(np.asarray(b.mlp.w_up[i]))
            out[p + "mlp.down_proj.weight"] = _t(np.asarray(b.mlp.w_down[i]))
            if cfg.bias:
                out[p + "self_attn.o_proj.bias"] = np.asarray(b.attn.b_o[i])
                out[p + "mlp.gate_proj.bias"] = zeros(F)  # (spmdgpt's SwiGLU gate has no bias)
                out[p + "mlp.up_proj.bias"] = np.asarray(b.mlp.b_up[i])
                out[p + "mlp.down_proj.bias"] = np.asarray(b.mlp.b_down[i])
        else:
            p = f"gpt_neox.layers.{i}."
            for hf, ln in (("input_layernorm", b.ln1), ("post_attention_layernorm", b.ln2)):
                out[p + hf + ".weight"] = np.asarray(ln.scale[i])
                out[p + hf + ".bias"] = np.asarray(ln.bias[i]) if ln.bias is not None else zeros(D)
            # rows interleaved per head: [N, 3, H] (q, k, v of head 0, then head 1, ...)
            out[p + "attention.query_key_value.weight"] = np.ascontiguousarray(
                w_qkv.transpose(2, 1, 3, 0).reshape(3 * N * H, D))
            out[p + "attention.dense.weight"] = _t(w_o.reshape(N * H, D))
            if cfg.bias:
                out[p + "attention.query_key_value.bias"] = np.ascontiguousarray(
                    np.asarray(b.attn.b_qkv[i]).transpose(1, 0, 2).reshape(3 * N * H))
                out[p + "attention.dense.bias"] = np.asarray(b.attn.b_o[i])
            out[p + "mlp.dense_h_to_4h.weight"] = _t(np.asarray(b.mlp.w_up[i]))
            out[p + "mlp.dense_h_to_4h.bias"] = np.asarray(b.mlp.b_up[i]) if cfg.bias else zeros(F)
            out[p + "mlp.dense_4h_to_h.weight"] = _t(np.asarray(b.mlp.w_down[i]))
            out[p + "mlp.dense_4h_to_h.bias"] = np.asarray(b.mlp.b_down[i]) if cfg.bias else zeros(D)
    if arch == LLAMA:
        out["model.embed_tokens.weight"] = np.asarray(params.embed)
        out["model.norm.weight"] = np.asarray(params.ln_f.scale)
        if params.unembed is not None:
            out["lm_head.weight"] = _t(np.asarray(params.unembed))
    else:
        out["gpt_neox.embed_in.weight"] = np.asarray(params.embed)
        out["gpt_neox.final_layer_norm.weight"] = np.asarray(params.ln_f.scale)
        ln_b = params.ln_f.bias
        out["gpt_neox.final_layer_norm.bias"] = np.asarray(ln_b) if ln_b is not None else zeros(D)
        if params.unembed is not None:
            out["embed_out.weight"] = _t(np.asarray(params.unembed))
    return out


# ----------------------------------------------------------------------------- tokenizer


def tokenizer_files(tok, max_seq_len: int) -> Dict[str, str]:
    """{file name: text}: tokenizer.json and tokenizer_config.json that `AutoTokenizer` loads
    (a `PreTrainedTokenizerFast`) and that give the run's own token ids.

    char: a `tokenizers` BPE whose vocabulary is the characters and which has no merges (so one
    token per character), a Fuse decoder (no spaces put between tokens) and the end-of-text id
    as the special token `<|endoftext|>`; gpt2: the data folder's GPT-2 tokenizer.json (the same
    ids as tiktoken's GPT-2 encoding); hf: the run's tokenizer.json as it is."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    from spmdgpt.data.tokenizers import EOS_NAMES, CharTokenizer, GPT2Tokenizer, HFTokenizer

    if isinstance(tok, CharTokenizer):
        t = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(tok.chars)}, merges=[]))
        t.decoder = decoders.Fuse()
        if tok.eos_id is not None:
            t.add_special_tokens([AddedToken(EOS_NAMES[0], special=True)])
        spec = t.to_str()
    elif isinstance(tok, GPT2Tokenizer):
        path = tok.cache_dir.parent / "tokenizer.json"
        try:
            spec = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError([f"{path}: the GPT-2 tokenizer.json cannot be read ({e.strerror}); "
                               "set data.path to the folder holding gpt2-tokenizer/"]) from None
    elif isinstance(tok, HFTokenizer):
        spec = tok.spec
    else:
        raise ConfigError([f"a {tok.kind} tokenizer cannot be exported"])
    eos = None
    if tok.eos_id is not None:
        vocab = Tokenizer.from_str(spec).get_vocab(with_added_tokens=True)
        eos = next(n for n in EOS_NAMES if vocab.get(n) == tok.eos_id)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_seq_len,
              "clean_up_tokenization_spaces": False, "add_bos_token": False, "add_eos_token": False}
    if eos is not None:
        config.update(eos_token=eos, bos_token=eos)
    return {"tokenizer.json": spec, "tokenizer_config.json": json.dumps(config, indent=2, ensure_ascii=False)}


# ----------------------------------------------------------------------------- folder

DTYPES = ("float32", "bfloat16", "float16")


def shard_names(tensors: Dict[str, np.ndarray], max_shard_bytes: int) -> List[List[str]]:
    """Tensor names in consecutive shards of at most max_shard_bytes (a larger tensor alone)."""
    shards: List[List[str]] = [[]]
    size = 0
    for name, a in tensors.items():
        if shards[-1] and size + a.nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += a.nbytes
    return shards


def write_folder(folder, tensors: Dict[str, np.ndarray], files: Dict[str, str], max_shard_bytes: int) -> None:
    """The weights as `model.safetensors`, or as model-0000i-of-0000n.safetensors with
    `model.safetensors.index.json` when they exceed max_shard_bytes; then each of `files`."""
    from pathlib import Path

    from safetensors.numpy import save_file

    folder = Path(folder)
    shards = shard_names(tensors, max_shard_bytes)
    if len(shards) == 1:
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    else:
        weight_map = {}
        for k, names in enumerate(shards):
            fname = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
            save_file({n: tensors[n] for n in names}, str(folder / fname), metadata={"format": "pt"})
            weight_map.update({n: fname for n in names})
        index = {"metadata": {"total_size": sum(a.nbytes for a in tensors.values())}, "weight_map": weight_map}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    mask = os.umask(0)
    os.umask(mask)
    for f in folder.glob("*.safetensors"):  # (the library creates them owner-only)
        f.chmod(0o666 & ~mask)


def cast(tensors: Dict[str, np.ndarray], dtype: str) -> Dict[str, np.ndarray]:
    import ml_dtypes

    np_dtype = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype]
    return {n: np.ascontiguousarray(a.astype(np_dtype)) for n, a in tensors.items()}


def total_bytes(tensors: Dict[str, np.ndarray]) -> int:
    return sum(a.nbytes for a in tensors.values())



# ----------------------------------------------------------------------------- import

HF_PREFIX = "hf:"


def read_hf_config(folder, where: str) -> dict:
    """config.json of a local Hugging Face model folder; ConfigError when it is not one."""
    from pathlib import Path

    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError([f"{where}: no such directory"])
    path = folder / "config.json"
    if not path.is_file():
        raise ConfigError([f"{where}: no config.json there; give a Hugging Face model folder "
                           "(config.json + safetensors weights)"])
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigError([f"{where}: config.json cannot be read ({e})"]) from None


def _rope(hf: dict) -> dict:
    rope = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    rope.setdefault("rope_theta", hf.get("rope_theta", hf.get("rotary_emb_base", 10000.0)))
    if "rotary_pct" in hf:
        rope.setdefault("partial_rotary_factor", hf["rotary_pct"])
    return rope


def model_fields(hf: dict, where: str) -> dict:
    """The spmdgpt model fields a Hugging Face config determines (the parameters' shapes and the
    computation), or a ConfigError naming every HF field that no spmdgpt model represents."""
    arch = (hf.get("architectures") or [None])[0]
    kind = hf.get("model_type")
    errs = []

    def need(key, ok, want):
        if not ok:
            errs.append(f"{where}: config.json has {key}={hf.get(key, _rope(hf).get(key))!r}; spmdgpt needs {want}")

    d, heads = hf.get("hidden_size"), hf.get("num_attention_heads")
    rope = _rope(hf)
    need("rope_type", rope.get("rope_type", rope.get("type", "default")) == "default", "the default RoPE (no scaling)")
    if kind == "llama" or arch == LLAMA:
        need("hidden_act", hf.get("hidden_act", "silu") == "silu", "silu (SwiGLU)")
        need("num_key_value_heads", hf.get("num_key_value_heads", heads) == heads,
             f"as many key/value heads as attention heads ({heads}): grouped-query attention is not supported")
        need("head_dim", hf.get("head_dim") in (None, d // heads), f"hidden_size / num_attention_heads = {d // heads}")
        need("mlp_bias", bool(hf.get("mlp_bias", False)) == bool(hf.get("attention_bias", False)),
             "mlp_bias == attention_bias (model.bias sets both)")
        fields = {"norm": "rmsnorm", "mlp": "swiglu", "norm_eps": hf.get("rms_norm_eps", 1e-6)}
    elif kind == "gpt_neox" or arch == NEOX:
        need("hidden_act", hf.get("hidden_act") in TANH_GELUS, f"the tanh GELU ({' or '.join(TANH_GELUS)})")
        need("use_parallel_residual", hf.get("use_parallel_residual", True) is False, "false (a sequential residual)")
        need("partial_rotary_factor", float(rope.get("partial_rotary_factor", 0.25)) == 1.0, "1.0 (full rotary)")
        fields = {"norm": "layernorm", "mlp": "gelu", "norm_eps": hf.get("layer_norm_eps", 1e-5)}
    else:
        raise ConfigError([f"{where}: architecture {arch or kind!r} is not supported; spmdgpt imports "
                           f"{LLAMA} and {NEOX} checkpoints"])
    if errs:
        raise ConfigError(errs)
    inter = hf["intermediate_size"]
    fields.update(num_layers=hf["num_hidden_layers"], num_heads=heads, d_model=d, mlp_factor=inter / d,
                  vocab_size=hf["vocab_size"], bias=bool(hf.get("attention_bias", kind == "gpt_neox")),
                  tie_embeddings=bool(hf.get("tie_word_embeddings", kind != "gpt_neox")),
                  rope_theta=float(rope["rope_theta"]))
    return fields


class WeightFiles:
    """The safetensors files of a model folder, read lazily (memory-mapped, one tensor at a
    time). Pickled PyTorch weights are refused, never opened."""

    def __init__(self, folder, where: str):
        from pathlib import Path

        from safetensors import safe_open

        folder = Path(folder)
        index = folder / "model.safetensors.index.json"
        if index.is_file():
            weight_map = json.loads(index.read_text())["weight_map"]
            files = sorted(set(weight_map.values()))
        elif (folder / "model.safetensors").is_file():
            files, weight_map = ["model.safetensors"], None
        else:
            pickles = sorted(p.name for p in folder.glob("*.bin")) + sorted(p.name for p in folder.glob("*.pt"))
            if pickles:
                raise ConfigError([
                    f"{where} holds only pickled PyTorch weights ({', '.join(pickles[:3])}), which spmdgpt never "
                    "opens (unpickling runs code); convert them once with transformers: "
                    "AutoModelForCausalLM.from_pretrained(DIR).save_pretrained(NEW_DIR) writes safetensors"])
            raise ConfigError([f"{where}: no model.safetensors or model.safetensors.index.json there"])
        self._files = {}
        for f in files:
            try:
                self._files[f] = safe_open(str(folder / f), framework="numpy")
            except Exception as e:  # the library raises its own error types for damaged files
                raise ConfigError([f"{where}/{f}: not a readable safetensors file ({e})"]) from None
        if weight_map is None:
            weight_map = {n: files[0] for n in self._files[files[0]].keys()}
        self.weight_map = weight_map
        self.where = where

    def shape(self, name: str) -> tuple:
        return tuple(self._files[self.weight_map[name]].get_slice(name).get_shape())

    def get(self, name: str) -> np.ndarray:
        return np.asarray(self._files[self.weight_map[name]].get_tensor(name), dtype=np.float32)


def expected_shapes(cfg: ModelConfig) -> Dict[str, tuple]:
    """{transformers name: shape} of a model exported from `cfg` (what an import must find),
    without allocating it: `to_hf` of a one-layer, one-token-vocabulary copy of the model,
    its layer-0 names repeated for every layer and the vocabulary dimension restored."""
    import dataclasses

    from spmdgpt.model import param_info

    small = dataclasses.replace(cfg, num_layers=1, vocab_size=1)
    fake = _map_leaves(param_info(small), lambda i: np.zeros(i.shape, np.float32))
    out = {}
    for name, a in to_hf(small, fake).items():
        shape = tuple(cfg.vocab_size if d == 1 and name.endswith(("embed_tokens.weight", "embed_in.weight",
                                                                     "lm_head.weight", "embed_out.weight"))
                      else d for d in a.shape)
        if ".layers.0." in name:
            out.update({name.replace(".layers.0.", f".layers.{i}."): shape for i in range(cfg.num_layers)})
        else:
            out[name] = shape
    return out


def _map_leaves(tree, fn):
    import jax

    from spmdgpt.model import is_info

    return jax.tree.map(fn, tree, is_leaf=is_info)


def check_weights(cfg: ModelConfig, files: WeightFiles) -> None:
    """ConfigError naming every tensor that is missing or has another shape than `cfg` gives, and
    every non-zero bias that spmdgpt's model (which has none there) would drop."""
    errs = []
    want = expected_shapes(cfg)
    for name, shape in want.items():
        if name not in files.weight_map:
            errs.append(f"{files.where}: tensor {name} is missing")
        elif files.shape(name) != shape:
            errs.append(f"{files.where}: tensor {name} has shape {list(files.shape(name))}, the model config "
                        f"gives {list(shape)}")
    if errs:
        raise ConfigError(errs[:5] + ([f"... and {len(errs) - 5} more"] if len(errs) > 5 else []))
    zero = [n for n in want if n.endswith(("mlp.gate_proj.bias",)) or (
        not cfg.bias and n.endswith(".bias"))]  # stored as zeros by an export, absent from spmdgpt
    nonzero = [n for n in zero if np.any(files.get(n))]
    if nonzero:
        raise ConfigError([f"{files.where}: tensor {nonzero[0]} is not zero ({len(nonzero)} such bias(es)), "
                           "and spmdgpt's model has no such bias; it cannot be imported exactly"])


def layer_values(cfg: ModelConfig, files: WeightFiles):
    """Params-shaped tree of functions: stacked leaves `f(layer) -> that layer's value`, the
    others `f() -> the value`, in spmdgpt's layout (float32): what `to_hf` wrote, inverted."""
    from spmdgpt.model import Attention, Block, Mlp, Norm, Params

    arch = architecture(cfg)
    D, N, H = cfg.d_model, cfg.num_heads, head_dim(cfg)
    g = files.get
    T = lambda name: np.ascontiguousarray(g(name).T)  # noqa: E731
    if arch == LLAMA:
        L = "model.layers.{}."
        qkv = lambda i: np.stack([g(L.format(i) + f"self_attn.{c}_proj.weight").T.reshape(D, N, H)  # noqa: E731
                                  for c in "qkv"], axis=1)
        b_qkv = lambda i: np.stack([g(L.format(i) + f"self_attn.{c}_proj.bias").reshape(N, H)  # noqa: E731
                                    for c in "qkv"])
        names = dict(ln1="input_layernorm", ln2="post_attention_layernorm", w_o="self_attn.o_proj",
                     w_up="mlp.up_proj", w_down="mlp.down_proj", w_gate="mlp.gate_proj")
        embed, ln_f, unembed = "model.embed_tokens.weight", "model.norm", "lm_head.weight"
    else:
        L = "gpt_neox.layers.{}."
        qkv = lambda i: np.ascontiguousarray(  # noqa: E731
            g(L.format(i) + "attention.query_key_value.weight").reshape(N, 3, H, D).transpose(3, 1, 0, 2))
        b_qkv = lambda i: np.ascontiguousarray(  # noqa: E731
            g(L.format(i) + "attention.query_key_value.bias").reshape(N, 3, H).transpose(1, 0, 2))
        names = dict(ln1="input_layernorm", ln2="post_attention_layernorm", w_o="attention.dense",
                     w_up="mlp.dense_h_to_4h", w_down="mlp.dense_4h_to_h", w_gate=None)
        embed, ln_f = "gpt_neox.embed_in.weight", "gpt_neox.final_layer_norm"
        unembed = "embed_out.weight" if "embed_out.weight" in files.weight_map else "lm_head.weight"
    ln_bias = cfg.bias and cfg.norm == NormType.layernorm

    def w(key, suffix=".weight", transpose=True):
        return lambda i: (T if transpose else g)(L.format(i) + names[key] + suffix)

    blocks = Block(
        ln1=Norm(w("ln1", transpose=False), w("ln1", ".bias", False) if ln_bias else None),
        attn=Attention(
            w_qkv=qkv,
            b_qkv=b_qkv if cfg.bias else None,
            w_o=lambda i: T(L.format(i) + names["w_o"] + ".weight").reshape(N, H, D),
            b_o=w("w_o", ".bias", False) if cfg.bias else None,
        ),
        ln2=Norm(w("ln2", transpose=False), w("ln2", ".bias", False) if ln_bias else None),
        mlp=Mlp(
            w_up=w("w_up"),
            b_up=w("w_up", ".bias", False) if cfg.bias else None,
            w_gate=w("w_gate") if names["w_gate"] else None,
            w_down=w("w_down"),
            b_down=w("w_down", ".bias", False) if cfg.bias else None,
        ),
    )
    return Params(
        embed=lambda: g(embed),
        blocks=blocks,
        ln_f=Norm(lambda: g(ln_f + ".weight"), (lambda: g(ln_f + ".bias")) if ln_bias else None),
        unembed=None if cfg.tie_embeddings else (lambda: T(unembed)),
    )


def open_weights(cfg: ModelConfig, folder, where: str) -> WeightFiles:
    """A Hugging Face model folder's weight files, checked against `cfg` (`check_weights`)."""
    files = WeightFiles(folder, where)
    check_weights(cfg, files)
    return files


def load_params(cfg: ModelConfig, folder, rules, where: str):
    """A Hugging Face model folder's weights as spmdgpt parameters (`open_weights`, then
    `read_params`)."""
    return read_params(cfg, open_weights(cfg, folder, where), rules)


def read_params(cfg: ModelConfig, files: WeightFiles, rules):
    """Checked weight files as spmdgpt parameters, each leaf built straight into its sharded
    layout (`jax.make_array_from_callback`: every device reads only the layers its shard covers;
    never the whole model on one device)."""
    import jax

    from spmdgpt.model import is_info, param_info
    from spmdgpt.model.layers import dtype_of

    values = layer_values(cfg, files)
    dtype = dtype_of(cfg.param_dtype)
    info = param_info(cfg)
    stacked = {id(leaf) for leaf in jax.tree.leaves(info.blocks, is_leaf=is_info)}

    def build(i, fn):
        sharding = rules.param_sharding(i.logical)
        if id(i) in stacked:
            def read(index):
                layers = range(i.shape[0])[index[0]]
                return np.stack([fn(layer)[index[1:]] for layer in layers]).astype(dtype)
        else:
            def read(index):
                return fn()[index].astype(dtype)
        return jax.make_array_from_callback(i.shape, sharding, read)

    return jax.tree.map(build, info, values, is_leaf=is_info)


def hf_folder(init_from: Optional[str]):
    """The folder of `checkpoint.init_from=hf:DIR`, or None for any other value."""
    from pathlib import Path

    if not init_from or not init_from.startswith(HF_PREFIX):
        return None
    return Path(init_from[len(HF_PREFIX):]).expanduser()


def with_hf_model(cfg):
    """(cfg, changes): with checkpoint.init_from=hf:DIR, the run's model config with every field
    that DIR's config.json determines taken from it (the run's own values of the other fields,
    e.g. max_seq_len, compute_dtype, attention, stay); `changes` lists the fields that differ
    from what the run's config said, as `model.FIELD=VALUE`."""
    import dataclasses
    import enum

    from spmdgpt.config import model_config_from_dict

    folder = hf_folder(cfg.checkpoint.init_from)
    if folder is None:
        return cfg, []
    where = f"checkpoint.init_from={cfg.checkpoint.init_from}"
    fields = model_fields(read_hf_config(folder, where), where)
    model = model_config_from_dict(fields, base=cfg.model)
    text = lambda v: v.value if isinstance(v, enum.Enum) else v  # noqa: E731
    changes = [f"model.{k}={text(getattr(model, k))}" for k in fields if getattr(model, k) != getattr(cfg.model, k)]
    return dataclasses.replace(cfg, model=model), changes
