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
    """A multi-turn conversation with a chat model (`spmdgpt chat`) through the inference engine
    (`spmdgpt.engine`): each turn renders the whole conversation with the chat template and asks
    for its continuation; the engine's shared prefixes take the pages the conversation so far
    already wrote (full pages of the same tokens), so a turn reads only the template's new text
    and the partly filled last page. The reply is sampled one token at a time (each passed to
    `on_token` with the reply's text so far) up to the tokenizer's end-of-turn token. Turn t
    samples stream t of the seed. `fed` counts the prompt tokens the engine read (not taken from
    shared pages), over the conversation."""

    def __init__(self, cfg: ModelConfig, rules: Rules, params: Params, tokenizer, sp: SamplingParams):
        from spmdgpt.engine import Engine, EngineConfig

        self.cfg, self.rules, self.params, self.tok, self.sp = cfg, rules, params, tokenizer, sp
        self.engine = Engine(cfg, rules, params, tokenizer.vocab_size, EngineConfig(slots=rules.batch_divisor()))
        self.fed = 0
        self.reset()

    def reset(self) -> None:
        """Forget the conversation (`/reset`)."""
        self.messages: list = []
        self.turns = 0

    def say(self, content: str, on_token=None) -> str:
        """The model's reply to the user's `content`, at most max_new_tokens and what the model's
        context has left (ValueError when it has none)."""
        from spmdgpt.engine import Request

        messages = self.messages + [{"role": "user", "content": content}]
        ids = self.tok.encode(self.tok.template.render(messages, add_generation_prompt=True))
        budget = min(self.sp.max_new_tokens, self.cfg.max_seq_len - len(ids))
        if budget < 1:
            raise ValueError(f"the conversation has reached the model's context of {self.cfg.max_seq_len} tokens; "
                             "/reset to start a new one")
        stop = self.tok.stop_id
        shown = (lambda r, t: t != stop and on_token(self.tok.decode([x for x in r.tokens if x != stop]), t)) \
            if on_token is not None else None
        sp, before = self.sp, self.engine.shared_tokens
        r = self.engine.run([Request(ids, budget, sp.temperature, sp.top_k, sp.top_p, sp.seed, self.turns,
                                     stop_ids=(stop,), on_token=shown)])[0]
        self.fed += len(ids) - (self.engine.shared_tokens - before)
        self.last = r  # (the turn's engine request: its tokens, stop token included)
        text = self.tok.decode([t for t in r.tokens if t != stop])
        self.messages = messages + [{"role": "assistant", "content": text}]
        self.turns += 1
        return text
