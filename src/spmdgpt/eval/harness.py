"""lm-evaluation-harness on spmdgpt's own forward pass and inference engine (`spmdgpt lm-eval`).

`SpmdgptLM` is an `lm_eval` model (a `TemplateLM`): lm-eval renders the tasks' requests and
scores the answers; this class answers them with the model in `rules`' layout (any mesh of this
process's devices):

    loglikelihood          (context, continuation) -> (sum of log p(continuation tokens), all greedy)
    loglikelihood_rolling  a whole text, in windows of the model's context, as lm-eval cuts them
    generate_until         greedy continuations (the inference engine, spmdgpt.engine), cut at the task's stop strings

It follows lm-eval's Hugging Face backend (`HFLM`) token for token, so that the exported model
scores the same there: the same tokenization (the tokenizer's own special tokens, a BOS-prefixed
text not prefixed again), the same prefix token for an empty context (BOS, else end-of-text),
inputs cut from the left to the model's context, log-softmax over all the model's vocabulary
rows, and the same rolling windows (`lm_eval.utils.get_rolling_token_windows`). Requests are
batched longest first, each batch padded to a length bucket (a power of two, at least 16, at
most the context), so a task compiles a handful of programs.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from lm_eval.api.model import TemplateLM
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
from tqdm import tqdm

from spmdgpt.config import ConfigError, ModelConfig
from spmdgpt.engine import Engine, EngineConfig, Request
from spmdgpt.engine.scheduler import fitting_page_size
from spmdgpt.mesh.sharding import Rules, to_host
from spmdgpt.model import forward


def bucket(n: int, most: int) -> int:
    """The padded length of n tokens: the next power of two >= 16, at most `most`."""
    return min(most, max(16, 1 << (n - 1).bit_length()))


class SpmdgptLM(TemplateLM):
    """An lm_eval model over spmdgpt parameters (see the module docstring)."""

    def __init__(self, cfg: ModelConfig, rules: Rules, params, tokenizer, batch_size: int = 8,
                 bos_id: Optional[int] = None, max_gen_toks: int = 256):
        super().__init__()
        self.cfg, self.rules, self.params, self.tok = cfg, rules, params, tokenizer
        self.batch = max(batch_size, 1) + (-max(batch_size, 1) % rules.batch_divisor())  # (rows split evenly)
        self.bos_id, self.max_length, self.max_gen_toks = bos_id, cfg.max_seq_len, max_gen_toks
        self.engine = Engine(cfg, rules, params, None,
                             EngineConfig(slots=self.batch, page_size=fitting_page_size(cfg)))
        self._scores = jax.jit(self._scores_impl)

    # -- tokens
    @property
    def eot_token_id(self) -> int:
        return self.tok.eos_id

    @property
    def prefix_token_id(self) -> int:
        return self.bos_id if self.bos_id is not None else self.tok.eos_id

    def tok_encode(self, string: str, add_special_tokens: Optional[bool] = None, **kwargs) -> list:
        # a Hugging Face tokenizer's post-processor (e.g. Llama 3's BOS), also under a chat
        # template of its own; char, GPT-2 and the default chat template's tokens add nothing
        base = self.tok.base if getattr(self.tok, "kind", None) == "chat" and not self.tok.specials else self.tok
        encode_special = getattr(base, "encode_with_specials", None)
        if encode_special is None:
            try:
                return self.tok.encode(string)
            except ValueError as e:  # (a char vocabulary: the task's text has characters the model never saw)
                why = f"the task's text cannot be tokenized by the run's {self.tok.kind} tokenizer ({e})"
                raise ConfigError([f"{why}; evaluate a model whose tokenizer covers the task (gpt2 or hf), or "
                                   "another task"]) from None
        if add_special_tokens is None and self.bos_id is not None and string.startswith(base.token_text(self.bos_id)):
            add_special_tokens = False  # (already BOS-prefixed: as HFLM)
        return encode_special(string, True if add_special_tokens is None else add_special_tokens)

    # -- log-likelihoods
    def _scores_impl(self, params, tokens, targets):
        """(sum of the targets' log-probabilities, whether every target is the argmax) per row of
        tokens [b, t], as [k, b / k] (part j: rows j, j + k, ...); targets [b, t] are -1 where
        nothing is scored. The k = b / (the ways the mesh splits the batch) parts run one after
        another (`training.step.microbatch_parts`): one row per device at a time, so at most
        [devices, t, vocab] float32 logits exist at once, whatever the batch size."""
        from spmdgpt.training.step import microbatch_parts

        def part(rows):
            tokens, targets = rows
            logits = forward(self.cfg, self.rules, params, tokens)[0]
            logp = jax.nn.log_softmax(logits, axis=-1)
            scored = targets >= 0
            safe = jnp.where(scored, targets, 0)
            picked = jnp.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
            greedy = jnp.argmax(logits, axis=-1) == safe
            return jnp.sum(jnp.where(scored, picked, 0.0), axis=1), jnp.all(greedy | ~scored, axis=1)

        k = tokens.shape[0] // self.rules.batch_divisor()
        if k == 1:
            return jax.tree.map(lambda a: a[None], part((tokens, targets)))
        return jax.lax.map(part, microbatch_parts((tokens, targets), k))

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list:
        """[(log p(continuation | context), greedy)] of requests [(key, context ids, continuation
        ids)], in their order."""
        rows = []
        for i, (_, context, continuation) in enumerate(requests):
            if not continuation or len(continuation) > self.max_length:
                raise ConfigError([f"lm-eval asked for the log-likelihood of a continuation of {len(continuation)} "
                                   f"tokens: spmdgpt scores 1 to {self.max_length} (the model's context)"])
            ids = (list(context) + list(continuation))[-(self.max_length + 1):]
            rows.append((i, ids[:-1], ids[1:], len(continuation)))
        rows.sort(key=lambda r: -len(r[1]))
        out: list = [None] * len(rows)
        bar = tqdm(total=len(rows), disable=disable_tqdm, desc="loglikelihood")
        for start in range(0, len(rows), self.batch):
            chunk = rows[start:start + self.batch]
            t = bucket(len(chunk[0][1]), self.max_length)
            tokens = np.zeros((self.batch, t), np.int32)
            targets = np.full((self.batch, t), -1, np.int32)
            for r, (_, inp, nxt, c) in enumerate(chunk):
                tokens[r, :len(inp)] = inp
                targets[r, len(inp) - c:len(inp)] = nxt[-c:]
            sharding = self.rules.batch_sharding()
            total, greedy = self._scores(
                self.params, jax.device_put(tokens, sharding), jax.device_put(targets, sharding)
            )
            # (rows back in the batch's order: part j held rows j, j + k, ...)
            total, greedy = (np.swapaxes(to_host(a), 0, 1).reshape(-1) for a in (total, greedy))
            for r, (i, *_) in enumerate(chunk):
                out[i] = (float(total[r]), bool(greedy[r]))
            bar.update(len(chunk))
        bar.close()
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list:
        windows, owner = [], []
        for k, (text,) in enumerate(req.args for req in requests):
            for context, continuation in map(make_disjoint_window, get_rolling_token_windows(
                    token_list=self.tok_encode(text), prefix_token=self.prefix_token_id,
                    max_seq_len=self.max_length, context_len=1)):
                windows.append((None, context, continuation))
                owner.append(k)
        sums = [0.0] * len(requests)
        for k, (logp, _) in zip(owner, self._loglikelihood_tokens(windows, disable_tqdm)):
            sums[k] += logp
        return sums

    # -- generation
    def generate_until(self, requests, disable_tqdm: bool = False) -> list:
        out: list = [None] * len(requests)
        groups: dict = {}  # requests with the same generation settings, decoded together
        for i, req in enumerate(requests):
            context, kwargs = req.args
            kwargs = dict(kwargs or {})
            until = kwargs.pop("until", None) or []
            until = [until] if isinstance(until, str) else list(until)
            eos = self.tok.decode([self.eot_token_id]) if self.eot_token_id is not None else None
            if eos and eos not in until:
                until.append(eos)
            new = int(kwargs.pop("max_gen_toks", self.max_gen_toks))
            if new >= self.max_length:
                raise ConfigError([f"a task asks for {new} generated tokens; the model's context is {self.max_length}: "
                                   "lower max_gen_toks (the task's generation_kwargs, or max_gen_toks=N)"])
            if kwargs.get("do_sample") or float(kwargs.get("temperature", 0.0) or 0.0) > 0:
                raise ConfigError(
                    [
                        "a task asks for sampled generations (do_sample or temperature > 0); "
                        "spmdgpt lm-eval decodes greedily only: set do_sample: false in its generation_kwargs"
                    ]
                )
            groups.setdefault((new, tuple(until)), []).append((i, context))
        bar = tqdm(total=len(requests), disable=disable_tqdm, desc="generate_until")
        def finished(r) -> str:
            text = self.tok.decode([t for t in r.tokens if t != self.eot_token_id])
            for stop in until:
                text = text.split(stop)[0] if stop else text
            return text

        for (new, until), items in groups.items():  # (greedy, through the engine: rows run as slots free up)
            room = self.max_length - new
            stops = () if self.eot_token_id is None else (self.eot_token_id,)
            # (a stop string ends its row early: the text is cut at it anyway)
            ended = (lambda r: any(u in self.tok.decode(r.tokens) for u in until if u)) if until else None
            requests = [Request(self.tok_encode(context)[-room:] or [self.prefix_token_id], new, 0.0,
                                stop_ids=stops, stop=ended, on_token=lambda r, t: r.done and bar.update(1))
                        for _, context in items]
            for (i, _), r in zip(items, self.engine.run(requests), strict=True):
                out[i] = finished(r)
        bar.close()
        return out
