"""Evaluators: validation loss on a fixed set of batches."""

from __future__ import annotations

from functools import partial
from typing import Dict

import jax
import jax.numpy as jnp
import numpy as np

from spmdgpt.config import Config, ModelConfig
from spmdgpt.data import EvalBatcher
from spmdgpt.mesh.sharding import Rules, shard_bytes, to_host
from spmdgpt.model.loss import count_first
from spmdgpt.run.loggers import append_rows


def loss_sums(cfg: Config, rules: Rules, microbatches: int = 1):
    """The evaluation's program, jitted: f(params, *batch, reference=None) -> (the summed loss
    over the batch's counted items, their count), float32 scalars: the training objectives'
    (`spmdgpt.training.objectives`) "loss" metric and count without dropout, the next token's over the
    targets >= 0, or with a `reference` (preference data) DPO's (train.dpo_beta, RPO's
    train.dpo_sft_weight) over the complete pairs.

    The batch runs in `microbatches` parts one after another inside the program, as the training
    step splits it (`train.microbatches`, `training.step.summed_over_microbatches`): only one part's
    activations and logits are alive at a time (a whole GPT-2 124M batch of 512 x 1,024 tokens
    would need 98 GiB of float32 logits). With pipeline stages the parts flow through the stages
    instead (`model.pipeline`), as in the step. model.loss_block and model.logits_dtype apply as
    in training (`model.loss.objective`)."""
    from spmdgpt.training.objectives import dpo, next_token
    from spmdgpt.training.step import summed_over_microbatches

    staged = rules.stage_size() > 1
    objectives = {False: next_token(cfg, rules, microbatches if staged else 1), True: dpo(cfg, rules)}

    def sums(params, reference, *part):  # one part's (summed loss, counted targets or pairs)
        obj = objectives[reference is not None]
        count, params, reference, part = count_first(obj.count(*part[1:]), params, reference, part)
        metrics = obj.score(params, *part, reference=reference, denominator=jnp.ones((), jnp.float32))[1]
        return metrics["loss"], count

    def f(params, *batch, reference=None):
        return summed_over_microbatches(partial(sums, params, reference), 1 if staged else microbatches, *batch)

    return jax.jit(f)


class LossEvaluator:
    """Mean next-token loss of each validation set over its `num_batches` fixed batches (built
    once), over their counted targets (>= 0); with a `reference` (preference data), the DPO loss
    over the complete pairs. Each batch runs as `loss_sums` (in the step's microbatches); the sums
    are added over batches in float64 on the host, so the mean is one unsplit pass's to float32
    rounding."""

    def __init__(self, cfg: Config, rules: Rules, sets: Dict[str, EvalBatcher], reference=None):
        """cfg: the run's (train.eval_batches batches of each set, in train.microbatches parts)."""
        self.batches = {name: [b.batch(i) for i in range(cfg.train.eval_batches)] for name, b in sets.items()}
        self.reference = reference
        self.sums = loss_sums(cfg, rules, cfg.train.microbatches)  # (or its executable: plan.run_programs)

    def first_batch(self) -> tuple:
        """The first validation batch (every set's batches have its shapes and shardings)."""
        return tuple(next(iter(self.batches.values()))[0])

    def held_bytes(self) -> int:
        """Bytes one device holds for the validation batches, kept for the whole run."""
        return sum(shard_bytes(tuple(b)) for batches in self.batches.values() for b in batches)

    def __call__(self, params) -> Dict[str, float]:
        out = {}
        for name, batches in self.batches.items():
            got = [self.sums(params, *batch, reference=self.reference) for batch in batches]
            losses, counts = (np.asarray(a, dtype=np.float64) for a in zip(*jax.device_get(got)))
            out[name] = float(np.sum(losses) / max(np.sum(counts), 1.0))
        return out


def rollout_rows(cfg, rules: Rules) -> int:
    """The rows the rollouts sample: train.rollout_prompts rounded up to a multiple of the ways the
    mesh splits the batch (the sampled batch splits evenly over the devices holding it)."""
    k = rules.batch_divisor()
    return -(-cfg.train.rollout_prompts // k) * k


def rollout_sampling(cfg, eos_id=None):
    """The rollouts' SamplingParams (the same seed at every evaluation)."""
    from spmdgpt.engine.generate import SamplingParams

    t = cfg.train
    return SamplingParams(t.rollout_tokens, t.rollout_temperature, 0, 1.0, t.seed, eos_id)


def text_engine(cfg, rules: Rules):
    """The text samples' engine (`spmdgpt.engine.batch_engine`: a slot for each row)."""
    from spmdgpt.engine import batch_engine
    from spmdgpt.engine.scheduler import fitting_page_size

    return batch_engine(rollout_rows(cfg, rules), cfg.train.rollout_prompt_tokens, cfg.train.rollout_tokens,
                        fitting_page_size(cfg.model))


class TextSampler:
    """Continues fixed validation prompts with the current parameters at each evaluation.

    The prompts (train.rollout_prompts windows of train.rollout_prompt_tokens tokens, evenly
    spaced over the validation split) and the sampling seed are the same at every evaluation,
    so the samples of a run are comparable step to step. Rows go to samples.jsonl.
    """

    def __init__(self, cfg, rules: Rules, tokenizer, val_tokens, samples_path=None):
        from spmdgpt.engine import Engine

        t = cfg.train
        n, plen = t.rollout_prompts, t.rollout_prompt_tokens
        offsets = np.linspace(0, len(val_tokens) - plen - 1, n).astype(int)
        self.prompts = [[int(x) for x in val_tokens[o : o + plen]] for o in offsets]
        self.tokenizer = tokenizer
        self.engine = Engine(cfg.model, rules, None, tokenizer.vocab_size, text_engine(cfg, rules))
        self.params = rollout_sampling(cfg, tokenizer.eos_id)
        self.samples_path = samples_path

    def sample(self, params) -> list:
        """The completions' token ids (nothing logged); prompt i samples stream i of the seed."""
        from spmdgpt.engine import Request

        sp = self.params
        stops = () if sp.eos_id is None else (sp.eos_id,)
        requests = [Request(list(p), sp.max_new_tokens, sp.temperature, sp.top_k, sp.top_p, sp.seed, i,
                            stop_ids=stops) for i, p in enumerate(self.prompts)]
        return [r.tokens for r in self.engine.run(requests, params)]

    def __call__(self, params, step: int) -> list:
        """[(prompt text, completion text)] for the fixed prompts; appended to samples.jsonl."""
        outs = self.sample(params)
        rows = [(self.tokenizer.decode(p), self.tokenizer.decode(o)) for p, o in zip(self.prompts, outs, strict=True)]
        if self.samples_path is not None:  # (a failed write raises files.WriteFailed)
            append_rows(self.samples_path, ({"step": step, "prompt": p, "completion": c} for p, c in rows))
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
    loss = nats / tokens, perplexity = exp(loss), bits per byte = nats / ln 2 / bytes. Each batch
    runs in `microbatches` parts one after another inside one program (`training.step.microbatch_parts`,
    as the training step splits it), so only one part's logits are alive at a time."""

    def __init__(self, cfg: ModelConfig, rules: Rules, token_bytes: np.ndarray, microbatches: int = 1):
        from spmdgpt.model.loss import token_losses
        from spmdgpt.training.step import microbatch_parts

        k = 1 if rules.stage_size() > 1 else microbatches  # (pipeline stages: the forward's own split)

        def losses(params, *batch):  # [k, B / k, t]: part j holds rows j::k
            if k == 1:
                return token_losses(cfg, rules, params, *batch)[None]
            return jax.lax.map(lambda part: token_losses(cfg, rules, params, *part), microbatch_parts(batch, k))

        self._losses = jax.jit(losses)
        self.token_bytes = token_bytes

    def __call__(self, params, batches, first_counted=None) -> Dict[str, float]:
        """batches: Batch objects; first_counted: per batch, [rows] int arrays (a row's
        targets before that index are not counted; seq_len = none), or None (all count).
        Targets < 0 are never counted."""
        nats = tokens = nbytes = 0.0
        for i, batch in enumerate(batches):
            parts = to_host(self._losses(params, *batch)).astype(np.float64)
            losses = np.swapaxes(parts, 0, 1).reshape(-1, parts.shape[-1])  # (rows back in the batch's order)
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
    from spmdgpt.data.stream import TokenStream

    starts, first = text_windows(len(tokens), seq_len, batch_size)
    stream = TokenStream([np.asarray(tokens, np.int32)])
    return EvalBatcher(stream, seq_len, batch_size, len(starts) // batch_size, sharding, starts=starts), starts, first
