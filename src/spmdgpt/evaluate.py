"""Evaluators: validation loss on a fixed set of batches."""

from __future__ import annotations

from functools import partial
from typing import Dict

import jax
import jax.numpy as jnp
import numpy as np

from spmdgpt.config import ModelConfig
from spmdgpt.data import EvalBatcher
from spmdgpt.loggers import JsonlLogger
from spmdgpt.model import objective
from spmdgpt.model.loss import counted_first
from spmdgpt.sharding import Rules, to_host


class LossEvaluator:
    """Mean next-token loss of each validation set over its `num_batches` fixed batches (built
    once), over their counted targets (>= 0): each batch's mean weighted by its count. With a
    `reference` (preference data), the DPO loss with that beta (and RPO's sft_weight) instead,
    over the complete pairs."""

    def __init__(self, cfg: ModelConfig, rules: Rules, sets: Dict[str, EvalBatcher], num_batches: int,
                 reference=None, beta: float = 0.0, sft_weight: float = 0.0):
        from spmdgpt.model.preference import dpo_objective, pair_count

        self.batches = {name: [b.batch(i) for i in range(num_batches)] for name, b in sets.items()}
        self.reference = reference

        def loss_and_count(params, *batch, reference=None):
            if reference is None:
                metrics = objective(cfg, rules, params, *batch)[1]
                return metrics["loss"], metrics["tokens"]
            count, params, batch = counted_first(pair_count(rules, batch[1], batch[2]), params, batch)
            return dpo_objective(cfg, rules, beta, params, reference, *batch, denominator=jnp.maximum(count, 1.0),
                                 sft_weight=sft_weight)[0], count

        self._loss = jax.jit(loss_and_count)

    def __call__(self, params) -> Dict[str, float]:
        out = {}
        for name, batches in self.batches.items():
            got = [self._loss(params, *batch, reference=self.reference) for batch in batches]
            losses, counts = (np.asarray(a, dtype=np.float64) for a in zip(*jax.device_get(got)))
            out[name] = float(np.sum(losses * counts) / max(np.sum(counts), 1.0))
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

    def sample(self, params) -> list:
        """The completions' token ids (nothing logged)."""
        return self.sampler.generate(params, self.batch, self.params)[: len(self.prompts)]

    def __call__(self, params, step: int) -> list:
        """[(prompt text, completion text)] for the fixed prompts; appended to samples.jsonl."""
        outs = self.sample(params)
        rows = [(self.tokenizer.decode(p), self.tokenizer.decode(o)) for p, o in zip(self.prompts, outs, strict=True)]
        if self.samples_path is not None:
            log = JsonlLogger(self.samples_path)  # a failed write raises files.WriteFailed
            try:
                for prompt, completion in rows:
                    log.log({"step": step, "prompt": prompt, "completion": completion})
            finally:
                log.close()
        return rows


# ----------------------------------------------------------------------------- scoring text


def token_byte_lengths(tokenizer, vocab_size: int) -> np.ndarray:
    """UTF-8 bytes of the text each token id stands for ([vocab_size] int64; the end-of-text id,
    special tokens and vocabulary padding 0): the denominator of bits per byte.

    char: each character's bytes; gpt2: tiktoken's bytes of each token (exact, also for tokens
    that hold part of a character); hf: the bytes of each token decoded alone (exact for
    byte-level BPEs such as GPT-2's and Llama-3's as long as a token holds whole characters; a
    token that holds part of one decodes to U+FFFD, counted as its 3 bytes)."""
    from spmdgpt.data.tokenizers import CharTokenizer, GPT2Tokenizer

    out = np.zeros(vocab_size, np.int64)
    if isinstance(tokenizer, CharTokenizer):
        out[: len(tokenizer.chars)] = [len(c.encode("utf-8")) for c in tokenizer.chars]
    elif isinstance(tokenizer, GPT2Tokenizer):
        enc = tokenizer._enc
        out[: enc.n_vocab] = [len(enc.decode_single_token_bytes(i)) for i in range(enc.n_vocab)]
    else:
        special = set()
        tok = getattr(tokenizer, "_tok", None)
        if tok is not None:
            special = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
        n = min(vocab_size, tokenizer.vocab_size)
        out[:n] = [0 if i in special else len(tokenizer.decode([i]).encode("utf-8")) for i in range(n)]
    if tokenizer.eos_id is not None and tokenizer.eos_id < vocab_size:
        out[tokenizer.eos_id] = 0
    return out


class Scorer:
    """Summed next-token losses, token counts and UTF-8 bytes over batches (float64 on the host):
    loss = nats / tokens, perplexity = exp(loss), bits per byte = nats / ln 2 / bytes."""

    def __init__(self, cfg: ModelConfig, rules: Rules, token_bytes: np.ndarray):
        from spmdgpt.model.loss import token_losses

        self._losses = jax.jit(partial(token_losses, cfg, rules))
        self.token_bytes = token_bytes

    def __call__(self, params, batches, first_counted=None) -> Dict[str, float]:
        """batches: Batch objects; first_counted: per batch, [rows] int arrays (a row's
        targets before that index are not counted; seq_len = none), or None (all count).
        Targets < 0 are never counted."""
        nats = tokens = nbytes = 0.0
        for i, batch in enumerate(batches):
            losses = to_host(self._losses(params, *batch)).astype(np.float64)
            targets = to_host(batch.targets)
            keep = targets >= 0  # (a chat prompt's targets are not scored)
            if first_counted is not None:
                keep &= np.arange(losses.shape[1])[None] >= np.asarray(first_counted[i])[:, None]
            nats += float(losses[keep].sum())
            tokens += float(keep.sum())
            nbytes += float(self.token_bytes[targets[keep]].sum())
        return summary(nats, tokens, nbytes)


def summary(nats: float, tokens: float, nbytes: float) -> Dict[str, float]:
    loss = nats / tokens
    return {"loss": loss, "perplexity": float(np.exp(loss)), "bits_per_byte": nats / np.log(2) / nbytes,
            "tokens": int(tokens), "bytes": int(nbytes)}


def text_windows(n_tokens: int, seq_len: int, batch_size: int):
    """(starts, first_counted) of windows of seq_len + 1 tokens that score every token of a text
    of n_tokens tokens after the first exactly once: consecutive windows, the last one aligned
    to the text's end and counting only the targets no earlier window scored; padded with
    uncounted copies of window 0 to a multiple of batch_size."""
    n = -(-(n_tokens - 1) // seq_len)
    starts = np.arange(n, dtype=np.int64) * seq_len
    first = np.zeros(n, np.int64)
    if starts[-1] + seq_len + 1 > n_tokens:  # the tail: end-aligned, its new targets only
        first[-1] = starts[-1] - (n_tokens - seq_len - 1)
        starts[-1] = n_tokens - seq_len - 1
    pad = -n % batch_size
    starts = np.concatenate([starts, np.zeros(pad, np.int64)])
    first = np.concatenate([first, np.full(pad, seq_len, np.int64)])
    return starts, first


def text_batcher(tokens, seq_len: int, batch_size: int, sharding):
    """(EvalBatcher, starts, first counted target per row) over a text's tokens: the windows of
    `text_windows`, batched and sharded like validation batches."""
    from spmdgpt.data.store import TokenStream

    starts, first = text_windows(len(tokens), seq_len, batch_size)
    stream = TokenStream([np.asarray(tokens, np.int32)])
    return EvalBatcher(stream, seq_len, batch_size, len(starts) // batch_size, sharding, starts=starts), starts, first
