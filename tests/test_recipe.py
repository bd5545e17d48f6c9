"""The training-recipe options (issue: the main job, better): their arithmetic, their errors, and
train.time_budget. Each option is off by default; the `shakespeare_char` defaults that use them
are covered by the end-to-end tests."""

import math
import time
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spmdgpt.config import ConfigError, load_config, validate
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import forward, init_params, loss_fn, objective, param_info
from spmdgpt.model.attention import attention_backend, fused_qkv
from spmdgpt.model.layers import dropout
from spmdgpt.model.mlp import mlp
from spmdgpt.optim import build_optimizer, learning_rate_schedule
from spmdgpt.training.budget import evaluations, steps_within
from spmdgpt.training.state import init_state
from spmdgpt.training.step import make_train_step

ONE = jax.devices()[:1]


def setup(*overrides):
    cfg = load_config(["+experiment=staircase", "mesh.data=1", "model.vocab_size=32", *overrides])
    mesh = make_mesh(cfg.mesh, ONE)
    rules = Rules(mesh, cfg.sharding)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
    return cfg, mesh, rules, params


def batch(seed=0, b=4, t=64, vocab=32):
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.integers(0, vocab, (b, t)), jnp.int32) for _ in range(2))


def test_qk_norm_gives_queries_and_keys_unit_rms():
    cfg, mesh, rules, params = setup("model.qk_norm=true", "model.init_std=0.3")
    x = jnp.asarray(np.random.default_rng(1).normal(size=(2 * 8, cfg.model.d_model)), jnp.float32)
    block0 = jax.tree.map(lambda a: a[0], params.blocks)
    with jax.set_mesh(mesh):
        q, k, v = fused_qkv(cfg.model, rules, block0.attn, x, jnp.arange(8), 2)
        q0, k0, _ = fused_qkv(
            load_config(["+experiment=staircase"]).model, rules, block0.attn, x, jnp.arange(8), 2
        )
    rms = lambda a: np.sqrt(np.mean(np.square(np.asarray(a)), axis=-1))  # noqa: E731 (RoPE keeps norms)
    np.testing.assert_allclose(rms(q), 1.0, atol=1e-5)
    np.testing.assert_allclose(rms(k), 1.0, atol=1e-5)
    assert abs(rms(q0).mean() - 1.0) > 0.5  # without it the scale is the init's (the test has teeth)


def test_logit_softcap_bounds_the_logits_and_is_tanh():
    c = 2.0
    cfg, mesh, rules, params = setup("model.init_std=0.5")
    capped = load_config(["+experiment=staircase", "model.vocab_size=32", f"model.logit_softcap={c}"]).model
    x, y = batch()
    with jax.set_mesh(mesh):
        raw = np.asarray(forward(cfg.model, rules, params, x)[0], np.float64)
        out = np.asarray(forward(capped, rules, params, x)[0], np.float64)
    assert np.abs(raw).max() > 2 * c  # raw logits well beyond the cap
    assert np.abs(out).max() < c
    np.testing.assert_allclose(out, c * np.tanh(raw / c), atol=1e-5)


def test_relu2_mlp_values():
    cfg, mesh, rules, params = setup("model.mlp=relu2", "model.init_std=0.3")
    block0 = jax.tree.map(lambda a: a[0], params.blocks)
    x = np.random.default_rng(2).normal(size=(8, cfg.model.d_model)).astype(np.float32)
    with jax.set_mesh(mesh):
        out = np.asarray(mlp(cfg.model, rules, block0.mlp, jnp.asarray(x))[0], np.float64)
    h = x.astype(np.float64) @ np.asarray(block0.mlp.w_up, np.float64)
    assert (h < 0).mean() > 0.3  # negative inputs exist: ReLU's zeros matter
    ref = np.square(np.maximum(h, 0)) @ np.asarray(block0.mlp.w_down, np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)  # (float32 sums of ~16-sized terms)


@pytest.mark.parametrize("loss_block", [0, 16])
def test_z_loss_term_and_blocked_equals_whole(loss_block):
    """objective = cross-entropy + z * mean(logsumexp^2), with soft-capped logits; the blocked
    loss (its own gradients, a custom VJP) gives the same value and gradients as the whole one."""
    z = 1e-2
    over = ("model.init_std=0.3", f"model.z_loss={z}", "model.logit_softcap=3")
    cfg, mesh, rules, params = setup(*over, f"model.loss_block={loss_block}")
    whole, *_ = setup(*over)
    x, y = batch(3)
    with jax.set_mesh(mesh):
        (obj, metrics), grads = jax.jit(jax.value_and_grad(partial(objective, cfg.model, rules), has_aux=True))(
            params, x, y
        )
        ce = metrics["loss"]
        (obj_w, _), grads_w = jax.jit(jax.value_and_grad(partial(objective, whole.model, rules), has_aux=True))(
            params, x, y
        )
        logits = np.asarray(forward(cfg.model, rules, params, x)[0], np.float64)
        plain = float(loss_fn(cfg.model, rules, params, x, y))
    m = logits.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[..., 0]
    ref_ce = np.mean(lse - np.take_along_axis(logits, np.asarray(y)[..., None], -1)[..., 0])
    assert float(ce) == pytest.approx(ref_ce, rel=1e-5)
    assert plain == pytest.approx(ref_ce, rel=1e-5)  # loss_fn: the cross-entropy alone
    assert float(obj) - float(ce) == pytest.approx(z * np.mean(lse ** 2), rel=1e-4)
    assert float(obj) == pytest.approx(float(obj_w), rel=1e-6)
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(grads_w), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-6)


def test_wsd_schedule_values():
    cfg = load_config(["+experiment=staircase", "optimizer.schedule=wsd", "optimizer.lr=1.0",
                       "optimizer.warmup_steps=10", "optimizer.cooldown_fraction=0.2",
                       "optimizer.min_lr_ratio=0.1"]).optimizer
    lr = learning_rate_schedule(cfg, 100)
    got = [float(lr(s)) for s in (0, 5, 10, 50, 80, 90, 100)]
    np.testing.assert_allclose(got, [0.0, 0.5, 1.0, 1.0, 1.0, 0.55, 0.1], atol=1e-6)


def test_squeezed_schedule_after_replans():
    """A re-plan at step 40 of 100 (to 70 steps), then at 50 (to 60): the learning rate is the
    schedule's up to step 40, goes on from its value there without a jump, and the schedule's rest
    is squeezed so that the last step takes the schedule's last rate."""
    cfg = load_config(["+experiment=staircase", "optimizer.lr=1.0", "optimizer.warmup_steps=10",
                       "optimizer.min_lr_ratio=0.1"]).optimizer
    plain, squeezed = learning_rate_schedule(cfg, 100), learning_rate_schedule(cfg, 60, replans=[(40, 100), (50, 70)])
    for s in (0, 5, 10, 39, 40):
        assert float(squeezed(s)) == float(plain(s))
    # 40..50: 30 steps stand for the schedule's last 60 (2 a step); 50..60: 10 steps for its last 40
    np.testing.assert_allclose([float(squeezed(s)) for s in (45, 50, 55, 60)],
                               [float(plain(s)) for s in (50, 60, 80, 100)], rtol=1e-6)
    assert float(plain(100)) == pytest.approx(0.1)
    one = learning_rate_schedule(cfg, 70, replans=[(40, 100)])  # the run before its second re-plan
    assert all(float(one(s)) == float(squeezed(s)) for s in range(0, 50))


def test_pacer_replans_when_the_run_falls_behind():
    """budget.Pacer on a made-up clock: a run calibrated at 0.1 s a step (800 steps, 100 s) whose
    steps take 0.3 s from step 200 on (a busier machine), and its evaluations 6 s instead of 2:
    re-planned to what fits the budget less REPLAN_MARGIN (the evaluations left at the last one's
    time, a recompilation slowed down as the steps), it ends within the budget (plus the slack),
    having used most of it; at 0.1 s a step it keeps its plan."""
    from spmdgpt.training.budget import REPLAN_MARGIN, REPLAN_SLACK, Calibration, Pacer

    cal = Calibration(budget_s=100.0, elapsed_s=10.0, compile_s=1.0, step_s=0.1, eval_s=2.0, steps=800, evals=4,
                      timed_steps=8)

    def run(slow_s):
        pacer, now, steps, step, plans = Pacer(cal, started=0.0, eval_every=200), 11.0, 800, 0, []
        while step < steps:
            step += 1
            now += 0.1 if step <= 200 else slow_s
            if step % 200 == 0 or step == steps:
                took = 20 * (0.1 if step < 200 else slow_s)
                now += took
                pacer.pause(took, evaluation=True)
            if step % 10 == 0 and step < steps and (plan := pacer.check(step, step, steps, now)):
                plans.append((plan, now))
                steps = plan.steps
                now += cal.compile_s * plan.step_s / cal.step_s  # the new step function compiles
        return now, steps, plans

    now, steps, plans = run(0.1)
    assert (steps, plans) == (800, []) and now == pytest.approx(99.0)
    now, steps, plans = run(0.3)
    # from 200 on (a slower evaluation, then slower steps) the projection passes the budget, and
    # stays past it for a whole window (5 s, 17 steps of 0.3 s): re-planned at the check after
    assert [(p.at, p.planned) for p, _ in plans] == [(220, 800)]
    assert plans[-1][0].step_s == pytest.approx(0.3) and steps == plans[-1][0].steps < 800
    assert 100 * (1 - 2 * REPLAN_MARGIN) <= now <= 100 * (1 + REPLAN_SLACK)
    for plan, then in plans:  # each plan's arithmetic
        left = 100 * (1 - REPLAN_MARGIN) - then - cal.compile_s * plan.step_s / cal.step_s
        assert plan.steps == plan.at + steps_within(left, plan.step_s, 6.0, 200, plan.at)
        assert plan.projected_s == pytest.approx(then + (plan.planned - plan.at) * plan.step_s
                                                 + evaluations(plan.planned, 200, plan.at) * 6.0)
    assert plans[0][0].row(100.0)["event"] == "time_budget_replan"


def test_dropout_rate_scale_and_masks():
    x = jnp.ones((256, 256), jnp.float32)
    key = jax.random.key(7)
    a = np.asarray(dropout(x, 0.2, key))
    zeros = (a == 0).mean()
    assert abs(zeros - 0.2) < 4 * math.sqrt(0.2 * 0.8 / a.size)  # the rate, within 4 sigma
    np.testing.assert_allclose(a[a != 0], 1 / 0.8, rtol=1e-6)  # inverted dropout: mean kept
    np.testing.assert_array_equal(a, np.asarray(dropout(x, 0.2, key)))  # same key, same mask
    assert (np.asarray(dropout(x, 0.2, jax.random.key(8))) != a).mean() > 0.2
    np.testing.assert_array_equal(np.asarray(dropout(x, 0.2, None)), 1.0)  # no key: identity


def test_dropout_in_training_is_a_function_of_seed_and_step():
    """The same state and batch at the same step: bitwise the same step; another step number:
    other masks, another result. Evaluation (loss_fn) never drops."""
    cfg, mesh, rules, _ = setup("model.dropout=0.2")
    x, y = batch(4)
    with jax.set_mesh(mesh):
        opt = build_optimizer(cfg.optimizer, param_info(cfg.model), 10)
        step = make_train_step(cfg, rules, opt)
        state = init_state(cfg, rules, opt)
        copy = lambda s: jax.tree.map(jnp.copy, s)  # noqa: E731 (the step donates its state)
        _, m1 = step(copy(state), x, y)
        _, m2 = step(copy(state), x, y)
        _, m3 = step(copy(state)._replace(step=jnp.asarray(5, jnp.int32)), x, y)
        no_drop = float(loss_fn(cfg.model, rules, state.params, x, y))
        eval_again = float(loss_fn(cfg.model, rules, state.params, x, y))
    assert float(m1["loss"]) == float(m2["loss"]) and float(m1["grad_norm"]) == float(m2["grad_norm"])
    assert float(m1["loss"]) != float(m3["loss"])
    assert no_drop == eval_again and no_drop != float(m1["loss"])


def test_zero_init_out_makes_every_block_the_identity():
    cfg, mesh, rules, params = setup("model.zero_init_out=true")
    assert not np.asarray(params.blocks.attn.w_o).any() and not np.asarray(params.blocks.mlp.w_down).any()
    assert np.asarray(params.blocks.mlp.w_up).std() == pytest.approx(cfg.model.init_std, rel=0.05)
    one_layer = load_config(["+experiment=staircase", "model.vocab_size=32", "model.num_layers=1"]).model
    x, _ = batch(5)
    with jax.set_mesh(mesh):
        deep = np.asarray(forward(cfg.model, rules, params, x)[0])
        # one block instead of two: the same output, since each block adds zero
        shallow = np.asarray(forward(one_layer, rules, params._replace(
            blocks=jax.tree.map(lambda a: a[:1], params.blocks)), x)[0])
    np.testing.assert_array_equal(deep, shallow)


def test_embedding_tables_get_their_own_learning_rates():
    """The first AdamW step moves every element with a gradient by the peak lr (constant
    schedule, no warmup): the embedding by embed_lr, the unembedding by unembed_lr, the rest by lr."""
    cfg, mesh, rules, _ = setup("model.tie_embeddings=false", "optimizer.schedule=constant",
                                "optimizer.warmup_steps=0", "optimizer.lr=1e-3", "optimizer.embed_lr=3e-2",
                                "optimizer.unembed_lr=2e-4", "optimizer.weight_decay=0", "optimizer.grad_clip=0")
    x, y = batch(6)
    with jax.set_mesh(mesh):
        opt = build_optimizer(cfg.optimizer, param_info(cfg.model), 10)
        state = init_state(cfg, rules, opt)
        before = jax.device_get(state.params)
        after, _ = make_train_step(cfg, rules, opt)(state, x, y)
        after = jax.device_get(after.params)
    moved = lambda a, b: np.abs(np.asarray(a) - np.asarray(b)).max()  # noqa: E731
    assert moved(after.embed, before.embed) == pytest.approx(3e-2, rel=1e-3)
    assert moved(after.unembed, before.unembed) == pytest.approx(2e-4, rel=1e-3)
    assert moved(after.blocks.mlp.w_up, before.blocks.mlp.w_up) == pytest.approx(1e-3, rel=1e-3)


def test_recipe_option_errors():
    cfg = load_config(["+experiment=staircase", "model.dropout=1.5", "model.logit_softcap=-1",
                       "optimizer.unembed_lr=0.1", "optimizer.cooldown_fraction=0", "train.time_budget=-5"])
    errs = validate(cfg, 1)
    for want in ("model.dropout=1.5 must be in [0, 1)", "model.logit_softcap=-1.0 must be >= 0",
                 "optimizer.unembed_lr needs model.tie_embeddings=false",
                 "optimizer.cooldown_fraction=0.0 must be in (0, 1]", "train.time_budget=-5.0 must be > 0"):
        assert any(want in e for e in errs), (want, errs)
    for replans, steps in ((["50:40"], 300), (["50:400", "40:300"], 200), (["50:400"], 50), (["x"], 300)):
        errs = validate(load_config(["+experiment=staircase", f"train.replans=[{','.join(replans)}]",
                                     f"train.steps={steps}"]), 1)
        assert errs == [f"train.replans={replans} must be STEP:STEPS entries in step order, 1 <= STEP < STEPS, "
                        f"each STEP below the next entry's STEPS (the last's below train.steps={steps}); "
                        "they are written by a time budget: take them from the run's config.yaml, or leave them "
                        "out"], errs
    errs = validate(load_config(["+experiment=staircase", "train.replans=[50:400]", "train.time_budget=60"]), 1)
    assert errs == ["train.replans and train.time_budget: the re-plans belong to a fixed step count; leave out "
                    "train.time_budget (or the re-plans)"]
    drop = load_config(["+experiment=staircase", "model.dropout=0.1", "model.attention=splash"]).model
    with pytest.raises(ConfigError, match="model.attention_dropout=0.1 needs model.attention=xla"):
        attention_backend(drop, "tpu")
    # auto picks the one backend with attention dropout
    drop_auto = load_config(["+experiment=staircase", "model.dropout=0.1", "model.compute_dtype=bfloat16"]).model
    assert attention_backend(drop_auto, "gpu").value == "xla"
    no_attn_drop = load_config(["+experiment=staircase", "model.dropout=0.1", "model.attention_dropout=0",
                                "model.compute_dtype=bfloat16"]).model
    assert attention_backend(no_attn_drop, "gpu").value == "cudnn"


def test_budget_arithmetic():
    assert [evaluations(n, 250) for n in (1, 250, 251, 750, 0)] == [1, 1, 2, 3, 0]
    assert evaluations(40, 0) == 1
    # 100 s, 0.2 s a step, 5 s an evaluation every 250 steps: 450 steps (90 s) + 2 evaluations
    assert steps_within(100.0, 0.2, 5.0, 250) == 450
    assert steps_within(100.0, 0.2, 0.0, 250) == 500
    assert steps_within(4.0, 0.2, 5.0, 250) == 0  # not even one step and its evaluation
    # from step 600 of a run: evaluations at 750 and at the end
    assert [evaluations(n, 250, 600) for n in (600, 700, 750, 751, 1000)] == [0, 1, 1, 2, 2]
    assert steps_within(30.0, 0.2, 5.0, 250, 600) == 125  # 25 s of steps + the final evaluation


def test_calibration_times_a_window_of_steps(monkeypatch):
    """calibrate times at least MIN_TIMED_STEPS steps and keeps going until MIN_TIMED_S seconds of
    them (at most MAX_TIMED_STEPS), on a fake clock; the steps then fill what is left."""
    import spmdgpt.training.budget as budget

    clock = [100.0]
    monkeypatch.setattr(budget.time, "perf_counter", lambda: clock[0])

    class State(NamedTuple):
        params: jax.Array

    def run(step_s):
        def train_step(state, x):
            clock[0] += step_s
            return State(state.params + 1), x

        def evaluate(params):
            clock[0] += 2.0
        return budget.calibrate(100.0, 99.0, 50, State(jnp.zeros(())), train_step, lambda i: (jnp.float32(i),),
                                evaluate)

    cal = run(0.25)  # 3 s of 0.25 s steps: 12 of them
    assert (cal.timed_steps, cal.step_s, cal.compile_s, cal.eval_s) == (12, 0.25, 0.0, 2.0)
    # started at 99: 1 s before, 0.25 (first step) + 3.5 (14 steps: the 12 timed ones end between
    # the ends of 13, and one more is sent before the last is waited for) + 4 (two evaluations)
    assert cal.elapsed_s == pytest.approx(8.75)
    # 91.25 s left: 309 steps (77.25 s) and 7 evaluations (14 s) fill it exactly
    assert cal.steps == steps_within(100.0 - 8.75, 0.25, 2.0, 50) == 309
    assert cal.evals == 7 and cal.predicted_s() == pytest.approx(100.0)
    assert cal.row()["predicted_s"] == pytest.approx(100.0) and cal.row()["timed_steps"] == 12
    assert run(1.0).timed_steps == budget.MIN_TIMED_STEPS == 8
    assert run(0.001).timed_steps == budget.MAX_TIMED_STEPS == 64


def test_time_budget_sets_the_steps_and_replans_when_the_machine_gets_busier(tmp_path, monkeypatch, capsys):
    """A budgeted run calibrates and plans the steps that fit; its steps three times slower after
    the calibration (a sleep in each batch: a busier machine), it still ends within its budget:
    it re-plans, records the re-plans and the new train.steps in config.yaml (time_budget null),
    the same command again resumes with those (no calibration), and that config alone, in a
    fresh run.dir, reproduces the run bitwise."""
    from conftest import read_jsonl

    import spmdgpt.loop as trainer
    from spmdgpt.config import load_run_config
    from spmdgpt.data import Batcher

    slow = []
    fit, batch = trainer.fit_budget, Batcher.train_batch

    def fit_then_slow_down(*args):
        cfg, cal = fit(*args)
        slow.append(2 * cal.step_s)
        return cfg, cal

    def slower_batch(self, i):
        if slow:
            time.sleep(slow[0])
        return batch(self, i)

    monkeypatch.setattr(trainer, "fit_budget", fit_then_slow_down)
    monkeypatch.setattr(Batcher, "train_batch", slower_batch)
    # (a constant rate after the warmup: a re-plan changes no program, so none compiles again mid-budget; the
    # squeezed schedule of a re-planned run is test_squeezed_schedule_after_replans')
    over = ["+experiment=staircase", "model.num_layers=1", "model.d_model=32", "model.num_heads=2",
            "optimizer.schedule=constant", "train.eval_every=0", "train.progress=false", "checkpoint.async_save=false",
            f"run.dir={tmp_path / 'a'}"]
    # (20 s: setting up, compilation included, took up to 12.6 s with staircase's own model on a loaded
    # 2-core box, 13.7 s on an idle AVX2-only EPYC with a cold compilation cache; a model of one narrow
    # layer sets up in less. With the cosine schedule 20 s ran past 1.25 x the budget on a slow box: the
    # re-planned step compiled again)
    budget_s = 20
    res = trainer.train(load_config([*over, f"train.time_budget={budget_s}"]), argv=["test"])
    rows = read_jsonl(tmp_path / "a" / "metrics.jsonl")
    e, = [r for r in rows if r.get("event") == "time_budget"]
    # the planned steps fill what the calibration left of the budget, to within one step (with
    # 10 ms of slack: the event's times are rounded, step_s to 10 us and the others to 1 ms)
    left = budget_s - e["elapsed_s"] - e["compile_s"]
    assert e["steps"] * e["step_s"] + e["eval_s"] <= left + 0.01 < (e["steps"] + 1) * e["step_s"] + e["eval_s"] + 0.02
    assert e["timed_steps"] >= 8
    plans = [r for r in rows if r.get("event") == "time_budget_replan"]
    used, = [r for r in rows if r.get("event") == "time_budget_used"]
    assert plans and plans[0]["planned"] == e["steps"] and res.step == plans[-1]["steps"] < e["steps"]
    assert used["step"] == res.step and used["predicted_s"] == e["predicted_s"]
    # (without the re-plans: about 2.5x the steps' share. Under the cosine schedule a re-planned step
    # compiled again and ran past the budget on a slow box, 25.3 s of 20 s on a loaded AVX2-only EPYC;
    # here no program changes at a re-plan)
    assert e["elapsed_s"] < used["used_s"] <= budget_s * 1.25
    saved = load_run_config(tmp_path / "a").train
    assert (saved.steps, saved.time_budget) == (res.step, None)
    assert saved.replans == [f"{p['step']}:{p['planned']}" for p in plans]
    err = capsys.readouterr().err
    assert f"train.steps={e['steps']} (recorded in config.yaml)" in err
    assert f"train.steps {plans[0]['planned']} -> {plans[0]['steps']} from step {plans[0]['step']} on" in err
    assert f"train.time_budget={budget_s} s: used {used['used_s']:.1f} s (predicted {e['predicted_s']:.1f} s)" in err
    slow.clear()
    again = trainer.train(load_config([*over, "train.time_budget=5"]), argv=["test"])  # another budget: ignored
    assert again.step == res.step and again.resumed_from == res.step
    assert len([r for r in read_jsonl(tmp_path / "a" / "metrics.jsonl") if r.get("event") == "time_budget"]) == 1
    rerun = trainer.train(load_config([*over[:-1], f"run.dir={tmp_path / 'b'}", f"train.steps={saved.steps}",
                                       f"train.replans=[{','.join(saved.replans)}]"]), argv=["test"])
    for a, b in zip(jax.tree.leaves(res.state), jax.tree.leaves(rerun.state), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    lrs = [[(r["step"], r["lr"]) for r in read_jsonl(tmp_path / d / "metrics.jsonl") if "lr" in r] for d in "ab"]
    assert lrs[0] == lrs[1] and lrs[0][-1][0] == res.step


def test_explicit_steps_turn_a_config_budget_off():
    budgeted = ["+experiment=staircase", "train.time_budget=100"]
    assert load_config(budgeted).train.time_budget == 100
    cfg = load_config([*budgeted[:1], "train.steps=7"])  # no budget anywhere: unchanged
    assert (cfg.train.steps, cfg.train.time_budget) == (7, None)
    from spmdgpt.config.load import steps_over_budget

    cfg = load_config(budgeted)
    assert steps_over_budget(cfg, ["train.steps=7"]).train.time_budget is None  # as if a file set it
    assert steps_over_budget(cfg, ["train.steps=7", "train.time_budget=100"]).train.time_budget == 100
    assert steps_over_budget(cfg, ["train.seed=3"]).train.time_budget == 100
