"""A run's corpus: its datasets resolved, their token stores prepared (once) and memory-mapped.

    data.datasets (or data.text_file) ─► sources.resolve_source: file listings
      ─► tokenizer (char: the corpus's characters, found once and cached beside the stores)
      ─► store.prepare: each dataset's store, built only where missing or damaged
      ─► Corpus: per dataset, a TokenStream of its training split (with its mixture weight)
         and one of its validation split
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Dict, List, Optional

from spmdgpt.config import (
    ConfigError,
    DataConfig,
    DatasetConfig,
    DataSource,
    TokenizerKind,
    dataset_configs,
)
from spmdgpt.data.sources import (
    BadRecords,
    Source,
    documents,
    resolve_source,
    single_file_dataset,
    staircase_tokens,
)
from spmdgpt.data.store import (
    STORE_VERSION,
    default_cache_dir,
    prepare,
    read_ledger,
)
from spmdgpt.data.stream import TokenStream, open_store
from spmdgpt.data.tokenizers import (
    CharTokenizer,
    DigitTokenizer,
    Tokenizer,
    data_file,
    load_tokenizer,
    token_dtype,
    tokenizer_file,
)
from spmdgpt.run.files import WriteFailed, os_reason, write_atomic


@dataclass
class Corpus:
    train: Dict[str, TokenStream]  # training split of each trained dataset
    weights: Dict[str, float]  # their mixture weights
    val: Dict[str, TokenStream]  # validation sets by name (non-empty ones)
    tokenizer: Tokenizer
    source: str  # human-readable description for logs
    folders: Dict[str, Path] = field(default_factory=dict)  # token store of each dataset

    @property
    def train_tokens(self) -> int:
        return sum(len(s) for s in self.train.values())

    @property
    def val_tokens(self) -> int:
        return sum(len(s) for s in self.val.values())


def corpus_datasets(cfg: DataConfig) -> Dict[str, DatasetConfig]:
    """data.datasets, or data.text_file as the one dataset `main`."""
    return dataset_configs(cfg) or {"main": single_file_dataset(cfg)}


def resolve_sources(cfg: DataConfig) -> List[Source]:
    return [resolve_source(name, ds, cfg) for name, ds in corpus_datasets(cfg).items()]


def chat_template_file(cfg: DataConfig) -> Optional[Path]:
    return data_file(cfg, cfg.chat_template, "data.chat_template") if cfg.chat_template else None


def with_chat_template(cfg: DataConfig, tok: Tokenizer) -> Tokenizer:
    """The tokenizer of a corpus with chat datasets: `tok` with its chat template (data/chat.py)."""
    from spmdgpt.data.chat import chat_tokenizer

    if tok.kind == "harmony":  # (its chat format is its own)
        return tok
    hf = tokenizer_file(cfg) if cfg.tokenizer == TokenizerKind.hf else None
    return chat_tokenizer(tok, chat_template_file(cfg), hf)


def char_vocabulary(cfg: DataConfig, sources: List[Source]) -> str:
    """The sorted characters of all the datasets (conversations as their chat template renders
    them, less its special tokens); read once, then cached by their listings."""
    render = None
    if any(s.chat for s in sources):
        from spmdgpt.data.chat import template_text

        template = with_chat_template(cfg, CharTokenizer("")).template
        render = partial(template_text, template)
    ident = json.dumps([STORE_VERSION, [s.identity() for s in sources], render and template.source], sort_keys=True)
    path = default_cache_dir(cfg) / f"chars-{hashlib.sha256(ident.encode()).hexdigest()[:16]}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))["chars"]
    except (OSError, ValueError, KeyError):
        pass
    chars: set = set()
    for src in sources:
        for text, _ in documents(src, BadRecords(), render):
            chars.update(text)
    out = "".join(sorted(chars))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"chars": out}, ensure_ascii=False).encode())
    except OSError as e:

        raise WriteFailed(f"writing {path} failed ({os_reason(e)}); free space or set "
                          "data.cache_dir") from None
    return out


def load_dataset(cfg: DataConfig, *, progress: bool = False, verify: bool = False,
                 check: Optional[Callable[[Tokenizer], None]] = None) -> Corpus:
    """The corpus data.* describes, preparing its token stores where they are missing
    (`verify`: checking every shard's checksum first). `check` sees the tokenizer before any
    store is prepared (e.g. to refuse a model vocabulary that is too small).

    ConfigError for bad input (missing files, invalid text, an empty corpus);
    files.WriteFailed when a store cannot be written."""
    if cfg.source == DataSource.staircase:
        tokens = staircase_tokens(cfg.staircase_tokens)
        n = int(len(tokens) * (1.0 - cfg.val_fraction))
        digits = DigitTokenizer()
        if check is not None:
            check(digits)
        return Corpus({"staircase": TokenStream([tokens[:n]])}, {"staircase": 1.0},
                      {"staircase": TokenStream([tokens[n:]])}, digits, f"staircase({cfg.staircase_tokens})")
    datasets = corpus_datasets(cfg)
    sources = [resolve_source(name, ds, cfg) for name, ds in datasets.items()]
    if any(s.preference for s in sources) and not all(s.preference for s in sources):
        raise ConfigError(["data.datasets: preference pairs (format preference, tuned by DPO) cannot be mixed "
                           "with other datasets; fine-tune on those first, then tune on the pairs from that run"])
    chars = char_vocabulary(cfg, sources) if cfg.tokenizer == TokenizerKind.char else None
    tok = load_tokenizer(cfg, chars)
    if any(s.chat for s in sources):
        tok = with_chat_template(cfg, tok)
    dtype = token_dtype(cfg, tok.vocab_size)
    if check is not None:
        check(tok)
    train, val, folders = {}, {}, {}
    for src in sources:
        folder = folders[src.name] = prepare(cfg, src, tok, dtype, progress=progress, verify=verify)
        ledger = read_ledger(folder)
        if src.split != "val":
            train[src.name] = open_store(folder, ledger, "train")
            train[src.name].pairs = src.preference
        v = open_store(folder, ledger, "val")
        v.pairs = src.preference
        if len(v):
            val[src.name] = v
    empty = [n for n, s in train.items() if not len(s)]
    if empty:
        raise ConfigError([f"data: dataset {', '.join(empty)} has no training text (its files are "
                           "empty, or all of it went to validation)"])
    names = ", ".join(f"{s.name} ({len(s.files)} file{'s' * (len(s.files) > 1)})" for s in sources)
    return Corpus(train, {n: datasets[n].weight for n in train}, val, tok,
                  sources[0].files[0].url if len(sources) == 1 and len(sources[0].files) == 1 else names,
                  folders)

