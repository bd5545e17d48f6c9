"""On-policy distillation's teacher (`rl.objective=distill`, `rl.teacher=RUN | hf:DIR`).

The student samples its completions as GRPO's rollouts do; the teacher, frozen on the same mesh
(its own model config, the run's sharding rules), scores the same tokens, and each completion
token's advantage is

    a_t = log p_teacher(x_t | x_<t) - log p_student(x_t | x_<t)        (+ rl.reward_weight x A_i)

with the student's log-probability under the parameters that sampled the batch (old_logp). GRPO's
clipped surrogate on these per-token advantages has, at the sampling parameters, the gradient
E[(log p_s - log p_t) grad log p_s] over the sampled tokens: the policy gradient of the per-token
reverse KL(student || teacher) on the student's own samples (GKD, Agarwal et al. 2024, with
λ = 1 and the reverse KL; each token's own term, no sum over the tokens after it, as Thinking
Machines' on-policy distillation (Lu et al. 2025) and Tinker take it). On a batch's first update
the step's loss is then the sampled estimate of that KL, mean(log p_s - log p_t) over the
completion tokens (the reward's term added, and rl.kl_beta's); rows log it as rl/reverse_kl.

Both log-probabilities are of the models' own distributions (temperature 1, which the rollouts
then sample at) over the tokenizer's ids. The teacher reads the student's tokenizer: a run
directory's tokenizer.json must be the student's (or the one under its chat template); a Hugging
Face folder's tokenizer.json, when it has one, must be that or give every id the same text.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Callable, List, NamedTuple

import jax
import numpy as np

from spmdgpt.config import Config, ConfigError, ModelConfig
from spmdgpt.hf import hf_folder
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.grpo import token_logps


class Teacher(NamedTuple):
    """A frozen teacher on the run's mesh: its model, its rules (the run's table for its model),
    its parameters and its jitted log-probabilities (params, inputs, targets) -> float32 [b, t]."""

    model: ModelConfig
    rules: Rules
    params: object
    logps: Callable

    def score(self, inputs, targets):
        """log p_teacher of every counted target (0 where targets < 0), float32 [b, t] on the devices."""
        return self.logps(self.params, inputs, targets)


def config_errors(cfg: Config) -> List[str]:
    """rl.objective / rl.teacher / rl.reward_weight, before the run starts (the teacher's
    tokenizer and shapes are checked when it loads: `load_teacher`)."""
    r = cfg.rl
    errs = []
    if r.objective.value == "grpo":
        for name, value in (("teacher", r.teacher), ("reward_weight", r.reward_weight)):
            if value:
                errs.append(f"rl.{name}={value} is read by on-policy distillation only: set rl.objective=distill "
                            f"(or leave rl.{name} out)")
        return errs
    if not r.teacher:
        return ["rl.objective=distill needs rl.teacher: a training run's directory or hf:DIR (the model whose "
                "log-probabilities the student learns)"]
    where = f"rl.teacher={r.teacher}"
    folder = hf_folder(r.teacher)
    if folder is not None and not (folder / "config.json").is_file():
        errs.append(f"{where}: no config.json in {folder}; give a Hugging Face model folder")
    elif folder is None and not (Path(r.teacher).expanduser() / "config.yaml").is_file():
        errs.append(f"{where}: no config.yaml there; give a training run's directory (or hf:DIR)")
    if r.temperature != 1.0:
        errs.append(f"rl.temperature={r.temperature}: on-policy distillation samples from the student's own "
                    "distribution (the reverse KL's expectation); leave it at 1")
    if not 0 <= r.reward_weight <= 1e6:  # (nan too)
        errs.append(f"rl.reward_weight={r.reward_weight} must be a number in [0, 1e6] (0: distillation alone)")
    return errs


def teacher_model(cfg: Config) -> ModelConfig:
    """rl.teacher's model config: a run's (its config.yaml), or a Hugging Face folder's config.json
    fields over the run's model (whose other fields, compute_dtype and attention among them, it keeps)."""
    from spmdgpt.config import load_run_config, model_config_from_dict

    folder = hf_folder(cfg.rl.teacher)
    where = f"rl.teacher={cfg.rl.teacher}"
    if folder is None:
        try:
            return load_run_config(Path(cfg.rl.teacher).expanduser()).model
        except ConfigError as e:
            raise ConfigError([f"{where}: {m}" for m in e.messages]) from None
    from spmdgpt.hf import model_fields, read_hf_config

    hf = read_hf_config(folder, where)
    model = model_config_from_dict(model_fields(hf, where), base=cfg.model)
    return model_config_from_dict({"max_seq_len": int(hf.get("max_position_embeddings", model.max_seq_len))},
                                  base=model)


def _teacher_tokenizer(cfg: Config):
    """rl.teacher's tokenizer: a run's tokenizer.json as a to_json() dict, a Hugging Face folder's
    as a tokenizer (None: a folder without tokenizer.json)."""
    import json

    folder = hf_folder(cfg.rl.teacher)
    if folder is not None:
        if not (folder / "tokenizer.json").is_file():
            return None
        from spmdgpt.data.tokenizers import HFTokenizer

        return HFTokenizer.from_file(folder / "tokenizer.json", f"rl.teacher={cfg.rl.teacher}: tokenizer.json",
                                     eos_required=False)
    path = Path(cfg.rl.teacher).expanduser() / "tokenizer.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError([f"rl.teacher={cfg.rl.teacher}: cannot read its tokenizer.json ({e}); give a training "
                           "run's directory"]) from None


def _same_ids(theirs, tokenizer) -> bool:
    """Whether a tokenizer object has `tokenizer`'s ids and gives each of the ids under its chat
    template's tokens the same text: an exported run's folder holds its char or GPT-2 vocabulary as
    a Hugging Face tokenizer.json (whose decoder skips the template's special tokens)."""
    plain = tokenizer.base if tokenizer.kind == "chat" else tokenizer
    return theirs.vocab_size == tokenizer.vocab_size and all(theirs.decode([i]) == plain.decode([i])
                                                             for i in range(plain.vocab_size))


def load_teacher(cfg: Config, rules: Rules, tokenizer) -> Teacher:
    """rl.teacher on the run's mesh (call inside it): checked against the student's tokenizer and
    context, its parameters restored into the run's sharding rules for its model."""
    from spmdgpt.training.state import same_tokenizer

    where = f"rl.teacher={cfg.rl.teacher}"
    model = teacher_model(cfg)
    theirs = _teacher_tokenizer(cfg)
    if theirs is not None and not (same_tokenizer(theirs, tokenizer) if isinstance(theirs, dict) else
                                   same_tokenizer(theirs.to_json(), tokenizer) or _same_ids(theirs, tokenizer)):
        kind = theirs.get("kind") if isinstance(theirs, dict) else theirs.kind
        raise ConfigError([f"{where} reads another tokenizer ({kind}) than this run's ({tokenizer.kind}, "
                           f"{tokenizer.vocab_size} ids), so its log-probabilities would be of other text; distil "
                           "from a teacher trained with the student's tokenizer"])
    if model.vocab_size < tokenizer.vocab_size:
        raise ConfigError([f"{where}: its vocabulary ({model.vocab_size} ids) is smaller than this run's tokenizer's "
                           f"({tokenizer.vocab_size}); distil from a teacher trained with the student's tokenizer"])
    if model.max_seq_len < cfg.data.seq_len:
        raise ConfigError([f"{where}: its context of {model.max_seq_len} tokens is shorter than the rollouts' rows "
                           f"(data.seq_len={cfg.data.seq_len}); lower data.seq_len"])
    trules = Rules(rules.mesh, cfg.sharding, model)
    folder = hf_folder(cfg.rl.teacher)
    if folder is None:
        from spmdgpt.training.state import load_params

        try:
            _, params = load_params(Path(cfg.rl.teacher).expanduser(), model, trules,
                                    fix="give a run whose checkpoints match its config.yaml")
        except ConfigError as e:
            raise ConfigError([f"{where}: {m}" for m in e.messages]) from None
    else:
        from spmdgpt.hf import load_params as load_hf_params

        params = load_hf_params(model, folder, trules, where)
    logps = jax.jit(partial(token_logps, model, trules, temperature=1.0, vocab_limit=tokenizer.vocab_size))
    return Teacher(model, trules, params, logps)


def distill_advantages(teacher_logp: np.ndarray, student_logp: np.ndarray, counted: np.ndarray,
                       advantages: np.ndarray, reward_weight: float) -> tuple:
    """(float32 [b, t] per-token advantages: teacher - student log-probability, plus reward_weight x
    each row's advantage [b], on the counted tokens and 0 elsewhere; rl/reverse_kl, the mean of
    student - teacher over the counted tokens (float64 sums))."""
    gap = teacher_logp.astype(np.float64) - student_logp.astype(np.float64)
    a = np.where(counted, gap + reward_weight * np.asarray(advantages, np.float64)[:, None], 0.0)
    n = max(int(counted.sum()), 1)
    return a.astype(np.float32), float(-gap[counted].sum() / n)
