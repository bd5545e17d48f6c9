"""Multi-token prediction (model.mtp_depth, spmdgpt.model.mtp): its loss against a reference that
runs each module on each document separately with explicit slices, a run that trains and logs
mtp/loss, exports and samples without the modules, and its refusals."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import init_params
from spmdgpt.model.blocks import block
from spmdgpt.model.head import embed, unembed
from spmdgpt.model.layers import norm
from spmdgpt.model.loss import objective
from spmdgpt.model.transformer import hidden_states


def _module_logits(m, rules, params, doc):
    """Per module k: its logits [n - k - 1, vocab] for one document [n + 1] alone, the module run on
    slices of the document's real tokens (None where the document is too short); one compiled
    program per document length."""
    n = doc.shape[0] - 1

    def run(params, doc):
        h = hidden_states(m, rules, params, doc[None, :n], residual=True)[0]
        out = []
        for k in range(m.mtp_depth):
            steps = n - k - 1
            if steps <= 0:
                out.append(None)
                continue
            p = jax.tree.map(lambda a: a[k], params.mtp)
            e = embed(m, rules, params, doc[None, k + 1:k + 1 + steps])
            x = jnp.concatenate([norm(m, rules, p.norm_e, e), norm(m, rules, p.norm_h, h[:steps])], axis=-1)
            h = jnp.einsum("td,de->te", x, jnp.reshape(p.w_in, (2 * m.d_model, m.d_model)))
            h = block(m, rules, p.block, h, jnp.arange(steps), 1, stack="dense_blocks")[0]
            out.append(unembed(m, rules, params, norm(m, rules, p.ln_f, h)))
        return out

    return jax.jit(run)(params, jnp.asarray(doc))


def _reference(cfg, rules, params, doc, counted=None):
    """Per module k: (the summed cross-entropy of predicting doc[i + k + 2] at each position i
    that has one, and whose target is counted (counted [n]: over the targets doc[1:]), their
    count), one document [n + 1] alone, its modules run on slices of its real tokens."""
    m = cfg.model
    n = len(doc) - 1
    counted = np.ones(n, bool) if counted is None else np.asarray(counted)
    out = []
    for k, logits in enumerate(_module_logits(m, rules, params, doc)):
        if logits is None:
            out.append((0.0, 0))
            continue
        steps = n - k - 1
        logits = np.asarray(logits, np.float64)
        target, use = doc[k + 2:k + 2 + steps], counted[k + 1:k + 1 + steps]
        lse = np.log(np.sum(np.exp(logits - logits.max(-1, keepdims=True)), -1)) + logits.max(-1)
        out.append((float(np.sum((lse - logits[np.arange(steps), target])[use])), int(use.sum())))
    return out


def test_loss_equals_each_module_run_on_each_document_alone():
    """Depth 2 on two rows of 24 tokens, the second packed with two documents of 12 (positions
    restarting, attention inside each): mtp/loss is the mean over the two modules of each one's
    mean cross-entropy over the positions whose target k + 2 places ahead is in the same document,
    as a reference running each module on each document's slices gives; the objective adds 0.3 of
    it; the main loss does not change."""
    cfg = load_config(["+experiment=staircase", "model.mtp_depth=2", "model.init_std=0.2", "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    rng = np.random.default_rng(0)
    seqs = rng.integers(0, 10, (2, 25)).astype(np.int32)
    seg = np.array([[0] * 24, [0] * 12 + [1] * 12], np.int32)
    pos = np.array([list(range(24)), list(range(12)) * 2], np.int32)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        obj, metrics = jax.jit(lambda p: objective(cfg.model, rules, p, seqs[:, :-1], seqs[:, 1:], seg, pos))(params)
        plain = load_config(["+experiment=staircase", "model.init_std=0.2", "mesh.data=1"]).model
        base = jax.jit(lambda p: objective(plain, rules, p, seqs[:, :-1], seqs[:, 1:], seg, pos)[0])(
            params._replace(mtp=None))
        # documents: row 0 whole; row 1's two of 12 inputs, each with its targets (the first's
        # last target is the second's first token, as the main loss has it)
        parts = [_reference(cfg, rules, params, d) for d in (seqs[0], seqs[1, :13], seqs[1, 12:])]
    want = np.mean([sum(p[k][0] for p in parts) / sum(p[k][1] for p in parts) for k in range(2)])
    assert float(metrics["mtp/loss"]) == pytest.approx(want, rel=1e-5)
    assert float(metrics["loss"]) == pytest.approx(float(base), rel=1e-6)
    assert float(obj) == pytest.approx(float(base) + 0.3 * want, rel=1e-5)
    assert [sum(p[k][1] for p in parts) for k in range(2)] == [23 + 11 + 11, 22 + 10 + 10]


def test_masked_prompts_embed_the_real_tokens():
    """An SFT batch: each document's prompt targets masked (-1) inside the row. The modules still
    embed the real next tokens (a prompt's last position embeds the answer's first token, not a
    stand-in for the masked target) and predict only the counted targets, as the reference run on
    the true token sequence gives."""
    cfg = load_config(["+experiment=staircase", "model.mtp_depth=2", "model.init_std=0.2", "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    seqs = np.random.default_rng(1).integers(1, 10, (2, 25)).astype(np.int32)  # (no token is 0: the stand-in)
    seg = np.array([[0] * 24, [0] * 12 + [1] * 12], np.int32)
    pos = np.array([list(range(24)), list(range(12)) * 2], np.int32)
    targets = seqs[:, 1:].copy()
    targets[0, :8] = -1  # row 0: a prompt of 9 tokens, then the answer
    targets[1, :4] = targets[1, 12:17] = -1  # row 1: two conversations, each a prompt then an answer
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        _, metrics = jax.jit(lambda p: objective(cfg.model, rules, p, seqs[:, :-1], targets, seg, pos))(params)
        counted = targets >= 0
        parts = [_reference(cfg, rules, params, seqs[0], counted[0]),
                 _reference(cfg, rules, params, seqs[1, :13], counted[1, :12]),
                 _reference(cfg, rules, params, seqs[1, 12:], counted[1, 12:])]
    want = np.mean([sum(p[k][0] for p in parts) / sum(p[k][1] for p in parts) for k in range(2)])
    assert [sum(p[k][1] for p in parts) for k in range(2)] == [16 + 8 + 7] * 2  # (the counted targets past 1)
    assert float(metrics["mtp/loss"]) == pytest.approx(want, rel=1e-5)


def test_a_run_trains_logs_exports_and_samples(tmp_path, capsys):
    """`model.mtp_depth=1`: mtp/loss in metrics.jsonl, falling; export leaves the modules out;
    sampling runs the main model."""
    run = tmp_path / "r"
    assert main(["train", "+experiment=staircase", "model.mtp_depth=1", "train.steps=20", "optimizer.warmup_steps=5",
                 "train.eval_every=20", "train.log_every=5", "train.progress=false", f"run.dir={run}"]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    mtp = [r["mtp/loss"] for r in rows if "mtp/loss" in r]
    assert len(mtp) == 4 and mtp[-1] < 0.6 * mtp[0]
    capsys.readouterr()
    assert main(["export", f"run.dir={run}", f"out={tmp_path / 'hf'}"]) == 0
    from safetensors.numpy import load_file

    assert not [k for k in load_file(str(tmp_path / "hf" / "model.safetensors")) if "mtp" in k]
    assert main(["sample", f"run.dir={run}", "prompt=0123", "max_new_tokens=8", "temperature=0"]) == 0


def test_flops_count_the_modules():
    """A module adds 6 x (its block's matrices + its 2D x D projection + the output head's V x D) and
    one more block's attention (6 T N (H + H)) per token: MFU counts what the step computes."""
    from spmdgpt.model import is_info, param_info
    from spmdgpt.plan.flops import flops_per_token

    cfg = load_config(["+experiment=staircase", "model.mtp_depth=1"]).model
    plain = load_config(["+experiment=staircase"]).model
    info = param_info(cfg)
    d, v, layers = cfg.d_model, cfg.vocab_size, cfg.num_layers
    block = sum(int(np.prod(i.shape)) for i in jax.tree.leaves(info.blocks, is_leaf=is_info) if i.fan_in) // layers
    want = 6 * (block + 2 * d * d + v * d) + 6 * 64 * cfg.num_heads * 2 * (d // cfg.num_heads)
    assert flops_per_token(cfg, 64) - flops_per_token(plain, 64) == pytest.approx(want)


@pytest.mark.parametrize("overrides,expected", [
    (["mesh.stage=2", "mesh.data=1"], "model.mtp_depth=1 with mesh.stage=2: multi-token prediction does not run "
                                      "under pipeline stages yet"),
    (["mesh.context=2", "mesh.data=1"], "model.mtp_depth=1 with mesh.context=2: multi-token prediction does not run "
                                        "under context parallelism yet"),
    (["lora.rank=4", "checkpoint.init_from=x", "mesh.data=1"], "model.mtp_depth=1 with lora.rank=4: LoRA trains"),
    (["model.mtp_weight=-1"], "model.mtp_depth=1 and model.mtp_weight=-1.0 must be >= 0"),
])
def test_refusals_are_one_line(overrides, expected, capsys):
    assert main(["train", "+experiment=staircase", "model.mtp_depth=1", *overrides]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") <= 2, err
