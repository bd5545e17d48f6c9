"""Evaluation in the step's microbatches (evaluate.loss_sums, Scorer): the same numbers as one
unsplit pass, to float32 rounding, on one device and on a data x tensor layout, with the blocked
loss and bfloat16 logits; the rows of a split batch come back in the batch's order."""

import jax
import numpy as np
import pytest

from spmdgpt.config import load_config
from spmdgpt.eval.evaluate import Scorer, loss_sums
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import params as T
from spmdgpt.model.loss import token_losses

BASE = ["model.d_model=32", "model.num_layers=2", "model.num_heads=4", "model.vocab_size=64", "model.init_std=0.2",
        "model.attention=xla", "data.seq_len=32", "model.max_seq_len=32"]
ROWS, T_LEN = 16, 32


def _batch(rules, vocab):
    toks = np.asarray(jax.random.randint(jax.random.key(3), (ROWS, T_LEN + 1), 0, vocab), np.int32)
    targets = toks[:, 1:].copy()
    targets[::3, :5] = -1  # (uncounted targets, as a chat prompt's: they fall unevenly between parts)
    return tuple(jax.device_put(a, rules.batch_sharding()) for a in (toks[:, :-1], targets))


def _sums(overrides, devices, microbatches):
    cfg = load_config(BASE + overrides)
    mesh = make_mesh(cfg.mesh, jax.devices()[:devices])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        params = T.init_params(cfg.model, jax.random.key(0), rules)
        batch = _batch(rules, cfg.model.vocab_size)
        total, count = jax.device_get(loss_sums(cfg, rules, microbatches)(params, *batch))
        whole = jax.device_get(token_losses(cfg.model, rules, params, *batch))  # (unsplit, whole logits)
    return float(total), float(count), np.asarray(whole, np.float64), np.asarray(jax.device_get(batch[1]))


@pytest.mark.parametrize("layout", [(["mesh.data=1"], 1), (["sharding=tp", "mesh.data=2", "mesh.model=2"], 4)],
                         ids=["1-device", "data2-model2"])
def test_split_evaluation_equals_the_unsplit_sums(layout):
    overrides, devices = layout
    total1, count1, whole, targets = _sums(overrides, devices, 1)
    counted = targets >= 0
    assert count1 == counted.sum() == ROWS * T_LEN - 6 * 5
    # the unsplit program is the per-token losses' sum (float32 against float64)
    assert total1 == pytest.approx(whole[counted].sum(), rel=2e-6)
    for k in (2, 4):
        total, count, _, _ = _sums(overrides, devices, k)
        assert count == count1
        assert total == pytest.approx(total1, rel=2e-6)
    # the blocked loss (chunks of 8 positions) and bfloat16 logits run inside the split program
    total, count, _, _ = _sums(overrides + ["model.loss_block=8"], devices, 4)
    assert count == count1 and total == pytest.approx(total1, rel=2e-6)
    bf16 = overrides + ["model.compute_dtype=bfloat16", "model.logits_dtype=bfloat16"]
    total_bf16, _, _, _ = _sums(bf16, devices, 1)
    assert total_bf16 == pytest.approx(total1, rel=1e-2) and total_bf16 != total1  # (bfloat16 logits: another number)
    total, _, _, _ = _sums(bf16, devices, 4)
    assert total == pytest.approx(total_bf16, rel=2e-4)  # (bfloat16 rounding of the parts' matmuls)


def test_scorer_rows_come_back_in_the_batchs_order():
    cfg = load_config(BASE + ["mesh.data=2"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:2])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        params = T.init_params(cfg.model, jax.random.key(0), rules)
        inputs, targets = _batch(rules, cfg.model.vocab_size)
        whole = np.asarray(jax.device_get(token_losses(cfg.model, rules, params, inputs, targets)))
        scorer = Scorer(cfg.model, rules, np.ones(64, np.int64), microbatches=4)
        parts = np.asarray(jax.device_get(scorer._losses(params, inputs, targets)))
        assert parts.shape == (4, ROWS // 4, T_LEN)
        np.testing.assert_allclose(np.swapaxes(parts, 0, 1).reshape(ROWS, T_LEN), whole, rtol=2e-6, atol=1e-6)

        class Batch(tuple):
            targets = property(lambda self: self[1])

        split = scorer(params, [Batch((inputs, targets))])
        one = Scorer(cfg.model, rules, np.ones(64, np.int64))(params, [Batch((inputs, targets))])
        assert split["tokens"] == one["tokens"] == ROWS * T_LEN - 6 * 5
        assert split["loss"] == pytest.approx(one["loss"], rel=2e-6)
