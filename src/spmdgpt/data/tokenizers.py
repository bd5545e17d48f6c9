"""Tokenizers: characters of the corpus, the GPT-2 BPE through tiktoken (offline), or any
Hugging Face tokenizer.json through `tokenizers`. Each has an end-of-text id that ends every
document of a token store, so document boundaries survive into the token stream."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List, Optional, Protocol, Sequence

import numpy as np

from spmdgpt.config import ConfigError, DataConfig, TokenDtype, TokenizerKind
from spmdgpt.data.sources import find_data_root


class Tokenizer(Protocol):
    kind: str
    vocab_size: int
    eos_id: Optional[int]  # end-of-text token (generation stops there), None when there is none

    def encode(self, text: str) -> List[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def to_json(self) -> dict: ...


class CharTokenizer:
    """One token per distinct character of the corpus, ids in sorted character order; with
    `eos`, one more id after them (len(chars)) marks the end of a document."""

    kind = "char"

    def __init__(self, chars: str, eos: bool = True):
        self.chars = chars
        self.eos_id: Optional[int] = len(chars) if eos else None
        self.vocab_size = len(chars) + (1 if eos else 0)
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
        n = len(self.chars)  # the end-of-text id decodes to nothing
        return "".join(self.chars[i] if 0 <= i < n else "" if i == self.eos_id else "\ufffd"
                       for i in map(int, ids))

    def to_json(self) -> dict:
        return {"kind": "char", "chars": self.chars, "eos": self.eos_id is not None}


class DigitTokenizer(CharTokenizer):
    """The staircase's ten digits."""

    def __init__(self):
        super().__init__("0123456789", eos=False)

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

    # to worker processes as the cache folder (tiktoken's own pickling would look online)
    def __reduce__(self):
        return (GPT2Tokenizer, (self.cache_dir,))

    def encode(self, text: str) -> List[int]:
        return self._enc.encode_ordinary(text)

    def encode_array(self, text: str) -> np.ndarray:
        """encode() as a uint32 array, built in tiktoken's Rust code (no list of Python ints)."""
        return self._enc.encode_to_numpy(text, allowed_special=set(), disallowed_special=())

    def decode(self, ids: Sequence[int]) -> str:
        return self._enc.decode([int(i) for i in ids if 0 <= int(i) < self.vocab_size])

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token (for a mergeable token, its BPE merge rank is its id)."""
        return self._enc.decode_single_token_bytes(token_id)

    def to_json(self) -> dict:
        return {"kind": "gpt2"}


EOS_NAMES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eot_id|>", "[SEP]")


class HFTokenizer:
    """Any Hugging Face `tokenizer.json` (BPE, WordPiece, Unigram ...) through `tokenizers`.
    The end-of-text id is the first of EOS_NAMES in its vocabulary; none: a ConfigError."""

    kind = "hf"

    def __init__(self, spec: str, where: str = "data.tokenizer_file", eos_required: bool = True):
        from tokenizers import Tokenizer as HF

        try:
            self._tok = HF.from_str(spec)
        except Exception as e:  # the library raises a bare Exception for a bad file
            raise ConfigError([f"{where}: not a Hugging Face tokenizer.json ({str(e).splitlines()[0]})"]) from None
        self.spec = spec
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)
        vocab = self._tok.get_vocab(with_added_tokens=True)
        eos = next((vocab[n] for n in EOS_NAMES if n in vocab), None)
        if eos is None and eos_required:
            raise ConfigError([f"{where}: the tokenizer has no end-of-text token (looked for "
                               f"{', '.join(EOS_NAMES)}); add one as a special token"])
        self.eos_id: Optional[int] = eos

    def __reduce__(self):
        return (HFTokenizer, (self.spec, "tokenizer.json", self.eos_id is not None))

    @classmethod
    def from_file(cls, path: Path, where: str = "data.tokenizer_file", eos_required: bool = True) -> "HFTokenizer":
        try:
            spec = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError([f"{where}={path}: cannot read it ({e})"]) from None
        return cls(spec, f"{where}={path}", eos_required)

    def encode(self, text: str) -> List[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_with_specials(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """encode with the tokenizer's post-processor (e.g. Llama 3's <|begin_of_text|> first), as
        transformers' tokenizer(text) does (lm-eval scores texts so)."""
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def token_text(self, token_id: int) -> str:
        """One token's text as the vocabulary holds it, a special token's included ("<|begin_of_text|>";
        decode drops special tokens)."""
        return self._tok.id_to_token(int(token_id)) or ""

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode([int(i) for i in ids if 0 <= int(i) < self.vocab_size])

    def to_json(self) -> dict:
        return {"kind": "hf", "tokenizer": json.loads(self.spec)}


def gpt2_cache_dir(cfg: DataConfig) -> Path:
    root = find_data_root(cfg.path)
    if root is None:
        raise ConfigError(
            ["data.tokenizer=gpt2: no data root found; set data.path=<folder with gpt2-tokenizer/>"]
        )
    return root / "gpt2-tokenizer" / "tiktoken_cache"


def data_file(cfg: DataConfig, value: Optional[str], field: str) -> Path:
    """A file a data.* field names: absolute, or relative to the data root (ConfigError if missing)."""
    p = Path(value or "").expanduser()
    if not p.is_absolute():
        root = find_data_root(cfg.path)
        p = (root / p) if root is not None else p
    if not p.is_file():
        raise ConfigError([f"{field}={value}: no such file {p}"])
    return p


def tokenizer_file(cfg: DataConfig) -> Path:
    return data_file(cfg, cfg.tokenizer_file, "data.tokenizer_file")


def load_tokenizer(cfg: DataConfig, chars: str | None = None) -> Tokenizer:
    """The tokenizer data.tokenizer names; the char tokenizer needs the corpus's characters."""
    if cfg.tokenizer == TokenizerKind.gpt2:
        return GPT2Tokenizer(gpt2_cache_dir(cfg))
    if cfg.tokenizer == TokenizerKind.hf:
        return HFTokenizer.from_file(tokenizer_file(cfg))
    if cfg.tokenizer == TokenizerKind.harmony:
        from spmdgpt.data.harmony import HarmonyTokenizer

        return HarmonyTokenizer()
    assert chars is not None, "the char tokenizer is built from the corpus's characters"
    return CharTokenizer(chars)


def tokenizer_from_json(d: dict, cfg: DataConfig | None = None) -> Tokenizer:
    """Rebuild a tokenizer saved with a run (tokenizer.json); plain JSON, never pickle. A
    ValueError when its ids are not as many as the vocab_size saved beside them (an edited file)."""
    if d.get("kind") == "char":  # runs of spmdgpt <= 0.1 had no end-of-text id
        tok = CharTokenizer(d["chars"], eos=d.get("eos", False))
    elif d.get("kind") == "digits":
        tok = DigitTokenizer()
    elif d.get("kind") == "gpt2":
        tok = GPT2Tokenizer(gpt2_cache_dir(cfg or DataConfig()))
    elif d.get("kind") == "hf":
        tok = HFTokenizer(json.dumps(d["tokenizer"]), "tokenizer.json")
    elif d.get("kind") == "harmony":
        from spmdgpt.data.harmony import HarmonyTokenizer

        tok = HarmonyTokenizer()
    elif d.get("kind") == "chat":
        from spmdgpt.data.chat import ChatTemplate, ChatTokenizer

        tok = ChatTokenizer(tokenizer_from_json(d["base"], cfg), ChatTemplate(d["template"], d["variables"]),
                            d["specials"])
    else:
        raise ValueError(f"unknown tokenizer kind {d.get('kind')!r}")
    if d.get("vocab_size", tok.vocab_size) != tok.vocab_size:  # (older runs saved none)
        raise ValueError(f"it has {tok.vocab_size} ids, the run trained with {d['vocab_size']}: it was edited")
    if "sha256" in d and d["sha256"] != _digest(d):  # (older runs saved none)
        raise ValueError("its contents are not those the run saved (their sha256 differs): it was edited")
    return tok


def _digest(d: dict) -> str:
    """sha256 of a saved tokenizer's JSON (its keys sorted), the digest itself left out."""
    import hashlib

    body = json.dumps({k: v for k, v in d.items() if k != "sha256"}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()


def save_tokenizer(tok: Tokenizer, path: Path) -> None:
    """path (a run's tokenizer.json): the tokenizer, its vocab_size and the sha256 of both (so an edit
    shows), atomic."""
    from spmdgpt.run.files import write_text_atomic

    d = {**tok.to_json(), "vocab_size": tok.vocab_size}
    write_text_atomic(path, json.dumps({**d, "sha256": _digest(d)}, ensure_ascii=False))


def token_dtype(cfg: DataConfig, vocab_size: int) -> np.dtype:
    """data.token_dtype resolved: uint16 when the vocabulary fits (auto), else uint32."""
    fits16 = vocab_size <= np.iinfo(np.uint16).max + 1
    if cfg.token_dtype == TokenDtype.uint16 and not fits16:
        raise ConfigError([f"data.token_dtype=uint16 cannot hold a vocabulary of {vocab_size} "
                           "tokens; set data.token_dtype=uint32 (or auto)"])
    if cfg.token_dtype == TokenDtype.uint32 or not fits16:
        return np.dtype(np.uint32)
    return np.dtype(np.uint16)
