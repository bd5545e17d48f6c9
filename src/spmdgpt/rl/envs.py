"""Multi-turn environments in rollouts (`rl.env=chain | module:Class`): a completion acts several
times on an environment and reads what it answers; the environment's rewards are the reward.

An environment is a class with two methods (a fresh instance for every episode, i.e. every
sampled completion):

    reset(prompt, record) -> str               the first observation (read after the prompt; "" for none)
    step(action) -> (observation, reward, done)

An action is the text between `rl.tool_open` and `rl.tool_close` ("<<" and ">>"), as a tool call is
(spmdgpt.rl.tools: a tool is the one-turn, stateless case). When a completion's text since its
last action ends with the close mark after an open one, the sequence pauses, `step` gets the text
between the marks, and its observation, in `rl.tool_output`'s "{}", is appended as tokens the
model reads but did not sample (never trained on: the rollout's targets mask them); then sampling
goes on. When `step` says done, the episode ends after its observation (the engine stops the
request there). Everything counts against the completion's budget, `rl.max_new_tokens`; at most
`rl.tool_calls` actions an episode. The episode's reward is the sum of its steps' rewards (what
GRPO's advantages and val/reward read; `rl.reward` is not used).

An environment that raises, returns something other than (text, a finite number, a truth value)
or text from `reset`, ends its episode where it is, with the rewards it gave so far: counted in
rl/env_errors (the first few said on the console), never the run's end; so does a reset or step
that runs past `rl.env_timeout` seconds. An episode the environment had not ended when the
sequence stopped (the model ended its turn, or the budget ran out) is counted in rl/env_unfinished.
One's own environment (`module:Class`) runs in a worker process (rl/envworker.py), one call at a
time, its instances there: a call past the timeout (or the process's exit) ends that process, and
with it the round's other episodes (each ends, counted, at its next call or reset, at once); the
next round starts a fresh one. The engine waits on each call: keep a step quick. The built-in `chain` runs in the
training process (its work is bounded).

`chain` (`ChainEnv`): a chain of operations on a number, "7 +5 *3 -4", which the completion must
carry out one call at a time, each call on the previous result: "<<7+5>>12<<12*3>>36<<36-4>>32".
Each right call is rewarded 1 / (the chain's operations) and answered with its result; a wrong one
is answered "wrong" and ends the episode. So the reward is the share of the chain done right, and
no call can be written without the result the environment gave for the previous one.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from spmdgpt.config import ConfigError
from spmdgpt.rl.envworker import step_error
from spmdgpt.rl.prompts import Prompt
from spmdgpt.rl.rewards import MAX_REWARD, imported
from spmdgpt.rl.tools import SAID, ToolProcess, check_marks, encodable, marked

_OP = re.compile(r"\s*([+\-*])\s*(\d+)\s*")
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


class ChainEnv:
    """The `chain` environment (the module docstring). The chain is the record's "chain" field,
    else the prompt's text: a whole number, then operations "+N", "-N" or "*N"."""

    def reset(self, prompt: Any, record: dict) -> str:
        text = record.get("chain", prompt if isinstance(prompt, str) else prompt[-1]["content"])
        first, _, rest = str(text).strip().partition(" ")
        self.ops = [(m.group(1), int(m.group(2))) for m in _OP.finditer(rest)]
        if not first.lstrip("-").isdigit() or not self.ops or _OP.sub("", rest).strip():
            raise ValueError(f"not a chain of operations: {text!r} (e.g. '7 +5 *3 -4', carried out left to right)")
        self.value = int(first)
        self.done = 0
        return ""

    def step(self, action: str) -> tuple:
        op, b = self.ops[self.done]
        if action.replace(" ", "") != f"{self.value}{op}{b}":
            return "wrong", 0.0, True
        self.value = _OPS[op](self.value, b)
        self.done += 1
        return str(self.value), 1.0 / len(self.ops), self.done == len(self.ops)


BUILTINS = {"chain": ChainEnv}
WORKER = Path(__file__).with_name("envworker.py")


def env_class(name: str, field: str = "rl.env") -> Callable:
    """The environment class `name` names: a built-in (chain) or `module:Class` (importable from
    PYTHONPATH); a ConfigError naming the field otherwise."""
    if name in BUILTINS:
        return BUILTINS[name]
    if ":" not in name:
        raise ConfigError([f"{field}={name}: unknown environment; use {', '.join(BUILTINS)} or module:Class (your "
                           "own class with reset(prompt, record) and step(action))"])
    cls = imported(name, field)
    missing = [m for m in ("reset", "step") if not callable(getattr(cls, m, None))]
    if missing or not isinstance(cls, type):
        raise ConfigError([f"{field}={name}: not an environment class (it needs methods reset(prompt, record) and "
                           f"step(action){'; missing: ' + ', '.join(missing) if missing else ''})"])
    return cls


class Refused(str):
    """Why an episode could not start (its environment's reset failed)."""


@dataclass
class Episode:
    env: Any  # (its environment; in a worker process, its number there)
    reward: float = 0.0
    done: bool = False  # (the environment ended it, or it failed)
    actions: int = 0
    start: int = 0  # where the completion's text after its last action (or observation) starts, in tokens


class EnvBox:
    """A run's environment (rl.env, rl.tool_*): `start` opens an episode per row, `inject` and
    `stop` are the engine's hooks for each row's request (its `stream` is the row), `rewards`
    the episodes' sums. With `worker` (a ToolProcess of rl/envworker.py) the environments live
    in that process, each call limited to `timeout` seconds."""

    def __init__(self, cls: Callable, tokenizer, open_mark: str = "<<", close_mark: str = ">>",
                 output: str = "{}", turns: int = 4, name: str = "env", timeout: float = 10.0,
                 worker: Optional[ToolProcess] = None):
        self.cls, self.tokenizer, self.open, self.close = cls, tokenizer, open_mark, close_mark
        self.output, self.turns, self.name, self.timeout, self.worker = output, turns, name, timeout, worker
        self.episodes: List[Episode] = []
        self.actions = self.errors = 0  # (since `start`: one sampling round)
        self.lost: Optional[str] = None  # (why the worker's instances are gone this round: its calls then fail at once)
        self.said = 0

    @classmethod
    def of(cls, cfg, tokenizer) -> Optional["EnvBox"]:
        """The run's environment, or None without rl.env."""
        r = cfg.rl
        if not r.env:
            return None
        check_marks(cfg, tokenizer, f"act on rl.env={r.env}")
        worker = None if r.env in BUILTINS else ToolProcess(r.env, WORKER, (str(MAX_REWARD),), "rl.env")
        return cls(env_class(r.env), tokenizer, r.tool_open, r.tool_close, r.tool_output, r.tool_calls, r.env,
                   r.env_timeout, worker)

    def start(self, prompts: Sequence[Prompt], room: int) -> List[Prompt]:
        """A fresh episode for each prompt (row), reset on it: the prompts with their first
        observations' tokens after them (read, never trained on); a first observation that makes its
        prompt longer than `room` tokens (what the context leaves after rl.max_new_tokens) ends its
        episode (counted, the prompt as it was)."""
        self.episodes, self.actions, self.errors, self.lost = [], 0, 0, None
        if self.worker is not None:
            try:
                self.worker.ask({"clear": True}, self.timeout)  # (the last round's instances dropped)
            except RuntimeError as ex:  # (its process did not start: this round's episodes end, not the run)
                self.lost = str(ex)
        out = []
        for i, p in enumerate(prompts):
            e = Episode(None)
            self.episodes.append(e)
            if self.worker is not None:
                e.env = i
                first = self._remote({"reset": i, "prompt": p.prompt, "record": p.record}, "reset")
            else:
                try:
                    e.env = self.cls()
                    first = e.env.reset(p.prompt, p.record)
                except Exception as ex:  # (one's own environment: its failure ends its episode, not the run)
                    first = Refused(f"reset raised {type(ex).__name__}: {ex}")
            if not isinstance(first, (str, Refused)):
                first = Refused(f"reset returned {type(first).__name__}, not text")
            seen = () if isinstance(first, Refused) else tuple(encodable(self.tokenizer, first))
            if len(p.tokens) + len(seen) > room:
                first = Refused(f"its first observation ({len(seen)} tokens) leaves the prompt longer than the {room} "
                                "tokens the context leaves after rl.max_new_tokens")
            if isinstance(first, Refused):
                self._error(p.where, str(first))
                e.done, seen = True, ()
            out.append(p._replace(tokens=tuple(p.tokens) + seen) if seen else p)
        return out

    def _error(self, where: str, said: str) -> None:
        self.errors += 1
        if self.said < SAID:
            self.said += 1
            more = " (further ones are counted in rl/env_errors)" if self.said == SAID else ""
            print(f"rl.env={self.name} on {where}: {said}; its episode ends there{more}", file=sys.stderr)

    def _remote(self, message: dict, what: str) -> Any:
        """The worker's "out" for `message`, or Refused saying why there is none. After a call that
        timed out or a worker that exited, the round's other calls fail at once (their instances
        went with the process): one timeout a round, however many episodes."""
        if self.lost:
            return Refused(f"its environment is gone ({self.lost} this round)")
        try:
            kind, answer = self.worker.ask(message, self.timeout)
        except RuntimeError as ex:  # (its process did not start)
            self.lost = str(ex)
            return Refused(self.lost)
        if kind != "answer":
            self.lost = (f"a {what} ran past rl.env_timeout={self.timeout:g} s" if kind == "timeout" else
                         f"the process exited during a {what}")
            return Refused(f"{what} ran past rl.env_timeout={self.timeout:g} s (its process was ended)"
                           if kind == "timeout" else f"its process exited during {what}")
        return Refused(answer["error"]) if "error" in answer else answer["out"]

    def _step(self, e: Episode, action: str) -> Optional[str]:
        """The observation of `action` (its reward added, `done` kept), or None when the
        environment failed (the episode then ends)."""
        if self.worker is not None:  # (checked there, by the same `step_error`)
            out = self._remote({"step": e.env, "action": action}, "step")
            if isinstance(out, Refused):
                return self._failed(e, action, str(out))
        else:
            try:
                out = e.env.step(action)
            except Exception as ex:  # (one's own environment: its failure ends its episode, not the run)
                return self._failed(e, action, f"step raised {type(ex).__name__}: {ex}")
            wrong = step_error(out, MAX_REWARD)
            if wrong:
                return self._failed(e, action, wrong)
        obs, reward, done = out
        e.reward += float(reward)
        e.done = bool(done)
        return obs

    def _failed(self, e: Episode, action: str, said: str) -> None:
        self._error(f"the action {action!r:.80}", said)
        e.done = True
        return None

    def inject(self, request) -> Optional[List[int]]:
        """The engine's hook after each sampled token: when the text since the last action ends
        with the close mark after an open one, the environment's observation as tokens; else None."""
        e = self.episodes[request.stream]
        if e.done or e.actions >= self.turns:
            return None
        action = marked(self.tokenizer, request.tokens[e.start:], self.open, self.close)
        if action is None:
            return None
        e.actions += 1
        self.actions += 1
        obs = self._step(e, action)
        out = [] if obs is None else encodable(self.tokenizer, self.output.replace("{}", obs))
        e.start = len(request.tokens) + len(out)
        return out

    def stop(self, request) -> bool:
        """The engine's stop rule: the episode has ended (checked after each token, appended ones too)."""
        return self.episodes[request.stream].done

    def rewards(self) -> np.ndarray:
        """Each episode's reward, the sum of its steps' (float64, in the rows' order)."""
        return np.array([e.reward for e in self.episodes], np.float64)

    def unfinished(self) -> int:
        """Episodes the environment had not ended (the sequence stopped first)."""
        return sum(not e.done for e in self.episodes)
