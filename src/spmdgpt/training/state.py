"""The training state, and which one a run starts from.

    start(cfg, run_dir, rules, optimizer) -> Start(state, kind, step)

        fresh      parameters from train.seed (param_info's init) + optimizer.init
        resumed    run.dir already has checkpoints: the newest one that loads and verifies,
                   resharded into this run's mesh and rules; damaged newer ones are moved to
                   checkpoints-damaged/ and the logs are cut back to the resumed step
        init_from  checkpoint.init_from names another run: its newest parameters, a fresh
                   optimizer state, step 0; or hf:DIR, a Hugging Face model folder (Llama or
                   GPT-NeoX safetensors, spmdgpt.hf): its weights, each leaf read straight
                   into its sharded layout
        restarted  run.dir holds a run stopped before its first checkpoint, this very run (same
                   config.yaml) or one that logged no training step (it died setting up or in
                   step 1: a rerun with a fixed config): fresh, with the logs cut back to step 0

Every refusal (a run.dir that holds a run but nothing to resume, checkpoints of another model,
no loadable checkpoint) is a ConfigError raised before this run writes anything.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from spmdgpt.config import (
    Config,
    ConfigError,
    LoraConfig,
    ModelConfig,
    load_run_config,
    model_config_from_dict,
    to_dict,
)
from spmdgpt.data import Tokenizer
from spmdgpt.hf import hf_folder
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model import (
    Params,
    abstract_params,
    init_params,
    lora,
    param_info,
    param_shapes,
    to_layer_order,
    to_stage_order,
)
from spmdgpt.model.info import by_name, path_name
from spmdgpt.model.layers import dtype_of
from spmdgpt.model.params import abstract_tree, init_tree
from spmdgpt.optim import initial_params
from spmdgpt.run.rundir import truncate_jsonl
from spmdgpt.training.checkpoint import (
    CHECKPOINT_DIR,
    CheckpointManager,
    first_loadable,
    restore_latest,
    set_aside,
)

LOGS = ("metrics.jsonl", "samples.jsonl")  # rows keyed by step, cut back on resume


class TrainState(NamedTuple):
    step: jax.Array  # int32 scalar: optimizer steps taken
    params: Params
    opt_state: optax.OptState


class StartKind(enum.Enum):
    fresh = "fresh"
    resumed = "resumed"
    init_from = "init_from"
    restarted = "restarted"  # the same run again from step 0: it stopped before any checkpoint


class Start(NamedTuple):
    state: TrainState
    kind: StartKind
    step: int  # the step training continues from (the resumed checkpoint's, else 0)


LORA_SALT = 0x10A  # separates LoRA's adapter init from the parameters' (train.seed)


def trained_info(cfg: Config) -> Params:
    """The ParamInfo tree of what the run trains: the model's parameters, or with lora.rank > 0
    the adapters (`lora.adapter_info`)."""
    return lora.adapter_info(param_info(cfg.model), cfg.lora) if cfg.lora.rank else param_info(cfg.model)


def trained_dtype(cfg: Config) -> jnp.dtype:
    """The trained leaves' dtype: model.param_dtype, or float32 for LoRA's adapters."""
    return jnp.dtype(jnp.float32) if cfg.lora.rank else dtype_of(cfg.model.param_dtype)


def init_state(cfg: Config, rules: Rules, optimizer: optax.GradientTransformation) -> TrainState:
    """A fresh state: seeded parameters (LoRA: adapters), created sharded, and the optimizer's
    initial state."""
    if cfg.lora.rank:
        params = init_tree(trained_info(cfg), trained_dtype(cfg), jax.random.key(cfg.train.seed ^ LORA_SALT), rules)
    else:
        params = init_params(cfg.model, jax.random.key(cfg.train.seed), rules)
        params = to_stage_order(rules, initial_params(cfg.optimizer, param_info(cfg.model), params))
    return TrainState(jnp.zeros((), jnp.int32), params, jax.jit(optimizer.init)(params))


def abstract_state(cfg: Config, rules: Rules, optimizer: optax.GradientTransformation) -> TrainState:
    """init_state's shapes, dtypes and shardings on rules' mesh, with nothing computed or
    allocated: the restore target of a resume or of checkpoint.init_from (a 7B model's random
    initialisation and optimizer state would otherwise be built first and thrown away)."""
    params = abstract_tree(trained_info(cfg), trained_dtype(cfg), rules)
    opt_state = jax.eval_shape(jax.jit(optimizer.init), params)  # its leaves' shardings follow the params'

    def on_mesh(s: jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:  # (a scalar's sharding is None: replicated)
        spec = s.sharding.spec if s.sharding is not None else jax.sharding.PartitionSpec()
        return jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=jax.sharding.NamedSharding(rules.mesh, spec))

    step = on_mesh(jax.ShapeDtypeStruct((), jnp.int32))
    return TrainState(step, params, jax.tree.map(on_mesh, opt_state))


def has_checkpoints(run_dir: Path) -> bool:
    d = Path(run_dir) / CHECKPOINT_DIR
    return d.is_dir() and any(p.name.isdigit() for p in d.iterdir())


def start(cfg: Config, run_dir: Path, rules: Rules, optimizer: optax.GradientTransformation) -> Start:
    """The state this run starts from (see the module docstring). Call inside the run's mesh."""
    run_dir = Path(run_dir)
    resume = has_checkpoints(run_dir)
    restart = False
    if (run_dir / "metrics.jsonl").exists() and not (resume and cfg.checkpoint.enabled):
        # Stopped before its first checkpoint: the same run (same config), or any run that trained
        # no step (nothing to lose), starts again from 0.
        restart = not resume and (_same_config(run_dir, cfg) or not _trained_steps(run_dir))
        if not restart:
            why = ("resuming it needs checkpoint.enabled=true" if resume
                   else f"it has no checkpoint to resume from, logged {_trained_steps(run_dir)} training steps and "
                        "was started with another config")
            raise ConfigError([f"run.dir={run_dir} already holds a run (metrics.jsonl); {why}; choose a new run.dir"])
    resume = resume and cfg.checkpoint.enabled
    if resume:
        reader = CheckpointManager.reader(run_dir)
        check_checkpoint_fits(reader, cfg.model, f"run.dir={run_dir} holds checkpoints of another model",
                              "resume with the run's model config or choose a new run.dir", damaged_ok=True)
    elif hf_folder(cfg.checkpoint.init_from) is not None:  # hf:DIR, a transformers model folder
        from spmdgpt.hf import open_weights

        hf_files = open_weights(cfg.model, hf_folder(cfg.checkpoint.init_from),
                                f"checkpoint.init_from={cfg.checkpoint.init_from}")
    elif cfg.checkpoint.init_from:
        src = Path(cfg.checkpoint.init_from).expanduser()
        if not (src / CHECKPOINT_DIR).is_dir():
            raise ConfigError(
                [f"checkpoint.init_from={src}: no {CHECKPOINT_DIR}/ folder there; give a run directory"]
            )
        reader = CheckpointManager.reader(src)
        if not reader.steps():
            raise ConfigError([f"checkpoint.init_from={src}: the run has no complete checkpoint"])
        check_checkpoint_fits(reader, _fp8_as_in(reader, cfg.model), f"checkpoint.init_from={src}: parameter "
                              "shapes do not match the config", "use that run's model config",
                              damaged_ok=True)  # (an unreadable checkpoint: _init_from_params says so)

    if restart and jax.process_index() == 0:  # every check passed: cut the logs back to step 0
        for log in LOGS:
            truncate_jsonl(run_dir / log, 0)
    target = abstract_state(cfg, rules, optimizer)  # shapes + this run's layout, nothing allocated
    if resume:
        found = restore_latest(reader, target)
        if found is None:  # step folders, but none that orbax finished writing
            raise ConfigError(
                [f"run.dir={run_dir}: its checkpoints/ folder holds no complete checkpoint; move it "
                 "away to start afresh, or choose a new run.dir"]
            )
        step, params, opt_state, _, skipped = found
        params, opt_state = to_stage_order(rules, (params, opt_state))  # (checkpoints hold the layers in order)
        if jax.process_index() == 0:
            set_aside(run_dir, skipped)
            for log in LOGS:
                truncate_jsonl(run_dir / log, step)
        return Start(TrainState(jnp.asarray(step, jnp.int32), params, opt_state), StartKind.resumed, step)
    if cfg.checkpoint.init_from and cfg.lora.rank:  # fresh adapters; the base is `starting_params`
        return Start(init_state(cfg, rules, optimizer), StartKind.restarted if restart else StartKind.init_from, 0)
    if cfg.checkpoint.init_from:
        source = hf_files if hf_folder(cfg.checkpoint.init_from) is not None else reader
        params = _init_from_params(cfg, rules, target.params, source)
        state = TrainState(jnp.zeros((), jnp.int32), params, jax.jit(optimizer.init)(params))
        return Start(state, StartKind.init_from, 0)
    return Start(init_state(cfg, rules, optimizer), StartKind.restarted if restart else StartKind.fresh, 0)


def _init_from_params(cfg: Config, rules: Rules, target: Params, source) -> Params:
    """checkpoint.init_from's parameters, in stage order: `source` is hf:DIR's opened weights or
    the run's checkpoint reader (both checked by `start`)."""
    if hf_folder(cfg.checkpoint.init_from) is not None:
        from spmdgpt.hf import read_params

        params = read_params(cfg.model, source, rules)
    else:
        model = _fp8_as_in(source, cfg.model)
        # (only the newest: a fine-tune never silently starts from an older checkpoint than asked)
        _, params, _ = first_loadable(
            source, source.steps()[-1:], lambda step: restore_params(source, step, model, rules,
                                                                     None if model != cfg.model else target),
            f"checkpoint.init_from={cfg.checkpoint.init_from}: its newest checkpoint cannot be loaded, step",
            "restore it, or point checkpoint.init_from at a run with a complete checkpoint")
        params = _refit(to_stage_order(rules, params), target)
    return params if cfg.lora.rank else initial_params(cfg.optimizer, param_info(cfg.model), params)


def _fp8_as_in(reader: CheckpointManager, model: ModelConfig) -> ModelConfig:
    """model with the FP8 fields of the run whose newest checkpoint `reader` holds: its amax
    histories (delayed scaling's state, not weights) are then dropped, or started at zero, by
    `_refit`, whatever FP8 scaling either run uses (checkpoint.init_from)."""
    try:
        saved = reader.read_meta(reader.steps()[-1]).get("config", {}).get("model", {})
    except Exception:  # (an unreadable checkpoint: the restore reports it)
        return model
    theirs = model_config_from_dict(saved, base=model)
    return dataclasses.replace(model, matmul_dtype=theirs.matmul_dtype, fp8_scaling=theirs.fp8_scaling,
                               fp8_history=theirs.fp8_history)


def _refit(params: Params, target: Params) -> Params:
    """params in target's tree (abstract arrays): each leaf by name, zeros where params has none."""
    got = by_name(params)

    def leaf(path, t):
        name = path_name(path)
        return got[name] if name in got else jnp.zeros(t.shape, t.dtype, device=t.sharding)

    return jax.tree_util.tree_map_with_path(leaf, target)


def restore_params(reader: CheckpointManager, step: int, model: ModelConfig, rules: Rules,
                   target: Optional[Params] = None) -> Params:
    """The model's parameters at a run's checkpoint `step`, in layer order, in `rules`' layout:
    what it holds, or for a LoRA run (lora.rank > 0 in its config) its base (the run's own
    checkpoint.init_from, `starting_params`) with the checkpoint's adapters merged in."""
    saved = reader.read_meta(step).get("config", {})
    if not (saved.get("lora") or {}).get("rank"):
        return reader.restore(step, abstract_params(model, rules) if target is None else target)[0]
    run_dir = reader.directory.parent
    run = dataclasses.replace(load_run_config(run_dir), model=model)
    src = run.checkpoint.init_from or ""
    base_dir = Path(src).expanduser() / CHECKPOINT_DIR
    if hf_folder(src) is None and not (base_dir.is_dir() and CheckpointManager.reader(base_dir.parent).steps()):
        raise ConfigError([f"run.dir={run_dir} trained LoRA adapters on checkpoint.init_from={src}, which holds no "
                           "checkpoint (moved or deleted?); put the base run back there, or set its new place in "
                           f"{run_dir / 'config.yaml'}"])
    # the adapters first: a damaged checkpoint fails here, before the base is loaded
    adapters = restore_adapters(reader, step, run, rules)
    base = to_layer_order(rules, starting_params(run, rules))  # (the adapters' order: checkpoints hold layer order)
    return lora.merge(param_info(model), run.lora, base, adapters)


def restore_adapters(reader: CheckpointManager, step: int, run: Config, rules: Rules) -> Params:
    """The LoRA adapters (`lora.adapter_info`'s tree) at checkpoint `step` of the LoRA run of
    config `run`, in layer order."""
    return reader.restore(step, abstract_tree(trained_info(run), trained_dtype(run), rules))[0]


def starting_params(cfg: Config, rules: Rules) -> Params:
    """The parameters a new run of cfg starts from, whatever run.dir holds: checkpoint.init_from's
    (a run's newest, or hf:DIR's), else the seeded initialisation (preference tuning's reference
    when a run resumes; LoRA's frozen base). Call inside the mesh, after `start` (which checks the
    source)."""
    src = cfg.checkpoint.init_from
    if not src:
        return init_state(dataclasses.replace(cfg, lora=LoraConfig()), rules, optax.identity()).params
    if hf_folder(src) is not None:
        from spmdgpt.hf import open_weights

        source = open_weights(cfg.model, hf_folder(src), f"checkpoint.init_from={src}")
    else:
        source = CheckpointManager.reader(Path(src).expanduser())
    return _init_from_params(cfg, rules, abstract_params(cfg.model, rules), source)


def _trained_steps(run_dir: Path) -> int:
    """Training steps logged in run_dir/metrics.jsonl (rows with a loss; an unreadable line is
    counted as one)."""
    n = 0
    for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            n += "loss" in json.loads(line)
        except (ValueError, TypeError):
            n += bool(line.strip())
    return n


def _same_config(run_dir: Path, cfg: Config) -> bool:
    """run_dir/config.yaml is this config (dist.*, e.g. a launcher's fresh port, aside)."""
    try:
        saved = to_dict(load_run_config(run_dir))
    except ConfigError:  # no config.yaml (or an unreadable one): not provably the same run
        return False
    now = to_dict(cfg)
    saved.pop("dist", None)
    now.pop("dist", None)
    return saved == now


def load_params(run_dir: Path, model: ModelConfig, rules: Rules, step: Optional[int] = None,
                fix: str = "use the run's model config", adapters: bool = False) -> tuple[int, Params]:
    """(step, parameters) of a run's newest checkpoint (or of `step`), restored straight into
    `rules`' layout (and a circular pipeline's stack order, `to_stage_order`). ConfigError when
    the run has no such checkpoint or `model` has other parameter shapes than the checkpoint's
    (`fix` says what to do). adapters=True: a LoRA run's adapters alone (`restore_adapters`), not
    its merged model."""
    reader = CheckpointManager.reader(run_dir)
    steps = reader.steps()
    if not steps:
        raise ConfigError([f"run.dir={run_dir} has no checkpoint"])
    if step is not None and step not in steps:
        raise ConfigError([f"step={step}: run.dir={run_dir} has checkpoints at steps "
                           f"{', '.join(map(str, steps))}"])

    def load(s: int):
        check_checkpoint_fits(reader, model, f"run.dir={run_dir}: the overrides change parameter shapes", fix, step=s)
        if adapters:
            return restore_adapters(reader, s, dataclasses.replace(load_run_config(run_dir), model=model), rules)
        return to_stage_order(rules, restore_params(reader, s, model, rules))

    # the newest checkpoint that loads (as train resumes), or exactly `step`
    tried = steps if step is None else [step]
    older = [s for s in steps if s < min(tried)]  # (what step=N could still name)
    step, params, _ = first_loadable(reader, tried, load, f"run.dir={run_dir}: the checkpoint(s) cannot be loaded",
                                     "give an older one with step=N, or train again" if older else
                                     "restore them, or train again")
    return step, params


def check_checkpoint_fits(reader: CheckpointManager, model: ModelConfig, what: str, fix: str,
                          damaged_ok: bool = False, step: Optional[int] = None) -> None:
    """ConfigError when the newest checkpoint's model (or step's) has other parameter shapes
    than `model`. damaged_ok: an unreadable checkpoint passes (restore_latest reports and skips
    it)."""
    try:
        saved = reader.read_meta(reader.steps()[-1] if step is None else step).get("config", {}).get("model", {})
    except Exception:
        if damaged_ok:
            return
        raise
    bad = shape_mismatches(saved, model)
    if bad:
        raise ConfigError([f"{what}: {', '.join(bad)}; {fix}"])


def shape_mismatches(saved: dict, model: ModelConfig) -> list:
    """`model.<field>=<now> (checkpoint: <saved>)` for the model fields that give a checkpoint
    written with the `saved` model config (a dict) other parameter shapes; [] when they match.

    Derived from param_info: a field is named when changing it alone changes a shape; when
    only a combination does, every differing field is named."""
    saved_model = model_config_from_dict(saved, base=model)
    if param_shapes(saved_model) == param_shapes(model):
        return []
    differing = [f.name for f in dataclasses.fields(ModelConfig)
                 if getattr(saved_model, f.name) != getattr(model, f.name)]

    def changes_shapes(field: str) -> bool:
        variant = dataclasses.replace(model, **{field: getattr(saved_model, field)})
        try:
            return param_shapes(variant) != param_shapes(model)
        except Exception:  # e.g. a head count that does not divide this width
            return True

    named = [f for f in differing if changes_shapes(f)] or differing

    def show(x):
        return x.value if isinstance(x, enum.Enum) else x

    return [f"model.{f}={show(getattr(model, f))} (checkpoint: {show(getattr(saved_model, f))})"
            for f in named]


def check_vocab(cfg: Config, tok: Tokenizer) -> None:
    """The embedding has a row for every token id, and (padding allowed, e.g. GPT-2's 50257 to
    50304) not more than twice as many rows as there are ids."""
    v, n = cfg.model.vocab_size, tok.vocab_size
    if v < n:
        raise ConfigError([f"model.vocab_size={v} is smaller than the tokenizer's vocabulary "
                           f"({n}, {tok.kind}); set model.vocab_size>={n}"])
    if v > 2 * n and v - n > 128:
        raise ConfigError([f"model.vocab_size={v} but the tokenizer ({tok.kind}) has {n} ids: {v - n:,} embedding "
                           f"rows would never be used; set model.vocab_size={-(-n // 64) * 64} (its size rounded up "
                           "to a multiple of 64)"])


def init_from_tokenizer(cfg: Config) -> Optional[Path]:
    """checkpoint.init_from=RUN's tokenizer.json (a run directory's; None for hf:DIR or no
    init_from), whether or not the file is there."""
    src = cfg.checkpoint.init_from
    return Path(src).expanduser() / "tokenizer.json" if src and hf_folder(src) is None else None


def same_tokenizer(theirs: dict, tok: Tokenizer) -> bool:
    """Whether a saved tokenizer (a run's tokenizer.json, or a to_json() dict) is `tok`, or the
    tokenizer under `tok`'s chat template: the same ids for the same text."""
    plain = lambda d: {k: v for k, v in d.items() if k not in ("vocab_size", "sha256")}  # noqa: E731
    ours = [tok.to_json()] + ([tok.base.to_json()] if tok.kind == "chat" else [])
    return plain(theirs) in [plain(d) for d in ours]


def check_tokenizer(cfg: Config, tok: Tokenizer) -> None:
    """check_vocab, and with checkpoint.init_from=RUN, that RUN trained with this tokenizer (or,
    for chat data, with the tokenizer under its chat template): other ids would mean other text."""
    check_vocab(cfg, tok)
    src, saved = cfg.checkpoint.init_from, init_from_tokenizer(cfg)
    if saved is None or not saved.is_file():
        return
    try:
        theirs = json.loads(saved.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # (an unreadable file is the checkpoint reader's to report)
    if not same_tokenizer(theirs, tok):
        raise ConfigError([f"checkpoint.init_from={src} trained with another tokenizer ({theirs.get('kind')}, "
                           f"{theirs.get('vocab_size', '?')} ids) than this run's ({tok.kind}, {tok.vocab_size} ids), "
                           "so its token ids would stand for other text; use the same data.tokenizer (a char "
                           "vocabulary is the corpus's characters: fine-tune a char run on gpt2 or hf instead)"])
