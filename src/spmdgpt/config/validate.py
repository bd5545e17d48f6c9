"""Validation: every problem of a config at once, one line each (field, value, fix), before a
single file is written. Checks only what the config itself says (no data, no devices beyond
their count)."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from spmdgpt.config.derived import (
    compress_kinds,
    global_stack,
    head_dim,
    indexer_warmup,
    kv_heads,
    logical_dim_sizes,
    mesh_axes,
    mesh_axes_of,
    mesh_sizes,
    resolve_mesh_shape,
    rotary_dims,
)
from spmdgpt.config.schema import (
    Config,
    ConfigError,
    DataSource,
    DistConfig,
    DType,
    MlpType,
    NormType,
    OptimizerName,
    Parametrization,
    RopeScaling,
    Split,
    TokenizerKind,
    dataset_configs,
)


def validate_dist(dist: "DistConfig") -> List[str]:
    """dist.* is checked before JAX starts (it decides how JAX starts)."""
    given = [dist.coordinator is not None, dist.num_processes is not None, dist.process_id is not None]
    if any(given) and not all(given):
        return ["dist.coordinator, dist.num_processes and dist.process_id go together; give all three "
                "(or none, to let JAX detect the cluster)"]
    errs = []
    if all(given):
        if ":" not in dist.coordinator:
            errs.append(f"dist.coordinator={dist.coordinator} must be host:port, e.g. 10.0.0.1:1234")
        if dist.num_processes < 1:
            errs.append(f"dist.num_processes={dist.num_processes} must be >= 1")
        elif not 0 <= dist.process_id < dist.num_processes:
            errs.append(f"dist.process_id={dist.process_id} must be in [0, {dist.num_processes})")
    return errs


def _data_sources(d) -> List[str]:
    """The corpus fields: datasets, tokenizer, store settings (no file is opened here)."""
    errs: List[str] = []
    if d.encoding_errors not in ("strict", "replace"):
        errs.append(f"data.encoding_errors={d.encoding_errors} must be strict or replace")
    if d.num_workers < 0:
        errs.append(f"data.num_workers={d.num_workers} must be >= 0 (0 = one per CPU core)")
    if not d.shard_mb > 0:
        errs.append(f"data.shard_mb={d.shard_mb} must be > 0, e.g. 64")
    if d.tokenizer == TokenizerKind.hf and not d.tokenizer_file:
        errs.append("data.tokenizer=hf needs data.tokenizer_file=<path to a tokenizer.json>")
    if d.reset_positions and not d.document_mask:
        errs.append("data.reset_positions=true needs data.document_mask=true (positions restart "
                    "at each document only when attention stays inside it)")
    if d.source != DataSource.text:
        return errs
    try:
        datasets = dataset_configs(d)
    except ConfigError as e:
        return errs + e.messages
    trained = 0
    for name, ds in datasets.items():
        where = f"data.datasets.{name}"
        if not name.replace("_", "").replace("-", "").isalnum():
            errs.append(f"{where}: dataset names are letters, digits, _ and - (they name log keys)")
        if not ds.paths:
            errs.append(f"{where}.paths is empty; list files, folders or globs")
        if ds.split == Split.val:
            continue
        if not ds.weight > 0:
            errs.append(f"{where}.weight={ds.weight} must be > 0 (use split=val for a dataset "
                        "that is only evaluated)")
        trained += 1
        vf = ds.val_fraction
        if vf is not None and ds.split in (Split.hash, Split.tail) and not 0.0 <= vf < 1.0:
            errs.append(f"{where}.val_fraction={vf} must be in [0, 1)")
    if datasets and not trained:
        errs.append("data.datasets has no training dataset (every one is split=val); give one "
                    "split=hash, tail or none")
    return errs


def profile_range(spec: str, steps: int) -> Optional[Tuple[int, int]]:
    """train.profile=START:STOP as (START, STOP), or None when it is not a range within the run."""
    try:
        start, stop = (int(x) for x in str(spec).split(":"))
    except ValueError:
        return None
    return (start, stop) if 1 <= start <= stop <= steps else None


def replan_points(replans, steps: int) -> Optional[List[Tuple[int, int]]]:
    """train.replans as [(STEP, STEPS), ...], or None when they are not a run's re-plans: each
    STEP:STEPS two integers, 1 <= STEP < STEPS, in step order, each STEP below the next one's
    STEPS (the last's below train.steps), so that every re-planned stretch has steps to take."""
    try:
        points = [tuple(int(x) for x in str(spec).split(":")) for spec in replans]
    except ValueError:
        return None
    if any(len(p) != 2 for p in points):
        return None
    ends = [p[1] for p in points[1:]] + [steps]
    starts = [0] + [p[0] for p in points[:-1]]
    if all(before < at < planned and at < end for (at, planned), end, before in zip(points, ends, starts)):
        return points
    return None


SECTIONS = ("model", "batch", "corpus", "optimizer", "train", "checkpoint", "layout")
"""What `validate` checks, by section: model.*; the batch's shape (data.seq_len, data.batch_size);
the corpus (the rest of data.*); optimizer.*; train.*; checkpoint.*; the layout (mesh.* against
the device count, sharding.*). A command asks for the sections it uses; checks across sections
(`_across`) run when it asks for all of theirs."""


def feature_errors(feature: str, *args) -> List[str]:
    """A feature's own configuration checks: `config_errors(*args)` of its module
    (spmdgpt.model.<feature>: moe, mla, mtp, fp8, preference, lora, context, collective, pipeline,
    kernels; or a dotted name under spmdgpt, as rl.checks, GRPO's run policy), beside the code it
    checks. Imported when a config is validated (those modules import this package)."""
    import importlib

    return importlib.import_module(f"spmdgpt.{feature}" if "." in feature else f"spmdgpt.model.{feature}"
                                   ).config_errors(*args)


def validate(cfg: Config, num_devices: int, training: bool = True, sections: Sequence[str] = SECTIONS) -> List[str]:
    """Every problem found in `cfg`'s `sections`, one line each (field, value, fix). Does no I/O
    on data. training=False (sampling a run) skips what only a training step needs."""
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise ValueError(f"unknown config sections {sorted(unknown)}; choose among {SECTIONS}")
    checks = {"model": lambda: _model(cfg.model, training), "batch": lambda: _batch(cfg.data),
              "corpus": lambda: _corpus(cfg.data), "optimizer": lambda: _optimizer(cfg.optimizer, training),
              "train": lambda: _train(cfg.train, cfg.rl), "checkpoint": lambda: _checkpoint(cfg.checkpoint)}
    errs = [e for name in SECTIONS if name in checks and name in sections for e in checks[name]()]
    sizes = None
    if "layout" in sections:
        # (rl.rollout_devices: the engine's devices are not the trainer's mesh's; sampling a run uses them all)
        split, left = cfg.rl.rollout_devices if training else 0, ""
        fits = 0 <= split < num_devices
        if split < 0:
            errs.append(f"rl.rollout_devices={split} must be >= 0 (the devices of the rollouts' engine; 0: the "
                        "trainer's own)")
        elif split >= num_devices:
            errs.append(f"rl.rollout_devices={split} leaves none of the {num_devices} device(s) to the trainer; "
                        f"give the engine fewer (at most {num_devices - 1})")
        elif split:
            num_devices, left = num_devices - split, f" (of {num_devices}: rl.rollout_devices={split} are the engine's)"
        if fits:
            sizes = _mesh_errors(cfg.mesh, num_devices, errs, left)
        errs += _sharding(cfg)
    return errs + _across(cfg, set(sections), sizes, training, clean=not errs)


MAX_PARAMS = 1e15  # 4 PB of float32 parameters: a model past it is a typo, refused before XLA's shapes overflow
MAX_TEMPERATURE = 2.0  # the OpenAI API's range, which the server takes: every sampler here takes the same


def sampling_errors(prefix: str = "", temperature: Optional[float] = None, top_k: Optional[int] = None,
                    top_p: Optional[float] = None) -> List[str]:
    """The one rule for sampling values, wherever they are given (`spmdgpt sample` and `chat`,
    the server's requests, GRPO's rollouts, a run's evaluation samples): each a finite number in
    its range, else a line naming the field (`prefix` + its name). None: not checked."""
    errs = []
    if temperature is not None and not (math.isfinite(temperature) and 0 <= temperature <= MAX_TEMPERATURE):
        errs.append(f"{prefix}temperature={temperature} must be a number in [0, {MAX_TEMPERATURE:g}] (0 = greedy)")
    if top_k is not None and not top_k >= 0:
        errs.append(f"{prefix}top_k={top_k} must be >= 0 (0 = no top-k filter)")
    if top_p is not None and not (math.isfinite(top_p) and 0 < top_p <= 1):
        errs.append(f"{prefix}top_p={top_p} must be in (0, 1] (1 = no top-p filter)")
    return errs


def positive(errs: List[str], name: str, value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):  # (inf passes "> 0"; NaN is neither)
        errs.append(f"{name}={value} must be a finite number > 0")
    elif not value > 0:
        errs.append(f"{name}={value} must be > 0")


def _model(m, training: bool) -> List[str]:
    errs: List[str] = []
    for name in ("num_layers", "num_heads", "d_model", "vocab_size", "max_seq_len", "mlp_factor", "init_std",
                 "norm_eps", "rope_theta", "pipeline_repeats"):
        positive(errs, f"model.{name}", getattr(m, name))
    if not errs:  # (a model past any machine: XLA's shapes overflow before a plan could refuse it)
        rough = m.num_layers * 12 * m.d_model ** 2 * max(1.0, m.mlp_factor / 4) + 2 * m.vocab_size * m.d_model
        if rough > MAX_PARAMS:
            errs.append(f"model.d_model={m.d_model}, model.num_layers={m.num_layers}: about {rough:.1e} parameters, "
                        f"past what any machine holds ({MAX_PARAMS:.0e}); choose a smaller model")
    if m.mlp == MlpType.swiglu_clamped:
        for name in ("glu_limit", "glu_alpha"):
            positive(errs, f"model.{name}", getattr(m, name))
    if m.mlp == MlpType.swiglu_clip:
        positive(errs, "model.glu_limit", m.glu_limit)
    for name, kinds, which in (
            ("glu_limit", (MlpType.swiglu_clamped, MlpType.swiglu_clip), "swiglu_clamped (gpt-oss) or swiglu_clip "
             "(DeepSeek-V4)"), ("glu_alpha", (MlpType.swiglu_clamped,), "swiglu_clamped (gpt-oss)")):
        default = getattr(type(m), name)
        if m.mlp not in kinds and getattr(m, name) != default:  # (no other MLP reads it)
            errs.append(f"model.{name}={getattr(m, name)} is read only by model.mlp={which}, not {m.mlp.value}; "
                        f"change model.mlp or leave model.{name} at {default}")
    if m.num_kv_heads is not None and m.num_heads > 0 and (
            not 1 <= m.num_kv_heads <= m.num_heads or m.num_heads % m.num_kv_heads):
        errs.append(f"model.num_kv_heads={m.num_kv_heads} must divide model.num_heads={m.num_heads} (each key/value "
                    "head serves as many query heads); choose a divisor: 1 = multi-query, num_heads = multi-head")
    if m.rope_scaling != RopeScaling.none:
        for name in ("rope_factor", "rope_original_max_len", "rope_low_freq_factor", "rope_high_freq_factor",
                     "rope_beta_fast", "rope_beta_slow"):
            positive(errs, f"model.{name}", getattr(m, name))
        if m.rope_scaling == RopeScaling.llama3 and not m.rope_high_freq_factor >= m.rope_low_freq_factor:
            errs.append(f"model.rope_high_freq_factor={m.rope_high_freq_factor} must be >= model.rope_low_freq_factor="
                        f"{m.rope_low_freq_factor} (Llama 3.1: 4 and 1; Llama 4 Scout: 1 and 1, no smooth band)")
    if m.sliding_window < 0:
        errs.append(f"model.sliding_window={m.sliding_window} must be >= 0 (0 = off)")
    if not m.window_pattern or set(m.window_pattern) - {"L", "G"}:
        errs.append(f"model.window_pattern={m.window_pattern!r} must be letters L (local: sliding window) and G "
                    "(global), e.g. L or LLLLLG")
    errs += _chunks(m) + _global_layers(m)
    for name in ("query_pre_attn_scalar", "rope_local_theta"):
        if getattr(m, name) is not None and not getattr(m, name) > 0:
            errs.append(f"model.{name}={getattr(m, name)} must be > 0 (Gemma 3: 256 and 10000), or null for off")
    if not 0.0 < m.rope_fraction <= 1.0:
        errs.append(f"model.rope_fraction={m.rope_fraction} must be in (0, 1] (the share of each head RoPE rotates; "
                    "Qwen3.5: 0.25; 1 = all of it)")
    elif m.num_heads > 0 and m.d_model > 0 and head_dim(m) > 0 and rotary_dims(m, head_dim(m)) < 2:
        errs.append(f"model.rope_fraction={m.rope_fraction} of a head of {head_dim(m)} rotates no pair of dimensions; "
                    "raise it")
    if m.qk_norm_scale and not m.qk_norm:
        errs.append("model.qk_norm_scale=true scales the QK-norm, which is off; set model.qk_norm=true too")
    if m.qk_norm_whole and not (m.qk_norm and m.qk_norm_scale):
        errs.append("model.qk_norm_whole=true is a kind of QK-norm with learned scales; set model.qk_norm=true and "
                    "model.qk_norm_scale=true too, or model.qk_norm_whole=false")
    if not m.norm_scale and (m.norm != NormType.rmsnorm or m.norm_plus_one):
        errs.append(f"model.norm_scale=false is for RMSNorm without parameters; set model.norm=rmsnorm (not "
                    f"{m.norm.value}) and model.norm_plus_one=false")
    if not m.pre_norms and not m.post_norms:
        errs.append("model.pre_norms=false leaves the blocks without norms; set model.post_norms=true (OLMo 2/3's "
                    "norms on the branches' outputs)")
    if m.attention_block < 0:
        errs.append(f"model.attention_block={m.attention_block} must be >= 0 (0 = one block)")
    if m.head_dim is not None:
        if not m.head_dim > 0 or m.head_dim % 2:
            errs.append(f"model.head_dim={m.head_dim} must be even and > 0 (RoPE rotates pairs of dimensions), "
                        "e.g. 64 or 128")
    elif m.num_heads > 0 and m.d_model > 0:
        if m.d_model % m.num_heads:
            errs.append(
                f"model.num_heads={m.num_heads} does not divide model.d_model={m.d_model}; "
                f"choose num_heads among the divisors of d_model, or give model.head_dim"
            )
        elif head_dim(m) % 2:
            errs.append(
                f"model.d_model/model.num_heads={head_dim(m)} is odd, but RoPE rotates pairs of "
                f"dimensions; choose num_heads so that the head dimension is even, or give model.head_dim"
            )
    whole_width(errs, "model.mlp_factor", m.mlp_factor, m.d_model, "MLP")
    if m.loss_block < 0:
        errs.append(f"model.loss_block={m.loss_block} must be >= 0 (0 = the whole loss at once)")
    errs += feature_errors("moe", m) + feature_errors("mla", m) + feature_errors("deltanet", m)
    errs += feature_errors("parametrization", m)
    errs += feature_errors("hyper", m) + feature_errors("csa", m)
    for name in ("dropout", "attention_dropout"):
        v = getattr(m, name)
        if v is not None and not 0.0 <= v < 1.0:
            errs.append(f"model.{name}={v} must be in [0, 1), e.g. 0.1 (0 = off)")
    if m.logits_dtype not in (DType.float32, m.compute_dtype):
        errs.append(f"model.logits_dtype={m.logits_dtype.value}: the logits are written in float32 or in "
                    f"the compute dtype (model.compute_dtype={m.compute_dtype.value}); choose one of the two")
    for name in ("logit_softcap", "z_loss"):
        if getattr(m, name) < 0:
            errs.append(f"model.{name}={getattr(m, name)} must be >= 0 (0 = off)")
    if training:
        for name in ("compute_dtype", "param_dtype"):
            if getattr(m, name) == DType.float16:
                errs.append(f"model.{name}=float16 needs loss scaling to train (float16 gradients "
                            "underflow), which spmdgpt does not implement; use bfloat16 (same speed on "
                            "current GPUs and TPUs, float32's range)")
    return errs


def _chunks(m) -> List[str]:
    """Llama 4's layers: chunked local attention, NoPE global layers and their attention temperature."""
    errs: List[str] = []
    if m.attention_chunk < 0:
        errs.append(f"model.attention_chunk={m.attention_chunk} must be >= 0 (0 = off; Llama 4: 8192)")
    elif m.attention_chunk and m.sliding_window > 0:
        errs.append(f"model.attention_chunk={m.attention_chunk} and model.sliding_window={m.sliding_window} both make "
                    "the L layers local; set one of them to 0 (chunks: Llama 4; windows: Mistral, Gemma, gpt-oss)")
    if not (math.isfinite(m.attn_temperature) and m.attn_temperature >= 0):
        errs.append(f"model.attn_temperature={m.attn_temperature} must be a finite number >= 0 (0 = off; Llama 4: 0.1)")
    elif m.attn_temperature and not m.global_nope:
        errs.append(f"model.attn_temperature={m.attn_temperature} tunes the NoPE layers' attention, and there are "
                    "none; set model.global_nope=true too (Llama 4), or model.attn_temperature=0")
    elif m.attn_temperature and m.mla.kv_rank:
        errs.append(f"model.attn_temperature={m.attn_temperature} is not in multi-head latent attention "
                    f"(model.mla.kv_rank={m.mla.kv_rank}); set model.attn_temperature=0")
    if m.attn_temperature_floor < 1:
        errs.append(f"model.attn_temperature_floor={m.attn_temperature_floor} must be >= 1 (positions per step of the "
                    "temperature; Llama 4: 8192)")
    return errs


def _global_layers(m) -> List[str]:
    """Gemma 4's attention: the G layers' own geometry (a stack of their own), proportional RoPE, value norms."""
    errs: List[str] = []
    if not 0.0 < m.rope_global_fraction <= 1.0:
        errs.append(f"model.rope_global_fraction={m.rope_global_fraction} must be in (0, 1] (the share of the G "
                    "layers' RoPE pairs that rotate; Gemma 4: 0.25; 1 = all)")
    if m.global_head_dim is not None and (not m.global_head_dim > 0 or m.global_head_dim % 2):
        errs.append(f"model.global_head_dim={m.global_head_dim} must be even and > 0 (Gemma 4: 512), or null (the "
                    "model's head_dim)")
    if m.global_kv_heads is not None and m.num_heads > 0 and (
            not 1 <= m.global_kv_heads <= m.num_heads or m.num_heads % m.global_kv_heads):
        errs.append(f"model.global_kv_heads={m.global_kv_heads} must divide model.num_heads={m.num_heads} (Gemma 4 "
                    "31B: 4), or be null (the model's num_kv_heads)")
    if m.per_layer_dim < 0:
        errs.append(f"model.per_layer_dim={m.per_layer_dim} must be >= 0 (Gemma 4 E2B / E4B: 256; 0 = off)")
    elif m.per_layer_dim and m.mtp_depth:
        errs.append("model.per_layer_dim and model.mtp_depth do not combine yet (the modules' blocks have no per-layer "
                    "input); set model.mtp_depth=0")
    errs += _kv_shared(m)
    if errs or not global_stack(m):
        return errs
    what = "model.global_head_dim / global_kv_heads / global_k_eq_v"
    k = len(m.window_pattern)
    local = m.sliding_window > 0 or m.attention_chunk > 0
    if not local or k < 2 or m.window_pattern != "L" * (k - 1) + "G" or m.num_layers % k:
        errs.append(f"{what} make the G layers a parameter stack of their own, run as groups of k - 1 local layers "
                    f"and one global: set model.window_pattern to k - 1 L then one G (Gemma 4: LLLLLG), "
                    f"model.num_layers a multiple of k and a model.sliding_window (now window_pattern="
                    f"{m.window_pattern!r}, num_layers={m.num_layers}, sliding_window={m.sliding_window})")
    for bad, name, fix in ((m.deltanet.full_attention_interval, "model.deltanet.full_attention_interval", "0"),
                           (m.mla.kv_rank, "model.mla.kv_rank", "0"), (m.mtp_depth, "model.mtp_depth", "0"),
                           (m.moe.num_experts and (m.moe.first_dense_layers or m.moe.interleave_step != 1),
                            "model.moe.first_dense_layers / interleave_step", "0 and 1"),
                           (m.moe.num_experts and m.moe.bias_update_rate, "model.moe.bias_update_rate", "0"),
                           (m.parametrization.value != "standard", "model.parametrization", "standard")):
        if bad:
            errs.append(f"{what} (the G layers' own stack) and {name} do not combine yet; set {name}={fix}")
    return errs


def _kv_shared(m) -> List[str]:
    """Gemma 4 E2B's and E4B's layers that read an earlier layer's keys and values (model.kv_shared_layers)."""
    s, k = m.kv_shared_layers, len(m.window_pattern)
    if s < 0:
        return [f"model.kv_shared_layers={s} must be >= 0 (0 = every layer its own keys and values)"]
    if not s:
        return ["model.kv_shared_wide_mlp=true widens the MLPs of the layers that share keys and values: set "
                "model.kv_shared_layers > 0 (Gemma 4 E2B: 20), or kv_shared_wide_mlp=false"] if m.kv_shared_wide_mlp \
            else []
    if not global_stack(m) or s % k or (m.num_layers - s) % k or m.num_layers - s < k:
        fits = [v for v in range(k, m.num_layers - k + 1, k) if (m.num_layers - v) % k == 0]
        which = (f"one of {', '.join(map(str, fits[:8]))}{', ...' if len(fits) > 8 else ''}" if fits else
                 f"none with model.num_layers={m.num_layers} (set model.kv_shared_layers=0 or more layers)")
        return [f"model.kv_shared_layers={s} needs the G layers' own stack (model.global_head_dim / global_kv_heads / "
                f"global_k_eq_v) and whole groups of model.window_pattern={m.window_pattern!r} on both sides: a "
                f"multiple of {k} below model.num_layers={m.num_layers} by at least {k}, here {which} (Gemma 4 E2B: "
                "20 of 35)"]
    if m.matmul_dtype.value == "fp8" or m.qk_norm_whole or m.attention_gate or kv_heads(m) == m.num_heads:
        return [f"model.kv_shared_layers={s} does not combine with model.matmul_dtype=fp8, qk_norm_whole, "
                "attention_gate or as many key/value heads as heads yet; set them off (model.num_kv_heads < num_heads)"]
    return []


def whole_width(errs: List[str], name: str, factor: float, d_model: int, what: str,
                width: str = "model.d_model") -> None:
    """An MLP width factor x d_model must be a whole number (mlp_hidden / expert_hidden round it);
    `width` names the d_model in the message (model.base_width: μP's base shape)."""
    if factor > 0 and d_model > 0 and abs(factor * d_model - round(factor * d_model)) > 1e-6:
        errs.append(f"{name}={factor} * {width}={d_model} is not a whole number; "
                    f"choose a factor that gives an integer {what} width")


def _batch(d) -> List[str]:
    errs: List[str] = []
    positive(errs, "data.seq_len", d.seq_len)
    positive(errs, "data.batch_size", d.batch_size)
    return errs


def _corpus(d) -> List[str]:
    errs: List[str] = []
    if not 0.0 < d.val_fraction < 1.0:
        errs.append(f"data.val_fraction={d.val_fraction} must be in (0, 1), e.g. 0.1")
    if d.source == DataSource.staircase:
        positive(errs, "data.staircase_tokens", d.staircase_tokens)
    return errs + _data_sources(d)


def _optimizer(o, training: bool) -> List[str]:
    errs: List[str] = []
    positive(errs, "optimizer.lr", o.lr)
    if not 0.0 < o.cooldown_fraction <= 1.0:
        errs.append(f"optimizer.cooldown_fraction={o.cooldown_fraction} must be in (0, 1], e.g. 0.2")
    for name in ("embed_lr", "unembed_lr"):
        if getattr(o, name) is not None:
            positive(errs, f"optimizer.{name}", getattr(o, name))
    if o.warmup_steps < 0:
        errs.append(f"optimizer.warmup_steps={o.warmup_steps} must be >= 0")
    if o.warmup_share is not None and not 0.0 <= o.warmup_share < 1.0:
        errs.append(f"optimizer.warmup_share={o.warmup_share} must be a share of the run's steps in [0, 1), or null "
                    "for optimizer.warmup_steps")
    if not 0.0 <= o.min_lr_ratio <= 1.0:
        errs.append(f"optimizer.min_lr_ratio={o.min_lr_ratio} must be in [0, 1]")
    for name in ("b1", "b2", "momentum"):
        v = getattr(o, name)
        if not 0.0 <= v < 1.0:
            errs.append(f"optimizer.{name}={v} must be in [0, 1)")
    if o.eps <= 0:
        errs.append(f"optimizer.eps={o.eps} must be > 0")
    if o.weight_decay < 0:
        errs.append(f"optimizer.weight_decay={o.weight_decay} must be >= 0")
    if o.grad_clip < 0:
        errs.append(f"optimizer.grad_clip={o.grad_clip} must be >= 0 (0 disables clipping)")
    if o.name in (OptimizerName.muon, OptimizerName.manifold_muon):
        positive(errs, "optimizer.muon_lr", o.muon_lr)
        if not 0.0 <= o.muon_momentum < 1.0:
            errs.append(f"optimizer.muon_momentum={o.muon_momentum} must be in [0, 1), e.g. 0.95")
        for name in ("ns_steps", "msign_steps"):
            if getattr(o, name) < 1:
                errs.append(f"optimizer.{name}={getattr(o, name)} must be >= 1")
        if o.solver_steps < 0:
            errs.append(f"optimizer.solver_steps={o.solver_steps} must be >= 0 (0 = the solver's starting step only)")
        positive(errs, "optimizer.rho", o.rho)
        positive(errs, "optimizer.dual_lr", o.dual_lr)
    if training and o.state_dtype == DType.float16:
        errs.append("optimizer.state_dtype=float16 cannot hold Adam's second moments (they underflow); "
                    "use bfloat16 or float32")
    return errs


def _train(t, rl) -> List[str]:
    errs: List[str] = []
    for name in ("steps", "microbatches", "eval_batches", "log_every", "cpu_peak_flops"):
        positive(errs, f"train.{name}", getattr(t, name))
    for name in ("time_budget", "peak_flops"):
        if getattr(t, name) is not None:
            positive(errs, f"train.{name}", getattr(t, name))
    if t.eval_every < 0:
        errs.append(f"train.eval_every={t.eval_every} must be >= 0 (0 = evaluate only at the end)")
    if t.skip_nonfinite < 0:
        errs.append(f"train.skip_nonfinite={t.skip_nonfinite} must be >= 0 (0 = stop at the first non-finite step)")
    if t.loss_spike_factor != 0 and t.loss_spike_factor <= 1:
        errs.append(f"train.loss_spike_factor={t.loss_spike_factor} must be > 1 (or 0 = off)")
    if t.stats_every < 0:
        errs.append(f"train.stats_every={t.stats_every} must be >= 0 (0 = off)")
    if t.replans and replan_points(t.replans, t.steps) is None:
        errs.append(
            f"train.replans={list(t.replans)} must be STEP:STEPS entries in step order, 1 <= STEP < STEPS, "
            f"each STEP below the next entry's STEPS (the last's below train.steps={t.steps}); they are written "
            "by a time budget: take them from the run's config.yaml, or leave them out"
        )
    if t.replans and t.time_budget is not None:
        errs.append("train.replans and train.time_budget: the re-plans belong to a fixed step count; "
                    "leave out train.time_budget (or the re-plans)")
    if t.profile is not None and profile_range(t.profile, t.steps) is None:
        errs.append(f"train.profile={t.profile} must be START:STOP with 1 <= START <= STOP <= train.steps "
                    f"({t.steps}), e.g. train.profile=10:15")
    if t.rollout_tokens < 0:
        errs.append(f"train.rollout_tokens={t.rollout_tokens} must be >= 0 (0 = no rollouts)")
    if t.rollout_tokens > 0:
        positive(errs, "train.rollout_prompts", t.rollout_prompts)
        positive(errs, "train.rollout_prompt_tokens", t.rollout_prompt_tokens)
    errs += sampling_errors("train.rollout_", temperature=t.rollout_temperature)  # (a NaN: a typo, used or not)
    errs += sampling_errors("rl.", temperature=rl.temperature, top_p=rl.top_p)  # (GRPO's; checked in every run)
    return errs


def _checkpoint(c) -> List[str]:
    errs: List[str] = []
    if c.every < 0:
        errs.append(f"checkpoint.every={c.every} must be >= 0 (0 = only at the end and on signals)")
    positive(errs, "checkpoint.keep", c.keep)
    if c.keep_every is not None:
        positive(errs, "checkpoint.keep_every", c.keep_every)
    return errs


def _sharding(cfg: Config) -> List[str]:
    """Rule tables name known mesh axes."""
    errs = []
    axes = mesh_axes(cfg.mesh)
    for table_name in ("params", "compute"):
        for logical, value in getattr(cfg.sharding, table_name).items():
            for ax in mesh_axes_of(value):
                if ax not in axes:
                    errs.append(f"sharding.{table_name}.{logical}={value}: unknown mesh axis {ax!r}; "
                                f"use one of {list(axes)} or null")
    return errs


def _across(cfg: Config, sections: set, sizes: Optional[Dict[str, int]], training: bool, clean: bool) -> List[str]:
    """The checks that involve two sections, in one place: each runs when both were asked for.
    The parameters' divisibility over the mesh only when nothing else is wrong (`clean`)."""
    errs: List[str] = []
    m, d, t = cfg.model, cfg.data, cfg.train
    if "model" in sections:  # (the attention backend's own checks, data.seq_len's when asked for)
        errs.extend(feature_errors("kernels", m, d.seq_len if "batch" in sections else None))
    if {"model", "batch"} <= sections and d.seq_len > 0:
        if m.loss_block > 0 and d.seq_len % m.loss_block:
            errs.append(f"model.loss_block={m.loss_block} does not divide data.seq_len={d.seq_len}; "
                        f"choose a divisor of the sequence length (or 0 = off)")
        if m.max_seq_len > 0 and d.seq_len > m.max_seq_len:
            errs.append(f"data.seq_len={d.seq_len} exceeds model.max_seq_len={m.max_seq_len}; "
                        f"lower data.seq_len or raise model.max_seq_len")
    if {"model", "optimizer"} <= sections and m.parametrization != Parametrization.standard \
            and cfg.optimizer.name == OptimizerName.sgd:
        errs.append(f"model.parametrization={m.parametrization.value} scales AdamW's learning rates (μP's Adam "
                    "rules); optimizer.name=sgd would need SGD's: use adamw, muon or manifold_muon")
    if {"model", "optimizer"} <= sections and training and indexer_warmup(m) and cfg.optimizer.weight_decay:
        field = "csa" if m.csa.q_rank else "mla"
        errs.append(f"model.{field}.index_train=dense with optimizer.weight_decay={cfg.optimizer.weight_decay}: "
                    "the warm-up trains the indexer alone (every other parameter frozen) and decay would move the "
                    "frozen ones; set optimizer.weight_decay=0 for the warm-up")
    if {"model", "optimizer"} <= sections and cfg.optimizer.unembed_lr is not None and m.tie_embeddings:
        errs.append("optimizer.unembed_lr needs model.tie_embeddings=false (a tied model's unembedding "
                    "is its embedding: use optimizer.embed_lr)")
    if ({"model", "train"} <= sections and t.rollout_tokens > 0
            and t.rollout_prompt_tokens + t.rollout_tokens > m.max_seq_len):
        errs.append(f"train.rollout_prompt_tokens={t.rollout_prompt_tokens} + train.rollout_tokens="
                    f"{t.rollout_tokens} exceeds model.max_seq_len={m.max_seq_len}; sample fewer tokens")
    if {"batch", "train"} <= sections and training and d.source == DataSource.text:
        errs.extend(feature_errors("preference", cfg))
    if {"batch", "train"} <= sections and training:  # (prompts are text data; rl.* set on any other is refused)
        errs.extend(feature_errors("rl.checks", cfg))
    if {"model", "optimizer", "train", "checkpoint"} <= sections and training:
        errs.extend(feature_errors("lora", cfg))
    if "model" in sections and "layout" in sections and training:
        errs.extend(feature_errors("mtp", cfg) + feature_errors("fp8", cfg))
    if sizes is None:
        return errs
    s = cfg.sharding
    if "batch" in sections and d.batch_size > 0:
        dp = math.prod(sizes.get(ax, 1) for ax in mesh_axes_of(s.compute.get("batch")))
        if d.batch_size % dp:
            errs.append(
                f"data.batch_size={d.batch_size} is not divisible by the data-parallel size {dp} "
                f"(sharding.compute.batch={s.compute.get('batch')}); use a multiple of {dp}"
            )
        elif training and "train" in sections and t.microbatches > 0:
            # (a microbatch in a pipeline's stages is split over the batch's axes but the stages')
            dp = math.prod(sizes.get(ax, 1) for ax in mesh_axes_of(s.compute.get("batch"))
                           if ax not in mesh_axes_of(s.params.get("layers")))
            if d.batch_size % (dp * t.microbatches):
                errs.append(
                    f"train.microbatches={t.microbatches} does not divide data.batch_size={d.batch_size} "
                    f"into parts the data-parallel size {dp} divides; make data.batch_size a multiple of "
                    f"{dp * t.microbatches} or choose another train.microbatches"
                )
    if "model" in sections and m.mla.kv_rank and m.mla.index_heads:  # (DeepSeek Sparse Attention, model/mla.py)
        for axis, why in (("context", "its blocks are causal in token order, not the ring's"),
                          ("stage", "the stages drop the units' auxiliary losses, its KL among them")):
            if sizes.get(axis, 1) > 1:
                errs.append(f"mesh.{axis}={sizes[axis]} with model.mla.index_heads={m.mla.index_heads}: DeepSeek "
                            f"Sparse Attention does not run there yet ({why}); set mesh.{axis}=1")
    if "model" in sections and m.csa.q_rank and sizes.get("context", 1) > 1:
        errs.append(f"mesh.context={sizes['context']} with model.csa.q_rank={m.csa.q_rank}: DeepSeek-V4's attention "
                    "does not run on a context ring yet; set mesh.context=1")
    if "model" in sections and m.csa.q_rank and set(compress_kinds(m)) - {"S"} and sizes.get("stage", 1) > 1:
        errs.append(f"mesh.stage={sizes['stage']} with model.csa.pattern={m.csa.pattern!r}: the pipeline's stages do "
                    "not run DeepSeek-V4's compressed layers (C, H) yet; set mesh.stage=1")
    if "model" in sections and m.hyper_connections and sizes.get("stage", 1) > 1:
        errs.append(f"mesh.stage={sizes['stage']} with model.hyper_connections={m.hyper_connections}: the pipeline's "
                    "stages pass one residual stream, not several, yet; set mesh.stage=1")
    errs.extend(feature_errors("context", cfg, sections, sizes))
    errs.extend(feature_errors("collective", cfg, sections, sizes, training))
    errs.extend(feature_errors("pipeline", cfg, sections, sizes))
    if "model" in sections and clean and not errs:
        errs.extend(_check_param_divisibility(cfg, sizes))
    return errs


def _mesh_errors(me, num_devices: int, errs: List[str], left: str = "") -> Optional[Dict[str, int]]:
    """Check mesh.* against the device count (errors appended to `errs`; `left` follows the count in
    them: where the others went); the resolved {axis: size}, or None when the sizes are wrong."""
    given = mesh_sizes(me)
    bad = {a: v for a, v in given.items() if not isinstance(v, int) or v == 0 or v < -1}
    for a, v in bad.items():
        errs.append(f"mesh.{a}={v} must be a positive size or -1 (all remaining devices)")
    if bad:
        return None
    shape = " x ".join(f"mesh.{a}={v}" for a, v in given.items())
    rest = [a for a, v in given.items() if v == -1]
    fixed = math.prod(v for v in given.values() if v > 0)
    if len(rest) > 1:
        errs.append(f"{' and '.join(f'mesh.{a}=-1' for a in rest)}: only one axis can take the remaining devices; "
                    f"give the others a size (e.g. mesh.{rest[0]}=1)")
    elif num_devices % fixed:
        errs.append(f"{shape} does not fit {num_devices} device(s){left}; the product of the fixed sizes must divide "
                    "the device count (use -1 for one axis)")
    elif not rest and fixed != num_devices:
        errs.append(f"{shape} = {fixed} but there are {num_devices} device(s){left}; set one axis to -1 or make the "
                    f"product {num_devices}")
    else:
        return resolve_mesh_shape(me, num_devices)
    return None


def _check_param_divisibility(cfg: Config, sizes: Dict[str, int]) -> List[str]:
    """Each sharded parameter/activation dimension must divide evenly over its mesh axes."""
    errs = []
    dims = logical_dim_sizes(cfg.model)
    for table_name in ("params", "compute"):
        table = getattr(cfg.sharding, table_name)
        for logical, value in table.items():
            n = 1
            for ax in mesh_axes_of(value):
                n *= sizes[ax]
            # (kv_heads: replicated instead where they do not divide, sharding.Rules)
            for field_name, size in dims.get(logical, []) if logical != "kv_heads" and n > 1 else []:
                if not size % n:
                    continue
                errs.append(
                    f"{field_name}={size} is not divisible by {n}, the size of mesh axis "
                    f"{value} that sharding.{table_name}.{logical} shards it over; "
                    f"use a multiple of {n} or another sharding"
                )
    return errs
