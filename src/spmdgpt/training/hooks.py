"""What the training loop does around its steps, as hooks (spmdgpt.loop's `_Loop` runs a list of
them): the divergence guard, profiling, model statistics, evaluation with rollouts, checkpoints,
the time budget's pace.

A hook implements any of these (the loop calls them in list order; `loop` is the `_Loop`, whose
state, config, logs and console the hooks read and write):

    before_step(loop, step, batch)   before step `step` runs (the state it will donate still alive)
    after_step(loop, step)           once the step is dispatched (the previous metrics reported)
    reported(loop, step, m, row)     a step's metrics reached the host (m: its metrics; row: the
                                     metrics.jsonl row, which a hook may add fields to)
    flush(loop, step) -> bool        whether the step's metrics must be on the host before at_flush
    at_flush(loop, step)             after that: evaluation, then checkpoints (list order)
    after(loop, step)                last (the pace; not after a signal's checkpoint)
    finish(loop)                     once the steps are done (not after a signal or an error)
    close(loop)                      at the end, also after an error (may raise WriteFailed)

A feature that runs work during training is one more hook (reinforcement learning's rollout
metrics and evaluation by reward: spmdgpt.rl.loop).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import sys
import time
from collections import deque
from pathlib import Path
from typing import Optional

import jax

from spmdgpt.config import freeze, to_yaml
from spmdgpt.config.load import fixed_steps
from spmdgpt.model import to_layer_order
from spmdgpt.run.files import WriteFailed, os_reason, write_text_atomic
from spmdgpt.training.budget import Replan, from_process_0
from spmdgpt.training.stats import stats_row


class Hook:
    """The no-op of every method (`spmdgpt.training.hooks`)."""

    def before_step(self, loop, step: int, batch) -> None:
        pass

    def after_step(self, loop, step: int) -> None:
        pass

    def reported(self, loop, step: int, m: dict, row: dict) -> None:
        pass

    def flush(self, loop, step: int) -> bool:
        return False

    def at_flush(self, loop, step: int) -> None:
        pass

    def after(self, loop, step: int) -> None:
        pass

    def finish(self, loop) -> None:
        pass

    def close(self, loop) -> None:
        pass


class Diverged(Exception):
    """Raised by the guard inside the loop (args: step, why); the loop turns it into
    loop.TrainingDiverged once the checkpoint manager has finished, so that the message can
    name the newest checkpoint."""


class Guard(Hook):
    """The divergence guard, on each step's metrics once they are on the host: a non-finite loss
    or gradient norm stops the run (its row logged whatever train.log_every says); with
    train.skip_nonfinite=N the step skipped such an update itself, and N skips in a row stop it;
    a loss above train.loss_spike_factor x the median of the last 64 (when that median is
    positive) is logged (event `loss_spike`)."""

    def __init__(self, skip_nonfinite: int, spike_factor: float):
        self.skip_nonfinite, self.spike_factor = skip_nonfinite, spike_factor
        self.recent: deque = deque(maxlen=64)
        self.skipped_in_a_row = 0

    def reported(self, loop, step, m, row):
        loss, grad_norm = float(m["loss"]), float(m["grad_norm"])
        if "skipped" in m and bool(m["skipped"]):
            self.skipped_in_a_row += 1
            loop.event(step, "skipped_nonfinite", loss=loss, grad_norm=grad_norm, in_a_row=self.skipped_in_a_row)
            if self.skipped_in_a_row >= self.skip_nonfinite:
                loop.event(step, "diverged")
                raise Diverged(step, f"{self.skipped_in_a_row} steps in a row had non-finite "
                               f"gradients (train.skip_nonfinite={self.skip_nonfinite})")
            return
        self.skipped_in_a_row = 0
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            if loop.metrics_log:
                loop.metrics_log.log(row)  # the diverged step's row, whatever train.log_every says
            loop.event(step, "diverged")
            raise Diverged(step, f"loss {loss}, grad_norm {grad_norm}")
        if self.spike_factor and len(self.recent) >= 16:
            median = statistics.median(self.recent)
            if median > 0 and loss > self.spike_factor * median:
                loop.event(step, "loss_spike", loss=loss, median=median)
        self.recent.append(loss)


class Profiler(Hook):
    """train.profile=START:STOP: a jax.profiler trace (XPlane for TensorBoard's profile plugin /
    xprof, and a Perfetto trace) of those steps in run.dir/profile, on every process."""

    def __init__(self, steps: tuple):
        self.first, self.last = steps
        self.tracing = False

    def before_step(self, loop, step, batch):
        if not self.tracing and self.first <= step <= self.last:
            jax.profiler.start_trace(str(loop.run_dir / "profile"), create_perfetto_trace=True)
            self.tracing = True

    def after_step(self, loop, step):
        if self.tracing and step >= self.last:
            self.close(loop)

    def close(self, loop):
        if self.tracing:
            jax.block_until_ready(loop.state)  # the traced steps have run on the devices
            jax.profiler.stop_trace()
            self.tracing = False
            loop.say(f"profile of steps {self.first}-{self.last} -> {loop.run_dir / 'profile'}")


class Statistics(Hook):
    """train.stats_every=K: the model statistics (spmdgpt.training.stats) of every K-th step, from the state
    before it, logged as a metrics row."""

    def __init__(self, every: int):
        self.every, self.pending = every, None

    def before_step(self, loop, step, batch):
        if loop.stats_fn is not None and step % self.every == 0:
            self.pending = loop.stats_fn(loop.state, *batch)

    def after_step(self, loop, step):
        if self.pending is not None and loop.metrics_log:
            loop.metrics_log.log(stats_row(step, jax.device_get(self.pending)))
        self.pending = None


class Evaluation(Hook):
    """The validation loss every train.eval_every steps and at the end (one row, `val/loss`; per
    validation set with several), and a rollout printed after it (train.rollout_tokens)."""

    def __init__(self, evaluator, rollouts=None):
        self.evaluator, self.rollouts = evaluator, rollouts

    def flush(self, loop, step):
        t = loop.cfg.train
        return step == t.steps or bool(t.eval_every and step % t.eval_every == 0)

    def at_flush(self, loop, step):
        if self.flush(loop, step):
            loop.paused(self.evaluate, loop, step, evaluation=True)

    def evaluate(self, loop, step: int) -> None:
        losses = self.evaluator(loop.model_params())
        loop.val_loss = sum(losses.values()) / len(losses)
        row = {"step": step, "val/loss": loop.val_loss}
        if len(losses) > 1:  # val/loss is then the mean over the validation sets
            row.update({f"val/{name}/loss": v for name, v in losses.items()})
        if loop.metrics_log:
            loop.metrics_log.log(row)
        loop.say(f"step {step}: " + " | ".join(f"{k} {v:.4f}" for k, v in row.items() if k.startswith("val/")))
        if self.rollouts is not None:
            prompt, completion = self.rollouts(loop.model_params(), step)[0]
            loop.say(f"sample at step {step}:\n{prompt}\033[1m{completion}\033[0m\n" if sys.stderr.isatty()
                     else f"sample at step {step}:\n{prompt}{completion}\n")
        loop.restart_window()  # evaluation is not training


class Checkpoints(Hook):
    """Asynchronous checkpoints every checkpoint.every steps, at the end and on a signal (the
    layers in order, as every checkpoint holds them: `model.pipeline`); a background save that
    failed stops the run at the next logged step (exit 4)."""

    def __init__(self, ckpt):
        self.ckpt = ckpt

    def after_step(self, loop, step):
        if step % loop.cfg.train.log_every == 0:
            self.ckpt.check()

    def flush(self, loop, step):
        every = loop.cfg.checkpoint.every
        return step == loop.cfg.train.steps or bool(every and step % every == 0) or loop.stop_signal is not None

    def at_flush(self, loop, step):
        if self.flush(loop, step):
            loop.paused(self.ckpt.save, step, to_layer_order(loop.rules, loop.state), loop.checkpoint_meta(step))

    def close(self, loop):
        self.ckpt.close()  # waits for the last asynchronous save


class Pacing(Hook):
    """train.time_budget: every pace_every steps, when the run has fallen behind (a busier
    machine), fewer steps for what is left of the budget (budget.Pacer), the new train.steps and
    re-plan recorded in config.yaml, and a new step function for the squeezed learning-rate
    schedule; at the end, the wall time used against the calibration's prediction."""

    def __init__(self, pacer, calibration, steps: int):
        self.pacer, self.calibration = pacer, calibration
        self.every = max(1, steps // 200)

    def after(self, loop, step):
        # (the pace leaves out a new step function's first run, slower than the rest)
        if step % self.every == 0 and loop.reported > loop.compiled_at + 1:
            self.pace(loop, step)

    def pace(self, loop, step: int) -> None:
        t = loop.cfg.train
        plan = self.pacer.check(loop.reported, step, t.steps, time.perf_counter())
        if jax.process_count() > 1:  # every process follows process 0's plan
            steps = from_process_0(plan.steps if plan is not None else 0)
            plan = dataclasses.replace(plan or Replan(step, steps, t.steps, 0.0, 0.0), steps=steps) if steps else None
        if plan is None:
            return
        loop.cfg = freeze(fixed_steps(loop.cfg, plan.steps, [*t.replans, f"{plan.at}:{plan.planned}"]))
        loop.step_functions(step)
        loop.console.set_total(plan.steps)
        loop.say(f"train.time_budget={self.calibration.budget_s:g} s: behind plan ({plan.step_s * 1e3:.1f} ms/step, "
                 f"{plan.projected_s:.1f} s projected): train.steps {plan.planned} -> {plan.steps} from step "
                 f"{plan.at} on, the learning-rate schedule's rest squeezed into them (recorded in config.yaml)")
        if loop.is_main:
            loop.metrics_log.log(plan.row(self.calibration.budget_s))
            path: Path = loop.run_dir / "config.yaml"
            try:
                write_text_atomic(path, to_yaml(loop.cfg))
            except OSError as e:
                raise WriteFailed(f"writing {path} failed ({os_reason(e)})") from None

    def finish(self, loop) -> None:
        """The wall time the run took to here (the final evaluation done) against the
        calibration's prediction, printed and logged (event `time_budget_used`)."""
        cal = self.calibration
        # (printed and logged alike: rounded once, so that 29.9504 is not "30.0" printed and 29.95 logged)
        used, predicted = round(time.perf_counter() - loop.started, 3), round(cal.predicted_s(), 3)
        loop.say(f"train.time_budget={cal.budget_s:g} s: used {used:.1f} s (predicted {predicted:.1f} s)")
        if loop.metrics_log:
            loop.metrics_log.log({"step": loop.cfg.train.steps, "event": "time_budget_used", "used_s": used,
                                  "predicted_s": predicted, "budget_s": cal.budget_s})


def training_hooks(loop, evaluation: list, ckpt, profile: Optional[tuple], pacer, calibration) -> list:
    """The hooks of a run, in the order they act: the divergence guard, profiling, statistics,
    the objective's `evaluation` hooks (the validation loss; reinforcement learning's rollout
    metrics and rewards: spmdgpt.rl.loop) before the checkpoint that covers them, checkpoints,
    the pace."""
    t = loop.cfg.train
    # (a kind whose loss is no positive quantity a spike multiplies, as GRPO's: no spike events)
    hooks: list = [Guard(t.skip_nonfinite, t.loss_spike_factor if loop.run_kind.loss_spike_guard else 0.0)]
    if profile:
        hooks.append(Profiler(profile))
    if t.stats_every:
        hooks.append(Statistics(t.stats_every))
    hooks.extend(evaluation)
    if ckpt is not None:
        hooks.append(Checkpoints(ckpt))
    if pacer is not None:
        hooks.append(Pacing(pacer, calibration, t.steps))
    return hooks
