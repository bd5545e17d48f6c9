"""Kinds of run: what a run loads, how its batches are made, what it evaluates, which programs
its preflight compiles and which batch its plan lays out. The trainer runs any kind without
naming one (`run_kind(cfg)` picks it from the run's data), as the step runs any `Objective`.

    text   documents (pretraining), conversations (SFT) or preference pairs (DPO, which keeps a
           frozen reference): packed token rows, the validation loss, text samples
    grpo   prompts with answers: batches sampled from the policy as each step begins, scored by a
           reward (spmdgpt.rl.kind)

A new kind is one module defining a `RunKind` (spmdgpt.training.runkind) and a case in `run_kind`.
"""

from __future__ import annotations

import sys
from typing import Callable

import jax

from spmdgpt.config import Config, ConfigError, document_batches, preference_data, prompts_data
from spmdgpt.mesh.sharding import Rules
from spmdgpt.training.runkind import RunKind, RunParts

# ----------------------------------------------------------------------------- text


def _load_text(cfg: Config, check: Callable):
    from spmdgpt.data import load_dataset

    data = load_dataset(cfg.data, progress=cfg.train.progress and jax.process_index() == 0, check=check)
    if not data.val:
        raise ConfigError(["data: the corpus has no validation text; set data.val_fraction > 0 "
                           "(or a dataset's val_fraction), or add a dataset with split=val"])
    return data


def corpus_batcher(cfg: Config, rules: Rules, data, is_main: bool):
    """The training batches of a text corpus (documents, conversations or preference pairs
    packed into rows, `Batcher`); how the packed datasets filled their rows, printed."""
    from spmdgpt.data import Batcher

    d = cfg.data
    batcher = Batcher(data.train, data.weights, d.seq_len, d.batch_size, cfg.train.seed, rules.batch_sharding(),
                      *document_batches(d), pad_id=data.tokenizer.eos_id or 0)
    for name, packing in zip(batcher.names, batcher.packed, strict=True):
        if packing is not None and is_main:
            what = "pairs" if packing.stream.pairs else "conversations"
            print(f"{name}: {packing.units:,} {what} packed into {packing.rows:,} rows of {d.seq_len + 1} tokens "
                  f"({packing.fill:.1%} filled" + (f"; {packing.truncated:,} longer than a row, "
                  + ("left out" if packing.stream.pairs else "cut") if packing.truncated else "") + ")",
                  file=sys.stderr)
    return batcher


def _text_parts(cfg: Config, rules: Rules, data, batcher, samples, reference) -> RunParts:
    from spmdgpt.data import EvalBatcher
    from spmdgpt.eval.evaluate import LossEvaluator, TextSampler
    from spmdgpt.training.hooks import Evaluation

    d = cfg.data
    val_sets = {name: EvalBatcher(s, d.seq_len, d.batch_size, cfg.train.eval_batches, rules.batch_sharding(),
                                  name, *document_batches(d), pad_id=data.tokenizer.eos_id or 0)
                for name, s in data.val.items()}
    evaluator = LossEvaluator(cfg, rules, val_sets, reference)
    sampler = None
    if cfg.train.rollout_tokens > 0:
        sampler = TextSampler(cfg, rules, data.tokenizer, next(iter(data.val.values())), samples)
    hooks = [Evaluation(evaluator, sampler)]
    if cfg.rl.eval_prompts:  # (an SFT run's val/reward, as GRPO's: spmdgpt.rl.loop.reward_evaluation)
        from spmdgpt.rl.loop import reward_evaluation

        hooks.append(reward_evaluation(cfg, rules, data.tokenizer, samples))
    return RunParts(batcher, hooks, evaluator, sampler)


def _text_preflight(cfg: Config, rules: Rules, optimizer, begin, parts: RunParts, base, reference) -> dict:
    from spmdgpt.plan.preflight import preflight

    return preflight(cfg, rules, optimizer, begin, parts.batcher, parts.evaluator, parts.sampler, base, reference)


def _text_batch_shapes(cfg: Config, rules: Rules) -> tuple:
    from spmdgpt.plan.plan import batch_shapes  # (inputs, targets, + segment ids, positions)

    return batch_shapes(cfg, rules)


TEXT = RunKind(
    name="text",
    load=_load_text,
    batcher=corpus_batcher,
    parts=_text_parts,
    keeps_reference=lambda cfg: preference_data(cfg.data),  # (DPO's reference)
    preflight=_text_preflight,
    batch_shapes=_text_batch_shapes,
)


def run_kind(cfg: Config) -> RunKind:
    """The kind of run `cfg` is, by its data: prompts with answers are GRPO's, the rest text."""
    if prompts_data(cfg.data):
        from spmdgpt.rl.kind import GRPO

        return GRPO
    return TEXT
