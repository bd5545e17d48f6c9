"""Tokenize once into a token cache on disk; later runs memory-map it.

A cache entry is a folder `<cache_dir>/<name>-<tokenizer>-<hash>/` with `train.npy`, `val.npy`
and `meta.json`, keyed by the SHA-256 of the source file, the tokenizer and the split. It is
written into a temporary folder and renamed into place, so a crash never leaves a partial entry.
Arrays are loaded with allow_pickle=False.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spmdgpt.config import DataConfig, DataSource
from spmdgpt.data.sources import read_text, staircase_tokens, text_path
from spmdgpt.data.tokenizers import (
    CharTokenizer,
    DigitTokenizer,
    Tokenizer,
    as_token_array,
    load_tokenizer,
)

CACHE_VERSION = 1


@dataclass
class Dataset:
    train: np.ndarray  # 1-D token ids (memory-mapped for cached corpora)
    val: np.ndarray
    tokenizer: Tokenizer
    source: str  # human-readable description for logs and metadata


def default_cache_dir(cfg: DataConfig) -> Path:
    if cfg.cache_dir:
        return Path(cfg.cache_dir).expanduser()
    env = os.environ.get("SPMDGPT_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spmdgpt"


def split(tokens: np.ndarray, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    n = int(len(tokens) * (1.0 - val_fraction))
    return tokens[:n], tokens[n:]


def load_dataset(cfg: DataConfig) -> Dataset:
    if cfg.source == DataSource.staircase:
        train, val = split(staircase_tokens(cfg.staircase_tokens), cfg.val_fraction)
        return Dataset(train, val, DigitTokenizer(), f"staircase({cfg.staircase_tokens})")

    path = text_path(cfg)
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    key = hashlib.sha256(
        json.dumps(
            [CACHE_VERSION, digest, cfg.tokenizer.value, cfg.encoding, cfg.val_fraction]
        ).encode()
    ).hexdigest()[:16]
    entry = default_cache_dir(cfg) / f"{path.stem}-{cfg.tokenizer.value}-{key}"
    if (entry / "meta.json").is_file():
        try:
            meta = json.loads((entry / "meta.json").read_text())
            train = np.load(entry / "train.npy", mmap_mode="r", allow_pickle=False)
            val = np.load(entry / "val.npy", mmap_mode="r", allow_pickle=False)
            if (len(train), len(val)) != (meta["train_tokens"], meta["val_tokens"]):
                raise ValueError(f"{len(train)}/{len(val)} tokens where meta.json says "
                                 f"{meta['train_tokens']}/{meta['val_tokens']}")
        except (OSError, ValueError, KeyError) as e:  # truncated or damaged: it is only a cache
            aside = entry.with_name(f"{entry.name}.damaged-{os.getpid()}")
            print(f"spmdgpt: warning: the token cache {entry} is damaged ({e}); moved it to "
                  f"{aside.name} and rebuilding it", file=sys.stderr, flush=True)
            os.replace(entry, aside)
        else:
            tok = (
                CharTokenizer(meta["tokenizer"]["chars"])
                if meta["tokenizer"]["kind"] == "char"
                else load_tokenizer(cfg)
            )
            return Dataset(train, val, tok, str(path))

    # nanoGPT's convention: split the *text* at 90% and tokenize each part.
    text = read_text(path, cfg.encoding)
    tok = load_tokenizer(cfg, text)
    cut = int(len(text) * (1.0 - cfg.val_fraction))
    train = as_token_array(tok.encode(text[:cut]), tok.vocab_size)
    val = as_token_array(tok.encode(text[cut:]), tok.vocab_size)
    meta = {
        "version": CACHE_VERSION,
        "source": str(path),
        "sha256": digest,
        "tokenizer": tok.to_json(),
        "val_fraction": cfg.val_fraction,
        "train_tokens": int(len(train)),
        "val_tokens": int(len(val)),
    }
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
        np.save(tmp / "train.npy", train, allow_pickle=False)
        np.save(tmp / "val.npy", val, allow_pickle=False)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False))
        try:
            os.replace(tmp, entry)
        except OSError:  # another process won the race: keep its entry
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as e:  # read-only cache: train from memory
        print(f"warning: could not write the token cache under {entry.parent}: {e}")
    return Dataset(train, val, tok, str(path))
