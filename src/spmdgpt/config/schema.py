"""The configuration schema: every knob is a dataclass field with a default and a one-line
comment, one section per concern (the model's optional units' in `config.units`); the enums of
its choices live in `config.choices`, values
derived from a config (head dim, MLP width, mesh shape) in `config.derived`, loading in
`config.load`, validation in `config.validate`. Imports nothing from spmdgpt outside config.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from spmdgpt.config.choices import (
    AttentionImpl,
    CollectiveMatmul,
    ConfigError,
    ContextAttention,
    DataFormat,
    DataSource,
    DType,
    Fp8Scaling,
    ManifoldSolver,
    MatmulDtype,
    MlpType,
    NormType,
    OptimizerName,
    Parametrization,
    Remat,
    RlAdvantage,
    RlCorrection,
    RlLossNorm,
    RlObjective,
    RlRatio,
    RopeScaling,
    Schedule,
    Split,
    TokenDtype,
    TokenizerKind,
)
from spmdgpt.config.section import Section, freeze  # noqa: F401  (freeze: re-exported)
from spmdgpt.config.units import CsaConfig, DeltaNetConfig, MlaConfig, MoeConfig

# ----------------------------------------------------------------------------- sections


@dataclass
class ModelConfig(Section):
    num_layers: int = 4  # transformer blocks (stacked, run with lax.scan)
    num_heads: int = 4  # attention heads; must divide d_model unless head_dim is given
    num_kv_heads: Optional[int] = None  # key/value heads (grouped-query attention): a divisor of
    # num_heads, each shared by num_heads / num_kv_heads query heads; 1 = multi-query; default num_heads
    d_model: int = 256  # residual stream width
    head_dim: Optional[int] = None  # width of each attention head (even, for RoPE); default d_model /
    # num_heads (Qwen3-0.6B: 16 heads of 128 on a 1,024-wide stream)
    mlp_factor: float = 4.0  # MLP hidden width = mlp_factor * d_model
    vocab_size: int = 66  # embedding rows; >= the tokenizer's vocabulary (padding is allowed)
    max_seq_len: int = 256  # longest sequence the model accepts (RoPE tables, KV cache)
    norm: NormType = NormType.layernorm  # layernorm | rmsnorm
    norm_eps: float = 1e-5  # epsilon inside the norms
    bias: bool = False  # biases in the QKV, output and MLP projections and in LayerNorm (an MoE's: router, experts)
    qkv_bias: bool = False  # biases in the query/key/value projections only (Qwen2; implied by bias)
    mlp: MlpType = MlpType.gelu  # gelu | swiglu | relu2 | geglu | swiglu_clamped | swiglu_clip
    glu_limit: float = 7.0  # mlp=swiglu_clamped / swiglu_clip: the gate's upper clamp and the up projection's +- clamp
    # (gpt-oss: 7; DeepSeek-V4's swiglu_limit: 10); with another mlp: refused
    glu_alpha: float = 1.702  # mlp=swiglu_clamped: the gate's sigmoid slope, g sigmoid(alpha g) (gpt-oss: 1.702); with
    # another mlp: refused
    tie_embeddings: bool = True  # unembedding = embedding transposed
    rope_theta: float = 10000.0  # RoPE base frequency
    rope_scaling: RopeScaling = RopeScaling.none  # none | linear | llama3 | yarn: RoPE frequencies stretched for a
    # longer context than pretraining's, by the rope_* fields below (those of transformers' rope_parameters)
    rope_factor: float = 1.0  # how many times longer (Llama 3.1: 8; Llama 3.2: 32; Qwen2.5 YaRN: 4)
    rope_original_max_len: int = 8192  # pretraining's context (original_max_position_embeddings)
    rope_low_freq_factor: float = 1.0  # llama3: wavelengths above original / this are divided by factor
    rope_high_freq_factor: float = 4.0  # llama3: wavelengths below original / this are kept
    rope_beta_fast: float = 32.0  # yarn: rotations above which a frequency is kept
    rope_beta_slow: float = 1.0  # yarn: rotations below which it is interpolated (divided by factor)
    rope_attention_factor: Optional[float] = None  # yarn: q and k scale; default 0.1 ln(factor) + 1, or with the
    # two below mscale(rope_mscale) / mscale(rope_mscale_all_dim), mscale(m) = 0.1 m ln(factor) + 1
    rope_truncate: bool = True  # yarn: the ramp's ends rounded out to whole dimensions (transformers' truncate;
    # gpt-oss: false, the ends as computed)
    rope_mscale: float = 0.0  # yarn, DeepSeek's variant (transformers' mscale); 0 = unset
    rope_mscale_all_dim: float = 0.0  # yarn, DeepSeek's variant: MLA's softmax scale times mscale(this)^2; 0 = unset
    init_std: float = 0.02  # std of the normal init (residual projections: / sqrt(2 * num_layers))
    parametrization: Parametrization = Parametrization.standard  # standard | mup | completep: how init, AdamW's
    # learning rates, the attention scale and the residual branches scale from the base shape (`model.parametrization`)
    base_width: Optional[int] = None  # mup / completep: the d_model the hyperparameters were tuned at; default d_model
    base_depth: Optional[int] = None  # completep: the num_layers they were tuned at; default num_layers
    base_head_dim: Optional[int] = None  # mup / completep: the head width they were tuned at (attention's 1/d
    # scale reads it); default base_width / num_heads; model.size sets its own head width (widths grow by heads)
    size: Optional[int] = None  # one size knob, the depth: num_layers = size, d_model = 64 x size, heads of 64
    # (`config.load.SIZE_RULES`; a field given on the command line wins); None: the fields as they are
    depth_alpha: float = 1.0  # completep: residual branches x (base_depth / num_layers)^alpha (CompleteP: 1;
    # depth-μP: 0.5), hidden matrices' AdamW rate x (num_layers / base_depth)^(alpha - 1)
    attention: AttentionImpl = AttentionImpl.auto  # attention backend: auto | xla | cudnn | tokamax | splash
    context_attention: ContextAttention = ContextAttention.ring  # attention under mesh.context > 1:
    # ring (K/V blocks passed device to device, overlapped with the blocks' attention) | allgather
    collective_matmul: CollectiveMatmul = CollectiveMatmul.none  # tensor parallelism (a `model` axis) with the
    # residual stream split over it, its all-gather before and reduce-scatter after each unit's matmuls overlapped
    # with them (ppermute loops, `model.collective`): none | uni | bi
    pipeline_repeats: int = 1  # pipeline stages (mesh.stage > 1): each stage holds this many chunks of
    # layers, a microbatch passing through the stages this many times (the circular schedule: a bubble of
    # (S - 1) / (R M + S - 1) of the step, not GPipe's (S - 1) / (M + S - 1); `model.pipeline`); 1 = GPipe
    pipeline_remat: bool = False  # pipeline stages: keep only each pass's input for the backward, which runs
    # the pass's forward again (MaxText's default): activations of (iterations + L / (S R)) microbatches
    # per device, not iterations x L / (S R), for one more forward of the layers
    remat: Remat = Remat.none  # activation checkpointing policy per block
    scan_unroll: bool = True  # unroll the layer scan: ~15% faster steps on CPU, longer compiles
    attention_block: int = 64  # causal attention in query blocks of this size, skipping key
    # blocks above the diagonal (0 = one block); used when it divides the sequence length
    param_dtype: DType = DType.float32  # dtype parameters are stored in (the master copy)
    compute_dtype: DType = DType.float32  # dtype of matmuls; norms, softmax and loss stay float32
    matmul_dtype: MatmulDtype = MatmulDtype.compute  # compute | fp8: the attention projections and the dense MLPs'
    # matmuls in FP8 (per-tensor scales; the output head, the experts and attention itself stay as they are)
    fp8_scaling: Fp8Scaling = Fp8Scaling.current  # current | delayed: where the FP8 scales come from (`model.fp8`)
    fp8_history: int = 16  # delayed scaling: the steps of amax history a scale is the largest of (Transformer
    # Engine's quick start: 16)
    fp8_head: bool = False  # with matmul_dtype=fp8: the output head's matmul in FP8 too (current scaling; the
    # logits written in the compute dtype)
    logits_dtype: DType = DType.float32  # dtype the unembedding matmul writes the logits in: float32,
    # or the compute dtype (as PyTorch's autocast and MaxText do: half the logits' bytes; the loss's
    # reductions are float32 either way)
    sliding_window: int = 0  # local attention: a query sees itself and the sliding_window - 1 positions
    # before it (Mistral 7B v0.1: 4096), in the layers window_pattern marks L; 0 = every layer global
    window_pattern: str = "L"  # the layers' kinds, repeated over the layers: L = local (sliding window or chunk),
    # G = global (full causal); "L": every layer (Mistral), "LLLLLG": Gemma 3's five local to one global
    attention_chunk: int = 0  # chunked local attention in the L layers instead of a sliding window: a query sees the
    # keys of its own chunk of this many positions, up to itself (Llama 4: 8192); 0 = off
    global_nope: bool = False  # the G layers (every layer with neither window nor chunk) use no RoPE and no QK-norm
    # (Llama 4's NoPE layers: one in four)
    attn_temperature: float = 0.0  # the NoPE layers' queries times 1 + this x log1p(floor((position + 1) /
    # attn_temperature_floor)) (Llama 4's attention temperature tuning, attn_scale: 0.1); 0 = off
    attn_temperature_floor: int = 8192  # the positions per step of that temperature (Llama 4's floor_scale)
    qk_norm: bool = False  # RMS-normalise each head's queries and keys (no learned scale) before RoPE
    qk_norm_scale: bool = False  # QK-norm with a learned scale per head dimension, one for queries and
    # one for keys in each layer, starting at ones (Qwen3); needs qk_norm
    logit_softcap: float = 0.0  # logits -> c * tanh(logits / c) (Gemma 2; 0 = off)
    z_loss: float = 0.0  # add z_loss * mean(logsumexp(logits)^2) to the training loss (PaLM; 0 = off)
    zero_init_out: bool = False  # the residual projections (attention output, MLP down) start at zero
    dropout: float = 0.0  # training only: dropout on the embedding and on each residual branch's output
    attention_dropout: Optional[float] = None  # on the attention probabilities (xla backend); default: dropout
    moe: MoeConfig = field(default_factory=MoeConfig)  # mixture-of-experts MLPs (moe.num_experts > 0)
    mla: MlaConfig = field(default_factory=MlaConfig)  # multi-head latent attention (mla.kv_rank > 0)
    csa: CsaConfig = field(default_factory=CsaConfig)  # DeepSeek-V4's attention (csa.q_rank > 0)
    deltanet: DeltaNetConfig = field(default_factory=DeltaNetConfig)  # Gated DeltaNet layers, a hybrid with softmax
    # attention (deltanet.full_attention_interval > 0)
    norm_plus_one: bool = False  # every norm's scale (and the QK-norm's) is stored as w and multiplies by 1 + w,
    # starting at w = 0 (Gemma: weight decay then pulls toward the identity scale)
    post_norms: bool = False  # a norm on each branch's output too, before the residual add (Gemma 2/3's sandwich)
    pre_norms: bool = True  # a norm on each branch's input (the pre-norm block); false, with post_norms: the norms
    # on the branches' outputs only (OLMo 2/3)
    qk_norm_whole: bool = False  # the QK-norm over all of a token's query (key) heads at once, its learned scale per
    # head and dimension (OLMo 2/3's RMSNorm of the whole projection); needs qk_norm and qk_norm_scale
    norm_scale: bool = True  # the norms' learned scales (false: RMSNorms without parameters, nanochat's)
    embed_norm: bool = False  # the embedding's output RMS-normalised (no parameters) before the first layer (nanochat)
    embed_scale: bool = False  # the embedding's output times sqrt(d_model) (Gemma; the tied unembedding is not)
    query_pre_attn_scalar: Optional[int] = None  # attention scores scaled by this^-0.5 instead of head_dim^-0.5
    # (Gemma 3: 256, or d_model / num_heads for 27B)
    attention_gate: bool = False  # each head's output times sigmoid(x w_gate), a gate from its own projection
    # (Qwen3-Next / Qwen3.5's gated attention, Qiu et al. 2025)
    attention_sinks: bool = False  # a learned logit per head in each layer's softmax denominator, attended by no
    # value (gpt-oss; Xiao et al. 2024's sink without its token): a head may put weight on nothing
    rope_fraction: float = 1.0  # the fraction of each head's dimensions RoPE rotates, the first ones (Qwen3.5 and
    # Qwen3-Next: 0.25, transformers' partial_rotary_factor); the rest pass unrotated
    rope_local_theta: Optional[float] = None  # the sliding-window (L) layers' RoPE base, unscaled (Gemma 3: 10,000;
    # the global ones: rope_theta 1,000,000 with rope_scaling); None: every layer rope_theta and the scaling
    rope_global_fraction: float = 1.0  # the G layers rotate the first fraction of each head's RoPE pairs at their
    # frequencies theta^(-2i/head_dim) and the rest at frequency 0 (Gemma 4's proportional RoPE: 0.25); 1 = all
    global_head_dim: Optional[int] = None  # the G layers' head width, their own parameter stack (Gemma 4: 512 beside
    # the local layers' 256); None: model.head_dim
    global_kv_heads: Optional[int] = None  # the G layers' key/value heads (Gemma 4 31B: 4); None: model.num_kv_heads
    global_k_eq_v: bool = False  # the G layers' values are their keys' projection before the key's norm and RoPE: no
    # value projection (Gemma 4's attention_k_eq_v)
    v_norm: bool = False  # each head's values RMS-normalised, no learned scale (Gemma 4)
    layer_scale: bool = False  # a learned scalar per layer multiplying the residual stream after the layer (Gemma 4's
    # layer_scalar; starts at 1)
    hyper_connections: int = 0  # manifold-constrained hyper-connections (DeepSeek-V4's mHC, hc_mult: 4): this many
    # residual streams, each branch's input a learned mix of them and its output mixed back (`model.hyper`); 0 = off
    hyper_sinkhorn_iters: int = 20  # the streams' mixing matrix made doubly stochastic by this many Sinkhorn-Knopp
    # iterations (DeepSeek-V4's hc_sinkhorn_iters)
    hyper_eps: float = 1e-6  # the floor added to the streams' weights and to Sinkhorn-Knopp's sums (hc_eps)
    per_layer_dim: int = 0  # per-layer input embeddings (Gemma 4 E2B / E4B: 256): each layer adds a gated projection of
    # an input of its own this wide, from a second embedding table and a projection of the embedding
    # (`model.per_layer`; hidden_size_per_layer_input); 0 = off
    kv_shared_layers: int = 0  # the last this-many layers compute no keys and values: each attends over those of the
    # last earlier layer of its kind (local or global), whose cache it reads (Gemma 4 E2B: 20 of 35;
    # num_kv_shared_layers)
    kv_shared_wide_mlp: bool = False  # those layers' MLPs twice model.mlp_factor wide (Gemma 4's use_double_wide_mlp)
    mtp_depth: int = 0  # multi-token prediction (DeepSeek-V3): this many sequential modules after the model, module k
    # predicting the token k + 1 places past the next one (training only; `model.mtp`); 0 = off
    mtp_weight: float = 0.3  # the objective adds this x the modules' mean loss (logged as mtp/loss; DeepSeek-V3: 0.3)
    loss_block: int = 0  # blocked cross-entropy: the loss and its gradients in chunks of this many
    # positions of every sequence (a divisor of data.seq_len), never all [tokens, vocab] logits at once; 0 = off


@dataclass
class DatasetConfig(Section):
    """One named dataset of a corpus (data.datasets.NAME)."""

    paths: List[str] = field(default_factory=list)  # files, folders, globs or URLs (fsspec);
    # relative paths are under data.path
    format: DataFormat = DataFormat.auto  # auto | txt | jsonl | parquet | chat | preference | prompts
    text_field: str = "text"  # the text's key (jsonl) or column (parquet)
    weight: float = 1.0  # mixture weight: this dataset's share of every training batch
    split: Split = Split.hash  # hash | tail | val | none: how validation text is chosen
    val_fraction: Optional[float] = None  # share held out by `hash` / `tail`; default data.val_fraction
    encoding: Optional[str] = None  # text encoding of the files; default data.encoding


def dataset_configs(data: "DataConfig") -> Dict[str, DatasetConfig]:
    """data.datasets as typed DatasetConfigs. Raises ConfigError naming every bad field."""

    out: Dict[str, DatasetConfig] = {}
    errs: List[str] = []
    names = [f.name for f in dataclasses.fields(DatasetConfig)]
    enums = {"format": DataFormat, "split": Split}
    for name, fields in data.datasets.items():
        where = f"data.datasets.{name}"
        if not isinstance(fields, dict):
            errs.append(f"{where} must be a mapping of {', '.join(names)}")
            continue
        kw = {}
        for k, v in fields.items():
            if k not in names:
                errs.append(f"{where}.{k}: unknown field; the fields are {', '.join(names)}")
            elif k in enums:
                try:
                    kw[k] = enums[k](v.value if isinstance(v, enum.Enum) else v)
                except ValueError:
                    errs.append(f"{where}.{k}={v}: choose one of {', '.join(e.value for e in enums[k])}")
            elif k == "paths":
                kw[k] = [v] if isinstance(v, str) else [str(p) for p in v]
            elif k in ("weight", "val_fraction") and v is not None:
                try:
                    kw[k] = float(v)
                except (TypeError, ValueError):
                    errs.append(f"{where}.{k}={v} must be a number")
            else:
                kw[k] = v if v is None else str(v)
        out[name] = DatasetConfig(**kw)
    if errs:
        raise ConfigError(errs)
    return out


def document_batches(data: "DataConfig") -> tuple:
    """(segment ids, positions restarting per document): whether batches carry them;
    data.document_mask and data.reset_positions, both on when a dataset is chat or preference
    (conversations are packed whole, each attending only to itself, from position 0)."""
    chat = data.source == DataSource.text and any(ds.format in (DataFormat.chat, DataFormat.preference)
                                                  for ds in dataset_configs(data).values())
    return data.document_mask or chat, data.reset_positions or chat


def prompts_data(data: "DataConfig") -> bool:
    """Whether the corpus is prompts with answers (the run then trains by GRPO, `rl.*`)."""
    return data.source == DataSource.text and any(ds.format == DataFormat.prompts
                                                  for ds in dataset_configs(data).values())


def preference_data(data: "DataConfig") -> bool:
    """Whether the corpus is preference pairs (the run then tunes by DPO)."""
    return data.source == DataSource.text and any(ds.format == DataFormat.preference
                                                  for ds in dataset_configs(data).values())


@dataclass
class DataConfig(Section):
    source: DataSource = DataSource.text  # staircase | text
    text_file: str = "tinyshakespeare/input.txt"  # the one-file corpus used when data.datasets is
    # empty (relative to data.path, or absolute; split `tail`: nanoGPT's 90/10)
    datasets: Dict[str, Any] = field(default_factory=dict)  # NAME -> DatasetConfig fields (a
    # mixture); add one with +data.datasets.NAME={paths:[...],weight:1}. (A plain dict: OmegaConf
    # cannot add keys to a Dict of dataclasses from the command line; `dataset_configs` types it.)
    encoding: str = "utf-8"  # text encoding of the sources (latin-1 for the Gutenberg files)
    encoding_errors: str = "strict"  # strict (stop at invalid text) | replace (U+FFFD and go on)
    skip_bad_records: bool = False  # count and report bad jsonl lines instead of stopping
    tokenizer: TokenizerKind = TokenizerKind.char  # char | gpt2 | hf | harmony (ignored by the staircase)
    tokenizer_file: Optional[str] = None  # tokenizer.json for data.tokenizer=hf (relative to data.path)
    chat_template: Optional[str] = None  # a jinja2 chat template file for chat datasets; default: the
    # tokenizer's own (tokenizer_config.json beside data.tokenizer_file), else <|role|>content<|end|>
    token_dtype: TokenDtype = TokenDtype.auto  # auto | uint16 | uint32: token store element type
    path: Optional[str] = None  # data root; default: $SPMDGPT_DATA, else shared/data beside the checkout
    cache_dir: Optional[str] = None  # token stores; default: $SPMDGPT_CACHE, else ~/.cache/spmdgpt
    num_workers: int = 0  # tokenizer processes for `prepare` (0 = one per CPU core)
    shard_mb: float = 16.0  # input read per token-store shard, in MB (part of the store's identity)
    seq_len: int = 256  # tokens per training window
    batch_size: int = 64  # global batch size (sequences per step, over all devices)
    val_fraction: float = 0.1  # share held out for validation (nanoGPT: the last 10% of the text)
    document_mask: bool = False  # attention never crosses an end-of-text token
    reset_positions: bool = False  # RoPE positions restart at 0 at each document
    staircase_tokens: int = 200_000  # length of the synthetic staircase corpus


@dataclass
class OptimizerConfig(Section):
    name: OptimizerName = OptimizerName.adamw  # adamw | sgd | muon | manifold_muon
    lr: float = 1e-3  # peak learning rate
    schedule: Schedule = Schedule.cosine  # cosine | constant
    warmup_steps: int = 100  # linear warmup from 0 to lr
    warmup_share: Optional[float] = None  # the warmup as a share of the run's steps instead of warmup_steps (set
    # by train.tokens_per_param: `config.load.SIZE_RULES`)
    min_lr_ratio: float = 0.1  # cosine (wsd) decays to lr * min_lr_ratio at train.steps
    cooldown_fraction: float = 0.2  # wsd: the share of train.steps spent decaying
    embed_lr: Optional[float] = None  # AdamW peak lr of the token embedding; default lr
    unembed_lr: Optional[float] = None  # AdamW peak lr of the unembedding (model.tie_embeddings=false); default lr
    b1: float = 0.9  # AdamW beta1
    b2: float = 0.95  # AdamW beta2
    eps: float = 1e-8  # AdamW epsilon
    weight_decay: float = 0.1  # decoupled, applied to matrix parameters only
    momentum: float = 0.9  # SGD momentum
    nesterov: bool = False  # SGD Nesterov momentum
    grad_clip: float = 1.0  # clip by global norm; 0 disables
    state_dtype: Optional[DType] = None  # dtype of the optimizer's moments (bfloat16 halves their
    # memory; updates are still computed in float32); default: model.param_dtype
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
class TrainConfig(Section):
    steps: int = 1000  # optimizer steps
    tokens_per_param: Optional[float] = None  # the run's length as tokens per parameter: train.steps = this x the
    # model's matmul parameters / tokens per step, rounded up (Chinchilla's compute-optimal: about 20)
    time_budget: Optional[float] = None  # seconds for the whole job from set-up to the final
    # evaluation: a calibration (a few timed steps and one evaluation) sets train.steps to fit;
    # config.yaml records the steps it chose (and time_budget null), so a rerun repeats them;
    # an explicit train.steps=N on the command line turns a config file's budget off
    replans: List[str] = field(default_factory=list)  # STEP:STEPS, written by a time budget whose
    # run fell behind (a busier machine): at optimizer step STEP the run planned for STEPS steps
    # was cut to the next entry's STEPS (the last: train.steps), the rest of the learning-rate
    # schedule squeezed into them; config.yaml records them, so a rerun repeats the schedule
    microbatches: int = 1  # gradient accumulation: each step's batch runs as k equal parts in turn
    # (inside the jitted step); data.batch_size stays the global batch of one optimizer step
    seed: int = 0  # seeds parameters and the data order
    dpo_beta: float = 0.1  # preference data: DPO's beta (how far the policy may move from the
    # reference, the parameters the run starts from)
    dpo_sft_weight: float = 0.0  # preference data: weight of the chosen reply's NLL per token added to
    # DPO's loss (RPO; TRL's rpo_alpha, e.g. 1.0), which keeps the chosen replies likely
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
    skip_nonfinite: int = 0  # the divergence guard: a non-finite loss or gradient norm stops the run (exit 3,
    # nothing saved after it); with N > 0 a step with non-finite gradients is skipped instead (parameters and
    # optimizer state kept), and the run stops after N skipped steps in a row
    loss_spike_factor: float = 3.0  # log a loss_spike event when loss > k x the recent median (0 = off)
    # where rows go: console, jsonl (always), tensorboard (run.dir/tb), wandb (optional package)
    loggers: List[str] = field(default_factory=lambda: ["console", "jsonl"])
    wandb_project: str = "spmdgpt"  # the wandb project of train.loggers=[...,wandb]
    profile: Optional[str] = None  # START:STOP: a jax.profiler trace of those steps in run.dir/profile
    stats_every: int = 0  # model statistics (per layer / parameter group) every k steps; 0 = off


@dataclass
class CheckpointConfig(Section):
    enabled: bool = True  # write checkpoints (and resume from them)
    every: int = 500  # save every k steps, at the end and on SIGTERM/SIGINT; 0 = only the latter
    keep: int = 3  # keep the newest k checkpoints
    keep_every: Optional[int] = None  # also keep, permanently, every checkpoint at a multiple of k
    async_save: bool = True  # write in the background while training goes on
    init_from: Optional[str] = None  # run directory whose newest parameters start this run, or
    # hf:DIR, a Hugging Face model folder (its config.json then sets the model's fields)


LORA_TARGETS = ("q", "k", "v", "o", "up", "gate", "down")  # lora.targets' names (as in Hugging Face's *_proj)


@dataclass
class LoraConfig(Section):
    """Low-rank adapters (LoRA, Hu et al. 2021): the model starting from checkpoint.init_from stays
    frozen and each targeted matrix W trains as W + (alpha / rank) A B (model/lora.py)."""

    rank: int = 0  # r, the adapters' inner dimension; 0 = off (every parameter trains)
    alpha: float = 16.0  # the update's scale is alpha / rank
    targets: List[str] = field(default_factory=lambda: ["all"])  # which matrices get adapters: q, k, v,
    # o (attention), up, gate, down (MLP), or all (every one of these the model has)


@dataclass
class RlConfig(Section):
    """Reinforcement learning with verifiable rewards (data of `format: prompts`): GRPO
    (model/grpo.py) on completions sampled by the KV-cache sampler (spmdgpt.rl)."""

    objective: RlObjective = RlObjective.grpo  # grpo | distill (on-policy distillation from rl.teacher)
    teacher: Optional[str] = None  # rl.objective=distill: the teacher, a run directory (its newest checkpoint) or
    # hf:DIR, frozen; it scores the student's samples (same tokenizer; any model shape)
    reward_weight: float = 0.0  # rl.objective=distill: the reward's group advantages' weight beside the teacher's
    # per-token term (0: distillation alone)
    group_size: int = 8  # completions sampled per prompt (data.batch_size / group_size prompts a step)
    max_new_tokens: int = 32  # a completion's length at most (it stops at end-of-turn / end-of-text)
    temperature: float = 1.0  # sampling temperature of the rollouts
    top_p: float = 1.0  # nucleus sampling of the rollouts (1 = off)
    reward: str = "exact"  # exact | numeric | digits | regex | module:function (spmdgpt/rl/rewards.py)
    clip: float = 0.2  # PPO's epsilon: the importance ratio's clip range [1 - clip, 1 + clip]
    clip_low: Optional[float] = None  # the range's lower side, 1 - clip_low (default: clip)
    clip_high: Optional[float] = None  # its upper side, 1 + clip_high (default: clip; DAPO's clip-higher: 0.28)
    advantage: RlAdvantage = RlAdvantage.group_std  # group_std | group_mean (Dr. GRPO: no division by the std)
    loss_norm: RlLossNorm = RlLossNorm.token  # token | sequence | constant: what the step's terms are averaged over
    ratio: RlRatio = RlRatio.token  # token | sequence (GSPO: one length-normalised ratio per completion)
    dynamic_sampling: bool = False  # DAPO: drop the groups whose rewards are all equal, sample more prompts
    dynamic_sampling_draws: int = 3  # sampling rounds a step may take to fill its batch (then: dropped groups)
    overlong_buffer: int = 0  # DAPO's soft overlong penalty over the last this-many of max_new_tokens (0: off)
    overlong_penalty: float = 1.0  # the penalty at max_new_tokens tokens, added to the reward
    kl_beta: float = 0.0  # weight of the KL penalty to the reference (the parameters the run starts from)
    updates_per_batch: int = 1  # optimizer steps on each sampled batch (ratio against the sampling policy)
    max_staleness: int = 0  # rollouts that run ahead: step t + K's batch is sampled (in a thread beside the update)
    # from the parameters step t starts from, and trained on with the ratio against them; 0 = on-policy
    rollout_devices: int = 0  # the rollouts' engine on the last N devices, the trainer's mesh (mesh.*) on the rest;
    # the parameters copied across after each update (spmdgpt/rl/split.py); 0 = the engine shares the trainer's devices
    rollout_correction: RlCorrection = RlCorrection.none  # none | tis | mis: the sampler's log-probabilities (the
    # engine's) against the trainer's old_logp for the same tokens, per token (Yao et al. 2025; spmdgpt/rl/rollouts.py)
    rollout_correction_cap: float = 2.0  # tis: the weight's truncation; mis: the ratio above which a token is dropped
    val_prompts: int = 64  # held-out prompts answered greedily at each evaluation (val/reward)
    val_reward: Optional[str] = None  # the reward val/reward scores by (default: rl.reward): e.g. train on partial
    # credit (digits) and evaluate the exact answer (numeric)
    eval_prompts: Optional[str] = None  # a text (SFT) run: a prompts file whose held-out prompts (split as a GRPO
    # run on it splits them, data.val_fraction) it answers greedily at each evaluation, scored by rl.val_reward (default
    # rl.reward): val/reward
    samples: int = 4  # completions written to samples.jsonl at each evaluation (with their rewards)
    tool: Optional[str] = None  # a tool rollouts may call mid-answer: calculator | module:function (text -> text;
    # spmdgpt/rl/tools.py); its output is read by the model, never trained on
    env: Optional[str] = None  # a multi-turn environment the rollouts act on: chain | module:Class (reset(prompt,
    # record) -> text, step(action) -> (text, reward, done); spmdgpt/rl/envs.py); its actions are marked as tool calls
    # (rl.tool_open / tool_close, at most rl.tool_calls an episode) and its rewards are the reward
    tool_open: str = "<<"  # the text that opens a tool call in a completion
    tool_close: str = ">>"  # the text that closes it: the sequence pauses and the tool gets the text between
    tool_output: str = "{}"  # the text appended after the close mark, {} the tool's output
    tool_calls: int = 4  # the most calls one completion may make
    tool_timeout: float = 1.0  # seconds a call may take (then the model reads "error: timeout")
    env_timeout: float = 10.0  # seconds an environment's reset or step may take (then its episode ends, counted)


@dataclass
class LadderConfig(Section):
    """`spmdgpt ladder` (spmdgpt.scaling.ladder): an isoFLOP grid, every model.size at every compute budget
    (C = 6 N D: N the model's matmul parameters, D its tokens), each point a training run; then
    the scaling-law fits and a forecast. `spmdgpt ladder lr`: a learning-rate sweep at several
    widths (does the best rate transfer?). Training runs do not read this section."""

    budgets: List[float] = field(default_factory=list)  # compute budgets in FLOPs, e.g. [1e13, 3e13, 1e14]
    sizes: List[int] = field(default_factory=list)  # model.size values (N layers of 64 N) run at every budget
    epochs: float = 1.0  # the most epochs of any training dataset a point may take (a grid past it is refused)
    warmup: float = 0.1  # each point's warmup as a share of its steps (sets optimizer.warmup_steps)
    metric: str = "val/loss"  # the final metric the laws are fitted to (a key of metrics.jsonl)
    forecast_budget: Optional[float] = None  # the budget forecast (default: 4 x the largest budget)
    forecast_size: Optional[int] = None  # its model.size (default: the size nearest the compute-optimal N)
    check: bool = False  # also train the forecast's point and compare its loss with the forecast
    bootstrap: int = 100  # refits on resampled points for the intervals (0: none)
    widths: List[int] = field(default_factory=list)  # ladder lr: the d_model values
    lrs: List[float] = field(default_factory=list)  # ladder lr: the learning rates
    lr_field: str = "optimizer.lr"  # ladder lr: the field swept (optimizer.muon_lr for Muon's matrices)


@dataclass
class MeshConfig(Section):
    """The mesh's named axes, one field each, in mesh order (the last axis varies fastest over
    the devices: neighbours share the fastest links). A size, or -1 (one axis at most) for all
    the devices the others leave. A new axis is a field here (default 1) and a line in the rule
    tables (configs/sharding/_base.yaml for all of them, or one table's own) that maps logical
    axes to it: nothing else names mesh axes (the layout search of `spmdgpt plan` reads these
    fields: it chooses data and model and holds the others at the command's sizes)."""

    data: int = -1  # data-parallel (and FSDP) axis: batches, and parameters under FSDP tables
    stage: int = 1  # pipeline axis: the layer stack split into this many stages (the `layers` parameter
    # axis, every table); train.microbatches flow through them (`model.pipeline`)
    expert: int = 1  # expert-parallel axis: a mixture of experts' experts split over it (every table), the
    # batch too (it is data-parallel for everything else); tokens reach their experts by all-to-all
    context: int = 1  # context-parallel axis: each sequence split over it (the `seq` logical axis), attention
    # by ring-passed keys and values (model.context_attention)
    model: int = 1  # tensor-parallel axis: heads, MLP width, vocabulary under TP tables


@dataclass
class ShardingConfig(Section):
    name: str = "dp"  # which rule table this is (configs/sharding/<name>.yaml)
    # Logical axis -> mesh axis (a name, a list of names, or null) for where parameters live.
    params: Dict[str, Any] = field(default_factory=dict)
    # Logical axis -> mesh axis for activations; parameters are resharded to this layout right
    # before use (with an FSDP table that is the all-gather).
    compute: Dict[str, Any] = field(default_factory=lambda: {"batch": "data"})


@dataclass
class DistConfig(Section):
    coordinator: Optional[str] = None  # host:port of process 0 (explicit multi-process runs)
    num_processes: Optional[int] = None  # processes in the run (with dist.coordinator)
    process_id: Optional[int] = None  # this process's index (with dist.coordinator)
    auto: bool = True  # detect SLURM / Open MPI / TPU VM clusters from the environment


@dataclass
class RunConfig(Section):
    name: str = "default"  # experiment name (used in the default run directory)
    dir: Optional[str] = None  # run directory; default runs/<utc-timestamp>-<name>


@dataclass
class Config(Section):
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    sharding: ShardingConfig = field(default_factory=ShardingConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    rl: RlConfig = field(default_factory=RlConfig)
    ladder: LadderConfig = field(default_factory=LadderConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    run: RunConfig = field(default_factory=RunConfig)


# ----------------------------------------------------------------------------- derived values
