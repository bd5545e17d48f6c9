"""Jit-once KV-cache decoding: the whole prompt in one prefill call (attention by the
`model.attention` backend, as in training), then a `lax.scan` decode loop.

Both call the model's one forward pass (`model.forward` with a `KVCache`); this module holds
only the generation driver and the sampling rules.

Prompts of different lengths share one batch by left padding: row r's tokens sit at the right
end of the prompt buffer with positions 0..len_r-1, its pad slots get position -1 and are
masked as keys (`causal_mask` drops keys with a negative position). The cache has a static
capacity (prompt buffer + max_new_tokens), so the prefill and the decode step each compile once
per (batch, prompt bucket, max_new_tokens); RoPE positions continue from each row's own prompt.

Sampling: temperature (0 = greedy), top-k, top-p, one PRNG stream per row (the seed folded with
the row index, then with the step), stop at end-of-text or max_new_tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from spmdgpt.config import ModelConfig
from spmdgpt.model import Params, forward, init_cache
from spmdgpt.sharding import Rules, to_host

Array = jax.Array


def sample_tokens(logits: Array, keys: Array, temperature, top_k: int, top_p, vocab_limit: int) -> Array:
    """One token per row of float32 logits [b, vocab]. temperature <= 0 picks the argmax."""
    vocab = logits.shape[-1]
    logits = jnp.where(jnp.arange(vocab) < vocab_limit, logits, -jnp.inf)  # never a padding id
    greedy = jnp.argmax(logits, axis=-1)
    if 0 < top_k < vocab:
        kth = jax.lax.top_k(logits, top_k)[0][:, -1:]
        logits = jnp.where(logits < kth, -jnp.inf, logits)
    scaled = logits / jnp.maximum(temperature, 1e-6)
    # top-p: keep the smallest set of most likely tokens whose probability reaches top_p
    probs = jax.nn.softmax(scaled, axis=-1)
    sorted_probs = jnp.sort(probs, axis=-1)[:, ::-1]
    before = jnp.cumsum(sorted_probs, axis=-1) - sorted_probs  # mass of the tokens ranked above
    threshold = jnp.min(jnp.where(before < top_p, sorted_probs, jnp.inf), axis=-1, keepdims=True)
    scaled = jnp.where(probs >= threshold, scaled, -jnp.inf)
    # Gumbel-max: argmax(logits + Gumbel noise) is a sample of softmax(logits); one stream per row
    noise = jax.vmap(lambda k: jax.random.gumbel(k, (vocab,), jnp.float32))(keys)
    noise = jax.sharding.reshard(noise, jax.typeof(scaled).sharding.spec)
    sampled = jnp.argmax(scaled + noise, axis=-1)
    return jnp.where(temperature <= 0, greedy, sampled).astype(jnp.int32)


def context_error(prompt_tokens: int, max_new_tokens: int, max_seq_len: int) -> Optional[str]:
    """Why a prompt of this length cannot be continued by max_new_tokens, or None if it fits."""
    if prompt_tokens + max_new_tokens <= max_seq_len:
        return None
    return (
        f"prompt of {prompt_tokens} tokens + max_new_tokens={max_new_tokens} exceeds the model's "
        f"context of {max_seq_len} tokens; shorten the prompt or lower max_new_tokens"
    )


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 200
    temperature: float = 1.0  # 0 = greedy
    top_k: int = 0  # 0 = no top-k filter
    top_p: float = 1.0  # 1 = no top-p filter
    seed: int = 0
    eos_id: Optional[int] = None  # stop a row when it emits this token


class Sampler:
    """Compiles prefill + decode loop once per shape and reuses them across calls."""

    def __init__(self, cfg: ModelConfig, rules: Rules, vocab_limit: Optional[int] = None):
        self.cfg, self.rules = cfg, rules
        self.vocab_limit = vocab_limit or cfg.vocab_size
        self._generate = jax.jit(
            self._generate_impl, static_argnames=("max_new_tokens", "top_k", "eos_id")
        )
        self._compiled = (None, None)  # ((shapes, static arguments), executable) given to `use`

    def _generate_impl(self, params, tokens, positions, key, temperature, top_p, *, max_new_tokens, top_k, eos_id):
        cfg, rules = self.cfg, self.rules
        b, prompt_len = tokens.shape
        cache = init_cache(cfg, rules, b, prompt_len + max_new_tokens)
        logits, cache = forward(cfg, rules, params, tokens, positions, cache, prefill=True, last=True)
        row_keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(b))
        fill = 0 if eos_id is None else eos_id

        def step(carry, i):
            cache, logits, pos, done = carry
            keys = jax.vmap(lambda k: jax.random.fold_in(k, i))(row_keys)
            last = jax.sharding.reshard(logits, rules.spec("batch", None))
            tok = sample_tokens(last, keys, temperature, top_k, top_p, self.vocab_limit)
            tok = jnp.where(done, fill, tok)
            if eos_id is not None:
                done = done | (tok == eos_id)
            new_logits, cache = forward(cfg, rules, params, tok[:, None], pos[:, None], cache)
            return (cache, new_logits[:, 0], pos + 1, done), tok

        done = jnp.zeros((b,), bool, out_sharding=rules.spec("batch"))
        start = (cache, logits[:, -1], positions[:, -1] + 1, done)
        _, toks = jax.lax.scan(step, start, jnp.arange(max_new_tokens))
        return toks.T  # [b, max_new_tokens]

    def _static(self, sp: SamplingParams) -> dict:
        return {"max_new_tokens": sp.max_new_tokens, "top_k": sp.top_k, "eos_id": sp.eos_id}

    def _args(self, sp: SamplingParams) -> tuple:
        return jax.random.key(sp.seed), jnp.float32(sp.temperature), jnp.float32(sp.top_p)

    def lower(self, params, rows: int, prompt_len: int, sp: SamplingParams):
        """The generation of `rows` prompts of `prompt_len` tokens (after `prepare`'s padding)
        with `sp`, lowered for `params` (arrays or ShapeDtypeStructs): one program, the KV cache,
        the prefill and the decode loop. Compile it and give it to `use`."""
        tokens = jax.ShapeDtypeStruct((rows, prompt_len), jnp.int32, sharding=self.rules.batch_sharding())
        # (the key and scalars as shapes: on a compile-only target, such as `plan topology=h100`, no
        # array can be made)
        return self._generate.lower(params, tokens, tokens, *jax.eval_shape(lambda: self._args(sp)),
                                    **self._static(sp))

    def use(self, compiled, rows: int, prompt_len: int, sp: SamplingParams) -> None:
        """`generate` runs `compiled` (`lower`'s program, compiled ahead of time) for those shapes."""
        self._compiled = (((rows, prompt_len), tuple(self._static(sp).items())), compiled)

    def prepare(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, pad_to: int = 1):
        """Left-pad prompts into [b, P] token and position arrays (positions -1 on padding).

        b is len(prompts) rounded up to a multiple of the ways the mesh splits the batch; the
        extra rows repeat the last prompt and are dropped by `generate` (each row samples from
        its own stream, so they change no other row). P is the longest prompt, rounded up to a
        multiple of pad_to where the context leaves room (fewer prompt lengths to compile)."""
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        longest = max(len(p) for p in prompts)
        err = context_error(longest, max_new_tokens, self.cfg.max_seq_len)
        if err:
            raise ValueError(err)
        longest = max(longest, min(-(-longest // pad_to) * pad_to, self.cfg.max_seq_len - max_new_tokens))
        prompts = list(prompts) + [prompts[-1]] * (-len(prompts) % self.rules.batch_divisor())
        tokens = np.zeros((len(prompts), longest), np.int32)
        positions = np.full((len(prompts), longest), -1, np.int32)
        for r, p in enumerate(prompts):
            tokens[r, longest - len(p):] = p
            positions[r, longest - len(p):] = np.arange(len(p))
        sharding = self.rules.batch_sharding()
        return jax.device_put(tokens, sharding), jax.device_put(positions, sharding)

    def generate(self, params: Params, prompts: Sequence[Sequence[int]], sp: SamplingParams, pad_to: int = 1) -> list:
        """New tokens for each prompt (cut after eos_id when given); pad_to: see `prepare`."""
        tokens, positions = self.prepare(prompts, sp.max_new_tokens, pad_to)
        static = self._static(sp)
        shapes, compiled = self._compiled
        if shapes == (tokens.shape, tuple(static.items())):  # (compiled ahead of time: `compile`)
            out = compiled(params, tokens, positions, *self._args(sp))
        else:
            out = self._generate(params, tokens, positions, *self._args(sp), **static)
        rows = to_host(out).tolist()[: len(prompts)]  # (rows live on several hosts: gathered everywhere)
        if sp.eos_id is not None:
            rows = [r[: r.index(sp.eos_id) + 1] if sp.eos_id in r else r for r in rows]
        return rows


class Conversation:
    """A multi-turn conversation with a chat model (`spmdgpt chat`): its KV cache is kept across
    turns, so each turn feeds only the text the chat template adds after what the cache already
    holds (the user's message and the start of the reply), then samples the reply one token at
    a time (each passed to `on_token` as it is decoded) up to the tokenizer's end-of-turn token.

    New tokens are fed in one call, left-padded to a multiple of FEED_BUCKET tokens (padding
    slots get position -1 and are never attended to), so a turn compiles once per bucket. When
    the template renders the conversation so far differently from what the cache holds (the
    decoded reply does not round-trip to its text), the cache is refilled from the whole
    conversation (`refills` counts these). The conversation runs in row 0 of a batch of
    rules.batch_divisor() rows (the other rows repeat it)."""

    FEED_BUCKET = 64

    def __init__(self, cfg: ModelConfig, rules: Rules, params: Params, tokenizer, sp: SamplingParams):
        self.cfg, self.rules, self.params, self.tok, self.sp = cfg, rules, params, tokenizer, sp
        self.rows = rules.batch_divisor()
        self.capacity = cfg.max_seq_len + self.FEED_BUCKET  # (room for one turn's padding slots)
        self.vocab_limit = tokenizer.vocab_size
        self._feed = jax.jit(self._feed_impl)
        self._next = jax.jit(self._next_impl, static_argnames=("top_k",))
        self._empty = jax.jit(lambda: init_cache(cfg, rules, self.rows, self.capacity))
        self.refills = 0
        self.fed = 0  # tokens fed to the cache (prompt tokens, not sampled ones), over the conversation
        self.reset()

    def reset(self) -> None:
        """Forget the conversation (`/reset`): an empty cache."""
        self.messages: list = []
        self.text = ""  # the template text the cache holds
        self.position = 0  # the next token's position
        self.cache = self._empty()
        self.key = jax.random.key(self.sp.seed)
        self.turns = 0

    def _feed_impl(self, params, cache, tokens, positions):
        logits, cache = forward(self.cfg, self.rules, params, tokens, positions, cache)
        return logits[:, -1], cache

    def _next_impl(self, params, cache, logits, position, key, temperature, top_p, *, top_k):
        keys = jax.random.split(key, self.rows)
        last = jax.sharding.reshard(logits, self.rules.spec("batch", None))
        tok = sample_tokens(last, keys, temperature, top_k, top_p, self.vocab_limit)
        tok = jnp.broadcast_to(tok[:1], tok.shape)  # (every row follows row 0)
        pos = jnp.full((self.rows, 1), position, jnp.int32)
        new_logits, cache = forward(self.cfg, self.rules, params, tok[:, None], pos, cache)
        return tok[0], new_logits[:, 0], cache

    def _feed_tokens(self, ids):
        n = -(-len(ids) // self.FEED_BUCKET) * self.FEED_BUCKET
        tokens = np.zeros((self.rows, n), np.int32)
        positions = np.full((self.rows, n), -1, np.int32)
        tokens[:, n - len(ids):] = ids
        positions[:, n - len(ids):] = np.arange(self.position, self.position + len(ids))
        sharding = self.rules.batch_sharding()
        logits, self.cache = self._feed(self.params, self.cache, jax.device_put(tokens, sharding),
                                        jax.device_put(positions, sharding))
        self.position += len(ids)
        self.fed += len(ids)
        return logits

    def room(self) -> int:
        """Cache slots left (a turn needs its new tokens, padding and max_new_tokens)."""
        return self.capacity - int(self.cache.end)

    def say(self, content: str, on_token=None) -> str:
        """The model's reply to the user's `content`, at most max_new_tokens and what the model's
        context has left (ValueError when it has none)."""
        messages = self.messages + [{"role": "user", "content": content}]
        prompt = self.tok.template.render(messages, add_generation_prompt=True)
        if not prompt.startswith(self.text):  # (the cache holds other text than the template renders)
            self.refills += 1
            history = self.messages
            self.reset()
            self.messages, self.turns = history, len(history) // 2
        ids = self.tok.encode(prompt[len(self.text):])
        padded = -(-len(ids) // self.FEED_BUCKET) * self.FEED_BUCKET
        # the reply stops at max_new_tokens or at the end of the model's context
        budget = min(self.sp.max_new_tokens, self.cfg.max_seq_len - self.position - len(ids), self.room() - padded)
        if budget < 1:
            raise ValueError(f"the conversation has reached the model's context of {self.cfg.max_seq_len} tokens; "
                             "/reset to start a new one")
        logits = self._feed_tokens(ids)
        stop, reply = self.tok.stop_id, []
        for _ in range(budget):
            self.key, key = jax.random.split(self.key)
            tok, logits, self.cache = self._next(self.params, self.cache, logits, jnp.int32(self.position), key,
                                                 jnp.float32(self.sp.temperature), jnp.float32(self.sp.top_p),
                                                 top_k=self.sp.top_k)
            self.position += 1
            tok = int(tok)
            if tok == stop:
                break
            reply.append(tok)
            if on_token is not None:
                on_token(self.tok.decode(reply), tok)
        text = self.tok.decode(reply)
        self.text = prompt + text + (self.tok.stop_text if tok == stop else "")  # (what the cache now holds)
        self.messages = messages + [{"role": "assistant", "content": text}]
        self.turns += 1
        return text
