"""GRPO in the training loop: the run's prompts and tokenizer (`load_prompts`), the batches
(`RolloutBatcher`: each step's batch sampled from the policy as the step begins, `rollouts`),
and two hooks (spmdgpt.training.hooks): the rollout's metrics in each step's row (`RolloutMetrics`:
rl/reward, rl/reward_std, rl/length, rl/solved beside the step's own rl/kl and
rl/clip_fraction) and the evaluation by reward (`RewardEvaluation`: val/reward, greedy
completions of held-out prompts; rl.samples of them into samples.jsonl with their rewards).

With rl.updates_per_batch = U > 1, steps kU .. kU + U - 1 train on the batch sampled at step kU
(the importance ratio against its sampling parameters). Checkpoints then fall on multiples of U
(checkpoint.every), so that a resumed run samples what the uninterrupted one did.

With rl.max_staleness = K > 0 the rollouts run ahead of the update: batch k + K is sampled from the
parameters batch k starts from, in a thread (`RolloutBatcher.ahead`) while batch k's steps train,
and trained on with the ratio against those parameters (its old log-probabilities are theirs).
After a checkpoint the pipeline starts afresh: batch k is sampled from the parameters batch
max(k - K, c) starts from, c the batch of the last checkpoint.every checkpoint at or before it
(`RolloutBatcher.source`), so a run resumed from that checkpoint samples what the uninterrupted
one did, bitwise.

With rl.rollout_devices = N the engine samples on the last N devices and the update runs on the
others; the parameters each batch is sampled from are copied to the engine's devices as it begins
(spmdgpt.rl.split).
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

from spmdgpt.config import Config, ConfigError, TokenizerKind, dataset_configs
from spmdgpt.mesh.sharding import Rules
from spmdgpt.rl.prompts import Prompt, characters, prompt_room, read_records, split_prompts
from spmdgpt.rl.rollouts import Rollout, Rollouts, extra_prompts, prompts_of_step
from spmdgpt.run.loggers import append_rows
from spmdgpt.training.hooks import Evaluation, Hook


@dataclass
class PromptsCorpus:
    """A run's prompts (what `load_dataset` is for text): the two splits and the tokenizer."""

    train: List[Prompt]
    val: List[Prompt]
    tokenizer: object
    source: str  # (for the run's header)

    @property
    def train_tokens(self) -> int:
        return sum(len(p.tokens) for p in self.train)

    @property
    def val_tokens(self) -> int:
        return sum(len(p.tokens) for p in self.val)


def prompts_tokenizer(cfg: Config, recs: list):
    """An RL run's tokenizer: checkpoint.init_from's (its run's tokenizer.json), the ids its
    model was trained on; else data.tokenizer's (char: the characters of the prompts and
    answers, with an end-of-text id); with a chat template when a prompt is chat messages."""
    from spmdgpt.data.corpus import with_chat_template
    from spmdgpt.data.tokenizers import CharTokenizer, load_tokenizer, tokenizer_from_json
    from spmdgpt.training.state import init_from_tokenizer

    saved = init_from_tokenizer(cfg)
    if saved is not None and saved.is_file():
        try:
            tok = tokenizer_from_json(json.loads(saved.read_text(encoding="utf-8")), cfg.data)
        except (OSError, ValueError) as e:
            raise ConfigError([f"{saved}: cannot read the run's tokenizer ({e}); restore the file"]) from None
    elif cfg.data.tokenizer == TokenizerKind.char:
        tok = CharTokenizer(characters(recs))
    else:
        tok = load_tokenizer(cfg.data)
    chat = any(isinstance(obj, dict) and isinstance(obj.get("prompt"), list) for obj, _, _ in recs)
    return with_chat_template(cfg.data, tok) if chat and tok.kind != "chat" else tok


def load_prompts(cfg: Config, check: Optional[Callable] = None) -> PromptsCorpus:
    """The prompts of an RL run (format prompts), tokenized and split; `check` sees the
    tokenizer first (as load_dataset's)."""
    recs, src = read_records(cfg.data)
    tok = prompts_tokenizer(cfg, recs)
    if check is not None:
        check(tok)
    train, val = split_prompts(recs, src, tok, prompt_room(cfg))
    if not val:
        raise ConfigError([f"data.datasets.{src.name}: no validation prompts; set data.val_fraction > 0 (or the "
                           "dataset's val_fraction), or add a dataset with split=val"])
    files = src.files[0].url if len(src.files) == 1 else f"{src.name} ({len(src.files)} files)"
    return PromptsCorpus(train, val, tok, f"{files}: {len(train):,} train / {len(val):,} val prompts")


class RolloutBatcher:
    """The batches of an RL run, as the loop asks a Batcher for them: step i's is sampled from
    `policy()` (the loop's (parameters, reference) then) when i is a multiple of
    rl.updates_per_batch, else the last one sampled; with rl.max_staleness, ahead of it (the
    module docstring)."""

    def __init__(self, cfg: Config, rules: Rules, corpus: PromptsCorpus, reward: Optional[Callable] = None):
        """reward: default rl.reward's (`rewards.reward_function`)."""
        from spmdgpt.rl.rewards import reward_function
        from spmdgpt.rl.split import engine_rules

        self.cfg, self.rules, self.prompts = cfg, rules, corpus.train
        reward = reward or reward_function(cfg.rl.reward)
        teacher = None
        if cfg.rl.objective.value == "distill":  # (on-policy distillation: the frozen teacher on this mesh)
            from spmdgpt.rl.teacher import load_teacher

            teacher = load_teacher(cfg, rules, corpus.tokenizer)
        self.rollouts = Rollouts(cfg, rules, corpus.tokenizer, reward,
                                 longest=max(len(p.tokens) for p in corpus.train + corpus.val), teacher=teacher,
                                 engine_rules=engine_rules(cfg))  # (rl.rollout_devices: the engine's own devices)
        self.names = list(dataset_configs(cfg.data))
        self.packed = [None]
        self.per_step = cfg.data.batch_size // cfg.rl.group_size
        self.policy: Optional[Callable] = None  # (copy=False) -> (params, reference), set by the loop's owner
        self.current = None  # (rollout index, Rollout, seconds the step waited for it)
        self.stats: dict = {}  # optimizer step (1-based) -> its rollout's metrics
        # rl.max_staleness: the batches sampled ahead (batch index -> its Rollout to come), by one thread
        self.pending: Dict[int, Future] = {}
        self.first: Optional[int] = None  # the first batch this process trains on (a resumed run's: its checkpoint's)
        self.worker: Optional[ThreadPoolExecutor] = None

    def train_batch(self, i: int) -> tuple:
        u = self.cfg.rl.updates_per_batch
        k = i // u
        if self.current is None or self.current[0] != k:
            waited = time.perf_counter()
            rollout = self.ahead(k) if self.cfg.rl.max_staleness else self.sample(k, *self.policy())
            self.current = (k, rollout, time.perf_counter() - waited)
        k, rollout, waited = self.current
        self.stats[i + 1] = rollout.metrics(self.cfg.rl.group_size)
        if self.cfg.rl.max_staleness:  # (steps between the sampling parameters and the trained ones; the wait)
            self.stats[i + 1].update({"rl/staleness": i - self.source(k) * u, "rl/wait_seconds": waited})
        return rollout.batch

    def sample(self, k: int, params, reference) -> Rollout:
        """Batch k's rollout (its prompts and keys functions of (train.seed, k)) from `params`."""
        n, seed = len(self.prompts), self.cfg.train.seed
        chosen = [self.prompts[j] for j in prompts_of_step(n, self.per_step, seed, k)]
        more = lambda draw: [self.prompts[j] for j in extra_prompts(n, self.per_step, seed, k, draw)]  # noqa: E731
        return self.rollouts.batch(params, reference, chosen, k, more)

    def source(self, k: int) -> int:
        """The batch whose starting parameters batch k is sampled from (rl.max_staleness = K): k - K,
        but none before the last checkpoint.every checkpoint at or before batch k, nor before this
        process's first batch (the module docstring)."""
        u, every = self.cfg.rl.updates_per_batch, self.cfg.checkpoint.every if self.cfg.checkpoint.enabled else 0
        saved = (k * u) // every * every // u if every else 0
        return max(k - self.cfg.rl.max_staleness, saved, self.first or 0)

    def ahead(self, k: int) -> Rollout:
        """Batch k's rollout, sampled ahead: as batch k begins, the batches up to k + K whose source is k
        are handed to the worker thread with a copy of the parameters (the step donates its own), then
        batch k's is waited for (sampled now, or while an earlier batch trained)."""
        if self.first is None:
            self.first = k
        batches = -(-self.cfg.train.steps // self.cfg.rl.updates_per_batch)
        due = [j for j in range(k, min(k + self.cfg.rl.max_staleness + 1, batches))
               if j not in self.pending and self.source(j) == k]
        if due:  # (rl.rollout_devices: the copy is on the engine's devices)
            params, reference = self.policy(copy=True)
            if self.worker is None:
                self.worker = ThreadPoolExecutor(1, thread_name_prefix="spmdgpt-rollouts")
            for j in due:
                self.pending[j] = self.worker.submit(self._sample_on_mesh, j, params, reference)
        return self.pending.pop(k).result()

    def _sample_on_mesh(self, k: int, params, reference) -> Rollout:
        import jax

        with jax.set_mesh(self.rules.mesh):  # (the run's mesh is the main thread's context)
            return self.sample(k, params, reference)

    def close(self) -> None:
        """The worker stopped: batches not begun are dropped, the one being sampled is waited for."""
        if self.worker is not None:
            self.worker.shutdown(wait=True, cancel_futures=True)
            self.worker, self.pending = None, {}

    def epochs(self, step: int) -> dict:
        """Passes over the training prompts after `step` optimizer steps."""
        seen = -(-step // self.cfg.rl.updates_per_batch) * self.per_step
        return {self.names[0]: seen / len(self.prompts)}


class RolloutMetrics(Hook):
    """The step's rollout metrics (rl/reward, rl/reward_std, rl/length, rl/solved,
    rl/empty_fraction, rl/flat_groups) in its row, and a warning (an event row and a console
    line) when QUIET steps in a row trained on nothing: every completion empty, or every group's
    rewards equal (all advantages 0: no gradient but the KL's)."""

    QUIET = 5

    def __init__(self, batcher: RolloutBatcher, rewarded: bool = True):
        """rewarded: the run learns from the rewards' advantages (not on-policy distillation alone,
        which learns from its teacher whatever the rewards: no equal-rewards warning)."""
        self.batcher, self.rewarded = batcher, rewarded
        self.streaks = {"rl_empty_completions": 0, "rl_equal_rewards": 0}

    def close(self, loop):
        self.batcher.close()  # (rl.max_staleness: the sampling thread)

    def reported(self, loop, step, m, row):
        stats = self.batcher.stats.pop(step, {})
        row.update(stats)
        if not stats:
            return
        for name, quiet in (("rl_empty_completions", stats["rl/empty_fraction"] == 1.0),
                            ("rl_equal_rewards", self.rewarded and stats["rl/flat_groups"] == 1.0)):
            self.streaks[name] = self.streaks[name] + 1 if quiet else 0
            if self.streaks[name] == self.QUIET:
                loop.event(step, name, steps=self.QUIET, reward=stats["rl/reward"], advice=ADVICE[name])


ADVICE = {
    "rl_empty_completions": "every completion was empty: the policy ends its turn at once; check that the prompts "
                            "look like its training data (a chat model's prompts as chat messages or texts under its "
                            "chat template), and samples.jsonl",
    "rl_equal_rewards": "every prompt's completions scored alike, so GRPO's advantages are 0 and nothing trains; "
                        "check rl.reward against samples.jsonl, raise rl.temperature or rl.group_size, or use "
                        "easier prompts",
}


class RewardEvaluator:
    """The mean reward (rl.val_reward, default rl.reward) of greedy completions of the first
    rl.val_prompts validation prompts (the same ones at every evaluation); the first rl.samples
    of them into samples.jsonl."""

    def __init__(self, cfg: Config, rollouts: Rollouts, val: List[Prompt], samples_path: Optional[Path]):
        from spmdgpt.rl.rewards import reward_function

        self.rollouts, self.samples = rollouts, cfg.rl.samples
        self.reward = reward_function(cfg.rl.val_reward, "rl.val_reward") if cfg.rl.val_reward else None
        self.prompts = val[: cfg.rl.val_prompts]
        self.samples_path = samples_path

    def __call__(self, params, step: int) -> tuple:
        """(mean reward, [(prompt, completion, reward)] of the samples)."""
        out = self.rollouts.complete(params, self.prompts, self.rollouts.sampling(0, greedy=True), self.reward)
        texts, rewards = out.texts, out.rewards
        shown = [(p, c, float(r)) for p, c, r in zip(self.prompts[: self.samples], texts, rewards, strict=False)]
        if self.samples_path is not None and shown:  # (a failed write raises files.WriteFailed)
            tools = self.rollouts.tools is not None  # (then what the tool wrote into each: its outputs' texts)
            append_rows(self.samples_path, ({"step": step, "prompt": p.prompt, "completion": c, "reward": r,
                                             "answer": p.record.get("answer"),
                                             **({"tool_outputs": self.rollouts.tool_outputs(t, j)} if tools else {})}
                                            for (p, c, r), t, j in zip(shown, out.tokens, out.injected)))
        return float(rewards.mean()), shown


def reward_evaluation(cfg: Config, rules: Rules, tokenizer, samples_path: Optional[Path]) -> "RewardEvaluation":
    """val/reward for a text run (SFT) with rl.eval_prompts: the file's validation prompts, split
    as a GRPO run on it splits them (by each line's hash under data.val_fraction: the same
    held-out prompts), tokenized by the run's tokenizer, answered greedily and scored by
    rl.val_reward (default rl.reward) at each evaluation: an SFT run's curve beside a GRPO run's."""
    import dataclasses

    from spmdgpt.rl.rewards import reward_function

    data = dataclasses.replace(cfg.data, datasets={"eval_prompts": {"paths": [cfg.rl.eval_prompts],
                                                                    "format": "prompts"}})
    recs, src = read_records(data)
    _, val = split_prompts(recs, src, tokenizer, prompt_room(cfg))
    if not val:
        raise ConfigError([f"rl.eval_prompts={cfg.rl.eval_prompts}: no validation prompts under data.val_fraction="
                           f"{cfg.data.val_fraction}; raise it"])
    rollouts = Rollouts(cfg, rules, tokenizer, reward_function(cfg.rl.reward),
                        longest=max(len(p.tokens) for p in val[: cfg.rl.val_prompts]))
    return RewardEvaluation(RewardEvaluator(cfg, rollouts, val, samples_path))


class RewardEvaluation(Evaluation):
    """val/reward every train.eval_every steps and at the end (`RewardEvaluator`), and one
    sample printed after it."""

    def __init__(self, evaluator: RewardEvaluator):
        super().__init__(evaluator)

    def evaluate(self, loop, step: int) -> None:
        reward, shown = self.evaluator(loop.model_params(), step)
        loop.val_reward = reward
        if loop.metrics_log:
            loop.metrics_log.log({"step": step, "val/reward": reward})
        loop.say(f"step {step}: val/reward {reward:.4f}")
        if shown:
            p, c, r = shown[0]
            if hasattr(self.evaluator.rollouts.tokenizer, "prompt"):  # (a chat turn: the user's, then the reply)
                text = p.prompt if isinstance(p.prompt, str) else p.prompt[-1].get("content", "")
                text, c = f"user: {text}\nassistant: ", c
            else:  # (a continuation of the prompt's text)
                text = p.prompt
            loop.say(f"sample at step {step} (reward {r:g}):\n{text}{c}\n" if not sys.stderr.isatty()
                     else f"sample at step {step} (reward {r:g}):\n{text}\033[1m{c}\033[0m\n")
        loop.restart_window()  # evaluation is not training
