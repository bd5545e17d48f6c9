"""The training loop; `train(cfg)` runs one job, top to bottom (the step itself: training/step.py):

    validate config ─► the kind of run (spmdgpt.kinds: text, or GRPO's prompts) ─► its data
      (token stores, prepared once; prompts) ─► mesh + rules ─► optimizer ─► starting state
      (state.start: fresh | resumed from run.dir's newest good checkpoint, on any layout |
      parameters from checkpoint.init_from) ─► the kind's parts (its batcher, evaluation hooks)
      ─► its preflight ─► checkpoint manager, run.dir files (config, metadata, tokenizer)
      ─► loop: train_step (jit, donated state), metrics read one step late; around the steps,
         the run's hooks (spmdgpt.training.hooks): the divergence guard, fixed-batch validation every
         train.eval_every steps, async checkpoints every checkpoint.every steps, at the end, and
         on SIGTERM/SIGINT, statistics, profiling; with train.time_budget, the pace checked and
         the steps left re-planned when the run falls behind (budget.Pacer)
"""

from __future__ import annotations

import copy
import signal
import sys
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import (
    Config,
    ConfigError,
    Parametrization,
    compress_kinds,
    freeze,
    profile_range,
    validate,
)
from spmdgpt.data import (
    Batcher,
    Corpus,
    save_tokenizer,
)
from spmdgpt.hf import with_hf_model
from spmdgpt.kinds import TEXT, run_kind
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import attention_backend, num_params, param_info
from spmdgpt.model.lora import attach, num_adapter_params
from spmdgpt.plan.flops import device_peak_flops, flops_per_token, mfu
from spmdgpt.plan.preflight import state_refusal
from spmdgpt.run.files import WriteFailed, os_reason
from spmdgpt.run.loggers import Console, JsonlLogger
from spmdgpt.run.rundir import default_run_dir, git_info, prepare_run_dir, run_lock
from spmdgpt.run.trackers import RunLog, check_loggers, open_trackers
from spmdgpt.scaling.size import size_line, with_token_budget
from spmdgpt.training.budget import Pacer, fit_budget, recorded_steps
from spmdgpt.training.hooks import Diverged, training_hooks
from spmdgpt.training.objectives import objective_of
from spmdgpt.training.runkind import RunKind
from spmdgpt.training.state import (
    Start,
    StartKind,
    TrainState,
    check_tokenizer,
    has_checkpoints,
    start,
    starting_params,
)
from spmdgpt.training.stats import make_stats_fn
from spmdgpt.training.step import make_train_step, optimizer_of


class TrainingDiverged(RuntimeError):
    """A non-finite loss or gradient norm (or train.skip_nonfinite skipped steps in a row)."""


@dataclass
class TrainResult:
    run_dir: Path
    state: TrainState
    step: int  # optimizer steps completed
    final_loss: float
    val_loss: Optional[float]
    preempted: bool = False  # stopped by SIGTERM/SIGINT (a checkpoint was written)
    resumed_from: Optional[int] = None


def train(cfg: Config, argv: Optional[list] = None) -> TrainResult:
    """Validate, set up (or resume) and run one training job: the steps of the module docstring.

    Raises ConfigError, before writing anything, for bad config, data or checkpoints.
    """
    started = time.perf_counter()  # (train.time_budget counts from here)
    run_dir = Path(cfg.run.dir) if cfg.run.dir else default_run_dir(cfg)
    cfg = recorded_steps(cfg, run_dir)  # train.time_budget of a run that already chose its steps
    if not has_checkpoints(run_dir):  # (a resumed run's config.yaml already holds the model)
        cfg, changes = with_hf_model(cfg)  # checkpoint.init_from=hf:DIR: that model's config
        if changes and jax.process_index() == 0:
            print(f"checkpoint.init_from={cfg.checkpoint.init_from}: the model is the checkpoint's: "
                  f"{' '.join(changes)}", file=sys.stderr)
    errs = validate(cfg, jax.device_count()) + check_loggers(cfg.train.loggers)
    if errs:
        raise ConfigError(errs)
    cfg = with_token_budget(cfg)  # train.tokens_per_param: the steps, from the model's parameters
    line = size_line(cfg)  # (model.size / tokens_per_param: what they set)
    if line and jax.process_index() == 0:
        print(line, flush=True)
    cfg = freeze(copy.deepcopy(cfg))  # the run's own config from here on (the caller's stays as it was)
    attention_backend(cfg.model)  # a backend this platform can run (else a ConfigError)
    kind = run_kind(cfg)  # what the run loads, how its batches are made, what it evaluates (spmdgpt.kinds)
    data = kind.load(cfg, partial(check_tokenizer, cfg))
    mesh = make_mesh(cfg.mesh, kind.devices(cfg, jax.devices()))  # (GRPO's rl.rollout_devices: not all of them)
    rules = Rules(mesh, cfg.sharding, cfg.model)
    is_main = jax.process_index() == 0
    with run_lock(run_dir) as lock, jax.set_mesh(mesh):  # a second run on run.dir stops here (exit 2)
        batcher = kind.batcher(cfg, rules, data, is_main)  # (its refusals come before the start touches run.dir)
        optimizer = optimizer_of(cfg)
        refusal = state_refusal(cfg, rules, optimizer)  # (a state that cannot fit: refused before it is built)
        if refusal:
            raise ConfigError([refusal])
        begin = start(cfg, run_dir, rules, optimizer)  # fresh | resumed | init_from | restarted
        resumed_from = begin.step if begin.kind == StartKind.resumed else None
        # LoRA: the frozen model under the adapters (checkpoint.init_from's parameters)
        base = starting_params(cfg, rules) if cfg.lora.rank else None
        reference = None  # a frozen reference (DPO's; GRPO's KL term's): the parameters the run started from
        if kind.keeps_reference(cfg):
            reference = (base if base is not None else starting_params(cfg, rules) if begin.kind == StartKind.resumed
                         else jax.tree.map(jnp.copy, begin.state.params))
        samples = run_dir / "samples.jsonl" if is_main else None
        parts = kind.parts(cfg, rules, data, batcher, samples, reference)
        evaluator, rollouts = parts.evaluator, parts.sampler
        # every program of the run compiled now, and refused here if one does not fit a device
        # (a run that has already trained its steps runs none)
        programs = (kind.preflight(cfg, rules, optimizer, begin, parts, base, reference)
                    if begin.step < cfg.train.steps else None)
        calibration = None
        if cfg.train.time_budget is not None:  # a fresh run: time a few steps, then size the run
            cfg, calibration = fit_budget(cfg, programs["train_step"], begin.state, batcher, evaluator, rollouts,
                                          started)
            # (the learning-rate schedule spans the chosen steps: the step and the statistics, which
            # hold it, compile again at their first call; the evaluation and rollouts stay)
            programs = None
        ckpt = None
        if cfg.checkpoint.enabled:
            from spmdgpt.training.checkpoint import CheckpointManager

            ckpt = CheckpointManager(run_dir, cfg.checkpoint)  # creates checkpoints/ on first save
        lock.committed = True  # from here on the run writes into run_dir
        if is_main:
            try:
                prepare_run_dir(cfg, run_dir, list(argv if argv is not None else sys.argv), resumed_from)
                save_tokenizer(data.tokenizer, run_dir / "tokenizer.json")
            except OSError as e:
                raise WriteFailed(f"writing into {run_dir} failed ({os_reason(e)})") from None
        loop = _Loop(cfg, run_dir, begin, rules, batcher, parts.evaluation, data, ckpt, is_main, calibration,
                     started, reference, base, programs, kind)
        kind.bind(loop, parts, reference)  # (GRPO: each step's batch sampled from the loop's parameters)
        if calibration is not None:
            loop.say(f"train.time_budget={calibration.budget_s:g} s: {calibration.elapsed_s:.1f} s used so far, "
                     f"{calibration.step_s * 1e3:.1f} ms/step (median of {calibration.timed_steps}), "
                     f"{calibration.eval_s:.1f} s/evaluation -> train.steps={calibration.steps} "
                     "(recorded in config.yaml)")
            if loop.metrics_log:
                loop.metrics_log.log(calibration.row())
        return loop.run()


class _Loop:
    """The training loop proper: steps, one-step-late metrics, evaluation, checkpoints, signals.

    All of its state is set up here, in __init__; run() only steps."""

    def __init__(self, cfg: Config, run_dir: Path, begin: Start, rules: Rules, batcher: Batcher,
                 evaluation: list, data: Corpus,
                 ckpt, is_main: bool, calibration=None, started: float = 0.0, reference=None, base=None,
                 programs: Optional[dict] = None, run_kind: RunKind = TEXT):
        self.cfg, self.run_dir, self.data, self.is_main, self.rules = cfg, run_dir, data, is_main, rules
        self.run_kind = run_kind  # (spmdgpt.kinds: what the hooks ask of the kind of run)
        self.reference = reference  # (the frozen reference: DPO's step reads it)
        self.base = base  # (LoRA: the frozen model; the state holds the adapters)
        self.calibration, self.started = calibration, started  # train.time_budget's choice, train's start
        # train.time_budget: the pace is checked every few steps (the same steps on every process)
        self.pacer = None if calibration is None else Pacer(calibration, started, cfg.train.eval_every)
        self.step_functions(begin.step, programs)
        self.batcher, self.ckpt = batcher, ckpt
        self.state, self.kind = begin.state, begin.kind
        self.reported = begin.step  # the last step whose metrics are on the host
        self.resumed_from = begin.step if begin.kind == StartKind.resumed else None
        t = cfg.train
        self.tokens_per_step = cfg.data.batch_size * cfg.data.seq_len
        self.masked = any(p is not None for p in batcher.packed)  # (chat data: log the targets learned)
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
        # the throughput window: its start (after the first step) and the steps done on the devices then
        self.window_t0: Optional[float] = None
        self.window_done = 0
        self.last_loss, self.val_loss, self.val_reward = float("nan"), None, None
        self.metrics_log = None
        if is_main:  # metrics.jsonl, then the trackers of train.loggers
            trackers = open_trackers(cfg, run_dir, self.resumed_from)
            self.metrics_log = RunLog(JsonlLogger(run_dir / "metrics.jsonl"), trackers)
        self.console = Console(t.steps, begin.step, t.progress, t.log_every,
                               active=is_main and "console" in t.loggers)
        self.say = self.console.write
        profile = profile_range(t.profile, t.steps) if t.profile else None
        self.hooks = training_hooks(self, evaluation, ckpt, profile, self.pacer, calibration)

    def _header(self) -> None:
        cfg, data = self.cfg, self.data
        self.say(
            f"run {self.run_dir} | {num_params(cfg.model) / 1e6:.2f}M params"
            + (f" ({num_adapter_params(param_info(cfg.model), cfg.lora) / 1e6:.3f}M trained: LoRA rank {cfg.lora.rank})"
               if cfg.lora.rank else "") + f" | data {data.source} "
            f"({data.train_tokens:,} train / {data.val_tokens:,} val tokens, {data.tokenizer.kind} "
            f"vocab {data.tokenizer.vocab_size}) | mesh {dict(jax.sharding.get_abstract_mesh().shape)} "
            f"sharding {cfg.sharding.name} | attention "
            f"{attention_backend(cfg.model).value} | {self.fpt / 1e6:.1f} MFLOP/token"
            + ("" if cfg.model.parametrization == Parametrization.standard else
               f" | {cfg.model.parametrization.value} against base width {cfg.model.base_width or cfg.model.d_model}"
               + (f", depth {cfg.model.base_depth or cfg.model.num_layers}"
                  if cfg.model.parametrization == Parametrization.completep else ""))
            + ("" if cfg.model.matmul_dtype.value != "fp8" else " | FP8 matmuls" + (
                " (emulated on the CPU: slower than bf16, for checking numerics)"
                if jax.devices()[0].platform == "cpu" else ""))
        )
        if self.resumed_from is not None:
            self.say(f"resumed from the checkpoint at step {self.resumed_from}")
        if self.kind == StartKind.restarted:
            self.say("restarted from step 0: the run stopped before its first checkpoint")
        if self.kind == StartKind.init_from:
            self.say(f"initialised from checkpoint.init_from={self.cfg.checkpoint.init_from}: its parameters ("
                     + ("the folder's weights" if self.cfg.checkpoint.init_from.startswith("hf:") else
                        "its newest checkpoint's") + "), a fresh optimizer state, from step 0")
        if int(self.state.step) >= self.cfg.train.steps:
            self.say(f"nothing to do: the run already has {int(self.state.step)} >= "
                     f"train.steps={self.cfg.train.steps} steps")

    # -- signals: finish the current step, checkpoint, flush, exit cleanly
    def _on_signal(self, signum, frame):
        if self.stop_signal is not None:  # a second signal: stop now
            raise KeyboardInterrupt
        self.stop_signal = signum

    def run(self) -> TrainResult:
        self._header()
        # Signal handlers can only be installed from the main thread (train() may run elsewhere,
        # e.g. in a notebook worker; there the process's own handlers stay in charge).
        on_main = threading.current_thread() is threading.main_thread()
        signals = (signal.SIGTERM, signal.SIGINT) if on_main else ()
        previous = {s: signal.signal(s, self._on_signal) for s in signals}
        pending, stopped = None, None
        step = first = int(self.state.step)
        try:
            while step < self.cfg.train.steps:  # (a time budget's re-plan may lower train.steps)
                i, step = step, step + 1  # (step: optimizer steps completed after this update)
                batch = self.batcher.train_batch(i)
                for hook in self.hooks:  # (statistics: from the state before the step, which it donates)
                    hook.before_step(self, step, batch)
                t0 = time.perf_counter()
                self.state, metrics = self.train_step(self.state, *batch)
                if self.pacer is not None and i == self.compiled_at:  # a new step function's first call
                    self.pacer.compiled(time.perf_counter() - t0)
                if pending is not None:
                    self._report(*pending, ahead=metrics)
                pending = (step, metrics)
                for hook in self.hooks:
                    hook.after_step(self, step)
                if any(hook.flush(self, step) for hook in self.hooks) or self.stop_signal is not None:
                    # metrics rows reach the log before the evaluation and the checkpoint that follow
                    self._report(*pending)
                    pending = None
                for hook in self.hooks:  # (each acts if it flushed; a checkpoint also on a signal that came meanwhile)
                    hook.at_flush(self, step)
                if self.stop_signal is not None:
                    break
                for hook in self.hooks:
                    hook.after(self, step)
            if pending is not None:
                self._report(*pending)
            if self.stop_signal is None:
                for hook in self.hooks:  # (the time budget's wall time against its prediction)
                    hook.finish(self)
        except (Diverged, WriteFailed) as e:
            stopped = e
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
            for hook in self.hooks:  # (the profiler's trace stopped; the last checkpoint waited for)
                try:
                    hook.close(self)
                except WriteFailed as e:
                    stopped = stopped or e
            self.console.close()
            if self.metrics_log:
                self.metrics_log.close()
        if isinstance(stopped, Diverged):
            raise TrainingDiverged(self._diverged_message(*stopped.args)) from None
        if isinstance(stopped, WriteFailed):
            newest = self._newest_step()
            keep = "no checkpoint was written" if newest is None else f"the newest complete checkpoint is step {newest}"
            raise WriteFailed(f"{stopped}; {keep}; free space (or fix the filesystem)", self.run_dir) from None
        t = self.cfg.train
        preempted = self.stop_signal is not None
        if preempted:
            self.say(f"signal {signal.Signals(self.stop_signal).name}: stopped after step {step}")
        elif first == t.steps:  # (no step ran: the run had already finished)
            self.say(f"done: {self.run_dir} had already trained its {t.steps} steps; nothing to do (spmdgpt eval "
                     f"run.dir={self.run_dir} evaluates it)")
        else:
            vals = ([] if self.val_loss is None else [f"val/loss {self.val_loss:.4f}"]) + (
                [] if self.val_reward is None else [f"val/reward {self.val_reward:.4f}"])
            what = ", ".join(vals) or "val/loss -"
            self.say(f"done: {t.steps} steps, final train loss {self.last_loss:.4f}, {what} -> {self.run_dir}")
        return TrainResult(self.run_dir, self.state, step, self.last_loss, self.val_loss, preempted,
                           self.resumed_from)

    def step_functions(self, at: int, programs: Optional[dict] = None) -> None:
        """The step (and train.stats_every's statistics, spmdgpt.training.stats) for self.cfg's optimizer:
        the executables `preflight` compiled, or (a time budget's re-plan) jitted functions that
        their call after step `at` compiles."""
        self.compiled_at = at
        if programs is not None:
            self.train_step, self.stats_fn = programs["train_step"], programs.get("statistics")
            return
        optimizer = optimizer_of(self.cfg)
        reference = self.reference if objective_of(self.cfg, self.rules).reference else None  # (DPO's; not GRPO's)
        self.train_step = make_train_step(self.cfg, self.rules, optimizer, reference, self.base,
                                          self.data.tokenizer.vocab_size)
        self.stats_fn = make_stats_fn(self.cfg, self.rules, optimizer) if self.cfg.train.stats_every else None

    def paused(self, fn, *args, evaluation: bool = False) -> None:
        """fn(*args), its time left out of the time budget's pace (an evaluation's also its cost)."""
        t0 = time.perf_counter()
        fn(*args)
        if self.pacer is not None:
            self.pacer.pause(time.perf_counter() - t0, evaluation)

    def _epochs(self, step: int) -> dict:
        """Epochs completed: `epoch` for one training dataset, `epoch/NAME` for a mixture."""
        ep = self.batcher.epochs(step)
        return {"epoch": next(iter(ep.values()))} if len(ep) == 1 else {f"epoch/{n}": v for n, v in ep.items()}

    def checkpoint_meta(self, step: int) -> dict:
        from spmdgpt.training.checkpoint import checkpoint_meta

        return checkpoint_meta(self.cfg, self.git_sha, step)

    def _newest_step(self) -> Optional[int]:
        """The newest complete checkpoint's step (after the manager has closed), or None."""
        from spmdgpt.training.checkpoint import CheckpointManager

        steps = CheckpointManager.reader(self.run_dir).steps() if self.ckpt is not None else []
        return steps[-1] if steps else None

    def _diverged_message(self, step: int, why: str) -> str:
        newest = self._newest_step()
        keep = ("no checkpoint was written" if newest is None else
                f"the newest checkpoint, step {newest}, predates it and a rerun resumes from it")
        fix = "lower optimizer.lr, raise optimizer.warmup_steps or set optimizer.grad_clip"
        if not self.cfg.train.skip_nonfinite:
            fix += ", or let train.skip_nonfinite=N skip such steps"
        m = self.cfg.model
        weights = {"model.z_loss": m.z_loss, "model.mtp_weight": m.mtp_weight if m.mtp_depth else 0.0,
                   "model.moe.load_balance_loss": m.moe.load_balance_loss if m.moe.num_experts else 0.0,
                   "model.moe.router_z_loss": m.moe.router_z_loss if m.moe.num_experts else 0.0,
                   "model.mla.index_kl": m.mla.index_kl if m.mla.kv_rank and m.mla.index_heads else 0.0,
                   "model.csa.index_kl": m.csa.index_kl if "C" in compress_kinds(m) else 0.0}
        heavy = [f"{name}={w:g}" for name, w in weights.items() if w > 100]  # (an auxiliary loss far over the
        # cross-entropy: the likelier cause)
        if heavy:
            fix = f"lower {', '.join(heavy)} (an auxiliary loss weighed far above the cross-entropy), or {fix}"
        return f"training diverged at step {step}: {why}; nothing was saved after it and {keep}; {fix}"

    def event(self, step: int, event: str, **fields) -> None:
        """A row {step, event, fields} in metrics.jsonl and a console line."""
        if self.metrics_log:
            self.metrics_log.log({"step": step, "event": event, **fields})
        self.say(f"step {step}: {event.replace('_', ' ')}" + "".join(f" | {k} {v:.4g}" if isinstance(v, float)
                                                                   else f" | {k} {v}" for k, v in fields.items()))

    def _report(self, step: int, metrics, ahead=None) -> None:
        """Fetch one step's metrics (blocks until it is done; `ahead`: the next step's, already
        queued, when it is). A row's tokens/s counts the steps the devices finished in its window:
        the reported step, and the one ahead of it when that is done too (a step call that returns
        only when its step has run: GPUs with microbatches, BENCHMARKS), so that rows are right
        whether the host runs a step ahead or not, also next to an evaluation."""
        t = self.cfg.train
        m = jax.device_get(metrics)
        now = time.perf_counter()
        self.reported = step  # (the steps up to here have run on the devices)
        done = step + (ahead is not None and all(a.is_ready() for a in jax.tree.leaves(ahead)))
        self.last_loss = float(m["loss"])
        tps = mfu_v = None
        if self.window_t0 is None:  # the first step includes compilation: start the clock after it
            self.window_t0, self.window_done = now, done
        elif done > self.window_done:
            tps = (done - self.window_done) * self.tokens_per_step / (now - self.window_t0)
            mfu_v = mfu(tps, self.fpt, self.total_peak)
        row = {
            "step": step,
            "loss": self.last_loss,
            "lr": float(m["lr"]),
            "grad_norm": float(m["grad_norm"]),
            **({"loss_tokens": int(m["tokens"])} if self.masked and "tokens" in m else {}),  # the targets counted
            **({"pairs": int(m["pairs"])} if "pairs" in m else {}),  # (DPO: the complete pairs of the step)
            # auxiliary losses; DPO's and GRPO's metrics
            **{k: float(v) for k, v in m.items() if k.startswith(("aux/", "dpo/", "rl/", "mtp/"))},
            "tokens_per_sec": tps,  # over the steps the devices finished since the last row (None: none)
            "mfu": mfu_v,
            **self._epochs(step),
        }
        for hook in self.hooks:  # (the divergence guard first: it may stop the run here)
            hook.reported(self, step, m, row)
        if step % t.log_every == 0 or step == t.steps:
            if self.metrics_log:
                self.metrics_log.log(row)
            if tps is not None:
                self.window_t0, self.window_done = now, done
        self.console.step(step, self.last_loss, tps, mfu_v)

    def model_params(self, trained=None):
        """The model's parameters now (LoRA: the base with the adapters attached); trained: these in
        place of the state's trained parameters."""
        trained = self.state.params if trained is None else trained
        if self.base is None:
            return trained
        return attach(param_info(self.cfg.model), self.cfg.lora, self.base, trained)

    def restart_window(self) -> None:
        """The throughput window starts again now (after work that is not training)."""
        self.window_t0, self.window_done = time.perf_counter(), self.reported  # (nothing in flight)
