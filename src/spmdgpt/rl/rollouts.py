"""Rollouts: the batch GRPO trains on, sampled from the policy (spmdgpt.model.grpo).

For optimizer step i the run draws data.batch_size / rl.group_size training prompts
(`prompts_of_step`: an epoch-wise shuffle of the prompts, a function of (train.seed, i) alone),
the inference engine (spmdgpt.engine: the group's prompt read once, its pages shared) draws
rl.group_size completions of each on the run's mesh (temperature
rl.temperature, top-p rl.top_p, at most rl.max_new_tokens tokens, stopping at the chat
template's end-of-turn token or the tokenizer's end-of-text; its key a function of (seed, i)),
the reward scores each completion's text, and the batch is laid out for the training step:

    row      = prompt tokens + completion tokens (+ the stop token when it stopped), then padding
    inputs   = row[:-1], targets = row[1:] where the target is a sampled completion token, else -1
               (with rl.tool, the tool's outputs are completion tokens the policy did not sample:
               read, never trained on; spmdgpt.rl.tools)
    advantages [b]: the completion's standing in its group (`group_advantages`)
    old_logp [b, t]: log-probabilities of the targets under the sampling parameters
    ref_logp [b, t]: ... under the reference (the parameters the run started from; with
                     rl.kl_beta = 0 none is kept or run, and these are old_logp)

So a rerun of step i from the same state samples, scores and trains on the same batch (exact
resume), and the prompt's tokens carry no loss.

The sampler and the trainer compute a token's log-probability in different programs (the engine's
paged step, its kernels and cache, against the training forward pass), so they may disagree in the
last bits or more (bfloat16). Each step logs how far: rl/logp_mismatch, the mean |trainer - sampler|
over the sampled tokens, and rl/logp_kl, KL(sampler || trainer) estimated from them (the k3
estimator, E[r - 1 - log r] with r = p_trainer / p_sampler), both at the rollouts' temperature
(the engine's log-probabilities at each request's temperature, against old_logp).

rl.rollout_correction corrects for that gap per token (Yao et al. 2025, "Your efficient RL framework
secretly brings you off-policy RL training"), with w = exp(old_logp - sampler's) the importance
weight of the trainer's sampling policy over the sampler: `tis` multiplies each token's
policy-gradient term by min(w, rl.rollout_correction_cap), `mis` drops the terms of the tokens
whose w exceeds the cap. Both enter as per-token advantages A x weight ([b, t]: GRPO's clipped
surrogate is linear in a non-negative weight; the KL term is not weighted), logged as
rl/correction_weight (the mean weight over the sampled tokens) and rl/correction_dropped (the
share of them mis dropped, or tis truncated).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable, List, NamedTuple, Optional, Sequence

import jax
import numpy as np

from spmdgpt.config import Config
from spmdgpt.engine import Engine, EngineConfig, Request, batch_engine
from spmdgpt.engine.generate import SamplingParams
from spmdgpt.engine.scheduler import fitting_page_size
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.grpo import logp_temperature, token_logps
from spmdgpt.rl.envs import EnvBox
from spmdgpt.rl.prompts import Prompt, prompt_room
from spmdgpt.rl.rewards import score
from spmdgpt.rl.split import engine_shardings
from spmdgpt.rl.teacher import Teacher, distill_advantages
from spmdgpt.rl.tools import Toolbox

ROLLOUT_SALT = 0x9A0  # separates the rollouts' streams from the data order and dropout
STD_EPS = 1e-4  # added to a group's reward std (an all-equal group: advantages 0, not 0/0)


def group_advantages(rewards: np.ndarray, group_size: int, std: bool = True) -> np.ndarray:
    """Each reward's advantage in its group: rewards [n * G] in groups of G consecutive ones
    (float64 in, float32 out), less the group's mean, over the group's std (+ 1e-4) unless
    `std` is False (rl.advantage=group_mean, Dr. GRPO)."""
    r = np.asarray(rewards, np.float64).reshape(-1, group_size)
    a = r - r.mean(axis=1, keepdims=True)
    if std:
        a = a / (r.std(axis=1, keepdims=True) + STD_EPS)
    return a.reshape(-1).astype(np.float32)


def correction_weights(trainer: np.ndarray, sampler: np.ndarray, counted: np.ndarray, mode: str,
                       cap: float) -> tuple:
    """(float32 [b, t] per-token weights, 0 where not counted; their mean over the counted tokens; the
    share of those truncated (tis) or dropped (mis)) of the trainer's over the sampler's
    log-probabilities (the module docstring)."""
    w = np.exp(np.clip(trainer.astype(np.float64) - sampler.astype(np.float64), -50.0, 50.0))
    over = (w > cap) & counted
    weights = np.minimum(w, cap) if mode == "tis" else np.where(over, 0.0, w)
    weights = np.where(counted, weights, 0.0)
    n = max(int(counted.sum()), 1)
    return weights.astype(np.float32), float(weights.sum() / n), float(over.sum() / n)


def logp_mismatch(trainer: np.ndarray, sampler: np.ndarray, counted: np.ndarray) -> tuple:
    """(mean |trainer - sampler|, KL(sampler || trainer) by the k3 estimator) over the `counted`
    tokens of [rows, t] log-probabilities (the module docstring); float64 sums."""
    d = (trainer.astype(np.float64) - sampler.astype(np.float64))[counted]
    if not d.size:
        return 0.0, 0.0
    return float(np.abs(d).mean()), float(np.mean(np.expm1(d) - d))


def prompts_of_step(n: int, per_step: int, seed: int, step: int) -> List[int]:
    """Indices of the prompts step `step` (0-based) trains on: prompt k of the run (k = step *
    per_step + j) is the (k mod n)-th of epoch k // n's shuffle, a permutation drawn from
    (seed, epoch)."""
    out, perms = [], {}
    for k in range(step * per_step, (step + 1) * per_step):
        epoch = k // n
        if epoch not in perms:
            perms[epoch] = np.random.default_rng([seed, ROLLOUT_SALT, epoch]).permutation(n)
        out.append(int(perms[epoch][k % n]))
    return out


def step_seed(seed: int, step: int, draw: int = 0) -> int:
    """The sampler's seed for step `step`'s rollouts (a uint32 drawn from (seed, step)); draw > 0:
    dynamic sampling's further rounds of the step."""
    return int(np.random.SeedSequence([seed, ROLLOUT_SALT, step] + ([draw] if draw else [])).generate_state(1)[0])


def extra_prompts(n: int, per_step: int, seed: int, step: int, draw: int) -> List[int]:
    """Indices of the prompts of dynamic sampling's round `draw` (>= 1) of step `step`: per_step
    prompts drawn without replacement (with, from fewer) from (seed, step, draw)."""
    rng = np.random.default_rng([seed, ROLLOUT_SALT, step, draw])
    return [int(i) for i in rng.choice(n, per_step, replace=per_step > n)]


def overlong_penalty(lengths: np.ndarray, max_tokens: int, buffer: int, penalty: float) -> np.ndarray:
    """DAPO's soft overlong punishment: 0 up to max_tokens - buffer tokens, then falling linearly
    to -penalty at max_tokens (lengths: completion tokens, the stop token counted)."""
    if buffer <= 0:
        return np.zeros(len(lengths))
    start = max_tokens - buffer
    return -penalty * np.clip((np.asarray(lengths, np.float64) - start) / buffer, 0.0, 1.0)


def rollout_engine(cfg: Config, rules: Rules, prompt_tokens: Optional[int] = None) -> EngineConfig:
    """The rollouts' engine (`batch_engine`: a slot for each row of a batch, page tables as wide as
    the longest prompt (`prompt_tokens`; None: what the context leaves) and its answer need; the
    group's followers read their prompt a step after its leader, from the leader's pages)."""
    d = rules.batch_divisor()
    new = cfg.rl.max_new_tokens
    room = cfg.model.max_seq_len - new
    return batch_engine(-(-cfg.data.batch_size // d) * d, min(prompt_tokens or room, room), new,
                        fitting_page_size(cfg.model))


class Sampled(NamedTuple):
    """Completions of a list of prompts (`Rollouts.complete`)."""

    tokens: List[List[int]]  # each completion's tokens (the stop token kept; a tool's outputs in)
    texts: List[str]  # their text, without the stop token
    rewards: np.ndarray  # [rows] float64
    injected: List[List[int]]  # indices into each one's tokens of those a tool appended (not sampled)
    tool_calls: int = 0  # calls made (rl.tool)
    tool_errors: int = 0  # ... that gave the model an error text
    seconds: tuple = (0.0, 0.0)  # wall time of the sampling (the engine, the tool's calls in it) and of the scoring
    logprobs: Sequence[Sequence[float]] = ()  # the engine's log-probability of each completion token (its temperature)
    prompts: Sequence[Prompt] = ()  # with rl.env: each row's prompt, its first observation after it
    env: tuple = ()  # with rl.env: (actions, errors, unfinished episodes)


@dataclass
class Rollout:
    """One step's sampled batch and what it scored."""

    batch: tuple  # (inputs, targets, advantages, old_logp, ref_logp), on the devices
    rewards: np.ndarray  # [rows] float64
    lengths: np.ndarray  # [rows] completion tokens (the stop token counted)
    completions: List[str]  # decoded, without the stop token
    prompts: List[Prompt]  # each row's prompt
    draws: int = 1  # sampling rounds the step took (rl.dynamic_sampling: more than one)
    informative: float = 1.0  # share of its groups whose rewards differ (dynamic sampling's aim: 1)
    shaping: float = 0.0  # mean overlong penalty added to the rewards for the advantages
    dynamic: bool = False  # (rl.dynamic_sampling: its metrics are logged)
    tools: Optional[tuple] = None  # (calls, errors) of rl.tool over the step's sampling rounds (None: no tool)
    injected: Optional[List[List[int]]] = None  # each row's tool-output tokens (indices into its completion)
    seconds: tuple = (0.0, 0.0, 0.0)  # wall time of the sampling, the scoring, the log-probabilities
    mismatch: Optional[tuple] = None  # (rl/logp_mismatch, rl/logp_kl): the sampler's log-probabilities vs the trainer's
    correction: Optional[tuple] = None  # (rl/correction_weight, rl/correction_dropped) with rl.rollout_correction
    reverse_kl: Optional[float] = None  # rl.objective=distill: mean student - teacher log-probability
    env: Optional[tuple] = None  # (actions, errors, unfinished episodes) of rl.env over the step's sampling rounds

    def metrics(self, group_size: int) -> dict:
        """rl/reward, rl/reward_std (over the step's completions), rl/length (mean tokens),
        rl/solved (share of prompts with a completion rewarded > 0), rl/empty_fraction (share of
        completions with no text), rl/flat_groups (share of prompts whose completions all scored
        the same: their advantages are 0, they teach nothing); with rl.tool, rl/tool_calls and
        rl/tool_errors (calls made, and calls that gave an error, per completion sampled); and where the
        rollout's time went: rl/sample_seconds (the engine, tool calls included), rl/score_seconds
        (the rewards), rl/logp_seconds (the sampling policy's and the reference's log-probabilities;
        the update's time is the step's less these; the teacher's too); rl/logp_mismatch and rl/logp_kl
        (the module docstring); rl/reverse_kl with rl.objective=distill (spmdgpt.rl.teacher); with
        rl.env, rl/env_actions, rl/env_errors and rl/env_unfinished per completion (spmdgpt.rl.envs)."""
        groups = self.rewards.reshape(-1, group_size)
        return {"rl/reward": float(self.rewards.mean()), "rl/reward_std": float(self.rewards.std()),
                "rl/length": float(self.lengths.mean()), "rl/solved": float((groups.max(axis=1) > 0).mean()),
                "rl/empty_fraction": float(np.mean([not c.strip() for c in self.completions])),
                "rl/flat_groups": float((groups.max(axis=1) == groups.min(axis=1)).mean()),
                **({"rl/draws": self.draws, "rl/informative": self.informative} if self.dynamic else {}),
                **({"rl/overlong_penalty": self.shaping} if self.shaping else {}),
                "rl/sample_seconds": self.seconds[0], "rl/score_seconds": self.seconds[1],
                "rl/logp_seconds": self.seconds[2],
                **({"rl/logp_mismatch": self.mismatch[0], "rl/logp_kl": self.mismatch[1]} if self.mismatch else {}),
                **({"rl/correction_weight": self.correction[0], "rl/correction_dropped": self.correction[1]}
                   if self.correction else {}),
                **({"rl/reverse_kl": self.reverse_kl} if self.reverse_kl is not None else {}),
                **({f"rl/env_{k}": v / (len(self.rewards) * self.draws) for k, v in
                    zip(("actions", "errors", "unfinished"), self.env, strict=True)} if self.env else {}),
                **({"rl/tool_calls": self.tools[0] / (len(self.rewards) * self.draws),
                    "rl/tool_errors": self.tools[1] / (len(self.rewards) * self.draws)} if self.tools else {})}


class Rollouts:
    """Samples, scores and lays out GRPO's batches (the module docstring) on the run's mesh."""

    def __init__(self, cfg: Config, rules: Rules, tokenizer, reward: Callable, longest: Optional[int] = None,
                 teacher: Optional[Teacher] = None, engine_rules: Optional[Rules] = None):
        """longest: the run's longest prompt in tokens (the engine's page tables are as wide as it
        and an answer need; None: any prompt the context leaves room for); teacher: rl.objective=distill's
        (its log-probabilities of the sampled tokens set their advantages, spmdgpt.rl.teacher); engine_rules:
        rl.rollout_devices' (the engine and the sampling policy's log-probabilities on devices of their own,
        spmdgpt.rl.split; None: on `rules`' mesh)."""
        self.cfg, self.rules, self.tokenizer, self.reward, self.teacher = cfg, rules, tokenizer, reward, teacher
        self.engine_rules = engine_rules or rules
        self.split = engine_rules is not None
        if cfg.rl.env:  # (an environment's first observation lengthens the prompts: any prompt the context allows)
            longest = None
        self.engine = Engine(cfg.model, self.engine_rules, None, tokenizer.vocab_size,
                             rollout_engine(cfg, self.engine_rules, longest))
        stop = getattr(tokenizer, "stop_id", None)
        self.stop_id = stop if stop is not None else tokenizer.eos_id
        self.tools = Toolbox.of(cfg, tokenizer)
        self.lock = threading.Lock()  # (one sampling at a time: rl.max_staleness's thread, the evaluation)
        self.env = EnvBox.of(cfg, tokenizer)  # (rl.env: multi-turn episodes, their rewards the reward)
        # (the sampling distribution's log-probabilities: at the rollouts' temperature)
        logps = lambda rules: jax.jit(partial(token_logps, cfg.model, rules,  # noqa: E731
                                              temperature=logp_temperature(cfg.rl.temperature),
                                              vocab_limit=tokenizer.vocab_size))  # (what the engine samples from)
        self.logps = logps(rules)  # (the reference's; unsplit, the sampling policy's too)
        self.engine_logps = logps(self.engine_rules) if self.split else self.logps  # (the sampling policy's)
        self.engine_params = None if not self.split else engine_shardings(cfg, self.engine_rules)

    def on_engine(self):
        """The engine's mesh as the context (rl.rollout_devices; else nothing changes)."""
        return jax.set_mesh(self.engine_rules.mesh) if self.split else contextlib.nullcontext()

    def to_engine(self, params, block: bool = False):
        """`params` on the engine's devices (rl.rollout_devices: copied there, jax.device_put to the engine's
        shardings; a copy already there stays as it is; block: wait for the copy); unsplit, `params`."""
        if not self.split:
            return params
        out = jax.device_put(params, self.engine_params)
        return jax.block_until_ready(out) if block else out

    def sampling(self, step: int, greedy: bool = False, draw: int = 0) -> SamplingParams:
        r = self.cfg.rl
        return SamplingParams(max_new_tokens=r.max_new_tokens, temperature=0.0 if greedy else r.temperature,
                              top_p=r.top_p, seed=step_seed(self.cfg.train.seed, step, draw), eos_id=self.stop_id)

    def complete(self, params, prompts: Sequence[Prompt], sp: SamplingParams, reward: Optional[Callable] = None
                 ) -> Sampled:
        """The prompts' completions, with rl.tool's calls in them, scored by `reward` (default the run's);
        with rl.env, each an episode of the environment (its first observation after the prompt), whose
        rewards are the rewards."""
        with self.lock:
            return self._complete(params, prompts, sp, reward)

    def _complete(self, params, prompts: Sequence[Prompt], sp: SamplingParams, reward: Optional[Callable] = None
                  ) -> Sampled:
        stops = () if self.stop_id is None else (self.stop_id,)
        env = self.env
        inject = self.tools.inject if self.tools is not None else env.inject if env is not None else None
        if self.tools is not None:
            self.tools.reset()
        if env is not None:
            prompts = env.start(prompts, prompt_room(self.cfg))
        requests = [Request(list(p.tokens), sp.max_new_tokens, sp.temperature, sp.top_k, sp.top_p, sp.seed, r,
                            stop_ids=stops, stop=None if env is None else env.stop, inject=inject)
                    for r, p in enumerate(prompts)]  # (row r: stream r of the step's seed; the environment's episode r)
        start = time.perf_counter()
        with self.on_engine():
            done = self.engine.run(requests, self.to_engine(params))
        sampled = time.perf_counter()
        new = [r.tokens for r in done]
        ended = [bool(t) and t[-1] == self.stop_id and len(t) - 1 not in r.injected for t, r in zip(new, done)]
        texts = [self.tokenizer.decode(t[:-1] if e else t) for t, e in zip(new, ended, strict=True)]
        rewards = env.rewards() if env is not None else np.array(
            [score(reward or self.reward, p.prompt, text, p.record, p.where) for p, text in zip(prompts, texts,
                                                                                                 strict=True)],
            np.float64)
        calls = (self.tools.calls, self.tools.errors) if self.tools is not None else (0, 0)
        return Sampled(new, texts, rewards, [r.injected for r in done], *calls,
                       seconds=(sampled - start, time.perf_counter() - sampled),
                       logprobs=[r.sampled_logprobs for r in done], prompts=prompts if env is not None else (),
                       env=(env.actions, env.errors, env.unfinished()) if env is not None else ())

    def tool_outputs(self, tokens: Sequence[int], injected: Sequence[int]) -> List[str]:
        """The texts a tool appended to one completion (its runs of `injected` tokens), in order."""
        runs: List[List[int]] = []
        for j in sorted(injected):
            if runs and runs[-1][-1] == j - 1:
                runs[-1].append(j)
            else:
                runs.append([j])
        return [self.tokenizer.decode([tokens[j] for j in run]) for run in runs]

    def layout(self, prompts: Sequence[Prompt], completions: Sequence[Sequence[int]],
               injected: Optional[Sequence[Sequence[int]]] = None, values: Optional[Sequence[Sequence[float]]] = None
               ) -> tuple:
        """(inputs, targets) [rows, data.seq_len] int32 on the host (the module docstring;
        `injected`: each completion's tool-output tokens, whose targets are -1). `values` (one per
        completion token: the engine's log-probabilities): (inputs, those values float32 where the
        targets are, 0 elsewhere)."""
        t = self.cfg.data.seq_len
        inputs = np.zeros((len(prompts), t), np.int32)
        targets = np.full((len(prompts), t), -1, np.int32) if values is None else np.zeros((len(prompts), t),
                                                                                          np.float32)
        for r, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            row = list(p.tokens) + list(c)
            n = min(len(row) - 1, t)
            inputs[r, :n] = row[:n]
            first = len(p.tokens) - 1  # (the input position whose target is the completion's first token)
            targets[r, first:n] = row[first + 1:n + 1] if values is None else values[r][:n - first]
            for j in (injected[r] if injected else ()):
                if first + j < t:
                    targets[r, first + j] = -1
        return inputs, targets

    def batch(self, params, reference, prompts: Sequence[Prompt], step: int,
              more: Optional[Callable[[int], List[Prompt]]] = None) -> Rollout:
        """Step `step`'s rollout of `prompts` (each sampled rl.group_size times), scored and laid
        out; the log-probabilities under `params` (the sampling policy) and `reference` (None:
        no KL term, the sampling policy's again). With rl.dynamic_sampling, groups whose rewards
        are all equal are dropped and `more(draw)` gives the prompts of another round, up to
        rl.dynamic_sampling_draws rounds; a batch still short is filled with dropped groups
        (advantage 0), and `informative` says how much of it is not. rl.overlong_buffer: the
        rewards the advantages see carry DAPO's overlong penalty."""
        r = self.cfg.rl
        params = self.to_engine(params)  # (rl.rollout_devices: the copy the engine samples from, and old_logp's)
        g, per = r.group_size, len(prompts)
        kept, flat, draw, calls, seconds, acted = [], [], 0, np.zeros(2, np.int64), np.zeros(2), np.zeros(3, np.int64)
        while True:
            rows = [p for p in prompts for _ in range(g)]
            out = self.complete(params, rows, self.sampling(step, draw=draw))
            calls += (out.tool_calls, out.tool_errors)
            seconds += out.seconds
            acted += out.env or (0, 0, 0)
            rows = list(out.prompts) or rows  # (with rl.env: each row's prompt, its first observation after it)
            for q in range(per):
                group = [(rows[i], out.tokens[i], out.texts[i], out.rewards[i], out.injected[i],
                          out.logprobs[i] if out.logprobs else None) for i in range(q * g, (q + 1) * g)]
                spread = len({x[3] for x in group}) > 1
                (kept if spread or not r.dynamic_sampling else flat).append(group)
            if not r.dynamic_sampling or len(kept) >= per or draw + 1 >= r.dynamic_sampling_draws or more is None:
                break
            draw += 1
            prompts = more(draw)
        informative = min(len(kept), per) / per if r.dynamic_sampling else 1.0
        rows, new, texts, rewards, injected, sampler = (list(column) for column in zip(
            *(x for q in (kept + flat)[:per] for x in q), strict=True))
        rewards = np.array(rewards, np.float64)
        lengths = np.array([len(c) for c in new])
        shaping = overlong_penalty(lengths, r.max_new_tokens, r.overlong_buffer, r.overlong_penalty)
        host = self.layout(rows, new, injected)
        sharding = self.rules.batch_sharding()
        inputs, targets = (jax.device_put(a, sharding) for a in host)
        advantages = jax.device_put(group_advantages(rewards + shaping, g, r.advantage.value == "group_std"),
                                    self.rules.sharding("batch"))
        start = time.perf_counter()
        if self.split:  # (the sampling policy's on the engine's devices, from its copy; then on the trainer's)
            with self.on_engine():
                here = [jax.device_put(a, self.engine_rules.batch_sharding()) for a in host]
                old = jax.device_put(self.engine_logps(params, *here), sharding)
        else:
            old = self.logps(params, inputs, targets)
        # (rl.kl_beta = 0 keeps no reference: the KL term weighs nothing, and rl/kl is then to the sampling policy)
        ref = old if reference is None else self.logps(reference, inputs, targets)
        taught = None if self.teacher is None else self.teacher.score(inputs, targets)
        jax.block_until_ready((old, ref, taught))
        logp_seconds = time.perf_counter() - start
        mismatch = correction = reverse_kl = None
        old_host, counted = np.asarray(old), np.asarray(targets) >= 0
        if taught is not None:  # (per-token advantages: the teacher's log-probability less the student's)
            per_token, reverse_kl = distill_advantages(np.asarray(taught), old_host, counted, np.asarray(advantages),
                                                       r.reward_weight)
            advantages = jax.device_put(per_token, sharding)
        if None not in sampler:
            at_sampler = self.layout(rows, new, injected, sampler)[1]
            mismatch = logp_mismatch(old_host, at_sampler, counted)
            if r.rollout_correction.value != "none":  # (per-token advantages: A x the token's weight)
                weights, *correction = correction_weights(old_host, at_sampler, counted, r.rollout_correction.value,
                                                          r.rollout_correction_cap)
                a = np.asarray(advantages)
                advantages = jax.device_put((a if a.ndim == 2 else a[:, None]) * weights, sharding)
        elif r.rollout_correction.value != "none":
            raise ValueError("rl.rollout_correction needs the engine's log-probabilities of every completion")
        return Rollout((inputs, targets, advantages, old, ref), rewards, lengths, texts, rows, draw + 1, informative,
                       float(shaping.mean()), r.dynamic_sampling, None if self.tools is None else tuple(calls),
                       injected, (*seconds.tolist(), logp_seconds), mismatch, tuple(correction) if correction else None,
                       reverse_kl, tuple(acted.tolist()) if self.env is not None else None)
