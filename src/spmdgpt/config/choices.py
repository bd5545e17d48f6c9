"""The choices of the configuration: one enum per field that takes one of several names (the
value each name is written as in YAML and overrides, with a comment on what it does), and
ConfigError, the one exception a bad value raises. A leaf module."""

from __future__ import annotations

import enum
from typing import List


class ConfigError(ValueError):
    """A bad configuration value. `messages` holds one line per problem (field + fix)."""

    def __init__(self, messages: List[str]):
        self.messages = list(messages)
        super().__init__("\n".join(self.messages))

    def __reduce__(self):  # (raised in a worker process, re-raised in the main one)
        return (type(self), (self.messages,))


# ----------------------------------------------------------------------------- enums


class NormType(enum.Enum):
    layernorm = "layernorm"
    rmsnorm = "rmsnorm"


class Parametrization(enum.Enum):
    standard = "standard"  # init and learning rates as configured, whatever the width and depth
    mup = "mup"  # μP against model.base_width: hidden matrices' init and AdamW rates by fan-in, the readout's by width
    completep = "completep"  # μP and CompleteP's depth rule against model.base_depth: residual branches x
    # (base_depth / num_layers)^depth_alpha


class RopeScaling(enum.Enum):
    none = "none"  # theta^(-2i/h), as trained
    llama3 = "llama3"  # Llama 3.1's: low frequencies / factor, high kept, a smooth ramp between
    yarn = "yarn"  # YaRN (Peng et al. 2023): interpolation / extrapolation ramp by rotations, and a
    # logit scale (attention factor; default 0.1 ln(factor) + 1 on q and k each)
    linear = "linear"  # every frequency / factor (position interpolation; Gemma 3's global layers: 8)


class MlpType(enum.Enum):
    gelu = "gelu"  # up-projection, GELU (tanh approximation), down-projection (GPT-2)
    swiglu = "swiglu"  # SiLU(x W_gate) * (x W_up), down-projection (LLaMA)
    relu2 = "relu2"  # up-projection, ReLU(x)^2 (So et al. 2021, "Primer"), down-projection
    geglu = "geglu"  # GELU(x W_gate) (tanh approximation) * (x W_up), down-projection (Gemma)
    swiglu_clamped = "swiglu_clamped"  # gpt-oss: g = min(x W_gate, L), u = clip(x W_up, -L, L),
    # g sigmoid(alpha g) (u + 1), down-projection (L = model.glu_limit, alpha = model.glu_alpha)
    swiglu_clip = "swiglu_clip"  # DeepSeek-V4: SiLU(min(x W_gate, L)) * clip(x W_up, -L, L), down-projection
    # (L = model.glu_limit; its swiglu_limit: 10)


class Router(enum.Enum):
    softmax = "softmax"  # softmax over the experts, then the top k (Mixtral, Qwen MoE)
    sigmoid = "sigmoid"  # a sigmoid score per expert, the top k, normalised among themselves (DeepSeek-V3)
    sqrtsoftplus = "sqrtsoftplus"  # sqrt(softplus(logit)) per expert, then as sigmoid (DeepSeek-V4's scoring_func)


class MoeDispatch(enum.Enum):
    dropless = "dropless"  # every token reaches its k experts: tokens grouped by expert (ragged products)
    capacity = "capacity"  # fixed [experts, capacity, d_model] buffers; tokens past an expert's capacity dropped


class GroupedMatmul(enum.Enum):
    auto = "auto"  # blocks on CPUs, pallas on GPUs (blocks where its tiles do not divide the widths), ragged on TPUs
    ragged = "ragged"  # jax.lax.ragged_dot over the copies sorted by expert (grouped GEMM kernels)
    blocks = "blocks"  # each expert's copies padded to whole row blocks, one batched matmul of blocks
    pallas = "pallas"  # the same row blocks by Pallas grouped-matmul kernels (Triton on GPUs; CPUs interpret them)
    tokamax = "tokamax"  # tokamax's ragged_dot of the sorted copies: Mosaic GPU kernels (NVIDIA GPU; gpu-kernels)


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
    tokamax = "tokamax"  # tokamax's Mosaic GPU flash attention (NVIDIA GPU, sm80+, 16-bit; the gpu-kernels extra)
    splash = "splash"  # Pallas splash attention (TPU; sequence length a multiple of 128)
    auto = "auto"  # cudnn on NVIDIA GPUs (16-bit compute), splash on TPUs, else xla


class ContextAttention(enum.Enum):
    ring = "ring"  # keys and values passed around the context ring, one block a step (ppermute)
    allgather = "allgather"  # every device gathers all keys and values (short rings)


class MatmulDtype(enum.Enum):
    compute = "compute"  # the hidden matmuls in model.compute_dtype
    fp8 = "fp8"  # in FP8 with per-tensor scales: e4m3 activations and weights, e5m2 gradients (`model.fp8`)


class Fp8Scaling(enum.Enum):
    current = "current"  # each tensor's scale from its own largest |value| this step (a reduction before the cast)
    delayed = "delayed"  # from the largest of its last model.fp8_history steps' (an amax history in the parameters)


class RlAdvantage(enum.Enum):
    group_std = "group_std"  # (r - the group's mean) / (its std + 1e-4): GRPO's
    group_mean = "group_mean"  # r - the group's mean, no std (Dr. GRPO: no bias toward easy or hard prompts)


class RlLossNorm(enum.Enum):
    token = "token"  # the step's token terms summed over its completion tokens' count (DAPO's token-level mean)
    sequence = "sequence"  # each completion's tokens averaged, then the completions (the GRPO paper's; GSPO's)
    constant = "constant"  # summed over completions x rl.max_new_tokens, a constant (Dr. GRPO: no length bias)


class RlRatio(enum.Enum):
    token = "token"  # each token's importance ratio, clipped per token (PPO, GRPO)
    sequence = "sequence"  # the completion's length-normalised ratio exp(mean log ratio), clipped per completion (GSPO)


class RlObjective(enum.Enum):
    grpo = "grpo"  # the clipped policy gradient of the rewards' advantages (model/grpo.py)
    distill = "distill"  # on-policy distillation: each sampled token's advantage is the teacher's log-probability
    # less the student's (the per-token reverse KL's policy gradient), plus rl.reward_weight x the reward's


class RlCorrection(enum.Enum):
    none = "none"  # the sampler's tokens trained as if the trainer had sampled them
    tis = "tis"  # truncated importance sampling: each token's policy-gradient term x min(p_old / p_sampler, cap)
    mis = "mis"  # masked importance sampling: the terms of tokens whose p_old / p_sampler exceeds cap dropped


class CollectiveMatmul(enum.Enum):
    none = "none"  # tensor parallelism as XLA partitions it (the residual stream replicated over the tensor axis)
    # stream split over the tensor axis; its gather / reduce-scatter overlapped with the matmuls, one ring direction
    uni = "uni"
    bi = "bi"  # the same with both ring directions: half the steps


class DataSource(enum.Enum):
    staircase = "staircase"  # synthetic 0123456789876543210... digits, vocabulary 10
    text = "text"  # a text file under data.path, tokenized by data.tokenizer


class TokenizerKind(enum.Enum):
    char = "char"  # characters of the corpus + a reserved end-of-text id (saved with the run)
    gpt2 = "gpt2"  # GPT-2 BPE through tiktoken, loaded offline from data.path/gpt2-tokenizer
    hf = "hf"  # any Hugging Face tokenizer.json (data.tokenizer_file), via `tokenizers`
    harmony = "harmony"  # gpt-oss's o200k_harmony and its harmony chat format, via openai-harmony (the harmony extra)


class DataFormat(enum.Enum):
    auto = "auto"  # from the file name: .txt, .jsonl/.json(.gz|.zst), .parquet
    txt = "txt"  # one document per file
    jsonl = "jsonl"  # one JSON object per line, text in `text_field` (also .gz / .zst)
    parquet = "parquet"  # one document per row, text in column `text_field`
    chat = "chat"  # one conversation per jsonl line: {"messages": [{"role", "content"}, ...]}
    # (`text_field` names the list when it is not "text"); rendered by the chat template, loss on
    # the assistant's tokens only, conversations packed whole into rows (data/chat.py)
    preference = "preference"  # one pair per jsonl line: {"prompt", "chosen", "rejected"} (texts or
    # lists of messages): preference tuning (DPO, train.dpo_beta), each pair packed into one row
    prompts = "prompts"  # one prompt per jsonl line: {"prompt": text or messages, "answer": any JSON}:
    # reinforcement learning (GRPO, rl.*): completions sampled, scored by rl.reward, trained on


class Split(enum.Enum):
    hash = "hash"  # a stable hash of each document puts val_fraction of them in validation
    tail = "tail"  # the last val_fraction of each document's text validates (nanoGPT's split)
    val = "val"  # the whole dataset is a validation set of its own (never trained on)
    none = "none"  # everything trains


class TokenDtype(enum.Enum):
    auto = "auto"  # uint16 when the vocabulary fits, else uint32
    uint16 = "uint16"
    uint32 = "uint32"


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
    wsd = "wsd"  # warmup-stable-decay: linear warmup, constant, then a linear decay to
    # lr * min_lr_ratio over the last optimizer.cooldown_fraction of train.steps
