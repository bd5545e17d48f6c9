"""Speculative decoding from the model's multi-token-prediction modules (`EngineConfig.speculate`):
the accept / resample rule samples exactly the model's distribution (counted on a small
vocabulary), greedy output equals plain decoding token for token, seeded requests keep their
tokens among others, and pages are not leaked."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import train_steps
from test_generate import setup

from spmdgpt.config import load_config
from spmdgpt.engine import Engine, EngineConfig, Request
from spmdgpt.engine.paged import filtered, row_keys, verify

N = 40_000  # draws: a frequency's standard error is at most 0.0025; the tests allow 0.012


def _draw(logits, drafts, temperature=1.0, top_k=0, top_p=1.0):
    """N verifications of one row (logits [n, vocab], drafts [n - 1]), each with its own key."""
    n, vocab = logits.shape
    mesh = jax.make_mesh((1,), ("data",), axis_types=(jax.sharding.AxisType.Explicit,))
    with jax.set_mesh(mesh):
        rows = lambda a, dtype: jnp.full((N,), a, dtype)  # noqa: E731
        keys = jnp.stack([row_keys(rows(7, jnp.uint32), jnp.arange(N, dtype=jnp.uint32), rows(j, jnp.uint32))
                          for j in range(n)], axis=1)
        tok, count = jax.jit(verify, static_argnums=6)(
            jnp.broadcast_to(jnp.asarray(logits, jnp.float32), (N, n, vocab)),
            jnp.broadcast_to(jnp.asarray(drafts, jnp.int32), (N, n - 1)), keys, rows(temperature, jnp.float32),
            rows(top_k, jnp.int32), rows(top_p, jnp.float32), vocab)
        one = lambda a, dtype: jnp.full((1,), a, dtype)  # noqa: E731
        scaled = [filtered(jnp.asarray(logits[j:j + 1], jnp.float32), one(temperature, jnp.float32),
                           one(top_k, jnp.int32), one(top_p, jnp.float32), vocab)[1] for j in range(n)]
        probs = [np.asarray(jax.nn.softmax(s))[0] for s in scaled]
    return np.asarray(tok), np.asarray(count), probs


def test_accept_and_resample_draw_exactly_the_models_distribution():
    """On a vocabulary of 6: the first token is distributed as the model's first distribution
    whether the draft is its likeliest token or an unlikely one; the second token exists with
    probability p0(draft) and is then distributed as the second place's distribution; with a
    temperature and top-k the filtered distribution (tokens outside the top 3 never appear)."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 6)) * 1.5
    for kwargs in ({}, {"temperature": 0.7, "top_k": 3}, {"top_p": 0.8}):
        for first in (int(np.argmax(logits[0])), int(np.argmin(logits[0]))):
            drafts = [first, 2]
            tok, count, p = _draw(logits, drafts, **kwargs)
            assert count.min() >= 1 and count.max() <= 3
            first_freq = np.bincount(tok[:, 0], minlength=6) / N
            np.testing.assert_allclose(first_freq, p[0], atol=0.012)
            assert abs(np.mean(count >= 2) - p[0][first]) < 0.012  # the draft is kept with probability p0(draft)
            second = tok[count >= 2, 1]
            assert len(second) > 1000 or p[0][first] < 0.05
            if len(second) > 1000:
                np.testing.assert_allclose(np.bincount(second, minlength=6) / len(second), p[1], atol=0.03)
            if kwargs.get("top_k"):
                assert set(tok[:, 0]) <= set(np.argsort(-logits[0])[:3].tolist())
            assert (tok[count >= 2, 0] == first).all()  # an accepted draft is the output


def test_greedy_rows_accept_the_argmax_and_stop_at_the_first_miss():
    logits = np.array([[0.0, 3.0, 1.0], [2.0, 0.0, 1.0], [0.0, 0.0, 5.0]])
    tok, count, _ = _draw(logits, [1, 0], temperature=0.0)
    assert (count == 3).all() and (tok == [1, 0, 2]).all()
    tok, count, _ = _draw(logits, [1, 2], temperature=0.0)  # the second draft misses: the argmax instead
    assert (count == 2).all() and (tok[:, :2] == [1, 0]).all()


@pytest.fixture(scope="module")
def trained():
    """The staircase model with one multi-token-prediction module, 60 steps trained (its drafts then
    mostly right)."""
    cfg = load_config(["+experiment=staircase", "model.mtp_depth=1", "mesh.data=1", "mesh.model=1"])
    _, state, rules = train_steps(cfg, jax.devices()[:1], 60)
    with jax.set_mesh(rules.mesh):
        yield cfg, rules, state.params


PROMPTS = [[1, 2, 3], [5], [9, 8, 7, 6], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1]]


def test_speculative_greedy_equals_plain_decoding_and_seeded_requests_keep_their_tokens(trained):
    """Greedy: the same tokens with and without drafts (two slots for four prompts, a prompt read in
    three chunks), most drafts accepted and fewer steps; a seeded sampled request gives the same
    tokens alone and among others; every page comes back."""
    cfg, rules, params = trained
    small = dict(slots=2, page_size=4, chunk=8)
    plain = Engine(cfg.model, rules, params, 10, EngineConfig(**small))
    expected = [r.tokens for r in plain.run([Request(p, 24, temperature=0.0) for p in PROMPTS])]
    spec = Engine(cfg.model, rules, params, 10, EngineConfig(**small, speculate=1))
    got = spec.run([Request(p, 24, temperature=0.0) for p in PROMPTS])
    assert [r.tokens for r in got] == expected and all(len(r.logprobs) == 24 for r in got)
    assert spec.acceptance > 0.8 and spec.steps < 0.7 * plain.steps, (spec.acceptance, spec.steps, plain.steps)
    seeded = lambda: Request([4, 5], 20, temperature=1.0, top_k=4, seed=11)  # noqa: E731
    alone = spec.run([seeded()])[0].tokens
    among = spec.run([Request(p, 20, temperature=1.0, seed=i) for i, p in enumerate(PROMPTS[:3])] + [seeded()])
    assert among[-1].tokens == alone and spec.pages_used() == 0


def test_speculation_on_a_mesh_and_under_preemption_leaks_no_page():
    """Drafts on data 2 x model 2 (an untrained model: few drafts kept) give one device's greedy
    tokens; a pool too small for all slots preempts and every page comes back; speculate past
    model.mtp_depth is refused."""
    prompts = PROMPTS[:3]
    results = []
    for devices, extra in ((jax.devices()[:1], []),
                           (jax.devices()[:4], ["sharding=fsdp_tp", "mesh.data=2", "mesh.model=2"])):
        cfg, mesh, rules, params = setup("model.mtp_depth=1", "model.max_seq_len=48", *extra, devices=devices)
        with jax.set_mesh(mesh):
            engine = Engine(cfg.model, rules, params, 10, EngineConfig(slots=2, page_size=4, chunk=8, pages=9,
                                                                        speculate=1))
            results.append([r.tokens for r in engine.run([Request(p, 20, temperature=0.0) for p in prompts])])
            if not extra:
                plain = Engine(cfg.model, rules, params, 10, EngineConfig(slots=2, page_size=4, chunk=8))
                assert results[0] == [r.tokens for r in plain.run([Request(p, 20, temperature=0.0) for p in prompts])]
                refused = r"speculate=2: .* model.mtp_depth=1; set speculate between 0 and 1"
                with pytest.raises(ValueError, match=refused):
                    Engine(cfg.model, rules, params, 10, EngineConfig(speculate=2))
                _seeded_beside_a_shared_page(cfg, rules, params)
        assert engine.preemptions > 0 and engine.pages_used() == 0 and engine.drafted > 0
    assert results[0] == results[1]


def _seeded_beside_a_shared_page(cfg, rules, params):
    """A seeded sampled request whose first page another sequence wrote: the drafter's entry at a
    page's last place reads the token after the page, the other sequence's, so the last page a
    prompt matches is read again, not shared (sharing it changed this untrained model's drafts, and
    with them the accept draws: seed 0 beside [0, 1, 2, 3, 0, ...] answered otherwise); pages
    before it are shared. The same tokens as alone, both ways."""
    config = EngineConfig(slots=2, page_size=4, chunk=16, speculate=1)
    seeded = lambda: Request([0, 1, 2, 3, 4, 5, 6, 7, 8], 16, temperature=1.0, seed=0)  # noqa: E731
    alone = Engine(cfg.model, rules, params, 10, config).run([seeded()])[0].tokens
    for other, shared in (([0, 1, 2, 3, 0, 0, 0, 0], 0), ([0, 1, 2, 3, 4, 5, 6, 7, 0], 4)):
        engine = Engine(cfg.model, rules, params, 10, config)
        engine.add(Request(other, 16, temperature=1.0, seed=99))
        engine.step()  # (the other prompt read: its pages written and keyed)
        request = engine.add(seeded())
        while engine.busy:
            engine.step()
        assert request.tokens == alone and engine.shared_tokens == shared
