"""train.time_budget: how many steps fit a wall-clock budget on this machine.

A short calibration before the run (`calibrate`) compiles and times a few training steps on a
throwaway copy of the starting state, and times one evaluation (loss and rollouts, each after
its compilation); `steps_within` then solves for the largest step count whose steps and
evaluations fit in what is left of the budget. The budget counts from the start of `train`
(after the interpreter has started and imported JAX: about 2-5 s of a CLI run), so data
loading, both compilations and the final evaluation are inside it.
The run's config.yaml records the steps chosen (with train.time_budget=null): a rerun of that
config, or a resume, trains exactly the same steps, bitwise, on any machine.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Optional

import jax
import jax.numpy as jnp

# Steps timed after the compiling one (their median is the step time): at least MIN_TIMED_STEPS,
# and more until MIN_TIMED_S seconds of them have run (at most MAX_TIMED_STEPS), so that a fast
# step is timed over a window long enough for the machine's jitter to average out.
MIN_TIMED_STEPS, MAX_TIMED_STEPS, MIN_TIMED_S = 8, 64, 3.0


def evaluations(steps: int, eval_every: int) -> int:
    """How many evaluations a run of `steps` steps does: every eval_every steps and at the end."""
    if not eval_every:
        return 1
    return steps // eval_every + (1 if steps % eval_every else 0)


def steps_within(seconds: float, step_s: float, eval_s: float, eval_every: int) -> int:
    """The largest step count n with n * step_s + evaluations(n) * eval_s <= seconds (0 when not
    even one step and its evaluation fit)."""
    n = max(0, int(seconds / step_s))
    while n > 0 and n * step_s + evaluations(n, eval_every) * eval_s > seconds:
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
    """Time `train_step` (compiled here) on a copy of `state` (the state itself is untouched)
    over batches batch_at(0, 1, ...) (see MIN_TIMED_STEPS), and one call of `evaluate(params)` and
    `rollout(params)` after a first, compiling, call of each; return the step count that fits
    in what is left of budget_s seconds counted from `started` (a time.perf_counter value)."""
    probe = jax.tree.map(jnp.copy, state)  # train_step donates its state
    t0 = time.perf_counter()
    probe, m = train_step(probe, *batch_at(0))
    jax.block_until_ready(m)
    first = time.perf_counter() - t0
    times = []
    while len(times) < MIN_TIMED_STEPS or (sum(times) < MIN_TIMED_S and len(times) < MAX_TIMED_STEPS):
        t0 = time.perf_counter()
        probe, m = train_step(probe, *batch_at(len(times) + 1))
        jax.block_until_ready(m)
        times.append(time.perf_counter() - t0)
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
