"""Evaluators: validation loss on a fixed set of batches."""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

from spmdgpt.config import ModelConfig
from spmdgpt.data import Batcher
from spmdgpt.loggers import JsonlLogger
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


class RolloutEvaluator:
    """Continues fixed validation prompts with the current parameters at each evaluation.

    The prompts (train.rollout_prompts windows of train.rollout_prompt_tokens tokens, evenly
    spaced over the validation split) and the sampling seed are the same at every evaluation,
    so the samples of a run are comparable step to step. Rows go to samples.jsonl.
    """

    def __init__(self, cfg, rules: Rules, tokenizer, val_tokens: np.ndarray, samples_path=None):
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
