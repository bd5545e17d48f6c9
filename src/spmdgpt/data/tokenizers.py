"""Tokenizers: characters of the corpus, or the GPT-2 BPE through tiktoken (offline)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List, Optional, Protocol, Sequence

import numpy as np

from spmdgpt.config import ConfigError, DataConfig, TokenizerKind
from spmdgpt.data.sources import find_data_root


class Tokenizer(Protocol):
    kind: str
    vocab_size: int
    eos_id: Optional[int]  # end-of-text token (generation stops there), None when there is none

    def encode(self, text: str) -> List[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def to_json(self) -> dict: ...


class CharTokenizer:
    """One token per distinct character of the corpus, ids in sorted character order."""

    kind = "char"
    eos_id = None

    def __init__(self, chars: str):
        self.chars = chars
        self.vocab_size = len(chars)
        self._index = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        return cls("".join(sorted(set(text))))

    def encode(self, text: str) -> List[int]:
        try:
            return [self._index[c] for c in text]
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.chars[i] if 0 <= i < len(self.chars) else "\ufffd" for i in ids)

    def to_json(self) -> dict:
        return {"kind": "char", "chars": self.chars}


class DigitTokenizer(CharTokenizer):
    """The staircase's ten digits."""

    def __init__(self):
        super().__init__("0123456789")

    def to_json(self) -> dict:
        return {"kind": "digits", "chars": self.chars}


class GPT2Tokenizer:
    """tiktoken's GPT-2 encoding, read from the local tiktoken cache (never downloads)."""

    kind = "gpt2"
    eos_id = 50256  # <|endoftext|>

    def __init__(self, cache_dir: Path):
        import tiktoken

        if not cache_dir.is_dir():
            raise ConfigError(
                [
                    f"data.tokenizer=gpt2 needs the GPT-2 BPE files in {cache_dir}; "
                    "set data.path to the folder holding gpt2-tokenizer/"
                ]
            )
        old = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
        try:
            self._enc = tiktoken.get_encoding("gpt2")
        finally:
            if old is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = old
        self.cache_dir = cache_dir
        self.vocab_size = self._enc.n_vocab

    def encode(self, text: str) -> List[int]:
        return self._enc.encode_ordinary(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._enc.decode([int(i) for i in ids if 0 <= int(i) < self.vocab_size])

    def to_json(self) -> dict:
        return {"kind": "gpt2"}


def gpt2_cache_dir(cfg: DataConfig) -> Path:
    root = find_data_root(cfg.path)
    if root is None:
        raise ConfigError(
            ["data.tokenizer=gpt2: no data root found; set data.path=<folder with gpt2-tokenizer/>"]
        )
    return root / "gpt2-tokenizer" / "tiktoken_cache"


def load_tokenizer(cfg: DataConfig, text: str | None = None) -> Tokenizer:
    if cfg.tokenizer == TokenizerKind.gpt2:
        return GPT2Tokenizer(gpt2_cache_dir(cfg))
    assert text is not None, "the char tokenizer is built from the corpus text"
    return CharTokenizer.from_text(text)


def tokenizer_from_json(d: dict, cfg: DataConfig | None = None) -> Tokenizer:
    """Rebuild a tokenizer saved with a run (tokenizer.json); plain JSON, never pickle."""
    if d.get("kind") == "char":
        return CharTokenizer(d["chars"])
    if d.get("kind") == "digits":
        return DigitTokenizer()
    if d.get("kind") == "gpt2":
        return GPT2Tokenizer(gpt2_cache_dir(cfg or DataConfig()))
    raise ValueError(f"unknown tokenizer kind {d.get('kind')!r}")


def save_tokenizer(tok: Tokenizer, path: Path) -> None:
    path.write_text(json.dumps(tok.to_json(), ensure_ascii=False))


def as_token_array(ids: Sequence[int], vocab_size: int) -> np.ndarray:
    dtype = np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.uint32
    return np.asarray(ids, dtype=dtype)
