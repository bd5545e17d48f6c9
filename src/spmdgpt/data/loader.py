"""Deterministic batches: the global batch of a step is a pure function of (seed, step).

Training rows come from windows of `seq_len + 1` tokens laid every `seq_len` tokens over each
dataset's training stream (so every token is a target once per epoch). Each epoch visits every
window of a dataset exactly once, in a seeded order that differs per epoch, with the window
grid shifted by a seeded offset per epoch (so successive epochs see different cuts of the
text). A mixture gives each dataset its weight's share of every batch. The index arithmetic
(per-epoch shuffles without materialising a permutation, proportional mixing with exact
per-dataset counters) is Grain's `MapDataset` (MaxText's loader), used here for indices only.

Each process reads only the rows its devices hold, straight from the memory-mapped stores, so a
resumed run continues the exact sequence without replaying it (the loader's whole state is the
step), on 1 device, 8 devices or several hosts alike.
"""

from __future__ import annotations

from functools import partial
from typing import Dict, List, NamedTuple, Optional, Tuple

import jax
import numpy as np
from jax.sharding import NamedSharding

from spmdgpt.config import ConfigError
from spmdgpt.data.stream import TokenStream
from spmdgpt.mesh.sharding import local_row_range


def _seed32(*words: int) -> int:
    return int(np.random.SeedSequence([int(w) for w in words]).generate_state(1)[0])


def _check_length(stream: TokenStream, seq_len: int, what: str) -> None:
    if len(stream) < seq_len + 1:
        raise ConfigError([
            f"data.seq_len={seq_len} is too long for {what} ({len(stream)} tokens); lower "
            "data.seq_len or use a larger corpus"
        ])


class Batch(NamedTuple):
    """One global batch, sharded like the batch axis: [batch, seq] int32 each. The last two are
    None unless data.document_mask (segment_ids: document numbers; attention stays inside a
    document) and data.reset_positions (RoPE positions restarting at 0 at each document start
    and at the window's first token) ask for them. `train_step(state, *batch)`."""

    inputs: jax.Array
    targets: jax.Array
    segment_ids: Optional[jax.Array] = None
    positions: Optional[jax.Array] = None


def document_positions(segments: np.ndarray) -> np.ndarray:
    """[rows, seq] positions that restart at 0 where the (non-decreasing) segment id changes."""
    idx = np.arange(segments.shape[1])
    first = np.stack([np.searchsorted(row, row, side="left") for row in segments])
    return (idx[None] - first).astype(np.int32)


PACK_SALT = 0x9AC4  # separates the packing order's seed from the windows' shuffles


class Packing:
    """The documents of a stream (a chat dataset's conversations) packed whole into rows of
    seq_len + 1 tokens, once: the documents in a seeded order (file order without a seed), each
    row taking the next ones while they fit (next fit), the end-of-text id padding the rest (no
    loss, a segment of its own). A document longer than a row keeps its first seq_len + 1
    tokens (`truncated` counts them); `fill` is the share of the rows' tokens that are documents';
    `units` counts the documents (pairs, for a preference stream).

    A preference stream (`stream.pairs`) is packed by pairs: documents 2i and 2i + 1 (pair i's
    chosen and rejected conversations) always share a row, as its segments 2j and 2j + 1; a pair
    longer than a row is left out (`truncated` counts those)."""

    def __init__(self, stream: TokenStream, seq_len: int, pad_id: int, seed: Optional[Tuple[int, ...]] = None,
                 name: str = "the dataset"):
        starts, lengths = stream.document_spans()
        cap, group = seq_len + 1, 2 if stream.pairs else 1
        self.stream, self.cap, self.pad_id = stream, cap, pad_id
        units = lengths.reshape(-1, group).sum(axis=1)  # (tokens of each unit: a document, or a pair)
        self.units = len(units)  # (conversations, or pairs)
        self.truncated = int(np.sum(units > cap))
        order = (np.arange(len(units)) if seed is None
                 else np.random.default_rng([*seed, PACK_SALT]).permutation(len(units)))
        if group > 1:
            order = order[units[order] <= cap]  # (a pair that does not fit is left out)
        docs = (order[:, None] * group + np.arange(group)).reshape(-1)  # the units' documents, in order
        self.starts, self.lengths = starts[docs], np.minimum(lengths, cap)[docs]
        first, fill = [], cap
        for k, n in enumerate(np.minimum(units, cap)[order].tolist()):
            if fill + n > cap:
                first.append(k * group)
                fill = 0
            fill += n
        self.first = np.asarray(first + [len(docs)], np.int64)  # row r: documents first[r]:first[r + 1]
        self.rows = len(first)
        if not self.rows:
            raise ConfigError([f"data.seq_len={seq_len} is too short for every pair of {name} (the shortest takes "
                               f"{int(units.min()) if len(units) else 0} tokens); raise data.seq_len"])
        self.fill = float(self.lengths.sum()) / max(self.rows * cap, 1)

    def row(self, r: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row r's (tokens, loss mask, document numbers), [seq_len + 1] each."""
        docs = range(int(self.first[r]), int(self.first[r + 1]))
        toks = [self.stream.read(int(self.starts[k]), int(self.lengths[k])) for k in docs]
        mask = [self.stream.read_mask(int(self.starts[k]), int(self.lengths[k])) for k in docs]
        seg = [np.full(int(self.lengths[k]), j) for j, k in enumerate(docs)]
        pad = self.cap - sum(len(t) for t in toks)
        toks.append(np.full(pad, self.pad_id, self.stream.dtype))
        mask.append(np.zeros(pad, np.uint8))
        seg.append(np.full(pad, len(docs)))
        return np.concatenate(toks), np.concatenate(mask), np.concatenate(seg)


class _Rows:
    """Turns process-local rows into a global Batch sharded like the batch axis."""

    def __init__(self, seq_len: int, batch_size: int, sharding: NamedSharding,
                 document_mask: bool = False, reset_positions: bool = False):
        self.seq_len, self.batch_size, self.sharding = seq_len, batch_size, sharding
        self.document_mask, self.reset_positions = document_mask, reset_positions
        self.shape = (batch_size, seq_len)
        self.rows = local_row_range(sharding, self.shape)

    def window(self, stream: TokenStream, start: int):
        """The window of seq_len + 1 tokens at `start`: (tokens, loss mask or None, document
        numbers of the first seq_len or None), as `assemble` takes them."""
        n = self.seq_len + 1
        return (stream.read(start, n), None if stream.masks is None else stream.read_mask(start, n),
                stream.segments(start, self.seq_len) if self.document_mask else None)

    def assemble(self, rows: List[tuple]) -> Batch:
        """One global Batch of the local rows, each (tokens [seq_len + 1], loss mask [seq_len +
        1] or None, document numbers [>= seq_len] or None): inputs the first seq_len tokens,
        targets the last seq_len, -1 (no loss) where the mask is 0."""
        win = np.stack([r[0] for r in rows]).astype(np.int32)
        targets = win[:, 1:]
        if any(r[1] is not None for r in rows):
            mask = np.stack([np.ones(self.seq_len + 1, np.uint8) if r[1] is None else r[1] for r in rows])
            targets = np.where(mask[:, 1:] == 1, targets, -1)
        make = partial(jax.make_array_from_process_local_data, self.sharding, global_shape=self.shape)
        seg = pos = None
        if self.document_mask:
            segs = np.stack([r[2][: self.seq_len] for r in rows])
            segs = segs - segs[:, :1]  # numbered from 0 in each row
            seg = make(segs.astype(np.int32))
            if self.reset_positions:
                pos = make(document_positions(segs))
        return Batch(make(win[:, :-1]), make(targets), seg, pos)


class Batcher(_Rows):
    """Training batches over one or more weighted token streams.

    Raises ConfigError (naming data.seq_len and the dataset) when a stream is too short."""

    def __init__(self, streams: Dict[str, TokenStream], weights: Dict[str, float], seq_len: int,
                 batch_size: int, seed: int, sharding: NamedSharding, document_mask: bool = False,
                 reset_positions: bool = False, pad_id: int = 0):
        """pad_id: the token that fills the end of a packed row (the end-of-text id)."""
        import grain

        super().__init__(seq_len, batch_size, sharding, document_mask, reset_positions)
        self.names = list(streams)
        self.streams = [streams[n] for n in self.names]
        self.seed = seed
        # chat datasets (a loss mask): whole conversations packed into rows, row w their window w
        self.packed = [None if s.masks is None else Packing(s, seq_len, pad_id, (seed, d), f"dataset {self.names[d]}")
                       for d, s in enumerate(self.streams)]
        for name, s, p in zip(self.names, self.streams, self.packed, strict=True):
            if p is None:
                _check_length(s, seq_len, f"the training split of dataset {name}")
        # epoch e of dataset d: windows start at offset(d, e) + w * seq_len, w < windows[d]
        self.phases = [min(seq_len, len(s) - seq_len) if p is None else 0
                       for s, p in zip(self.streams, self.packed, strict=True)]
        self.windows = [(len(s) - ph) // seq_len if p is None else p.rows
                        for s, ph, p in zip(self.streams, self.phases, self.packed, strict=True)]
        # dataset d's k-th row: (d, epoch k // W_d, window of that epoch's permutation of W_d)
        parts = [grain.MapDataset.range(w).shuffle(seed=_seed32(seed, d)).repeat()
                 .map_with_index(lambda k, v, d=d, w=w: (d, k // w, v))
                 for d, w in enumerate(self.windows)]
        self.index = (parts[0] if len(parts) == 1 else
                      grain.MapDataset.mix(parts, [weights[n] for n in self.names]))
        total = sum(weights[n] for n in self.names)
        self.shares = [weights[n] / total for n in self.names]
        self._offsets: Dict[Tuple[int, int], int] = {}

    def _offset(self, d: int, epoch: int) -> int:
        key = (d, epoch)
        if key not in self._offsets:
            rng = np.random.default_rng([self.seed, d, epoch, 0x0FF5E7])
            self._offsets[key] = int(rng.integers(self.phases[d]))
        return self._offsets[key]

    def locate(self, row: int) -> Tuple[int, int, int]:
        """(dataset, epoch, first token) of global row `row` (= step * batch_size + r); for a
        packed dataset, its packed row in place of the first token."""
        d, epoch, w = self.index[row]
        if self.packed[d] is not None:
            return d, epoch, int(w)
        return d, epoch, self._offset(d, epoch) + int(w) * self.seq_len

    def train_batch(self, step: int) -> Batch:
        """The batch of training step `step`, sharded over the mesh."""
        lo, hi = self.rows
        rows = [self.locate(step * self.batch_size + r) for r in range(lo, hi)]
        return self.assemble([self.window(self.streams[d], start) if self.packed[d] is None
                              else self.packed[d].row(start) for d, _, start in rows])

    def epochs(self, step: int) -> Dict[str, float]:
        """Epochs of each dataset completed after `step` steps (its share of the rows so far)."""
        rows = step * self.batch_size
        return {n: rows * s / w for n, s, w in zip(self.names, self.shares, self.windows, strict=True)}


class EvalBatcher(_Rows):
    """Fixed validation batches of one stream: num_batches * batch_size windows spread evenly
    over it (the same windows at every evaluation, on any number of devices)."""

    def __init__(self, stream: TokenStream, seq_len: int, batch_size: int, num_batches: int,
                 sharding: NamedSharding, name: str = "validation", document_mask: bool = False,
                 reset_positions: bool = False, starts: Optional[np.ndarray] = None, pad_id: int = 0):
        """starts: the windows' first tokens (num_batches * batch_size of them) in place of the
        evenly spread ones (not for a chat set). pad_id: as Batcher's."""
        super().__init__(seq_len, batch_size, sharding, document_mask, reset_positions)
        self.stream = stream
        k = num_batches * batch_size
        # a chat set: its conversations packed in file order, rows spread as windows are
        self.packed = (
            None if stream.masks is None else Packing(stream, seq_len, pad_id, name=f"the validation set {name}")
        )
        if self.packed is None:
            _check_length(stream, seq_len, f"the validation set {name}")
        available = (len(stream) - 1) // seq_len if self.packed is None else self.packed.rows
        if self.packed is not None:
            self.starts = np.arange(k) * available // k if k <= available else np.arange(k) % available
        elif starts is not None:
            assert len(starts) == k, (len(starts), k)
            self.starts = np.asarray(starts, np.int64)
        else:
            self.starts = (np.arange(k) * available // k if k <= available else np.arange(k) % available) * seq_len

    def batch(self, i: int) -> Batch:
        lo, hi = self.rows
        rows = self.starts[i * self.batch_size + lo : i * self.batch_size + hi]
        return self.assemble([self.window(self.stream, int(s)) if self.packed is None else self.packed.row(int(s))
                              for s in rows])
