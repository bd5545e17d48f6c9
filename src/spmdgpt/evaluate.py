"""Evaluators: validation loss on a fixed set of batches."""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

from spmdgpt.config import ModelConfig
from spmdgpt.data.loader import Batcher
from spmdgpt.model import loss_fn
from spmdgpt.sharding import Rules


class LossEvaluator:
    """Mean next-token loss over `num_batches` fixed validation batches (built once)."""

    def __init__(self, cfg: ModelConfig, rules: Rules, batcher: Batcher, num_batches: int):
        self.batches = [batcher.eval_batch(i) for i in range(num_batches)]
        self._loss = jax.jit(partial(loss_fn, cfg, rules))

    def __call__(self, params) -> float:
        losses = [self._loss(params, x, y) for x, y in self.batches]
        return float(np.mean(np.asarray(jax.device_get(losses), dtype=np.float64)))
