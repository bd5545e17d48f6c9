"""GRPO as a kind of run (`spmdgpt.training.runkind.RunKind`): prompts with answers loaded with their
tokenizer, each step's batch sampled from the policy as the step begins (`loop.RolloutBatcher`),
the rollouts' metrics and the reward evaluation as hooks, a preflight that compiles the step, the
rollouts' engine step and their log-probabilities, and the rollout batch's shapes for the plan."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from spmdgpt.config import Config
from spmdgpt.mesh.sharding import Rules
from spmdgpt.rl.split import trainer_devices
from spmdgpt.training.runkind import RunKind, RunParts


def _batcher(cfg: Config, rules: Rules, data, is_main: bool):
    from spmdgpt.rl.loop import RolloutBatcher

    return RolloutBatcher(cfg, rules, data)


def _parts(cfg: Config, rules: Rules, data, batcher, samples, reference) -> RunParts:
    from spmdgpt.rl.loop import RewardEvaluation, RewardEvaluator, RolloutMetrics

    rewarded = cfg.rl.objective.value != "distill" or cfg.rl.reward_weight > 0
    return RunParts(batcher, [RolloutMetrics(batcher, rewarded),
                              RewardEvaluation(RewardEvaluator(cfg, batcher.rollouts, data.val, samples))])


def _bind(loop, parts: RunParts, reference) -> None:
    """Each step's batch is sampled from the loop's parameters as the step begins (copy: the trained
    ones copied, for rollouts sampled ahead while the step, which donates them, runs; with
    rl.rollout_devices the copy is the engine's, on its devices, waited for before the step runs)."""
    rollouts = parts.batcher.rollouts

    def policy(copy: bool = False):
        if copy and rollouts.split:
            return rollouts.to_engine(loop.model_params(), block=True), reference
        return loop.model_params(jax.tree.map(jnp.copy, loop.state.params) if copy else None), reference

    parts.batcher.policy = policy


def batch_shapes(cfg: Config, rules: Rules) -> tuple:
    """A rollout batch: inputs, targets (int32 [batch, seq]), advantages (float32 [batch]; [batch, seq]
    with rl.rollout_correction), the
    sampling policy's and the reference's log-probabilities (float32 [batch, seq])."""
    d = cfg.data
    tokens = jax.ShapeDtypeStruct((d.batch_size, d.seq_len), jnp.int32, sharding=rules.batch_sharding())
    floats = jax.ShapeDtypeStruct((d.batch_size, d.seq_len), jnp.float32, sharding=rules.batch_sharding())
    # (with rl.rollout_correction, one per token: the advantage times the token's importance weight; with
    # rl.objective=distill, the teacher's log-probability less the student's)
    per_token = cfg.rl.rollout_correction.value != "none" or cfg.rl.objective.value == "distill"
    advantages = (jax.ShapeDtypeStruct((d.batch_size,), jnp.float32, sharding=rules.sharding("batch"))
                  if not per_token else
                  jax.ShapeDtypeStruct((d.batch_size, d.seq_len), jnp.float32, sharding=rules.batch_sharding()))
    return tokens, tokens, advantages, floats, floats


def preflight(cfg: Config, rules: Rules, optimizer, begin, parts: RunParts, base=None, reference=None) -> dict:
    """The preflight of a GRPO run: its step on a rollout batch's shapes, the engine's step of its
    rollouts (with decode and prefill rows: its largest program) and the log-probabilities of a batch
    (and on-policy distillation's teacher's, its parameters resident beside every program),
    compiled before step 1 for the run's state (and with rl.max_staleness = K the K copies of the
    trained parameters the rollouts sampled ahead read) and checked against a device's memory
    (`preflight.checked`); the run then calls these executables. With rl.rollout_devices the engine's
    step and the sampling policy's log-probabilities are compiled for the engine's devices, beside
    the parameters' copies there (1 + K: the one sampled from, K made for batches queued) and not the
    trainer's state; the trainer's devices hold no pool nor copy (`engine_programs`), and the
    reference's log-probabilities (rl_ref_logps) are compiled on them."""
    from spmdgpt.mesh.sharding import shard_bytes
    from spmdgpt.model import param_info
    from spmdgpt.model.lora import attach
    from spmdgpt.plan.plan import _compiled, run_programs
    from spmdgpt.plan.preflight import checked

    ro = parts.batcher.rollouts
    batch = batch_shapes(cfg, rules)
    tokens = batch[0]
    teacher = None if ro.teacher is None else ro.teacher.params  # (distillation's: resident beside every program)
    state = begin.state
    # (the copies rollouts sampled ahead read, one a batch: with rl.rollout_devices, on the engine's devices)
    ahead = (state.params,) * cfg.rl.max_staleness if not ro.split else ()
    programs = run_programs(cfg, rules, optimizer, state, batch, (), base=base,
                            held_bytes=shard_bytes((teacher, ahead)), step_only=True,
                            vocab_limit=ro.tokenizer.vocab_size)
    params = state.params if base is None else attach(param_info(cfg.model), cfg.lora, base, state.params)
    resident = shard_bytes((state, base, reference, teacher, ahead))
    device = rules.mesh.devices.flat[0]
    if ro.split:
        programs += engine_programs(cfg, ro, jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype),
                                                          state.params), tokens)
        if reference is not None:  # (the reference's log-probabilities, on the trainer's devices)
            programs.append(_compiled("rl_ref_logps", ro.logps.lower(reference, tokens, tokens), resident,
                                      (tokens, tokens), device=device))
            ro.logps = programs[-1].compiled
        return {p.name: p.executable for p in checked(_teacher_programs(ro, tokens, resident, device, programs))}
    # (the engine's step with both row groups, its largest program: the pool is its input and output)
    programs.append(_compiled("rl_rollout", ro.engine.lower(params), resident, ro.engine.shapes(), device=device))
    ro.engine.use(programs[-1].compiled)
    programs.append(_compiled("rl_logps", ro.logps.lower(params, tokens, tokens), resident, (tokens, tokens),
                              device=device))
    if base is None:  # (with LoRA the policy's parameters hold adapters and the reference's do not: two
        ro.logps = programs[-1].compiled  # structures, each compiled at its first call)
    return {p.name: p.executable for p in checked(_teacher_programs(ro, tokens, resident, device, programs))}


def _teacher_programs(ro, tokens, resident: int, device, programs: list) -> list:
    """`programs` and on-policy distillation's teacher's log-probabilities (its parameters resident; on the
    trainer's devices), the teacher then calling it."""
    from spmdgpt.plan.plan import _compiled

    if ro.teacher is not None:
        t = ro.teacher
        programs.append(_compiled("rl_teacher_logps", t.logps.lower(t.params, tokens, tokens), resident,
                                  (tokens, tokens), device=device))
        ro.teacher = t._replace(logps=programs[-1].compiled)
    return programs


def engine_programs(cfg: Config, ro, params, tokens) -> list:
    """rl.rollout_devices: the engine's step (rl_rollout) and the sampling policy's log-probabilities
    (rl_logps) compiled for the engine's devices (`ro`: the Rollouts), from `params`' shapes copied
    there, resident beside them the 1 + rl.max_staleness copies (the one sampled from, those made for
    batches queued); the rollouts then call them."""
    from spmdgpt.mesh.sharding import shard_bytes
    from spmdgpt.plan.plan import _compiled

    er = ro.engine_rules
    copy = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), params, ro.engine_params)
    resident = (1 + cfg.rl.max_staleness) * shard_bytes(copy)
    device, where = er.mesh.devices.flat[0], f"the engine's {er.mesh.size} device(s)"
    here = jax.ShapeDtypeStruct(tokens.shape, tokens.dtype, sharding=er.batch_sharding())
    with ro.on_engine():
        step = _compiled("rl_rollout", ro.engine.lower(copy), resident, ro.engine.shapes(), device=device)
        ro.engine.use(step.compiled)
        logps = _compiled("rl_logps", ro.engine_logps.lower(copy, here, here), resident, (here, here), device=device)
        ro.engine_logps = logps.compiled
    step.where = logps.where = where
    return [step, logps]


def side_programs(cfg: Config, devices) -> list:
    """The plan's programs outside the trainer's mesh: with rl.rollout_devices, the engine's (`engine_programs`,
    compiled on the last rl.rollout_devices of `devices`, for the model's vocabulary); else none."""
    from spmdgpt.model import abstract_params
    from spmdgpt.rl.rollouts import Rollouts
    from spmdgpt.rl.split import engine_rules

    er = engine_rules(cfg, devices)
    if er is None:
        return []

    class Vocabulary:  # (the plan reads no data: the model's vocabulary, no stop token)
        vocab_size, eos_id = cfg.model.vocab_size, None

    ro = Rollouts(cfg, er, Vocabulary(), reward=lambda *a: 0.0, engine_rules=er)
    d = cfg.data
    tokens = jax.ShapeDtypeStruct((d.batch_size, d.seq_len), jnp.int32, sharding=er.batch_sharding())
    return engine_programs(cfg, ro, abstract_params(cfg.model, er), tokens)


def _load(cfg: Config, check):
    from spmdgpt.rl.loop import load_prompts

    return load_prompts(cfg, check=check)


def _frozen(cfg: Config, rules: Rules):
    """What a run holds beside its state, as shapes in the run's sharding rules: rl.objective=distill's
    teacher, and with rl.max_staleness = K the copies of the trained parameters its rollouts sampled
    ahead read, one for each batch in flight (None: neither)."""
    from spmdgpt.model import abstract_params
    from spmdgpt.rl.teacher import teacher_model
    from spmdgpt.training.state import abstract_state
    from spmdgpt.training.step import optimizer_of

    held = []
    if cfg.rl.objective.value == "distill":
        model = teacher_model(cfg)
        held.append(abstract_params(model, Rules(rules.mesh, cfg.sharding, model)))
    if cfg.rl.max_staleness and not cfg.rl.rollout_devices:  # (split: the copies are on the engine's devices)
        held += [abstract_state(cfg, rules, optimizer_of(cfg)).params] * cfg.rl.max_staleness
    return tuple(held) or None


GRPO = RunKind(
    name="grpo",
    load=_load,
    batcher=_batcher,
    parts=_parts,
    keeps_reference=lambda cfg: cfg.rl.kl_beta > 0,  # (without the KL term no reference is read)
    preflight=preflight,
    batch_shapes=batch_shapes,
    step_only=True,  # (its engine step and log-probabilities compile in the run's preflight)
    loss_spike_guard=False,  # (GRPO's loss is centred on 0, not a positive quantity a spike multiplies)
    bind=_bind,
    frozen=_frozen,
    devices=lambda cfg, devices: trainer_devices(cfg, devices),
    side_programs=side_programs,
)
