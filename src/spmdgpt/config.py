"""Typed configuration: dataclasses + enums, Hydra registration, and one validation pass.

Every knob is a dataclass field with a default and a one-line comment. `load_config` composes
the packaged YAML (``spmdgpt/configs``) with CLI overrides through Hydra's compose API, so it
works from any working directory, installed or editable. `validate` checks everything that can
be checked before a single file is written and returns one message per bad field.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional


class ConfigError(ValueError):
    """A bad configuration value. `messages` holds one line per problem (field + fix)."""

    def __init__(self, messages: List[str]):
        self.messages = list(messages)
        super().__init__("\n".join(self.messages))


# ----------------------------------------------------------------------------- enums


class NormType(enum.Enum):
    layernorm = "layernorm"
    rmsnorm = "rmsnorm"


class MlpType(enum.Enum):
    gelu = "gelu"  # up-projection, GELU (tanh approximation), down-projection (GPT-2)
    swiglu = "swiglu"  # SiLU(x W_gate) * (x W_up), down-projection (LLaMA)


class DType(enum.Enum):
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


class Remat(enum.Enum):
    none = "none"  # keep all activations (fastest, most memory)
    full = "full"  # recompute each block in the backward pass
    dots = "dots"  # save matmul outputs without batch dims, recompute the rest


class AttentionImpl(enum.Enum):
    xla = "xla"  # einsum + masked softmax, compiled by XLA (runs everywhere)
    cudnn = "cudnn"  # cuDNN fused attention (NVIDIA GPU, bfloat16/float16 compute)
    auto = "auto"  # cudnn where it can run, else xla


class DataSource(enum.Enum):
    staircase = "staircase"  # synthetic 0123456789876543210... digits, vocabulary 10
    text = "text"  # a text file under data.path, tokenized by data.tokenizer


class TokenizerKind(enum.Enum):
    char = "char"  # characters of the corpus (vocabulary built from it, saved with the run)
    gpt2 = "gpt2"  # GPT-2 BPE through tiktoken, loaded offline from data.path/gpt2-tokenizer


class OptimizerName(enum.Enum):
    adamw = "adamw"
    sgd = "sgd"
    muon = "muon"  # hidden matrices: Muon; embeddings, norms, biases: AdamW
    manifold_muon = "manifold_muon"  # hidden matrices on the Stiefel manifold; the rest: AdamW


class ManifoldSolver(enum.Enum):
    admm = "admm"
    dual_ascent = "dual_ascent"


class Schedule(enum.Enum):
    cosine = "cosine"  # linear warmup, cosine decay to lr * min_lr_ratio
    constant = "constant"  # linear warmup, then constant


# ----------------------------------------------------------------------------- sections


@dataclass
class ModelConfig:
    num_layers: int = 4  # transformer blocks (stacked, run with lax.scan)
    num_heads: int = 4  # attention heads; must divide d_model
    d_model: int = 256  # residual stream width
    mlp_factor: float = 4.0  # MLP hidden width = mlp_factor * d_model
    vocab_size: int = 65  # embedding rows; >= the tokenizer's vocabulary (padding is allowed)
    max_seq_len: int = 256  # longest sequence the model accepts (RoPE tables, KV cache)
    norm: NormType = NormType.layernorm  # layernorm | rmsnorm
    norm_eps: float = 1e-5  # epsilon inside the norms
    bias: bool = False  # biases in the QKV, output and MLP projections and in LayerNorm
    mlp: MlpType = MlpType.gelu  # gelu | swiglu
    tie_embeddings: bool = True  # unembedding = embedding transposed
    rope_theta: float = 10000.0  # RoPE base frequency
    init_std: float = 0.02  # std of the normal init (residual projections: / sqrt(2 * num_layers))
    attention: AttentionImpl = AttentionImpl.auto  # attention backend: auto | xla | cudnn
    remat: Remat = Remat.none  # activation checkpointing policy per block
    scan_unroll: bool = True  # unroll the layer scan: ~15% faster steps on CPU, longer compiles
    attention_block: int = 64  # causal attention in query blocks of this size, skipping key
    # blocks above the diagonal (0 = one block); used when it divides the sequence length
    param_dtype: DType = DType.float32  # dtype parameters (and optimizer state) are stored in
    compute_dtype: DType = DType.float32  # dtype of matmuls; norms, softmax and loss stay float32


@dataclass
class DataConfig:
    source: DataSource = DataSource.text  # staircase | text
    text_file: str = "tinyshakespeare/input.txt"  # text corpus, relative to data.path (or absolute)
    encoding: str = "utf-8"  # text encoding of data.text_file (latin-1 for the Gutenberg files)
    tokenizer: TokenizerKind = TokenizerKind.char  # char | gpt2 (ignored by the staircase)
    path: Optional[str] = None  # data root; default: $SPMDGPT_DATA, else shared/data beside the checkout
    cache_dir: Optional[str] = None  # token cache; default: $SPMDGPT_CACHE, else ~/.cache/spmdgpt
    seq_len: int = 256  # tokens per training window
    batch_size: int = 64  # global batch size (sequences per step, over all devices)
    val_fraction: float = 0.1  # tail of the corpus held out for validation (nanoGPT: 0.1)
    staircase_tokens: int = 200_000  # length of the synthetic staircase corpus


@dataclass
class OptimizerConfig:
    name: OptimizerName = OptimizerName.adamw  # adamw | sgd | muon | manifold_muon
    lr: float = 1e-3  # peak learning rate
    schedule: Schedule = Schedule.cosine  # cosine | constant
    warmup_steps: int = 100  # linear warmup from 0 to lr
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio at train.steps
    b1: float = 0.9  # AdamW beta1
    b2: float = 0.95  # AdamW beta2
    eps: float = 1e-8  # AdamW epsilon
    weight_decay: float = 0.1  # decoupled, applied to matrix parameters only
    momentum: float = 0.9  # SGD momentum
    nesterov: bool = False  # SGD Nesterov momentum
    grad_clip: float = 1.0  # clip by global norm; 0 disables
    # muon / manifold_muon: hidden matrices (QKV, output, MLP) get these; every other parameter
    # gets AdamW with lr, b1, b2, eps above. Same warmup and schedule shape as lr.
    muon_lr: float = 0.05  # peak step size η (manifold_muon: spectral norm of each update)
    muon_momentum: float = 0.95  # EMA momentum of the gradients
    muon_nesterov: bool = True  # step with the Nesterov look-ahead of the momentum
    ns_steps: int = 5  # muon: Polar Express msign iterations
    solver: ManifoldSolver = ManifoldSolver.admm  # manifold_muon inner solver: admm | dual_ascent
    solver_steps: int = 10  # inner iterations (dual_ascent needs ~100; 0: the Λ₀ step, no solver)
    rho: float = 16.0  # ADMM penalty, for gradients normalised to unit Frobenius norm
    dual_lr: float = 0.003  # dual ascent step, decays linearly to 0 over solver_steps
    msign_steps: int = 8  # msign iterations inside the solver and the retraction


@dataclass
class TrainConfig:
    steps: int = 1000  # optimizer steps
    seed: int = 0  # seeds parameters and the data order
    eval_every: int = 250  # validation loss every k steps (and at the end); 0 = only at the end
    eval_batches: int = 16  # fixed validation batches (the same ones at every evaluation)
    log_every: int = 10  # write a metrics.jsonl row every k steps
    progress: bool = True  # tqdm progress bar on the console
    cpu_peak_flops: float = 470e9  # this host's CPU matmul peak (FLOP/s, all cores) used for MFU
    peak_flops: Optional[float] = None  # per-device peak FLOP/s for MFU; default: the device table
    deterministic: bool = False  # GPU: deterministic XLA ops (--xla_gpu_deterministic_ops)
    rollout_tokens: int = 0  # at each evaluation, sample this many tokens from fixed prompts (0 = off)
    rollout_prompts: int = 2  # how many fixed validation prompts to continue
    rollout_prompt_tokens: int = 16  # prompt length, taken from the validation split
    rollout_temperature: float = 0.8  # sampling temperature of the rollouts (0 = greedy)


@dataclass
class CheckpointConfig:
    enabled: bool = True  # write checkpoints (and resume from them)
    every: int = 500  # save every k steps, at the end and on SIGTERM/SIGINT; 0 = only the latter
    keep: int = 3  # keep the newest k checkpoints
    keep_every: Optional[int] = None  # also keep, permanently, every checkpoint at a multiple of k
    async_save: bool = True  # write in the background while training goes on
    init_from: Optional[str] = None  # run directory whose newest parameters start this run


@dataclass
class MeshConfig:
    data: int = -1  # devices on the data axis; -1 = all devices not used by the other axis
    model: int = 1  # devices on the model (tensor-parallel) axis; -1 = all remaining


@dataclass
class ShardingConfig:
    name: str = "dp"  # which rule table this is (configs/sharding/<name>.yaml)
    # Logical axis -> mesh axis (a name, a list of names, or null) for where parameters live.
    params: Dict[str, Any] = field(default_factory=dict)
    # Logical axis -> mesh axis for activations; parameters are resharded to this layout right
    # before use (with an FSDP table that is the all-gather).
    compute: Dict[str, Any] = field(default_factory=lambda: {"batch": "data"})


@dataclass
class DistConfig:
    coordinator: Optional[str] = None  # host:port of process 0 (explicit multi-process runs)
    num_processes: Optional[int] = None  # processes in the run (with dist.coordinator)
    process_id: Optional[int] = None  # this process's index (with dist.coordinator)
    auto: bool = True  # detect SLURM / Open MPI / TPU VM clusters from the environment


@dataclass
class RunConfig:
    name: str = "default"  # experiment name (used in the default run directory)
    dir: Optional[str] = None  # run directory; default runs/<utc-timestamp>-<name>


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    sharding: ShardingConfig = field(default_factory=ShardingConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    run: RunConfig = field(default_factory=RunConfig)


# ----------------------------------------------------------------------------- Hydra

_REGISTERED = False


def register_configs() -> None:
    """Register the schema in Hydra's ConfigStore (the packaged config.yaml extends it)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="spmdgpt_schema", node=Config)
    _REGISTERED = True


def load_config(overrides: List[str]) -> Config:
    """Compose packaged YAML + CLI overrides into a typed Config. Raises ConfigError."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="spmdgpt.configs", version_base="1.3"):
            dcfg = compose(config_name="config", overrides=list(overrides))
        cfg = OmegaConf.to_object(dcfg)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError([_one_line_hydra_error(e)]) from None
    finally:
        GlobalHydra.instance().clear()
    assert isinstance(cfg, Config)
    return cfg


def _one_line_hydra_error(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    # OmegaConf appends "full_key: ..., object_type=..." context lines; keep the message and key.
    msg = lines[0] if lines else type(e).__name__
    key = next((ln for ln in lines[1:] if ln.startswith("full_key:")), None)
    if key and key.split(":", 1)[1].strip() and key.split(":", 1)[1].strip() not in msg:
        msg = f"{key.split(':', 1)[1].strip()}: {msg}"
    if "Could not find 'experiment/" in msg or "Could not load 'experiment/" in msg:
        msg += f" (packaged experiments: {', '.join(packaged_names('experiment'))})"
    if "sharding/" in msg and ("Could not find" in msg or "Could not load" in msg):
        msg += f" (packaged tables: {', '.join(packaged_names('sharding'))})"
    return msg


def packaged_names(group: str) -> List[str]:
    d = Path(__file__).parent / "configs" / group
    return sorted(p.stem for p in d.glob("*.yaml"))


def load_run_config(run_dir: Path) -> Config:
    """The resolved Config a run wrote to run_dir/config.yaml."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise ConfigError([f"run.dir={run_dir}: no config.yaml there; give the directory of a training run"])
    try:
        merged = OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.load(path))
        return OmegaConf.to_object(merged)
    except OmegaConfBaseException as e:
        raise ConfigError([f"{path}: {_one_line_hydra_error(e)}"]) from None


def to_yaml(cfg: Config) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def to_dict(cfg: Config) -> Dict[str, Any]:
    def conv(x):
        if isinstance(x, enum.Enum):
            return x.value
        if dataclasses.is_dataclass(x):
            return {f.name: conv(getattr(x, f.name)) for f in dataclasses.fields(x)}
        if isinstance(x, dict):
            return {k: conv(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [conv(v) for v in x]
        return x

    return conv(cfg)


# ----------------------------------------------------------------------------- derived values


def head_dim(m: ModelConfig) -> int:
    return m.d_model // m.num_heads


def mlp_hidden(m: ModelConfig) -> int:
    return int(round(m.mlp_factor * m.d_model))


def resolve_mesh_shape(mesh: MeshConfig, num_devices: int) -> tuple[int, int]:
    """(data, model) sizes with -1 filled in. Assumes validate() passed."""
    data, model = mesh.data, mesh.model
    if data == -1 and model == -1:
        model = 1
    if data == -1:
        data = num_devices // model
    if model == -1:
        model = num_devices // data
    return data, model


def find_data_root(explicit: Optional[str] = None) -> Optional[Path]:
    """data.path, else $SPMDGPT_DATA, else the nearest `shared/data` above cwd or this package."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("SPMDGPT_DATA")
    if env:
        return Path(env).expanduser()
    starts = [Path.cwd().resolve(), Path(__file__).resolve().parent]
    for start in starts:
        for p in [start, *start.parents]:
            if (p / "shared" / "data").is_dir():
                return p / "shared" / "data"
    return None


# ----------------------------------------------------------------------------- validation

MESH_AXES = ("data", "model")


def _mesh_axes_of(value: Any) -> List[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


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


def validate(cfg: Config, num_devices: int) -> List[str]:
    """Every problem found in `cfg`, one line each (field, value, fix). Does no I/O on data."""
    errs: List[str] = []
    m, d, o, t, me = cfg.model, cfg.data, cfg.optimizer, cfg.train, cfg.mesh

    def positive(name: str, value: Any) -> None:
        if not value > 0:
            errs.append(f"{name}={value} must be > 0")

    for name in ("num_layers", "num_heads", "d_model", "vocab_size", "max_seq_len"):
        positive(f"model.{name}", getattr(m, name))
    positive("model.mlp_factor", m.mlp_factor)
    positive("model.init_std", m.init_std)
    positive("model.norm_eps", m.norm_eps)
    positive("model.rope_theta", m.rope_theta)
    if m.attention_block < 0:
        errs.append(f"model.attention_block={m.attention_block} must be >= 0 (0 = one block)")
    if m.num_heads > 0 and m.d_model > 0:
        if m.d_model % m.num_heads:
            errs.append(
                f"model.num_heads={m.num_heads} does not divide model.d_model={m.d_model}; "
                f"choose num_heads among the divisors of d_model"
            )
        elif head_dim(m) % 2:
            errs.append(
                f"model.d_model/model.num_heads={head_dim(m)} is odd, but RoPE rotates pairs of "
                f"dimensions; choose num_heads so that the head dimension is even"
            )
    if m.mlp_factor > 0 and m.d_model > 0 and abs(m.mlp_factor * m.d_model - mlp_hidden(m)) > 1e-6:
        errs.append(
            f"model.mlp_factor={m.mlp_factor} * model.d_model={m.d_model} is not a whole number; "
            f"choose a factor that gives an integer MLP width"
        )

    positive("data.seq_len", d.seq_len)
    positive("data.batch_size", d.batch_size)
    if d.seq_len > 0 and m.max_seq_len > 0 and d.seq_len > m.max_seq_len:
        errs.append(
            f"data.seq_len={d.seq_len} exceeds model.max_seq_len={m.max_seq_len}; "
            f"lower data.seq_len or raise model.max_seq_len"
        )
    if not 0.0 < d.val_fraction < 1.0:
        errs.append(f"data.val_fraction={d.val_fraction} must be in (0, 1), e.g. 0.1")
    if d.source == DataSource.staircase:
        positive("data.staircase_tokens", d.staircase_tokens)

    positive("optimizer.lr", o.lr)
    if o.warmup_steps < 0:
        errs.append(f"optimizer.warmup_steps={o.warmup_steps} must be >= 0")
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
        positive("optimizer.muon_lr", o.muon_lr)
        if not 0.0 <= o.muon_momentum < 1.0:
            errs.append(f"optimizer.muon_momentum={o.muon_momentum} must be in [0, 1), e.g. 0.95")
        for name in ("ns_steps", "msign_steps"):
            if getattr(o, name) < 1:
                errs.append(f"optimizer.{name}={getattr(o, name)} must be >= 1")
        if o.solver_steps < 0:
            errs.append(f"optimizer.solver_steps={o.solver_steps} must be >= 0 (0 = the solver's starting step only)")
        positive("optimizer.rho", o.rho)
        positive("optimizer.dual_lr", o.dual_lr)

    positive("train.steps", t.steps)
    if t.eval_every < 0:
        errs.append(f"train.eval_every={t.eval_every} must be >= 0 (0 = evaluate only at the end)")
    positive("train.eval_batches", t.eval_batches)
    positive("train.log_every", t.log_every)
    positive("train.cpu_peak_flops", t.cpu_peak_flops)
    if t.rollout_tokens < 0:
        errs.append(f"train.rollout_tokens={t.rollout_tokens} must be >= 0 (0 = no rollouts)")
    if t.rollout_tokens > 0:
        positive("train.rollout_prompts", t.rollout_prompts)
        positive("train.rollout_prompt_tokens", t.rollout_prompt_tokens)
        if t.rollout_prompt_tokens + t.rollout_tokens > m.max_seq_len:
            errs.append(
                f"train.rollout_prompt_tokens={t.rollout_prompt_tokens} + train.rollout_tokens="
                f"{t.rollout_tokens} exceeds model.max_seq_len={m.max_seq_len}; sample fewer tokens"
            )
        if t.rollout_temperature < 0:
            errs.append(f"train.rollout_temperature={t.rollout_temperature} must be >= 0 (0 = greedy)")
    if t.peak_flops is not None:
        positive("train.peak_flops", t.peak_flops)

    c = cfg.checkpoint
    if c.every < 0:
        errs.append(f"checkpoint.every={c.every} must be >= 0 (0 = only at the end and on signals)")
    positive("checkpoint.keep", c.keep)
    if c.keep_every is not None:
        positive("checkpoint.keep_every", c.keep_every)

    # Mesh: sizes must multiply to the device count.
    for name in MESH_AXES:
        v = getattr(me, name)
        if v == 0 or v < -1:
            errs.append(f"mesh.{name}={v} must be a positive size or -1 (all remaining devices)")
    mesh_ok = not any(getattr(me, a) == 0 or getattr(me, a) < -1 for a in MESH_AXES)
    data_size = model_size = None
    if mesh_ok:
        fixed = [getattr(me, a) for a in MESH_AXES if getattr(me, a) != -1]
        prod = 1
        for v in fixed:
            prod *= v
        if num_devices % prod:
            errs.append(
                f"mesh.data={me.data} x mesh.model={me.model} does not fit {num_devices} device(s); "
                f"the product of the fixed sizes must divide the device count (use -1 for one axis)"
            )
        elif len(fixed) == 2 and prod != num_devices:
            errs.append(
                f"mesh.data={me.data} x mesh.model={me.model} = {prod} but there are "
                f"{num_devices} device(s); set one axis to -1 or make the product {num_devices}"
            )
        else:
            data_size, model_size = resolve_mesh_shape(me, num_devices)

    # Sharding rules: known mesh axes, each used once per table entry.
    s = cfg.sharding
    for table_name in ("params", "compute"):
        table = getattr(s, table_name)
        for logical, value in table.items():
            for ax in _mesh_axes_of(value):
                if ax not in MESH_AXES:
                    errs.append(
                        f"sharding.{table_name}.{logical}={value}: unknown mesh axis {ax!r}; "
                        f"use one of {list(MESH_AXES)} or null"
                    )

    # Divisibility of sharded dimensions (only once the mesh is known).
    if data_size is not None:
        sizes = {"data": data_size, "model": model_size}
        batch_axes = _mesh_axes_of(s.compute.get("batch"))
        dp = 1
        for ax in batch_axes:
            dp *= sizes.get(ax, 1)
        if d.batch_size > 0 and d.batch_size % dp:
            errs.append(
                f"data.batch_size={d.batch_size} is not divisible by the data-parallel size {dp} "
                f"(sharding.compute.batch={s.compute.get('batch')}); use a multiple of {dp}"
            )
        if not errs:
            errs.extend(_check_param_divisibility(cfg, sizes))
    return errs


def _check_param_divisibility(cfg: Config, sizes: Dict[str, int]) -> List[str]:
    """Each sharded parameter/activation dimension must divide evenly over its mesh axes."""
    from spmdgpt.model.transformer import logical_dim_sizes

    errs = []
    dims = logical_dim_sizes(cfg.model)
    for table_name in ("params", "compute"):
        table = getattr(cfg.sharding, table_name)
        for logical, value in table.items():
            n = 1
            for ax in _mesh_axes_of(value):
                n *= sizes[ax]
            if logical in dims and n > 1 and dims[logical][1] % n:
                field_name, size = dims[logical]
                errs.append(
                    f"{field_name}={size} is not divisible by {n}, the size of mesh axis "
                    f"{value} that sharding.{table_name}.{logical} shards it over; "
                    f"use a multiple of {n} or another sharding"
                )
    return errs
