"""Deterministic batches: window starts drawn from (seed, step), each process builds its rows.

The global batch of a step depends only on (seed, step), not on the number of processes or
devices, so the same config trains on the same data on 1 CPU or 4 hosts, and a resumed run
continues the exact sequence without replaying it: the loader's whole state is the step.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding

from spmdgpt.config import ConfigError
from spmdgpt.sharding import local_row_range

VAL_STREAM = 0x7FFF_FFFF  # separates validation windows from the training step stream


class Batcher:
    """Windows of `seq_len + 1` tokens of one split, `batch_size` rows a batch.

    Raises ConfigError (naming data.seq_len and the split) when the split is too short."""

    def __init__(
        self, tokens: np.ndarray, seq_len: int, batch_size: int, seed: int, sharding: NamedSharding,
        split: str = "train",
    ):
        if len(tokens) < seq_len + 2:
            raise ConfigError([
                f"data.seq_len={seq_len} is too long for the {split} split ({len(tokens)} "
                "tokens); lower data.seq_len or use a larger corpus"
            ])
        self.tokens = tokens
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.seed = seed
        self.sharding = sharding
        self.shape = (batch_size, seq_len)
        self.rows = local_row_range(sharding, self.shape)

    def starts(self, stream: int, index: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, stream, index])
        return rng.integers(0, len(self.tokens) - self.seq_len - 1, size=self.batch_size)

    def local_windows(self, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.rows
        offs = starts[lo:hi, None] + np.arange(self.seq_len + 1)
        win = np.asarray(self.tokens[offs], dtype=np.int32)
        return win[:, :-1], win[:, 1:]

    def _global(self, starts: np.ndarray) -> tuple[jax.Array, jax.Array]:
        x, y = self.local_windows(starts)
        make = jax.make_array_from_process_local_data
        return make(self.sharding, x, self.shape), make(self.sharding, y, self.shape)

    def train_batch(self, step: int) -> tuple[jax.Array, jax.Array]:
        """(inputs, targets) for training step `step`, sharded over the mesh."""
        return self._global(self.starts(0, step))

    def eval_batch(self, i: int) -> tuple[jax.Array, jax.Array]:
        """The i-th fixed validation batch: the same windows at every evaluation."""
        return self._global(self.starts(VAL_STREAM, i))
