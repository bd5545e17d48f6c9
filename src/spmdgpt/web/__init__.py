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
import functools
import http.server
import json
import threading
from importlib import resources
from pathlib import Path
from typing import Dict, Iterator

import numpy as np

from spmdgpt.config import ROPE_SCALING_DEFAULTS, ConfigError, MlpType, ModelConfig, RopeScaling, head_dim, mlp_hidden
from spmdgpt.hf.convert import refusals
from spmdgpt.hf.export import to_tensors
from spmdgpt.hf.files import ordinary_permissions
from spmdgpt.hf.tables import (
    DENSE,
    NO_DEEPSEEK_V4,
    NO_DELTANET,
    NO_GEMMA,
    NO_LLAMA4,
    NO_MLA,
    NO_NANOCHAT,
    NO_OLMO,
    NO_SINKS,
    Architecture,
    Tensor,
)

DTYPES = ("float32", "float16")  # jax-js has no bfloat16
BUNDLE = "spmdgpt-web.js"
PAGE = "index.html"
# GPT-2's pre-tokenisation pattern (tiktoken's r50k_base), as a JavaScript RegExp source ("gu" flags)
GPT2_PATTERN = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


# The page's format as a table (spmdgpt.hf.tables' kind, checked by the same code): its
# tensors are spmdgpt's own leaves under their names without the unit that holds them,
# untransposed ("blocks.w_qkv" [L, D, 3, N, H]); its fields are config.json's keys, which
# web/src/model.js reads. Every model field is mapped, refused (the page computes it only at
# that value: the default computation) or training-only, so a new option is refused at export
# time and the page never computes something other than the model.
TABLE = Architecture(
    name="web/src/model.js", model_type="web", norm=None, mlp=None,
    tensors=tuple(Tensor((name,), leaf, "... -> ...") for name, leaf in (
        ("embed", "embed"), ("unembed", "unembed"), ("ln_f.scale", "ln_f.scale"), ("ln_f.bias", "ln_f.bias"),
        *((f"blocks.{ln}.{p}", f"blocks.{ln}.{p}") for ln in ("ln1", "ln2") for p in ("scale", "bias")),
        *((f"blocks.{p}", f"blocks.attn.{p}") for p in ("w_qkv", "b_qkv", "w_o", "b_o")),
        *((f"blocks.{p}", f"blocks.mlp.{p}") for p in ("w_up", "b_up", "w_gate", "w_down", "b_down")))),
    fields={**{name: name for name in ("num_layers", "num_heads", "d_model", "head_dim", "vocab_size", "max_seq_len",
                                       "norm", "norm_eps", "mlp", "rope_theta", "qk_norm", "logit_softcap",
                                       "tie_embeddings", "bias")}, "mlp_factor": "mlp_hidden"},
    refused={"num_kv_heads": None, "qkv_bias": False, "qk_norm_scale": False, "rope_scaling": RopeScaling.none,
             "sliding_window": 0, "window_pattern": "L", **DENSE, **NO_MLA, **NO_GEMMA, **NO_DELTANET, **NO_SINKS,
             **NO_OLMO, **NO_NANOCHAT, **NO_LLAMA4, **NO_DEEPSEEK_V4,
             **ROPE_SCALING_DEFAULTS},
)


def check_supported(cfg: ModelConfig) -> None:
    """ConfigError naming any model field the page's model does not compute (at this value)."""
    refused, unknown = refusals(TABLE, cfg)
    page_mlps = (MlpType.gelu, MlpType.swiglu, MlpType.relu2)  # (what the page computes)
    refused += [f"mlp={cfg.mlp.value}"] if cfg.mlp not in page_mlps else []
    if refused or unknown:
        raise ConfigError([f"format=web: the page's model (web/src/model.js) does not implement "
                           f"{', '.join('model.' + n for n in refused + unknown)}; export format=hf instead"])


def web_config(cfg: ModelConfig, vocab_limit: int) -> dict:
    """The model fields of config.json (what web/src/model.js reads), by the table."""
    values = {"head_dim": head_dim(cfg), "mlp_factor": mlp_hidden(cfg)}  # (the widths, not their defaults)
    out = {key: values.get(name, getattr(cfg, name)) for name, key in TABLE.fields.items()}
    return {**{k: getattr(v, "value", v) for k, v in out.items()}, "vocab_limit": vocab_limit}


def web_tensors(cfg: ModelConfig, params, dtype: str) -> Dict[str, np.ndarray]:
    """{"embed": ..., "blocks.w_qkv": ..., ...}: every parameter leaf under the table's name, in `dtype`."""
    tensors = to_tensors(cfg, params, TABLE)
    return {n: np.ascontiguousarray(np.asarray(a, np.float32).astype(dtype)) for n, a in tensors.items()}


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
    ordinary_permissions(folder)
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
