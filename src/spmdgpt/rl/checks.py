"""GRPO's run policy: the checks of a run on prompts data (`rl.*`, and what GRPO does not run
with yet), collected by `config.validate` beside the other features' (the loss itself is
`spmdgpt.model.grpo`, beside DPO's)."""

from __future__ import annotations

from typing import List

from spmdgpt.config import Config, ConfigError, dataset_configs, preference_data, prompts_data
from spmdgpt.rl.envs import env_class
from spmdgpt.rl.rewards import reward_function
from spmdgpt.rl.split import split_errors
from spmdgpt.rl.teacher import config_errors as teacher_errors
from spmdgpt.rl.tools import tool_function


def config_errors(cfg: Config) -> List[str]:
    """GRPO's settings (`rl.*`), checked when the run's data is prompts (`format: prompts`; its
    sampling values, rl.temperature and rl.top_p, in every run: config.validate)."""
    try:
        if not prompts_data(cfg.data):
            return _eval_prompts_errors(cfg) + ([
                f"rl.rollout_devices={cfg.rl.rollout_devices}: the rollouts' own devices are GRPO's (prompts data, "
                "format: prompts); this run's data is not prompts: leave it out"] if cfg.rl.rollout_devices else [])
    except ConfigError:  # (reported by the data checks)
        return []
    r, d, t = cfg.rl, cfg.data, cfg.train
    if r.eval_prompts:
        return ["rl.eval_prompts is a text (SFT) run's reward evaluation; a GRPO run evaluates its own validation "
                "prompts (val/reward): leave it out"]
    errs = teacher_errors(cfg)
    alone = r.objective.value == "distill" and not r.reward_weight > 0  # (no group advantages: any group size)
    if r.group_size < (1 if alone else 2):
        errs.append(f"rl.group_size={r.group_size} must be >= {1 if alone else 2} (advantages compare a prompt's "
                    "completions)")
    elif d.batch_size % r.group_size:
        errs.append(f"data.batch_size={d.batch_size} must be a multiple of rl.group_size={r.group_size} "
                    "(a batch holds whole groups: batch_size / group_size prompts a step)")
    if r.max_new_tokens < 1:
        errs.append(f"rl.max_new_tokens={r.max_new_tokens} must be >= 1")
    if r.dynamic_sampling_draws < 1:
        errs.append(f"rl.dynamic_sampling_draws={r.dynamic_sampling_draws} must be >= 1")
    if not 0 <= r.overlong_buffer <= r.max_new_tokens:
        errs.append(f"rl.overlong_buffer={r.overlong_buffer} must be in [0, rl.max_new_tokens={r.max_new_tokens}] "
                    "(the last tokens of the budget over which the penalty grows)")
    if r.overlong_penalty < 0:
        errs.append(f"rl.overlong_penalty={r.overlong_penalty} must be >= 0")
    if r.clip <= 0 or r.clip >= 1:
        errs.append(f"rl.clip={r.clip} must be in (0, 1) (PPO's epsilon, e.g. 0.2)")
    if r.clip_low is not None and not 0 < r.clip_low < 1:
        errs.append(f"rl.clip_low={r.clip_low} must be in (0, 1) (the ratio's floor is 1 - clip_low)")
    if r.clip_high is not None and r.clip_high <= 0:
        errs.append(f"rl.clip_high={r.clip_high} must be > 0 (the ratio's ceiling is 1 + clip_high; DAPO: 0.28)")
    if r.kl_beta < 0:
        errs.append(f"rl.kl_beta={r.kl_beta} must be >= 0 (0: no KL penalty)")
    if r.temperature == 0:
        errs.append("rl.temperature=0 samples every completion of a group alike (greedy): their advantages are all 0 "
                    "and GRPO learns nothing; give a temperature > 0 (1.0: the model's own distribution)")
    if not r.rollout_correction_cap >= 1.0:
        errs.append(f"rl.rollout_correction_cap={r.rollout_correction_cap} must be >= 1 (the importance weight's "
                    "truncation, or the ratio above which a token is dropped)")
    if r.updates_per_batch < 1:
        errs.append(f"rl.updates_per_batch={r.updates_per_batch} must be >= 1")
    if r.max_staleness < 0:
        errs.append(f"rl.max_staleness={r.max_staleness} must be >= 0 (batches sampled ahead of the update; 0: "
                    "on-policy)")
    if len(dataset_configs(d)) > 1:
        errs.append("data.datasets: prompts (format prompts, trained by GRPO) are one dataset; leave the others out")
    for bad, what in ((cfg.mesh.stage > 1, f"mesh.stage={cfg.mesh.stage}: pipeline stages (the sampler has none)"),
                      (cfg.mesh.context > 1, f"mesh.context={cfg.mesh.context}: context parallelism (the sampler "
                                             "has none)"),
                      (cfg.model.moe.num_experts > 0, "model.moe.num_experts: mixture-of-experts layers (their "
                                                      "balancing losses)"),
                      (t.time_budget is not None, "train.time_budget (its calibration times the language-model step)"),
                      (t.stats_every > 0, "train.stats_every (the statistics differentiate the language-model loss)"),
                      (preference_data(d), "preference data")):
        if bad:
            errs.append(f"prompts data (GRPO) does not work with {what} yet; leave it out")
    u = r.updates_per_batch
    if u > 1 and cfg.checkpoint.every % u:
        errs.append(f"checkpoint.every={cfg.checkpoint.every} must be a multiple of rl.updates_per_batch={u} "
                    "(a checkpoint between a batch's updates could not resume its sampled batch)")
    errs += val_reward_errors(cfg) + tool_errors(cfg) + split_errors(cfg)
    try:
        reward_function(r.reward)
    except ConfigError as e:
        errs.extend(e.messages)
    return errs


def tool_errors(cfg: Config) -> List[str]:
    """rl.tool or rl.env, when set: a tool (or environment class) that imports, marks that open and
    close a call, an output with its {}."""
    r = cfg.rl
    if not r.tool and not r.env:
        return []
    errs = []
    if r.tool and r.env:
        errs.append(f"rl.tool={r.tool} and rl.env={r.env}: a rollout acts on one of them; leave one out (an "
                    "environment can hold a tool: its step answers the call)")
    try:
        tool_function(r.tool) if r.tool else env_class(r.env)
    except ConfigError as e:
        errs.extend(e.messages)
    if not r.tool_open or not r.tool_close:
        errs.append(f"rl.tool_open={r.tool_open!r}, rl.tool_close={r.tool_close!r}: a tool call needs both marks "
                    "(e.g. << and >>)")
    if "{}" not in r.tool_output:
        errs.append(f"rl.tool_output={r.tool_output!r} must hold {{}} (where the tool's output goes)")
    if r.tool_calls < 1:
        errs.append(f"rl.tool_calls={r.tool_calls} must be >= 1 (the most calls, or an environment's actions, a "
                    "completion may make)")
    if not r.tool_timeout > 0:
        errs.append(f"rl.tool_timeout={r.tool_timeout} must be > 0 seconds")
    if not 0 < r.env_timeout < float("inf"):
        errs.append(f"rl.env_timeout={r.env_timeout} must be a finite number > 0 of seconds")
    return errs


def val_reward_errors(cfg: Config) -> List[str]:
    """rl.val_reward, when set: a reward that imports."""
    try:
        cfg.rl.val_reward and reward_function(cfg.rl.val_reward, "rl.val_reward")
    except ConfigError as e:
        return list(e.messages)
    return []


def _eval_prompts_errors(cfg: Config) -> List[str]:
    """rl.eval_prompts on a text run: what its greedy answers need."""
    r = cfg.rl
    if r.objective.value != "grpo" or r.teacher:
        return [f"rl.objective={r.objective.value}, rl.teacher={r.teacher}: on-policy distillation samples prompts "
                "(data of format: prompts); this run's data is not prompts"]
    if r.env and not r.eval_prompts:
        return [f"rl.env={r.env}: environments act in GRPO's rollouts (prompts data) and in rl.eval_prompts' "
                "answers; this run has neither: leave it out, or set rl.eval_prompts"]
    if not r.eval_prompts:
        return [f"rl.tool={r.tool}: tools are called in GRPO's rollouts (prompts data) and in rl.eval_prompts' "
                "answers; this run has neither: leave it out, or set rl.eval_prompts"] if r.tool else []
    errs = []
    if r.max_new_tokens < 1:
        errs.append(f"rl.max_new_tokens={r.max_new_tokens} must be >= 1 (rl.eval_prompts' answers)")
    if r.val_prompts < 1:
        errs.append(f"rl.val_prompts={r.val_prompts} must be >= 1 (the held-out prompts rl.eval_prompts answers)")
    return errs + val_reward_errors(cfg) + tool_errors(cfg)
