"""Hugging Face model folders: tokenizer files, writing the weights (sharded safetensors),
reading a folder's config.json and weights (memory-mapped safetensors, never pickles), and
building spmdgpt parameters from them in their sharded layout."""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional

import numpy as np

from spmdgpt.config import ConfigError, ModelConfig
from spmdgpt.hf.convert import architecture, check_weights, layer_values
from spmdgpt.hf.fields import LANGUAGE_MODELS, language_model, model_fields

# ----------------------------------------------------------------------------- tokenizer


def tokenizer_files(tok, max_seq_len: int) -> Dict[str, str]:
    """{file name: text}: tokenizer.json and tokenizer_config.json that `AutoTokenizer` loads
    (a `PreTrainedTokenizerFast`) and that give the run's own token ids.

    char: a `tokenizers` BPE whose vocabulary is the characters and which has no merges (so one
    token per character), a Fuse decoder (no spaces put between tokens) and the end-of-text id
    as the special token `<|endoftext|>`; gpt2: the data folder's GPT-2 tokenizer.json (the same
    ids as tiktoken's GPT-2 encoding); hf: the run's tokenizer.json as it is. A chat run's
    (data/chat.py): its base tokenizer's, with the default template's tokens added as special
    tokens at the run's ids, and tokenizer_config.json holding the chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    from spmdgpt.data.tokenizers import EOS_NAMES, CharTokenizer, GPT2Tokenizer, HFTokenizer

    if getattr(tok, "kind", None) == "harmony":
        raise ConfigError(["data.tokenizer=harmony: export writes no tokenizer files for o200k_harmony yet, so it "
                           "refuses (nothing written); export a run of another tokenizer, or wait for that export"])
    chat = tok if getattr(tok, "kind", None) == "chat" else None
    if chat is not None:  # (a chat run: its base tokenizer, the added tokens, the template)
        tok = chat.base
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
    if chat is not None:
        if chat.specials:  # the default template's tokens, as special tokens at the run's ids
            t = Tokenizer.from_str(spec)
            t.add_special_tokens([AddedToken(name, special=True) for name in chat.specials])
            if [t.token_to_id(name) for name in chat.specials] != chat.encode("".join(chat.specials)):
                raise ConfigError(["the chat tokens cannot take the run's ids in the exported tokenizer"])
            spec = t.to_str()
        config.update(chat.template.variables, chat_template=chat.template.source)
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
    ordinary_permissions(folder)


def ordinary_permissions(folder) -> None:
    """Give the folder's safetensors files the permissions of any new file under the umask
    (safetensors creates them owner-only: a web server running as another user could not read
    them)."""
    from pathlib import Path

    mask = os.umask(0)
    os.umask(mask)
    for f in Path(folder).glob("*.safetensors"):
        f.chmod(0o666 & ~mask)


def cast(tensors: Dict[str, np.ndarray], dtype: str) -> Dict[str, np.ndarray]:
    import ml_dtypes

    np_dtype = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype]
    return {n: np.ascontiguousarray(a.astype(np_dtype)) for n, a in tensors.items()}


def total_bytes(tensors: Dict[str, np.ndarray]) -> int:
    return sum(a.nbytes for a in tensors.values())



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


# a multimodal checkpoint's language model (fields.LANGUAGE_MODELS): its tensors' prefixes -> the text class's
# (Qwen3.5 saves model.language_model.*; Gemma 3 language_model.model.* and language_model.lm_head)
LANGUAGE_PREFIXES = {"model.language_model.": "model.", "language_model.model.": "model.",
                     "language_model.lm_head.": "lm_head."}


# MXFP4's 4-bit values (OCP Microscaling E2M1), by their code: a byte holds two, the low nibble first
FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                      np.float32)


def mxfp4(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """An MXFP4 tensor as gpt-oss's checkpoints store its experts (`NAME_blocks` [E, R, G, 16]
    uint8: 32 values in each group of 16 bytes, low nibble first; `NAME_scales` [E, R, G] uint8: each
    group's e8m0 exponent, 2^(s - 127)) -> the float32 parameter [E, G x 32, R] (the R rows
    transposed to last, as transformers' dequantization lays them out). Exact: every value is a
    4-bit float times a power of two."""
    blocks = np.asarray(blocks, np.uint8)
    values = np.stack([FP4_VALUES[blocks & 0x0F], FP4_VALUES[blocks >> 4]], axis=-1)  # [..., R, G, 16, 2]
    values = np.ldexp(values.reshape(*blocks.shape[:-1], -1), np.asarray(scales, np.int32)[..., None] - 127)
    return np.ascontiguousarray(np.swapaxes(values.reshape(*blocks.shape[:-2], -1), -1, -2))


class WeightFiles:
    """The safetensors files of a model folder, read lazily (memory-mapped, one tensor at a
    time). Pickled PyTorch weights are refused, never opened. A tensor stored in MXFP4 (NAME_blocks
    beside NAME_scales: gpt-oss's experts) reads as NAME, dequantized (`mxfp4`)."""

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
        # a multimodal checkpoint's language model: its tensors read under the text class's names; the
        # vision tower's are never read
        self._stored = {text + n[len(stored):]: n for n in weight_map for stored, text in LANGUAGE_PREFIXES.items()
                        if n.startswith(stored)}
        self.weight_map = {**weight_map, **{n: weight_map[s] for n, s in self._stored.items()}}
        self._mxfp4 = {n.removesuffix("_blocks"): (n, n.removesuffix("_blocks") + "_scales") for n in self.weight_map
                       if n.endswith("_blocks") and n.removesuffix("_blocks") + "_scales" in self.weight_map}
        self.weight_map.update({n: self.weight_map[b] for n, (b, _) in self._mxfp4.items()})
        self.where = where
        # the class config.json names (a multimodal one's language model's): the table its tensors are read by
        # where several compute the same model (Qwen3-Next, Qwen3.5-MoE; `convert.architecture`)
        try:
            hf = language_model(json.loads((folder / "config.json").read_text()))
        except (OSError, ValueError, AttributeError):  # (none, or not a config: the tables' own choice)
            hf = {}
        self.architecture = (hf.get("architectures") or [None])[0] if isinstance(hf, dict) else None

    def _raw(self, name: str) -> np.ndarray:
        name = self._stored.get(name, name)
        return self._files[self.weight_map[name]].get_tensor(name)

    def shape(self, name: str) -> tuple:
        if name in self._mxfp4:  # [E, R, G, 16] -> [E, G x 32, R]
            *prefix, rows, groups, width = self.shape(self._mxfp4[name][0])
            return (*prefix, groups * width * 2, rows)
        name = self._stored.get(name, name)
        return tuple(self._files[self.weight_map[name]].get_slice(name).get_shape())

    def get(self, name: str) -> np.ndarray:
        if name in self._mxfp4:
            return mxfp4(*(self._raw(n) for n in self._mxfp4[name]))
        return np.asarray(self._raw(name), dtype=np.float32)


def stored(cfg: ModelConfig) -> ModelConfig:
    """The model as Hugging Face files hold it: without state that training sets between steps
    (model.moe.bias_update_rate's router bias), but for the sigmoid (or sqrt-softplus) router's of an
    architecture whose files hold it (DeepSeek-V3's and V4's e_score_correction_bias). A run that
    fine-tunes an imported softmax-routed model with the bias starts it where a new model does (zeros:
    `read_params`); so do FP8's amax histories (model.fp8_scaling=delayed)."""
    import dataclasses

    from spmdgpt.config import Fp8Scaling, Router

    cfg = dataclasses.replace(cfg, fp8_scaling=Fp8Scaling.current)
    plain = dataclasses.replace(cfg, moe=dataclasses.replace(cfg.moe, bias_update_rate=0.0))
    if cfg.moe.bias_update_rate and cfg.moe.router in (Router.sigmoid, Router.sqrtsoftplus) and \
            "moe.bias_update_rate" in architecture(plain).fields:  # (DeepSeek-V3's and V4's files hold it; Llama 4's
        # sigmoid router has none)
        return cfg
    return plain


def open_weights(cfg: ModelConfig, folder, where: str) -> WeightFiles:
    """A Hugging Face model folder's weight files, checked against `cfg` (`check_weights`)."""
    files = WeightFiles(folder, where)
    check_weights(stored(cfg), files)
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
    from spmdgpt.model.pipeline import stack_order

    flat = jax.tree_util.tree_flatten_with_path(layer_values(stored(cfg), files))[0]
    values = {jax.tree_util.keystr(path): fn for path, fn in flat}
    dtype = dtype_of(cfg.param_dtype)
    info = param_info(cfg)

    def build(path, i):
        sharding = rules.param_sharding(i.logical)
        fn = values.get(jax.tree_util.keystr(path))
        if fn is None:  # (state the files do not hold: its init, a constant)
            assert i.init in ("zeros", "ones"), path
            return jax.make_array_from_callback(i.shape, sharding, lambda index: np.full(
                i.shape, 1.0 if i.init == "ones" else 0.0, dtype)[index])
        if "layers" in i.logical:  # (a stacked block leaf: read layer by layer, in a circular pipeline's order)
            order = stack_order(i.shape[0], rules.stage_size(), rules.repeats)

            def read(index):
                layers = (range(i.shape[0]) if order is None else order)[index[0]]
                return np.stack([fn(layer)[index[1:]] for layer in layers]).astype(dtype)
        else:
            def read(index):
                return fn()[index].astype(dtype)
        return jax.make_array_from_callback(i.shape, sharding, read)

    return jax.tree_util.tree_map_with_path(build, info, is_leaf=is_info)


def hf_folder(init_from: Optional[str]):
    """The folder of `checkpoint.init_from=hf:DIR`, or None for any other value."""
    from pathlib import Path

    if not init_from or not init_from.startswith(HF_PREFIX):
        return None
    return Path(init_from[len(HF_PREFIX):]).expanduser()


def with_hf_model(cfg):
    """(cfg, changes): with checkpoint.init_from=hf:DIR, the run's model config with every field
    that DIR's config.json determines taken from it (the run's own values of the other fields,
    e.g. max_seq_len, compute_dtype, attention, stay), and with data.tokenizer=hf and no
    data.tokenizer_file, DIR's tokenizer.json; `changes` lists the fields that differ from what
    the run's config said, as `model.FIELD=VALUE` / `data.tokenizer_file=PATH`."""
    import dataclasses
    import enum

    from spmdgpt.config import model_config_from_dict

    folder = hf_folder(cfg.checkpoint.init_from)
    if folder is None:
        return cfg, []
    where = f"checkpoint.init_from={cfg.checkpoint.init_from}"
    hf = read_hf_config(folder, where)
    fields = model_fields(hf, where)
    model = model_config_from_dict(fields, base=cfg.model)
    text = lambda v: v.value if isinstance(v, enum.Enum) else v  # noqa: E731
    changes = [f"model.{k}={text(getattr(model, k))}" for k in fields if getattr(model, k) != getattr(cfg.model, k)]
    arch = (hf.get("architectures") or [None])[0]
    if arch in LANGUAGE_MODELS:
        changes.append(f"{arch}: its language model only ({LANGUAGE_MODELS[arch]}'s weights); the vision tower is "
                       "left out")
    data = cfg.data
    if text(data.tokenizer) == "hf" and not data.tokenizer_file and (folder / "tokenizer.json").is_file():
        data = dataclasses.replace(data, tokenizer_file=str(folder / "tokenizer.json"))  # (and its chat template)
        changes.append(f"data.tokenizer_file={data.tokenizer_file}")
    return dataclasses.replace(cfg, model=model, data=data), changes
