"""TrainState, train_step and the loop.

    config ─► mesh + rules ─► data (token cache ─► Batcher) ─► state: fresh, or restored from the
           newest complete checkpoint of run.dir (any layout), or params from checkpoint.init_from
           ─► loop: train_step (jit, donated state), metrics read one step late, fixed-batch
              validation every train.eval_every steps, async checkpoints every
              checkpoint.every steps, at the end, and on SIGTERM/SIGINT
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from spmdgpt.config import Config, ConfigError, validate
from spmdgpt.data import Dataset, load_dataset
from spmdgpt.data.loader import Batcher
from spmdgpt.data.tokenizers import save_tokenizer
from spmdgpt.evaluate import LossEvaluator, RolloutEvaluator
from spmdgpt.flops import device_peak_flops, flops_per_token, mfu
from spmdgpt.loggers import Console, JsonlLogger
from spmdgpt.model import init_params, loss_fn, num_params, param_info
from spmdgpt.model.attention import attention_backend
from spmdgpt.model.transformer import Params
from spmdgpt.optim import build_optimizer, initial_params, learning_rate_schedule
from spmdgpt.rundir import default_run_dir, git_info, prepare_run_dir, truncate_jsonl
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
    params = initial_params(cfg.optimizer, param_info(cfg.model), params)
    opt_state = jax.jit(optimizer.init)(params)
    return TrainState(jnp.zeros((), jnp.int32), params, opt_state)


@dataclass
class TrainResult:
    run_dir: Path
    state: TrainState
    step: int  # optimizer steps completed
    final_loss: float
    val_loss: Optional[float]
    preempted: bool = False  # stopped by SIGTERM/SIGINT (a checkpoint was written)
    resumed_from: Optional[int] = None


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


def _has_checkpoints(run_dir: Path) -> bool:
    d = run_dir / "checkpoints"
    return d.is_dir() and any(p.name.isdigit() for p in d.iterdir())


def train(cfg: Config, argv: Optional[list] = None) -> TrainResult:
    """Validate, set up (or resume) and run one training job.

    Raises ConfigError, before writing anything, for bad config, data or checkpoints.
    """
    errs = validate(cfg, jax.device_count())
    if errs:
        raise ConfigError(errs)
    attention_backend(cfg.model)  # a backend this platform can run (else a ConfigError)
    data = load_dataset(cfg.data)
    check_data(cfg, data)
    run_dir = Path(cfg.run.dir) if cfg.run.dir else default_run_dir(cfg)
    has_checkpoints = _has_checkpoints(run_dir)
    resume = cfg.checkpoint.enabled and has_checkpoints
    if (run_dir / "metrics.jsonl").exists() and not resume:
        why = ("resuming it needs checkpoint.enabled=true" if has_checkpoints
               else "it has no checkpoint to resume from")
        raise ConfigError([f"run.dir={run_dir} already holds a run (metrics.jsonl); {why}; choose a new run.dir"])

    mesh = make_mesh(cfg.mesh)
    rules = Rules(mesh, cfg.sharding)
    is_main = jax.process_index() == 0
    with jax.set_mesh(mesh):
        optimizer = build_optimizer(cfg.optimizer, param_info(cfg.model), cfg.train.steps)
        state = init_state(cfg, rules, optimizer)
        resumed_from = None
        if resume:  # (implies checkpoint.enabled)
            state, resumed_from = _resume(cfg, run_dir, state)
        elif cfg.checkpoint.init_from:
            state = _init_from(cfg, state, optimizer)
        ckpt = None
        if cfg.checkpoint.enabled:
            from spmdgpt.checkpoint import CheckpointManager

            ckpt = CheckpointManager(run_dir, cfg.checkpoint)  # creates checkpoints/ on first save

        batch_sharding = rules.batch_sharding()
        batcher = Batcher(data.train, cfg.data.seq_len, cfg.data.batch_size, cfg.train.seed, batch_sharding)
        val_batcher = Batcher(data.val, cfg.data.seq_len, cfg.data.batch_size, cfg.train.seed, batch_sharding)
        evaluator = LossEvaluator(cfg.model, rules, val_batcher, cfg.train.eval_batches)
        rollouts = None
        if cfg.train.rollout_tokens > 0:
            samples = run_dir / "samples.jsonl" if is_main else None
            rollouts = RolloutEvaluator(cfg, rules, data.tokenizer, data.val, samples)
        train_step = make_train_step(cfg, rules, optimizer)

        if is_main:
            if resumed_from is not None:
                truncate_jsonl(run_dir / "metrics.jsonl", resumed_from)
                truncate_jsonl(run_dir / "samples.jsonl", resumed_from)
            prepare_run_dir(cfg, run_dir, list(argv if argv is not None else sys.argv), resumed_from)
            save_tokenizer(data.tokenizer, run_dir / "tokenizer.json")
        loop = _Loop(cfg, run_dir, train_step, batcher, evaluator, rollouts, data, ckpt, is_main)
        return loop.run(state, resumed_from)


def _resume(cfg: Config, run_dir: Path, fresh: TrainState):
    """The newest loadable checkpoint of run_dir, resharded into the current layout."""
    from spmdgpt.checkpoint import CheckpointManager, restore_latest, set_aside, shape_mismatches

    reader = CheckpointManager.reader(run_dir)
    try:
        newest_meta = reader.read_meta(reader.steps()[-1])
    except Exception:  # a damaged newest checkpoint: restore_latest reports and skips it
        newest_meta = None
    if newest_meta is not None:
        bad = shape_mismatches(newest_meta.get("config", {}).get("model", {}), cfg)
        if bad:
            raise ConfigError(
                [
                    f"run.dir={run_dir} holds checkpoints of another model: {', '.join(bad)}; "
                    "resume with the run's model config or choose a new run.dir"
                ]
            )
    found = restore_latest(reader, fresh)
    if found is None:  # step folders, but none that orbax finished writing
        raise ConfigError(
            [f"run.dir={run_dir}: its checkpoints/ folder holds no complete checkpoint; move it "
             "away to start afresh, or choose a new run.dir"]
        )
    step, params, opt_state, meta, skipped = found
    if jax.process_index() == 0:
        set_aside(run_dir, skipped)
    return TrainState(jnp.asarray(step, jnp.int32), params, opt_state), step


def _init_from(cfg: Config, fresh: TrainState, optimizer) -> TrainState:
    from spmdgpt.checkpoint import load_init_params

    params, _ = load_init_params(cfg, fresh)
    params = initial_params(cfg.optimizer, param_info(cfg.model), params)
    return TrainState(fresh.step, params, jax.jit(optimizer.init)(params))


class _Loop:
    """The training loop proper: steps, one-step-late metrics, evaluation, checkpoints, signals."""

    def __init__(self, cfg, run_dir, train_step, batcher, evaluator, rollouts, data, ckpt, is_main):
        self.cfg, self.run_dir, self.data = cfg, run_dir, data
        self.train_step, self.batcher, self.evaluator, self.ckpt = train_step, batcher, evaluator, ckpt
        self.rollouts = rollouts
        self.is_main = is_main
        t = cfg.train
        self.tokens_per_step = cfg.data.batch_size * cfg.data.seq_len
        self.fpt = flops_per_token(cfg.model, cfg.data.seq_len)
        devices = jax.devices()
        n_cpu = sum(d.platform == "cpu" for d in devices)
        peaks = [
            t.peak_flops or device_peak_flops(d, cfg.model.compute_dtype, t.cpu_peak_flops, n_cpu)
            for d in devices
        ]
        self.total_peak = None if any(p is None for p in peaks) else sum(peaks)
        self.git_sha = git_info()["sha"] if is_main else None
        self.stop_signal: Optional[int] = None

    # -- signals: finish the current step, checkpoint, flush, exit cleanly
    def _on_signal(self, signum, frame):
        if self.stop_signal is not None:  # a second signal: stop now
            raise KeyboardInterrupt
        self.stop_signal = signum

    def run(self, state: TrainState, resumed_from: Optional[int]) -> TrainResult:
        cfg, t = self.cfg, self.cfg.train
        self.metrics_log = JsonlLogger(self.run_dir / "metrics.jsonl") if self.is_main else None
        self.console = Console(t.steps, int(state.step), t.progress, t.log_every, active=self.is_main)
        self.say = self.console.write
        data = self.data
        self.say(
            f"run {self.run_dir} | {num_params(cfg.model) / 1e6:.2f}M params | data {data.source} "
            f"({len(data.train):,} train / {len(data.val):,} val tokens, {data.tokenizer.kind} "
            f"vocab {data.tokenizer.vocab_size}) | mesh {dict(jax.sharding.get_abstract_mesh().shape)} "
            f"sharding {cfg.sharding.name} | attention "
            f"{attention_backend(cfg.model).value} | {self.fpt / 1e6:.1f} MFLOP/token"
        )
        if resumed_from is not None:
            self.say(f"resumed from the checkpoint at step {resumed_from}")
        if int(state.step) >= t.steps:
            self.say(f"nothing to do: the run already has {int(state.step)} >= train.steps={t.steps} steps")
        self.window_t0, self.window_steps = None, 0
        self.last_loss, self.val_loss = float("nan"), None
        self.state = state
        # Signal handlers can only be installed from the main thread (train() may run elsewhere,
        # e.g. in a notebook worker; there the process's own handlers stay in charge).
        on_main = threading.current_thread() is threading.main_thread()
        signals = (signal.SIGTERM, signal.SIGINT) if on_main else ()
        previous = {s: signal.signal(s, self._on_signal) for s in signals}
        pending = None
        step = int(state.step)
        try:
            for i in range(int(state.step), t.steps):
                step = i + 1  # optimizer steps completed after this update
                inputs, targets = self.batcher.train_batch(i)
                self.state, metrics = self.train_step(self.state, inputs, targets)
                if pending is not None:
                    self._report(*pending)
                pending = (step, metrics)
                eval_now = step == t.steps or (t.eval_every and step % t.eval_every == 0)
                save_now = self.ckpt is not None and (
                    step == t.steps or (cfg.checkpoint.every and step % cfg.checkpoint.every == 0)
                )
                if eval_now or save_now or self.stop_signal is not None:
                    # metrics rows reach the log before the checkpoint that covers them
                    self._report(*pending)
                    pending = None
                if eval_now:
                    self._evaluate(step)
                if save_now or (self.stop_signal is not None and self.ckpt is not None):
                    self.ckpt.save(step, self.state, self._meta(step))
                if self.stop_signal is not None:
                    break
            if pending is not None:
                self._report(*pending)
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
            self.console.close()
            if self.ckpt is not None:
                self.ckpt.close()  # waits for the last asynchronous save
            if self.metrics_log:
                self.metrics_log.close()
        preempted = self.stop_signal is not None
        if preempted:
            self.say(f"signal {signal.Signals(self.stop_signal).name}: stopped after step {step}")
        else:
            val = "-" if self.val_loss is None else f"{self.val_loss:.4f}"
            self.say(f"done: {t.steps} steps, final train loss {self.last_loss:.4f}, val/loss {val} -> {self.run_dir}")
        return TrainResult(self.run_dir, self.state, step, self.last_loss, self.val_loss, preempted, resumed_from)

    def _meta(self, step: int) -> dict:
        from spmdgpt.checkpoint import checkpoint_meta

        return checkpoint_meta(self.cfg, self.git_sha, step)

    def _report(self, step: int, metrics) -> None:
        """Fetch one step's metrics (blocks until it is done; the next step is already queued)."""
        t = self.cfg.train
        m = jax.device_get(metrics)
        now = time.perf_counter()
        self.last_loss = float(m["loss"])
        tps = mfu_v = None
        if self.window_t0 is None:  # the first step includes compilation: start the clock after it
            self.window_t0, self.window_steps = now, 0
        else:
            self.window_steps += 1
            tps = self.window_steps * self.tokens_per_step / (now - self.window_t0)
            mfu_v = mfu(tps, self.fpt, self.total_peak)
        if step % t.log_every == 0 or step == t.steps:
            if self.metrics_log:
                self.metrics_log.log(
                    {
                        "step": step,
                        "loss": self.last_loss,
                        "lr": float(m["lr"]),
                        "grad_norm": float(m["grad_norm"]),
                        "tokens_per_sec": tps,  # mean over the steps since the last row
                        "mfu": mfu_v,
                    }
                )
            self.window_t0, self.window_steps = now, 0
        self.console.step(step, self.last_loss, tps, mfu_v)

    def _evaluate(self, step: int) -> None:
        self.val_loss = self.evaluator(self.state.params)
        if self.metrics_log:
            self.metrics_log.log({"step": step, "val/loss": self.val_loss})
        self.say(f"step {step}: val/loss {self.val_loss:.4f}")
        if self.rollouts is not None:
            prompt, completion = self.rollouts(self.state.params, step)[0]
            self.say(f"sample at step {step}:\n{prompt}\033[1m{completion}\033[0m\n" if sys.stderr.isatty()
                     else f"sample at step {step}:\n{prompt}{completion}\n")
        self.window_t0, self.window_steps = time.perf_counter(), 0  # evaluation is not training
