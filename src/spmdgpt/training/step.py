"""One training step, the function `jit` compiles: gradients of the objective over the
batch (gradient accumulation over train.microbatches, dropout keys from (seed, step)), the
optimizer update, the metrics; and `training_parts`, a step and its inputs without the loop
(loop.py), for scripts and tests. The model statistics (stats.py) differentiate the same
`step_gradients`."""

from __future__ import annotations

from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P

from spmdgpt.config import Config, document_batches, replan_points
from spmdgpt.data import Batcher, load_dataset
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model import between_steps, fp8, param_info
from spmdgpt.model.lora import attach
from spmdgpt.model.loss import count_first
from spmdgpt.optim import build_optimizer, learning_rate_schedule
from spmdgpt.training.objectives import objective_of
from spmdgpt.training.state import TrainState, init_state, trained_info


def microbatch_parts(batch: tuple, microbatches: int) -> tuple:
    """Each array of a batch [B, ...] as `microbatches` parts [k, B / k, ...] (None stays None):
    part j holds rows j, j + k, j + 2k, ... so that every part keeps the batch's sharding with no
    data movement. What the step's gradient accumulation and the evaluators scan over."""
    k = microbatches

    def split(a):  # [B, ...] -> [k, B / k, ...], part j = rows j::k
        if a is None:
            return None
        spec = tuple(jax.typeof(a).sharding.spec) + (None,) * a.ndim
        # (the batch's split stays on B / k whole: left to itself, the reshape may put a size-1
        # mesh axis of it on k, which a scan over the parts refuses)
        parts = jnp.reshape(a, (a.shape[0] // k, k) + a.shape[1:], out_sharding=P(spec[0], None, *spec[1:a.ndim]))
        return jnp.swapaxes(parts, 0, 1)

    return tuple(split(a) for a in batch)


def summed_over_microbatches(fn, microbatches: int, *batch):
    """The sum of fn(*part) (a pytree of arrays) over the batch's `microbatch_parts`, run one
    after another by `lax.scan`: only one part's activations (and logits) are alive at a time.
    What the evaluators run: their sums of losses and counts over a batch of any size, in the
    step's parts."""
    if microbatches == 1:
        return fn(*batch)
    parts = microbatch_parts(batch, microbatches)
    shapes = jax.eval_shape(lambda: fn(*jax.tree.map(lambda a: a[0], parts)))  # (traced, not run)

    def body(total, part):
        return jax.tree.map(jnp.add, total, fn(*part)), None

    zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    return jax.lax.scan(body, zero, parts)[0]


def accumulated_grads(grad_fn, microbatches: int, params, *batch, key: Optional[jax.Array] = None):
    """(mean metrics, mean gradients) of a batch [B, ...] split into `microbatches` equal parts
    (`microbatch_parts`) run one after another by `lax.scan` inside the step (gradient
    accumulation): only one part's activations are alive at a time. Gradients are summed in
    float32 (FP8's amax histories: the largest, `fp8.accumulate`). With a key (dropout), grad_fn is
    called with key=fold_in(key, j) for part j (key itself when k=1)."""
    if microbatches == 1:
        return grad_fn(params, *batch) if key is None else grad_fn(params, *batch, key=key)
    k = microbatches

    def body(carry, xs):
        j, part = xs
        kw = {} if key is None else {"key": jax.random.fold_in(key, j)}
        metrics, grads = grad_fn(params, *part, **kw)
        total, acc = carry
        acc = jax.tree_util.tree_map_with_path(fp8.accumulate, acc, grads)
        return (jax.tree.map(jnp.add, total, metrics), acc), None

    zeros = jax.tree.map(lambda p: jnp.zeros_like(p, dtype=jnp.float32), params)
    parts = (jnp.arange(k, dtype=jnp.uint32), microbatch_parts(batch, k))
    kw = {} if key is None else {"key": key}  # the metrics' structure, from one part (traced, not run):
    shapes = jax.eval_shape(lambda: grad_fn(params, *jax.tree.map(lambda a: a[0], parts[1]), **kw)[0])
    total0 = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    (metrics, grads), _ = jax.lax.scan(body, (total0, zeros), parts)
    return jax.tree.map(lambda m: m / k, metrics), jax.tree_util.tree_map_with_path(
        lambda path, g, p: fp8.averaged(path, g, k).astype(p.dtype), grads, params)


DROPOUT_SALT = 0x5D0  # separates the dropout keys from the parameter init's key (train.seed)


def step_gradients(cfg: Config, rules: Rules, vocab_limit: Optional[int] = None):
    """f(params, step, inputs, targets, segment_ids=None, positions=None, reference=None,
    base=None) -> (mean metrics
    {"loss": cross-entropy over the targets >= 0, "tokens": their count, "aux/<name>":
    auxiliary losses}, gradients of the objective) of one optimizer step's batch: gradient
    accumulation over train.microbatches, z-loss (model.z_loss), and dropout masks drawn from
    fold_in(key(train.seed ^ DROPOUT_SALT), step), a pure function of (seed, step) so that a
    resumed run draws the same masks. What train_step and the model statistics differentiate.
    With `base` (LoRA: the frozen model), params are the adapters (model/lora.py) and the
    gradients theirs; `reference`: DPO's reference parameters; `vocab_limit`: the tokenizer's
    vocabulary, which GRPO's log-probabilities are over (`objectives.grpo`)."""
    # with pipeline stages the microbatches flow through them inside the model (`model.pipeline`)
    microbatches = 1 if rules.stage_size() > 1 else cfg.train.microbatches
    goal = objective_of(cfg, rules, vocab_limit)
    info = param_info(cfg.model)

    def of_trained(params, base, *args, **kwargs):  # LoRA: params are the adapters, attached to the frozen base
        return goal.score(params if base is None else attach(info, cfg.lora, base, params), *args, **kwargs)

    value_and_grad = jax.value_and_grad(of_trained, has_aux=True)

    def f(params, step, *batch, reference=None, base=None):
        key = jax.random.fold_in(jax.random.key(cfg.train.seed ^ DROPOUT_SALT), step) if goal.dropout else None
        # the step's counted units (targets >= 0; DPO: complete pairs) over its microbatches: each
        # part's sums divided by it give, averaged over the parts, the step's mean (model/loss.py)
        count = goal.count(*batch[1:])
        count, params, batch, reference, base = count_first(count, params, batch, reference, base)
        denominator = jnp.maximum(count, 1.0) / microbatches

        def grad_fn(params, *part, key=None):
            (_, metrics), grads = value_and_grad(params, base, *part, reference=reference, key=key,
                                                 denominator=denominator)
            return metrics, grads

        metrics, grads = accumulated_grads(grad_fn, microbatches, params, *batch, key=key)
        grads, histories = fp8.split_histories(grads)  # (FP8's delayed scaling: set between steps, not trained)
        if histories:
            metrics["between_steps"] = {**metrics.get("between_steps", {}), fp8.HISTORY: histories}
        return {**metrics, goal.counted: count}, grads

    return f


def run_replans(cfg: Config) -> list:
    """train.replans as [(STEP, STEPS), ...] (validated before a run starts)."""
    return replan_points(cfg.train.replans, cfg.train.steps) or []


def optimizer_of(cfg: Config) -> optax.GradientTransformation:
    """The optimizer of cfg's run: its schedule over train.steps, re-planned at train.replans."""
    return build_optimizer(cfg.optimizer, trained_info(cfg), cfg.train.steps, run_replans(cfg))


def make_train_step(cfg: Config, rules: Rules, optimizer: optax.GradientTransformation, reference=None, base=None,
                    vocab_limit: Optional[int] = None):
    """The jitted step: step(state, *batch) -> (state, metrics), the state donated. With
    `reference` (preference data: DPO's frozen reference parameters) or `base` (LoRA: the frozen
    model whose adapters the state holds), the step takes them too, as arguments of every call
    (not baked into the program). vocab_limit: the run's tokenizer's vocabulary (GRPO's
    log-probabilities are over it: `objectives.grpo`)."""
    schedule = learning_rate_schedule(cfg.optimizer, cfg.train.steps, replans=run_replans(cfg))
    gradients = step_gradients(cfg, rules, vocab_limit)

    skip_nonfinite = cfg.train.skip_nonfinite > 0

    def train_step(state: TrainState, *batch: jax.Array, reference=None, base=None):
        # (batch: inputs, targets, then what the objective reads: segment ids and positions;
        # GRPO's advantages and log-probabilities)
        losses, grads = gradients(state.params, state.step, *batch, reference=reference, base=base)
        loss = losses["loss"]
        grad_norm = optax.tree.norm(grads)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        if "between_steps" in losses:  # (state set, not trained: MoE's balancing bias)
            params = between_steps(cfg.model, state.params, params, losses.pop("between_steps"))
        metrics = {**losses, "grad_norm": grad_norm, "lr": schedule(state.step)}
        if skip_nonfinite:  # keep the old parameters and optimizer state; the step still counts
            finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
            params, opt_state = jax.tree.map(lambda new, old: jnp.where(finite, new, old),
                                             (params, opt_state), (state.params, state.opt_state))
            metrics["skipped"] = ~finite
        return TrainState(state.step + 1, params, opt_state), metrics

    step = jax.jit(train_step, donate_argnums=0)
    return step if reference is None and base is None else partial(step, reference=reference, base=base)


def training_parts(cfg: Config, rules: Rules, schedule_steps: Optional[int] = None):
    """(fresh state, jitted train step, training Batcher, Corpus) for `cfg` on `rules`' mesh:
    what a script or test needs to take steps without the loop. Call inside jax.set_mesh.
    `schedule_steps` (default train.steps) is the length the learning-rate schedule assumes."""
    if cfg.lora.rank:
        raise ValueError("training_parts builds a fresh model; a LoRA run trains adapters on checkpoint.init_from's "
                         "(make_train_step(..., base=...) takes it)")
    data = load_dataset(cfg.data)
    d = cfg.data
    optimizer = build_optimizer(cfg.optimizer, trained_info(cfg), schedule_steps or cfg.train.steps)
    state = init_state(cfg, rules, optimizer)
    batcher = Batcher(data.train, data.weights, d.seq_len, d.batch_size, cfg.train.seed,
                      rules.batch_sharding(), *document_batches(d), pad_id=data.tokenizer.eos_id or 0)
    return state, make_train_step(cfg, rules, optimizer), batcher, data
