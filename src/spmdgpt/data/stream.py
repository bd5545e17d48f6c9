"""Reading a token store (`store.py` writes it): one split of one dataset as a stream of tokens
read by global offset, shard after shard, each shard memory-mapped and its SHA-256 checked the
first time it is read."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

from spmdgpt.data.store import StoreDamaged, shard_name


class TokenStream:
    """The tokens of one split of one dataset, shard after shard, read by global offset.

    Shards are memory-mapped; a shard's SHA-256 is checked the first time it is read (a
    mismatch raises StoreDamaged naming the file and the fix)."""

    def __init__(self, shards: List[np.ndarray], doc_ends: Optional[List[np.ndarray]] = None,
                 checks: Optional[List[Tuple[Path, str]]] = None, masks: Optional[List[np.ndarray]] = None):
        """masks: a chat store's loss mask of each shard (uint8 per token)."""
        self.shards = shards
        self.doc_ends = doc_ends
        self.masks = masks
        self.pairs = False  # a preference store: documents 2i, 2i + 1 are pair i's chosen, rejected
        self.offsets = np.concatenate([[0], np.cumsum([len(s) for s in shards])]).astype(np.int64)
        # documents before each shard (every shard of a store ends at a document end)
        self.docs_before = np.concatenate([[0], np.cumsum([len(e) for e in doc_ends or []])]).astype(np.int64)
        self._checks = checks
        self._verified = [checks is None] * len(shards)
        self.dtype = shards[0].dtype if shards else np.dtype(np.uint16)

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, key) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("TokenStream supports contiguous slices only")
        start, stop, _ = key.indices(len(self))
        return self.read(start, max(0, stop - start))

    def _verify(self, i: int) -> None:
        path, digest = self._checks[i]
        if hashlib.sha256(memoryview(self.shards[i])).hexdigest() != digest:
            raise StoreDamaged([f"token store shard {path} does not match its checksum; run "
                                "`spmdgpt prepare <the same data overrides> --verify` to rebuild it"])
        self._verified[i] = True

    def _pieces(self, start: int, n: int):
        """(shard, first, count) covering [start, start + n)."""
        i = int(np.searchsorted(self.offsets, start, side="right")) - 1
        pos = start
        while n > 0 and i < len(self.shards):
            lo = pos - int(self.offsets[i])
            take = min(n, len(self.shards[i]) - lo)
            yield i, lo, take
            n, pos, i = n - take, pos + take, i + 1

    def read(self, start: int, n: int, arrays: Optional[List[np.ndarray]] = None) -> np.ndarray:
        """Tokens [start, start + n) as a new array (crossing shard boundaries as needed); of
        `arrays` (one per shard, e.g. the masks) in place of the tokens, when given."""
        out = []
        for i, lo, take in self._pieces(start, n):
            if not self._verified[i]:
                self._verify(i)
            out.append((self.shards if arrays is None else arrays)[i][lo : lo + take])
        return np.concatenate(out) if len(out) != 1 else np.array(out[0])

    def read_mask(self, start: int, n: int) -> np.ndarray:
        """The loss mask (uint8) of tokens [start, start + n): a chat store's, else all ones."""
        return np.ones(n, np.uint8) if self.masks is None else self.read(start, n, self.masks)

    def document_spans(self) -> Tuple[np.ndarray, np.ndarray]:
        """(first token, length) of every document, int64 each (the whole stream as one document
        when it has no document ends)."""
        if self.doc_ends is None:
            return np.zeros(1, np.int64), np.asarray([len(self)], np.int64)
        ends = np.concatenate([e + o for e, o in zip(self.doc_ends, self.offsets[:-1], strict=True)] or [np.zeros(0)])
        ends = ends.astype(np.int64)
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        return starts, ends - starts

    def segments(self, start: int, n: int) -> np.ndarray:
        """Document number (int64) of each token in [start, start + n): the count of document
        ends at or before it. A stream without document ends is one document."""
        if self.doc_ends is None:
            return np.zeros(n, np.int64)
        out = [np.searchsorted(self.doc_ends[i], np.arange(lo, lo + take), side="right") + self.docs_before[i]
               for i, lo, take in self._pieces(start, n)]
        return np.concatenate(out)


def open_store(folder: Path, ledger: dict, split: str) -> TokenStream:
    """The memory-mapped `split` of a complete store (sizes checked by `prepare`), as its
    ledger lists it."""
    dtype = np.dtype(ledger["dtype"])
    shards, ends, checks, masks = [], [], [], []
    for key, entry in sorted(ledger["shards"].items()):
        e = entry[split]
        if not e["tokens"]:
            continue
        name = shard_name(split, int(key))
        shards.append(np.memmap(folder / f"{name}.bin", dtype=dtype.newbyteorder("<"), mode="r"))
        ends.append(np.memmap(folder / f"{name}.docs", dtype="<i8", mode="r"))
        checks.append((folder / f"{name}.bin", e["sha256"]))
        if "mask_sha256" in e:
            masks.append(np.memmap(folder / f"{name}.mask", dtype=np.uint8, mode="r"))
    return TokenStream(shards, ends, checks, masks if masks else None)
