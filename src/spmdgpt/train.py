"""TrainState, train_step and the loop.

    config ─► mesh + rules ─► data (token cache ─► Batcher) ─► params (created sharded)
           ─► optax chain ─► loop: train_step (jit, donated state), metrics read one step late,
              fixed-batch validation every train.eval_every steps and at the end
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from spmdgpt.config import Config, ConfigError, validate
from spmdgpt.data import Batcher, Dataset, load_dataset
from spmdgpt.data.tokenizers import save_tokenizer
from spmdgpt.evaluate import LossEvaluator
from spmdgpt.flops import device_peak_flops, flops_per_token, mfu
from spmdgpt.loggers import Console, JsonlLogger
from spmdgpt.model import init_params, loss_fn, num_params, param_info
from spmdgpt.model.transformer import Params
from spmdgpt.optim import build_optimizer, learning_rate_schedule
from spmdgpt.rundir import default_run_dir, prepare_run_dir
from spmdgpt.sharding import Rules, make_mesh


class TrainState(NamedTuple):
    step: jax.Array  # int32 scalar: optimizer steps taken
    params: Params
    opt_state: optax.OptState


def make_train_step(cfg: Config, rules: Rules, optimizer: optax.GradientTransformation):
    schedule = learning_rate_schedule(cfg.optimizer, cfg.train.steps)
    grad_fn = jax.value_and_grad(partial(loss_fn, cfg.model, rules))

    def train_step(state: TrainState, inputs: jax.Array, targets: jax.Array):
        loss, grads = grad_fn(state.params, inputs, targets)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics = {
            "loss": loss,
            "grad_norm": optax.tree.norm(grads),
            "lr": schedule(state.step),
        }
        return TrainState(state.step + 1, params, opt_state), metrics

    return jax.jit(train_step, donate_argnums=0)


def init_state(cfg: Config, rules: Rules, optimizer: optax.GradientTransformation) -> TrainState:
    params = init_params(cfg.model, jax.random.key(cfg.train.seed), rules)
    opt_state = jax.jit(optimizer.init)(params)
    return TrainState(jnp.zeros((), jnp.int32), params, opt_state)


@dataclass
class TrainResult:
    run_dir: Path
    state: TrainState
    final_loss: float
    val_loss: Optional[float]


def check_data(cfg: Config, data: Dataset) -> None:
    """Data-dependent checks, before anything is written."""
    errs = []
    if cfg.model.vocab_size < data.tokenizer.vocab_size:
        errs.append(
            f"model.vocab_size={cfg.model.vocab_size} is smaller than the tokenizer's vocabulary "
            f"({data.tokenizer.vocab_size}, {data.tokenizer.kind}); set model.vocab_size>="
            f"{data.tokenizer.vocab_size}"
        )
    for name, toks in (("train", data.train), ("validation", data.val)):
        if len(toks) < cfg.data.seq_len + 2:
            errs.append(
                f"data.seq_len={cfg.data.seq_len} is too long for the {name} split "
                f"({len(toks)} tokens); lower data.seq_len or use a larger corpus"
            )
    if errs:
        raise ConfigError(errs)


def train(cfg: Config, argv: Optional[list] = None) -> TrainResult:
    """Validate, set up and run one training job. Raises ConfigError before writing anything."""
    errs = validate(cfg, jax.device_count())
    if errs:
        raise ConfigError(errs)
    data = load_dataset(cfg.data)
    check_data(cfg, data)
    run_dir = Path(cfg.run.dir) if cfg.run.dir else default_run_dir(cfg)
    if (run_dir / "metrics.jsonl").exists():
        raise ConfigError(
            [f"run.dir={run_dir} already holds a run (metrics.jsonl); choose a new run.dir"]
        )

    mesh = make_mesh(cfg.mesh)
    rules = Rules(mesh, cfg.sharding)
    is_main = jax.process_index() == 0
    with jax.set_mesh(mesh):
        optimizer = build_optimizer(cfg.optimizer, param_info(cfg.model), cfg.train.steps)
        batch_sharding = rules.batch_sharding()
        batcher = Batcher(data.train, cfg.data.seq_len, cfg.data.batch_size, cfg.train.seed, batch_sharding)
        val_batcher = Batcher(data.val, cfg.data.seq_len, cfg.data.batch_size, cfg.train.seed, batch_sharding)
        evaluator = LossEvaluator(cfg.model, rules, val_batcher, cfg.train.eval_batches)
        state = init_state(cfg, rules, optimizer)
        train_step = make_train_step(cfg, rules, optimizer)

        if is_main:
            prepare_run_dir(cfg, run_dir, list(argv if argv is not None else sys.argv))
            save_tokenizer(data.tokenizer, run_dir / "tokenizer.json")
        return _loop(cfg, run_dir, state, train_step, batcher, evaluator, data, is_main)


def _loop(cfg, run_dir, state, train_step, batcher, evaluator, data, is_main) -> TrainResult:
    t = cfg.train
    tokens_per_step = cfg.data.batch_size * cfg.data.seq_len
    fpt = flops_per_token(cfg.model, cfg.data.seq_len)
    devices = jax.devices()
    n_cpu = sum(d.platform == "cpu" for d in devices)
    peaks = [
        t.peak_flops or device_peak_flops(d, cfg.model.compute_dtype, t.cpu_peak_flops, n_cpu)
        for d in devices
    ]
    total_peak = None if any(p is None for p in peaks) else sum(peaks)

    metrics_log = JsonlLogger(run_dir / "metrics.jsonl") if is_main else None
    console = Console(t.steps, int(state.step), t.progress and is_main, t.log_every)
    say = console.write if is_main else (lambda msg: None)
    say(
        f"run {run_dir} | {num_params(cfg.model) / 1e6:.2f}M params | data {data.source} "
        f"({len(data.train):,} train / {len(data.val):,} val tokens, {data.tokenizer.kind} "
        f"vocab {data.tokenizer.vocab_size}) | mesh {dict(jax.sharding.get_abstract_mesh().shape)} "
        f"sharding {cfg.sharding.name} | {fpt / 1e6:.1f} MFLOP/token"
    )

    window_t0 = None  # wall time when the first step's metrics arrived (compile excluded)
    window_steps = 0
    last_loss = float("nan")
    val_loss = None

    def report(step: int, metrics) -> None:
        """Fetch one step's metrics (blocks until it is done; the next step is already queued)."""
        nonlocal window_t0, window_steps, last_loss
        m = jax.device_get(metrics)
        now = time.perf_counter()
        last_loss = float(m["loss"])
        tps = mfu_v = None
        if window_t0 is None:  # the first step includes compilation: start the clock after it
            window_t0, window_steps = now, 0
        else:
            window_steps += 1
            tps = window_steps * tokens_per_step / (now - window_t0)
            mfu_v = mfu(tps, fpt, total_peak)
        if step % t.log_every == 0 or step == t.steps:
            if metrics_log:
                metrics_log.log(
                    {
                        "step": step,
                        "loss": last_loss,
                        "lr": float(m["lr"]),
                        "grad_norm": float(m["grad_norm"]),
                        "tokens_per_sec": tps,  # mean over the steps since the last row
                        "mfu": mfu_v,
                    }
                )
            window_t0, window_steps = now, 0
        console.step(step, last_loss, tps, mfu_v)

    def run_eval(step: int) -> None:
        nonlocal val_loss, window_t0, window_steps
        val_loss = evaluator(state.params)
        if metrics_log:
            metrics_log.log({"step": step, "val/loss": val_loss})
        say(f"step {step}: val/loss {val_loss:.4f}")
        window_t0, window_steps = time.perf_counter(), 0  # evaluation time is not training time

    pending = None
    try:
        for i in range(int(state.step), t.steps):
            step = i + 1  # optimizer steps completed after this update
            inputs, targets = batcher.train_batch(i)
            state, metrics = train_step(state, inputs, targets)
            if pending is not None:
                report(*pending)
            pending = (step, metrics)
            if step == t.steps or (t.eval_every and step % t.eval_every == 0):
                report(*pending)
                pending = None
                run_eval(step)
        if pending is not None:
            report(*pending)
    finally:
        console.close()
        if metrics_log:
            metrics_log.close()
    say(f"done: {t.steps} steps, final train loss {last_loss:.4f}, val/loss {val_loss:.4f} -> {run_dir}")
    return TrainResult(run_dir, state, last_loss, val_loss)
