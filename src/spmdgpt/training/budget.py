"""train.time_budget: how many steps fit a wall-clock budget on this machine.

A short calibration before the run (`calibrate`) compiles and times a few training steps on a
throwaway copy of the starting state, and times one evaluation (loss and rollouts, each after
its compilation); `steps_within` then solves for the largest step count whose steps and
evaluations fit in what is left of the budget. The budget counts from the start of `train`
(after the interpreter has started and imported JAX: about 2-5 s of a CLI run), so data
loading, both compilations and the final evaluation are inside it.
While the run trains, a `Pacer` watches its pace: when the machine gets busier and the
projected end passes the budget by more than a few percent, the run re-plans what is left, fewer
steps, the rest of the learning-rate schedule squeezed into them (optim.squeezed), and says so.
The run's config.yaml records the steps chosen (with train.time_budget=null) and each re-plan
(train.replans): a rerun of that config, or a resume, trains exactly the same steps with the
same learning rates, bitwise, on any machine.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import Config, ConfigError, freeze
from spmdgpt.config.load import fixed_steps

# Steps timed after the compiling one (their median is the step time): at least MIN_TIMED_STEPS,
# and more until MIN_TIMED_S seconds of them have run (at most MAX_TIMED_STEPS), so that a fast
# step is timed over a window long enough for the machine's jitter to average out.
MIN_TIMED_STEPS, MAX_TIMED_STEPS, MIN_TIMED_S = 8, 64, 3.0
# The run re-plans when its projected end has passed the budget by more than REPLAN_SLACK of it
# for a whole pace window (one slow stretch is not a slower machine), and then aims REPLAN_MARGIN
# under the budget (so that a slowdown that stays needs no second re-plan); its pace is measured
# over the last PACE_WINDOW of the budget (at least MIN_PACE_S seconds). (A quiet 2-core box's
# pace moves by up to 5% within a run: benchmarks/BENCHMARKS.md, "Time budget".)
REPLAN_SLACK, REPLAN_MARGIN, PACE_WINDOW, MIN_PACE_S = 0.05, 0.02, 0.05, 2.0


def evaluations(steps: int, eval_every: int, after: int = 0) -> int:
    """How many evaluations the steps after..steps of a run of `steps` steps do: one every
    eval_every steps and one at the end."""
    if steps <= after:
        return 0
    if not eval_every:
        return 1
    return steps // eval_every - after // eval_every + (1 if steps % eval_every else 0)


def steps_within(seconds: float, step_s: float, eval_s: float, eval_every: int, after: int = 0) -> int:
    """The largest step count n with n * step_s + evaluations(after + n, after) * eval_s <= seconds:
    the steps a run at step `after` can still take (0 when not even one step and its evaluation fit)."""
    n = max(0, int(seconds / step_s))
    while n > 0 and n * step_s + evaluations(after + n, eval_every, after) * eval_s > seconds:
        n -= 1
    return n


@dataclass
class Calibration:
    budget_s: float  # train.time_budget
    elapsed_s: float  # time from the start of `train` to the end of the calibration
    compile_s: float  # the first step's time beyond a step: what the run's own compilation costs
    step_s: float  # median time of one training step
    eval_s: float  # one evaluation (validation loss, and rollouts when on)
    steps: int  # what fits
    evals: int  # the evaluations those steps include
    timed_steps: int  # how many steps step_s is the median of

    def predicted_s(self) -> float:
        """The whole run's predicted wall time from the start of `train`: what the calibration
        used, the run's own compilation, its steps and its evaluations."""
        return self.elapsed_s + self.compile_s + self.steps * self.step_s + self.evals * self.eval_s

    def row(self) -> dict:
        return {"step": 0, "event": "time_budget", "budget_s": self.budget_s, "elapsed_s": round(self.elapsed_s, 3),
                "compile_s": round(self.compile_s, 3), "step_s": round(self.step_s, 5),
                "eval_s": round(self.eval_s, 3), "steps": self.steps, "timed_steps": self.timed_steps,
                "predicted_s": round(self.predicted_s(), 3)}


def calibrate(budget_s: float, started: float, eval_every: int, state, train_step,
              batch_at: Callable[[int], tuple], evaluate: Callable, rollout: Optional[Callable] = None) -> Calibration:
    """Time `train_step` (compiled by its first call here unless the preflight compiled it) on a
    copy of `state` (the state itself is untouched) over batches batch_at(0, 1, ...) (see
    MIN_TIMED_STEPS), and one call of `evaluate(params)` and
    `rollout(params)` after a first, compiling, call of each; return the step count that fits
    in what is left of budget_s seconds counted from `started` (a time.perf_counter value)."""
    probe = jax.tree.map(jnp.copy, state)  # train_step donates its state
    t0 = time.perf_counter()
    probe, m = train_step(probe, *batch_at(0))
    jax.block_until_ready(m)
    first = time.perf_counter() - t0
    # then steps as the loop takes them: each one sent before the one before it is waited for (its
    # batch and dispatch overlap that step, as they compete for the host's cores in the loop); a
    # step's time is the time between two steps' ends
    times, last, i = [], None, 1
    probe, pending = train_step(probe, *batch_at(i))
    while len(times) < MIN_TIMED_STEPS or (sum(times) < MIN_TIMED_S and len(times) < MAX_TIMED_STEPS):
        i += 1
        probe, m = train_step(probe, *batch_at(i))
        jax.block_until_ready(pending)
        now = time.perf_counter()
        if last is not None:
            times.append(now - last)
        last, pending = now, m
    jax.block_until_ready(pending)
    step_s = statistics.median(times)
    eval_s = 0.0
    for fn in (evaluate, rollout):
        if fn is not None:
            fn(probe.params)  # compiles
            t0 = time.perf_counter()
            fn(probe.params)
            eval_s += time.perf_counter() - t0
    del probe
    compile_s = max(0.0, first - step_s)
    elapsed = time.perf_counter() - started
    steps = steps_within(budget_s - elapsed - compile_s, step_s, eval_s, eval_every)
    return Calibration(budget_s, elapsed, compile_s, step_s, eval_s, steps, evaluations(steps, eval_every),
                       len(times))


@dataclass
class Replan:
    at: int  # the optimizer step after which the run was re-planned
    steps: int  # the new train.steps
    planned: int  # train.steps before
    projected_s: float  # the old plan's projected wall time from the start of `train`
    step_s: float  # the pace measured (seconds a step)

    def row(self, budget_s: float) -> dict:
        return {"step": self.at, "event": "time_budget_replan", "steps": self.steps, "planned": self.planned,
                "projected_s": round(self.projected_s, 3), "step_s": round(self.step_s, 5), "budget_s": budget_s}


class Pacer:
    """A budgeted run's pace, measured at the steps `check` is given (the same ones on every
    process): seconds per step over the last PACE_WINDOW of the budget, leaving out the time the
    loop reports as `paused` (evaluations, checkpoint saves). `check` returns a Replan when the
    plan's projected end has passed the budget by more than REPLAN_SLACK for a pace window."""

    def __init__(self, cal: Calibration, started: float, eval_every: int):
        self.cal, self.started, self.eval_every = cal, started, eval_every
        self.eval_s = cal.eval_s  # the latest evaluation's time (a busier machine evaluates slower)
        self.compile_s = cal.compile_s  # the latest compilation of the step (the loop's own: `compiled`)
        self.paused = 0.0  # seconds of evaluations and saves so far
        self.marks: list = []  # (step, time - paused) at the recent checks
        self.behind_since: Optional[float] = None  # (time - paused) when the projection first passed
        self.window = max(MIN_PACE_S, PACE_WINDOW * cal.budget_s)

    def compiled(self, seconds: float) -> None:
        """The loop's first call of a new step function took `seconds` (its compilation)."""
        self.compile_s = max(seconds, self.cal.compile_s)

    def pause(self, seconds: float, evaluation: bool = False) -> None:
        self.paused += seconds
        if evaluation:
            self.eval_s = seconds

    def check(self, done: int, at: int, steps: int, now: float) -> Optional[Replan]:
        """At time `now` (perf_counter), `done` steps of `steps` have finished on the devices and
        the loop has sent up to step `at`: a Replan of the steps after `at`, or None."""
        busy = now - self.paused
        self.marks.append((done, busy))
        while len(self.marks) > 2 and busy - self.marks[1][1] >= self.window:
            self.marks.pop(0)  # the oldest mark that still leaves a whole window
        (since, then), step_s = self.marks[0], None
        if done > since and busy - then >= self.window:
            step_s = (busy - then) / (done - since)
        if step_s is None or at >= steps:
            return None
        elapsed = now - self.started
        projected = elapsed + (steps - done) * step_s + evaluations(steps, self.eval_every, done) * self.eval_s
        if projected <= self.cal.budget_s * (1 + REPLAN_SLACK):
            self.behind_since = None
            return None
        if self.behind_since is None:
            self.behind_since = busy
        if busy - self.behind_since < self.window:  # behind for a whole window before re-planning
            return None
        # the new step function compiles again: as long as the last time, slowed down as the steps were
        recompile = self.compile_s * max(1.0, step_s / self.cal.step_s)
        left = self.cal.budget_s * (1 - REPLAN_MARGIN) - elapsed - recompile
        new = max(at + 1, done + steps_within(left, step_s, self.eval_s, self.eval_every, done))
        saved = (steps - new) * step_s + (evaluations(steps, self.eval_every, done)
                                          - evaluations(new, self.eval_every, done)) * self.eval_s
        if saved <= recompile:  # (too late: stopping early saves less than the compilation costs)
            return None
        self.marks, self.behind_since = [], None  # the next window starts after the recompilation
        return Replan(at, new, steps, projected, step_s)


def recorded_steps(cfg: Config, run_dir: Path) -> Config:
    """train.time_budget set and run_dir already holds a run whose config.yaml recorded the steps
    (and re-plans) its budget chose (time_budget null there): those, without a new calibration,
    so a resume or restart continues the same schedule. Otherwise cfg unchanged."""
    if cfg.train.time_budget is None or not (run_dir / "config.yaml").exists():
        return cfg
    from spmdgpt.config import load_run_config

    saved = load_run_config(run_dir).train
    if saved.time_budget is not None:
        return cfg
    return fixed_steps(cfg, saved.steps, saved.replans)


def fit_budget(cfg: Config, step, state, batcher, evaluator, rollouts, started: float):
    """(cfg with the train.steps that fit train.time_budget and time_budget=None, the
    Calibration), timing the run's `step` (its executable) over batcher's batches, evaluator
    and the rollouts (or None). ConfigError when not even one step fits."""
    t = cfg.train
    cal = calibrate(t.time_budget, started, t.eval_every, state, step, batcher.train_batch, evaluator,
                    None if rollouts is None else rollouts.sample)
    if jax.process_count() > 1:  # every process trains process 0's choice (their timings differ)
        cal = dataclasses.replace(cal, steps=from_process_0(cal.steps))
    if cal.steps < 1:
        raise ConfigError([f"train.time_budget={t.time_budget:g} s leaves no time to train: {cal.elapsed_s:.1f} s "
                           f"go to setting up and a step takes {cal.step_s:.3f} s, an evaluation "
                           f"{cal.eval_s:.1f} s; raise the budget"])
    return freeze(fixed_steps(cfg, cal.steps)), cal  # (the steps were checked just above)


def from_process_0(n: int) -> int:
    """Process 0's n on every process (a collective: every process calls it at the same point)."""
    from jax.experimental import multihost_utils

    return int(multihost_utils.broadcast_one_to_all(jnp.int32(n)))
