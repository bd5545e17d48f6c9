"""`spmdgpt export format=web`: a trained model as a static web page that samples text in the
browser with jax-js (the JavaScript sources are in web/ at the repository root; their built
bundle ships in this package as `spmdgpt/web/spmdgpt-web.js`).

The folder holds:

    index.html        the page (prompt, sampling controls, streamed output, tokens/s, backend)
    spmdgpt-web.js    the bundle: jax-js, the model (web/src/model.js), tokenizers, the page
    model.safetensors the parameters under spmdgpt's own names and shapes (float32 or float16)
    config.json       the model fields the forward pass needs (spmdgpt.model's ModelConfig)
    tokenizer.json    {"kind": "char", ...} or {"kind": "bpe", ...} (web/src/tokenizer.js)
    gpt2.tiktoken     GPT-2's merge ranks (BPE runs only)

Parameter names are the names of `spmdgpt.model.Params`' leaves ("embed", "blocks.w_qkv" [L, D, 3, N, H],
"blocks.ln1.scale", "ln_f.scale", "unembed" when untied, ...): no transposes, so the page's
matrices are exactly the checkpoint's.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import http.server
import json
import threading
from importlib import resources
from pathlib import Path
from typing import Dict, Iterator

import numpy as np

from spmdgpt.config import ROPE_SCALING_PARAMS, ConfigError, ModelConfig, RopeScaling, head_dim, mlp_hidden
from spmdgpt.hf import tables as hf_tables
from spmdgpt.hf.convert import canonical

DTYPES = ("float32", "float16")  # jax-js has no bfloat16
BUNDLE = "spmdgpt-web.js"
PAGE = "index.html"
# GPT-2's pre-tokenisation pattern (tiktoken's r50k_base), as a JavaScript RegExp source ("gu" flags)
GPT2_PATTERN = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


# Every ModelConfig field, by what the page does with it: the computation's fields are in
# config.json and web/src/model.js computes them; the rest change how training runs, not what
# the trained model computes. A field in neither (a new option) is refused at export time, so
# the page never computes something other than the model.
COMPUTED = {"num_layers", "num_heads", "d_model", "mlp_factor", "vocab_size", "max_seq_len", "norm", "norm_eps",
            "bias", "mlp", "tie_embeddings", "rope_theta", "qk_norm", "logit_softcap",
            "head_dim"}
TRAINING_ONLY = {*hf_tables.TRAINING_ONLY, "init_std"}  # (config.json records init_std for Hugging Face)
# fields the page computes only at these values (the default computation)
DEFAULT_ONLY = {"num_kv_heads": None, "qkv_bias": False, "qk_norm_scale": False, "rope_scaling": RopeScaling.none,
                "sliding_window": 0}
# (the scalings' parameters and the window pattern: unread without a scaling, a window)
COMPUTED |= {*ROPE_SCALING_PARAMS, "window_pattern"}


def check_supported(cfg: ModelConfig) -> None:
    """ConfigError naming any model field the page's model does not know."""
    unknown = [f.name for f in dataclasses.fields(cfg) if f.name not in COMPUTED | TRAINING_ONLY | set(DEFAULT_ONLY)]
    same = canonical(cfg)  # (e.g. num_kv_heads = num_heads: multi-head attention)
    unknown += [name for name, value in DEFAULT_ONLY.items() if getattr(same, name) != value]
    if unknown:
        raise ConfigError([f"format=web: the page's model (web/src/model.js) does not implement "
                           f"{', '.join('model.' + n for n in unknown)}; export format=hf instead"])


def web_config(cfg: ModelConfig, vocab_limit: int) -> dict:
    """The model fields of config.json (what web/src/model.js reads)."""
    return {
        "num_layers": cfg.num_layers, "d_model": cfg.d_model, "num_heads": cfg.num_heads,
        "head_dim": head_dim(cfg), "mlp_hidden": mlp_hidden(cfg), "vocab_size": cfg.vocab_size,
        "vocab_limit": vocab_limit, "max_seq_len": cfg.max_seq_len, "norm": cfg.norm.value,
        "norm_eps": cfg.norm_eps, "mlp": cfg.mlp.value, "rope_theta": cfg.rope_theta,
        "qk_norm": cfg.qk_norm, "logit_softcap": cfg.logit_softcap, "tie_embeddings": cfg.tie_embeddings,
        "bias": cfg.bias,
    }


def web_tensors(params, dtype: str) -> Dict[str, np.ndarray]:
    """{"embed": ..., "blocks.w_qkv": ..., ...}: every parameter leaf under its name (its path
    without the unit that holds it, `model.leaf_name`), in `dtype`."""
    import jax

    from spmdgpt.model import leaf_name

    flat, _ = jax.tree_util.tree_flatten_with_path(params)
    out = {}
    for path, leaf in flat:
        name = leaf_name(path).lstrip(".")
        out[name] = np.ascontiguousarray(np.asarray(leaf, dtype=np.float32).astype(dtype))
    return out


def tokenizer_spec(tok) -> tuple[dict, Dict[str, bytes]]:
    """(tokenizer.json's spec, extra files {name: bytes}) for the run's tokenizer."""
    kind = getattr(tok, "kind", None)
    if kind in ("char", "digits"):
        return {"kind": "char", "chars": tok.chars, "eos_id": tok.eos_id}, {}
    if kind == "gpt2":  # merge ranks in tiktoken's file format: base64 bytes, rank (= GPT-2's token id)
        ids = range(tok.eos_id)  # every id below <|endoftext|> is a mergeable token
        ranks = "".join(f"{base64.b64encode(tok.token_bytes(i)).decode()} {i}\n" for i in ids)
        return ({"kind": "bpe", "ranks": "gpt2.tiktoken", "pattern": GPT2_PATTERN, "eos_id": tok.eos_id,
                 "special": {"<|endoftext|>": tok.eos_id}, "vocab_size": tok.vocab_size},
                {"gpt2.tiktoken": ranks.encode()})
    raise ConfigError([f"format=web: the run's tokenizer ({kind}) has no browser port yet; char and gpt2 runs "
                       "can be exported"])


def bundle_files() -> Dict[str, bytes]:
    """The page and the built bundle, from the installed package."""
    root = resources.files("spmdgpt") / "web"
    return {name: (root / name).read_bytes() for name in (PAGE, BUNDLE)}


def write_web_folder(folder: Path, cfg: ModelConfig, tensors: Dict[str, np.ndarray], tok, dtype: str) -> None:
    """Everything of the export into `folder` (an existing, empty directory); `tensors` from
    `web_tensors`."""
    from safetensors.numpy import save_file

    spec, extra = tokenizer_spec(tok)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "spmdgpt"})
    (folder / "config.json").write_text(json.dumps({**web_config(cfg, tok.vocab_size), "dtype": dtype}, indent=1))
    (folder / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False))
    for name, data in {**extra, **bundle_files()}.items():
        (folder / name).write_bytes(data)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def static_server(folder: Path) -> Iterator[str]:
    """A plain static file server for `folder` on a free local port (what a user puts an export
    behind; the tests and benchmarks/web.py open the page through it): yields its URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
