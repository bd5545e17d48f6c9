"""A model on a layout of the 8 simulated devices against the same model on one device: loss,
gradients and (with `full`) per-token losses and statistics, with document masks and restarted
positions (tests/test_context.py, tests/test_collective.py)."""

import dataclasses

import jax
import numpy as np

from spmdgpt.config import load_config
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import activation_stats, init_params
from spmdgpt.model.loss import loss_fn, token_losses

# init_std 0.2: attention far from uniform at init, so that a wrong mask or order shows in the loss
BASE = ["model.d_model=32", "model.num_layers=2", "model.num_heads=4", "model.vocab_size=64", "model.init_std=0.2",
        "model.attention=xla", "model.scan_unroll=false", "data.seq_len=64", "model.max_seq_len=64"]
B, T_LEN = 4, 64
RTOL = 1e-5  # the bound: max |difference| / max |one device's value|, per array


def cfg_for(*overrides):
    return load_config(BASE + list(overrides))


def batch(vocab: int, b: int = B):
    """b sequences of token ids with targets, document ids (a new document after every token
    divisible by 7) and positions restarting at each document (data.reset_positions)."""
    toks = np.asarray(jax.random.randint(jax.random.key(1), (b, T_LEN + 1), 0, vocab))
    seg = np.cumsum(toks[:, :-1] % 7 == 0, axis=1).astype(np.int32)
    starts = np.maximum.accumulate(np.where(np.diff(seg, axis=1, prepend=-1) != 0, np.arange(T_LEN), 0), axis=1)
    return toks[:, :-1], toks[:, 1:], seg, (np.arange(T_LEN) - starts).astype(np.int32)


def run(cfg, full: bool = False):
    """(loss with documents, gradients with documents, the compiled step's HLO text, and with
    `full` the loss without documents, per-token losses [b, t], the per-layer max attention
    logit and the loss without sliding windows) on the devices cfg.mesh names."""
    n = cfg.mesh.data * cfg.mesh.stage * cfg.mesh.expert * cfg.mesh.context * cfg.mesh.model
    mesh = make_mesh(cfg.mesh, jax.devices()[:n])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        params = init_params(cfg.model, jax.random.key(0), rules)
        inputs, targets, seg, pos = (jax.device_put(a, rules.batch_sharding()) for a in batch(cfg.model.vocab_size))
        grad = jax.jit(jax.value_and_grad(lambda p, s, q: loss_fn(cfg.model, rules, p, inputs, targets, s, q)))
        compiled = grad.lower(params, seg, pos).compile()
        loss, grads = compiled(params, seg, pos)
        if not full:
            return float(loss), jax.device_get(grads), compiled.as_text()

        unwindowed = dataclasses.replace(cfg.model, sliding_window=0)

        def others(p):
            return (
                loss_fn(cfg.model, rules, p, inputs, targets),
                token_losses(cfg.model, rules, p, inputs, targets, seg, pos),
                activation_stats(cfg.model, rules, p, inputs, pos, seg)["max_attn_logit"],
                loss_fn(unwindowed, rules, p, inputs, targets, seg, pos),
            )

        plain, per_token, logit, global_only = jax.device_get(jax.jit(others)(params))
        return (float(loss), jax.device_get(grads), compiled.as_text(), float(plain), per_token, logit,
                float(global_only))


def assert_close(got, want):
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert np.max(np.abs(a - b)) <= RTOL * np.max(np.abs(b)), (np.max(np.abs(a - b)), np.max(np.abs(b)))


_REFERENCES: dict = {}


def reference(model: tuple, full: bool = False):
    """One device's results for these model overrides (computed once per session)."""
    if len(_REFERENCES.get(model, ())) < (7 if full else 3):
        _REFERENCES[model] = run(cfg_for("mesh.data=1", *model), full)
    return _REFERENCES[model]


def assert_matches(got, ref, full: bool):
    """`run`'s results on a layout against one device's: the loss and every gradient, and with
    `full` the loss without documents, the per-token losses and the statistics."""
    assert abs(got[0] - ref[0]) <= RTOL * ref[0]
    assert_close(got[1], ref[1])  # every gradient
    if full:
        assert abs(got[3] - ref[3]) <= RTOL * ref[3]
        assert_close(got[4], ref[4])  # per-token losses
        assert_close(got[5], ref[5])  # statistics
