"""The padded sampler every sampling path used before the inference engine, kept as the
benchmarks' baseline (`benchmarks/engine.py`, `generate.py`, `gpu.py`): a left-padded batch, the
whole prompt in one prefill (the model's cached forward pass, `model.forward` with a `KVCache`),
then a `lax.scan` decode loop of max_new_tokens steps for every row; one PRNG stream per row (the
seed folded with the row index, then with the step), stopping at eos_id."""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from spmdgpt.engine.generate import SamplingParams, context_error
from spmdgpt.mesh.sharding import to_host
from spmdgpt.model import Params, forward, init_cache

Array = jax.Array

__all__ = ["Sampler", "SamplingParams", "sample_tokens"]


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



class Sampler:
    """Compiles prefill + decode loop once per shape and reuses them across calls."""

    def __init__(self, cfg, rules, vocab_limit=None):
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
