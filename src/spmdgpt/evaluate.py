"""Evaluators: validation loss on a fixed set of batches."""

from __future__ import annotations

from functools import partial
from typing import Dict

import jax
import numpy as np

from spmdgpt.config import ModelConfig
from spmdgpt.data import EvalBatcher
from spmdgpt.loggers import JsonlLogger
from spmdgpt.model import loss_fn
from spmdgpt.sharding import Rules


class LossEvaluator:
    """Mean next-token loss of each validation set over its `num_batches` fixed batches
    (built once)."""

    def __init__(self, cfg: ModelConfig, rules: Rules, sets: Dict[str, EvalBatcher], num_batches: int):
        self.batches = {name: [b.batch(i) for i in range(num_batches)] for name, b in sets.items()}
        self._loss = jax.jit(partial(loss_fn, cfg, rules))

    def __call__(self, params) -> Dict[str, float]:
        out = {}
        for name, batches in self.batches.items():
            losses = [self._loss(params, *batch) for batch in batches]
            out[name] = float(np.mean(np.asarray(jax.device_get(losses), dtype=np.float64)))
        return out


class RolloutEvaluator:
    """Continues fixed validation prompts with the current parameters at each evaluation.

    The prompts (train.rollout_prompts windows of train.rollout_prompt_tokens tokens, evenly
    spaced over the validation split) and the sampling seed are the same at every evaluation,
    so the samples of a run are comparable step to step. Rows go to samples.jsonl.
    """

    def __init__(self, cfg, rules: Rules, tokenizer, val_tokens, samples_path=None):
        from spmdgpt.generate import Sampler, SamplingParams

        t = cfg.train
        n, plen = t.rollout_prompts, t.rollout_prompt_tokens
        offsets = np.linspace(0, len(val_tokens) - plen - 1, n).astype(int)
        self.prompts = [[int(x) for x in val_tokens[o : o + plen]] for o in offsets]
        # the sampled batch must split evenly over the devices holding the batch
        k = rules.batch_divisor()
        self.batch = [self.prompts[i % n] for i in range(-(-n // k) * k)]
        self.tokenizer = tokenizer
        self.sampler = Sampler(cfg.model, rules, vocab_limit=tokenizer.vocab_size)
        self.params = SamplingParams(t.rollout_tokens, t.rollout_temperature, 0, 1.0, t.seed,
                                     tokenizer.eos_id)
        self.samples_path = samples_path

    def __call__(self, params, step: int) -> list:
        """[(prompt text, completion text)] for the fixed prompts; appended to samples.jsonl."""
        outs = self.sampler.generate(params, self.batch, self.params)[: len(self.prompts)]
        rows = [(self.tokenizer.decode(p), self.tokenizer.decode(o)) for p, o in zip(self.prompts, outs, strict=True)]
        if self.samples_path is not None:
            log = JsonlLogger(self.samples_path)  # a failed write raises rundir.WriteFailed
            try:
                for prompt, completion in rows:
                    log.log({"step": step, "prompt": prompt, "completion": completion})
            finally:
                log.close()
        return rows
