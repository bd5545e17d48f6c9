"""The fused attention kernels, run per device inside `shard_map` (cuDNN's through
`jax.nn.dot_product_attention`, tokamax's Mosaic GPU flash attention, Pallas splash attention),
and what they share with the xla path of `attention`: grouped-query heads as a layout can use
them (`local_kv`, `repeat_kv`) and the masks (causal, sliding window or chunk, document; also the context
ring's, `context`); and which backend runs (`attention_backend`: model.attention on this
platform, with its checks, `config_errors`, which config validation collects). Also the
paged-attention kernels the inference engine's decode rows use on GPUs and TPUs
(`paged_decode_attention`, with what they cannot take: `paged_kernel_error`)."""

from __future__ import annotations

import importlib.util
import logging
import math
import warnings
from typing import List, Optional

import jax
import jax.numpy as jnp

from spmdgpt.config import AttentionImpl, ConfigError, DType, ModelConfig, head_dim, kv_heads, layer_windows
from spmdgpt.mesh.sharding import Rules
from spmdgpt.mesh.sharding import platform as mesh_platform


def local_kv(k: jax.Array, v: jax.Array, n: int, rules: Rules, head_axis: int = 1):
    """Keys and values as grouped attention can use them on this layout: as they are when the
    K key/value heads are split like the n query heads (each device then holds the query heads
    of its key/value heads), else repeated to n heads (`repeat_kv`; the K heads are replicated
    where K does not divide the `model` axis, `sharding.Rules`, and the repeat is then a local
    slice on each device)."""
    if k.shape[head_axis] == n or rules.spec("kv_heads") == rules.spec("heads"):
        return k, v
    return repeat_kv(k, n, rules, head_axis), repeat_kv(v, n, rules, head_axis)


def repeat_kv(x: jax.Array, n: int, rules: Rules, head_axis: int = 1) -> jax.Array:
    """Keys or values [.., K, ..] (heads on head_axis) -> n heads, each repeated n / K times in a
    row (for what takes one key/value head per query head: splash, the statistics)."""
    if x.shape[head_axis] == n:
        return x
    spec = [None] * x.ndim
    spec[0], spec[head_axis] = "batch", "heads"
    return jnp.repeat(x, n // x.shape[head_axis], axis=head_axis, out_sharding=rules.spec(*spec))


def causal_mask(q_pos: jax.Array, k_pos: jax.Array) -> jax.Array:
    """True where query i may attend to key j: k_pos[j] <= q_pos[i] (and k_pos[j] >= 0)."""
    return (k_pos[..., None, :] <= q_pos[..., :, None]) & (k_pos[..., None, :] >= 0)


def window_mask(q_pos: jax.Array, k_pos: jax.Array, window) -> jax.Array:
    """True where key j lies within query i's window (`config.layer_windows`): a sliding window
    (window > 0, `model.sliding_window`): fewer than `window` positions back, q_pos[i] - k_pos[j] <
    window (transformers' convention); a chunk (window < 0, `model.attention_chunk` C = -window): in
    query i's chunk of C positions, q_pos[i] // C == k_pos[j] // C (Llama 4's chunked attention); 0:
    everywhere (a global layer). window may be traced (a layer scan's per-layer value)."""
    q, k = q_pos[..., :, None], k_pos[..., None, :]
    chunk = jnp.maximum(-window, 1)
    return (window == 0) | jnp.where(window > 0, q - k < window, q // chunk == k // chunk)


def document_mask(segment_ids: jax.Array, q: slice, k: slice) -> jax.Array:
    """[b, queries, keys]: True where query and key lie in the same document."""
    return segment_ids[:, q, None] == segment_ids[:, None, k]


def fused_causal_attention(q: jax.Array, k: jax.Array, v: jax.Array, rules: Rules, implementation: str,
                           segment_ids: Optional[jax.Array] = None) -> jax.Array:
    """`jax.nn.dot_product_attention` (causal; `implementation` "cudnn") or tokamax's Mosaic GPU
    flash attention ("tokamax", `tokamax_attention`) run per device: q/k/v [b, t, n, h] -> [b, t, n, h].

    Attention is independent per sequence and per head, so under a batch- and/or head-sharded
    layout each device attends over its own rows and heads: the kernel runs inside `shard_map`
    on local, unsharded arrays (fused kernels such as cuDNN's are custom calls that do not carry
    explicit shardings through their gradients). Document masks go in as the boolean `mask`
    argument ([b, 1, t, t]; the function has no segment-id argument)."""
    k, v = local_kv(k, v, q.shape[2], rules, head_axis=2)
    spec = rules.spec("batch", "seq", "heads", "head_dim")
    kv_spec = rules.spec("batch", "seq", "heads" if k.shape[2] == q.shape[2] else "kv_heads", "head_dim")
    seg_spec = rules.spec("batch", "seq")

    def local(q, k, v, seg):  # (fewer key/value heads: grouped-query attention, which the kernels take as is)
        mask = None if seg is None else document_mask(seg, slice(None), slice(None))[:, None]
        if implementation == "tokamax":
            return tokamax_attention(q, k, v, mask)
        return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=True, implementation=implementation)

    q = jax.sharding.reshard(q, spec)
    k, v = (jax.sharding.reshard(x, kv_spec) for x in (k, v))
    vma = implementation != "tokamax"  # (Mosaic GPU's kernels take no varying-axes annotation, as splash's)
    if segment_ids is None:
        return jax.shard_map(lambda q, k, v: local(q, k, v, None), in_specs=(spec, kv_spec, kv_spec),
                             out_specs=spec, check_vma=vma)(q, k, v)
    seg = jax.sharding.reshard(segment_ids, seg_spec)
    return jax.shard_map(local, in_specs=(spec, kv_spec, kv_spec, seg_spec), out_specs=spec,
                         check_vma=vma)(q, k, v, seg)


class _NoAutotuningCacheMiss(logging.Filter):
    """tokamax warns, for every kernel and shape its autotuning cache has no entry for, that it
    misses, and then uses its heuristics' tiles: expected for every shape of ours (long lines
    before a plan or a run's first step), so dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Autotuning cache miss for")


def tokamax_missing(field: str) -> Optional[str]:
    """The refusal of `field`=tokamax where the tokamax package (the `gpu-kernels` extra) is not
    installed; None where it is."""
    if importlib.util.find_spec("tokamax") is not None:
        return None
    return (f"{field}=tokamax needs the tokamax package, which is not installed: pip install -e '.[gpu-kernels]' "
            f"(or {field}=auto)")


def load_tokamax():
    """The tokamax module (the `gpu-kernels` extra), its autotuning cache misses not logged."""
    import tokamax

    absl = logging.getLogger("absl")
    if not any(isinstance(f, _NoAutotuningCacheMiss) for f in absl.filters):
        absl.addFilter(_NoAutotuningCacheMiss())
    return tokamax


def tokamax_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: Optional[jax.Array]) -> jax.Array:
    """Causal attention by tokamax's flash attention kernels for NVIDIA GPUs written in Mosaic GPU
    (`tokamax.dot_product_attention`, implementation mosaic_gpu; the `gpu-kernels` extra): q/k/v
    [b, t, n, h] (k, v: n or fewer heads) -> [b, t, n, h]; mask [b, 1, t, t] or None (documents).
    tokamax picks its kernels (Ampere's, Hopper's, Blackwell's) for the default device: a plan
    compiled on a CPU makes its target's GPU the default (`topology.target_default`)."""
    return load_tokamax().dot_product_attention(q, k, v, mask=mask, is_causal=True, implementation="mosaic_gpu")


SPLASH_BLOCKS = (512, 256, 128)  # splash tiles: multiples of 128 (the TPU's lane count)


def splash_causal_attention(q: jax.Array, k: jax.Array, v: jax.Array, rules: Rules,
                            segment_ids: Optional[jax.Array] = None, interpret: Optional[bool] = None) -> jax.Array:
    """Causal attention by Pallas splash attention: q/k/v [b, n, t, h] (head-major) -> the same.

    Per device inside `shard_map`, like `fused_causal_attention`: the kernel is made for the
    local heads ([n, t, h] per sequence, `vmap`ped over the local batch) with a causal mask per
    head; document segment ids go in as the kernel's own `SegmentIds` (a query attends to keys
    of its document only). Tiles: the largest of 512, 256, 128 that divides t. The kernel does
    not scale the scores, so q is scaled here. interpret: run the kernels in Pallas' interpreter
    (default: off a TPU; `attention_backend` lets only TPUs choose splash, so that is for tests)."""
    from jax.experimental.pallas.ops.tpu import splash_attention as splash

    if interpret is None:
        interpret = jax.devices()[0].platform != "tpu"

    spec = rules.spec("batch", "heads", "seq", "head_dim")
    seg_spec = rules.spec("batch", "seq")

    def local(q, k, v, seg):
        _, n, t, h = q.shape
        blk = next((b for b in SPLASH_BLOCKS if t % b == 0), None)
        if blk is None:
            raise ConfigError([f"model.attention=splash needs a sequence length that is a multiple of 128 (got {t})"])
        sizes = splash.BlockSizes(block_q=blk, block_kv=blk, block_kv_compute=blk, block_q_dkv=blk,
                                  block_kv_dkv=blk, block_kv_dkv_compute=blk, block_q_dq=blk, block_kv_dq=blk)
        mask = splash.MultiHeadMask([splash.CausalMask((t, t))] * n)
        kernel = splash.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret)
        q = q * jnp.asarray(h ** -0.5, q.dtype)
        if seg is None:
            return jax.vmap(kernel)(q, k, v)
        return jax.vmap(lambda q, k, v, s: kernel(q, k, v, segment_ids=splash.SegmentIds(s, s)))(q, k, v, seg)

    k, v = (repeat_kv(x, q.shape[1], rules) for x in (k, v))  # one key/value head per query head
    q, k, v = (jax.sharding.reshard(x, spec) for x in (q, k, v))
    # (check_vma=False: the Pallas kernels' outputs carry no varying-axes annotation)
    if segment_ids is None:
        return jax.shard_map(lambda q, k, v: local(q, k, v, None), in_specs=(spec, spec, spec),
                             out_specs=spec, check_vma=False)(q, k, v)
    seg = jax.sharding.reshard(segment_ids, seg_spec)
    return jax.shard_map(local, in_specs=(spec, spec, spec, seg_spec), out_specs=spec,
                         check_vma=False)(q, k, v, seg)


# the fused GPU kernels (`fused_causal_attention`): q, k, v token-major [b, t, n, h], not head-major
TOKEN_MAJOR = (AttentionImpl.cudnn, AttentionImpl.tokamax)


def attention_backend(cfg: ModelConfig, platform: Optional[str] = None) -> AttentionImpl:
    """The backend `model.attention` means on this platform ('cpu', 'gpu', 'tpu'; default: the
    current mesh's, else the default device's): `auto` resolved, an impossible explicit choice a
    ConfigError naming the field."""
    errs = config_errors(cfg)
    try:
        backend = _backend(cfg, platform or mesh_platform())
    except ConfigError as e:  # (the platform's refusal first, with every other: all fixes at once)
        errs = e.messages + errs
    if errs:
        raise ConfigError(errs)
    return backend


def attention_dropout(cfg: ModelConfig) -> float:
    """The attention-probability dropout rate: model.attention_dropout, default model.dropout."""
    return cfg.dropout if cfg.attention_dropout is None else cfg.attention_dropout


def _backend(cfg: ModelConfig, platform: str) -> AttentionImpl:
    half = cfg.compute_dtype in (DType.bfloat16, DType.float16)
    if cfg.attention == AttentionImpl.auto:
        if attention_dropout(cfg) > 0 or any(layer_windows(cfg)) or cfg.attention_sinks:  # the one backend with these
            return AttentionImpl.xla
        if platform == "tpu":
            return AttentionImpl.splash
        return AttentionImpl.cudnn if platform == "gpu" and half else AttentionImpl.xla
    if cfg.attention == AttentionImpl.splash and platform != "tpu":
        raise ConfigError([f"model.attention=splash needs a TPU (this run's devices are {platform}); "
                           "use model.attention=auto or xla"])
    if cfg.attention in TOKEN_MAJOR and platform != "gpu":
        raise ConfigError([f"model.attention={cfg.attention.value} needs an NVIDIA GPU (this run's devices are "
                           f"{platform}); use model.attention=auto or xla"])
    if cfg.attention == AttentionImpl.tokamax and (missing := tokamax_missing("model.attention")):
        raise ConfigError([missing])
    return cfg.attention


def config_errors(cfg: ModelConfig, seq_len: Optional[int] = None) -> List[str]:
    """What an explicit model.attention cannot do on any platform (the platform's own rules:
    `attention_backend`); with `seq_len` (data.seq_len), also the sequence length it needs."""
    errs: List[str] = []
    kernel = cfg.attention not in (AttentionImpl.auto, AttentionImpl.xla)
    if kernel and cfg.sliding_window > 0:
        errs.append(f"model.sliding_window={cfg.sliding_window} needs model.attention=xla (the "
                    f"{cfg.attention.value} path has no sliding window yet); set model.attention=xla or auto")
    elif kernel and cfg.attention_chunk > 0:
        errs.append(f"model.attention_chunk={cfg.attention_chunk} needs model.attention=xla (the "
                    f"{cfg.attention.value} path has no chunked attention yet); set model.attention=xla or auto")
    if kernel and cfg.attention_sinks:
        errs.append(f"model.attention_sinks=true needs model.attention=xla (the {cfg.attention.value} kernel has no "
                    "sink logit); set model.attention=xla or auto")
    if kernel and attention_dropout(cfg) > 0:
        errs.append(f"model.attention_dropout={attention_dropout(cfg)} needs model.attention=xla (the "
                    f"{cfg.attention.value} kernel has no dropout); set model.attention=xla or "
                    "model.attention_dropout=0")
    if cfg.attention in TOKEN_MAJOR and cfg.compute_dtype not in (DType.bfloat16, DType.float16):
        errs.append(f"model.attention={cfg.attention.value} needs model.compute_dtype=bfloat16 or float16 "
                    f"(got {cfg.compute_dtype.value}); change one of the two")
    if cfg.attention == AttentionImpl.splash and seq_len and seq_len % 128:
        errs.append(f"model.attention=splash needs data.seq_len a multiple of 128 (got {seq_len}): "
                    "its kernels work in tiles of 128 positions; change data.seq_len or use model.attention=xla")
    return errs


PAGED_KERNEL_PLATFORMS = ("gpu", "tpu")  # where JAX ships a paged-attention kernel (Pallas: Triton, Mosaic TPU)


def paged_kernel_blocks(pages_per_seq: int, page_size: int) -> tuple:
    """(pages a kernel step reads, key splits) for page tables `pages_per_seq` wide: the most
    pages, up to 8 and a power of two, that divide the table, then the most splits of the table
    (GPU: up to 16, each a multiple of the pages a step reads; the splits' partial softmaxes are
    combined at the end) that divide what is left."""
    block = next(p for p in (8, 4, 2, 1) if pages_per_seq % p == 0)
    splits = next(s for s in (16, 8, 4, 2, 1) if (pages_per_seq // block) % s == 0)
    return block, splits


def paged_decode_attention(q: jax.Array, pages: tuple, table: jax.Array, lengths: jax.Array, rules: Rules,
                           platform: str, interpret: bool = False) -> jax.Array:
    """One query per row over its pages, by the paged-attention kernel JAX ships for `platform`:
    q [b, n, h] (scaled: the kernels do not scale the scores), table [b, pages_per_seq] (rows'
    pages, indices into `pages`), lengths [b] (a row attends to its first `length` keys: positions
    0..length - 1 in table order; 0: an idle row, whose output is left undefined) -> [b, n, h].

    - 'gpu': `pallas.ops.gpu.paged_attention` (Triton), pages = (k, v) [K, pages, page_size, h];
    - 'tpu': `pallas.ops.tpu.ragged_paged_attention` (Mosaic; its queries ragged, here one per
      row), pages = (kv,) [pages, page_size, 2K, h], key head i at 2i and its value at 2i + 1.
      (The older `pallas.ops.tpu.paged_attention` does not lower with JAX 0.12's Mosaic checks.)

    Per device inside `shard_map`, as the fused kernels: rows over the batch axes, heads over the
    model axis (K heads split like the n query heads: `paged_kernel_error`). interpret (the tests'
    CPUs): the GPU kernel in Pallas' interpreter; the TPU kernel's contract by
    `interleaved_reference` (Pallas' TPU interpreter cannot run that kernel's ref reshapes, JAX
    0.12.0.1), so the tests check the pool's layout and `spmdgpt plan topology=v5e-..` the kernel."""
    heads = "heads" if q.shape[1] == (pages[0].shape[0] if platform == "gpu" else pages[0].shape[2] // 2) \
        else "kv_heads"
    q_spec, row_spec = rules.spec("batch", "heads", None), rules.spec("batch", None)
    page_spec = (rules.spec(heads, None, None, None) if platform == "gpu" else rules.spec(None, None, heads, None))
    block, splits = paged_kernel_blocks(table.shape[1], pages[0].shape[-2])

    def local(q, table, lengths, *pages):
        if platform == "tpu" and interpret:
            return interleaved_reference(q, pages[0], table, lengths)
        if platform == "tpu":
            from jax.experimental.pallas.ops.tpu.ragged_paged_attention import ragged_paged_attention

            b = q.shape[0]
            # (block sizes given: its table of tuned ones looks at the host's device, not the target)
            starts, seqs = jnp.arange(b + 1, dtype=jnp.int32), jnp.full((1,), b, jnp.int32)  # (a query a row)
            return ragged_paged_attention(q, pages[0], jnp.maximum(lengths, 1), table, starts, seqs,
                                          num_kv_pages_per_block=block, num_queries_per_block=min(b, 8))
        with warnings.catch_warnings():  # (its module warns on import: Pallas' Triton ops are deprecated)
            warnings.simplefilter("ignore", DeprecationWarning)
            from jax.experimental.pallas.ops.gpu.paged_attention import paged_attention
        return paged_attention(q, *pages, table, lengths, pages_per_compute_block=block, k_splits=splits,
                               interpret=interpret)

    specs = (q_spec, row_spec, rules.spec("batch")) + (page_spec,) * len(pages)
    args = [jax.sharding.reshard(a, s) for a, s in zip((q, table, lengths) + tuple(pages), specs, strict=True)]
    # (check_vma=False: the Pallas kernels' outputs carry no varying-axes annotation)
    return jax.shard_map(local, in_specs=specs, out_specs=q_spec, check_vma=False)(*args)


def interleaved_reference(q: jax.Array, kv: jax.Array, table: jax.Array, lengths: jax.Array) -> jax.Array:
    """What `ragged_paged_attention` computes for one query per row, by a gather: q [b, n, h]
    (scaled), kv [pages, page_size, 2K, h] (key head i at 2i, its value at 2i + 1), table [b, m],
    lengths [b] -> [b, n, h]."""
    b, n, h = q.shape
    rows = kv[table]  # [b, m, page_size, 2K, h]
    K = rows.shape[3] // 2
    rows = jnp.reshape(rows, (b, -1, K, 2, h))
    k, v = rows[..., 0, :], rows[..., 1, :]
    scores = jnp.einsum("bkgh,btkh->bkgt", jnp.reshape(q, (b, K, n // K, h)), k, preferred_element_type=jnp.float32)
    scores = jnp.where(jnp.arange(k.shape[1]) < lengths[:, None, None, None], scores, jnp.finfo(jnp.float32).min)
    o = jnp.einsum("bkgt,btkh->bkgh", jax.nn.softmax(scores, axis=-1).astype(v.dtype), v)
    return jnp.reshape(o, (b, n, h))


def paged_kernel_error(cfg: ModelConfig, rules: Rules, platform: str, page_size: int, pages_per_seq: int,
                       drafts: int) -> Optional[str]:
    """Why the engine's decode rows cannot attend by `paged_decode_attention` on `platform` for
    this model, mesh and pool, or None: the kernels take one query per row over key/value heads
    (no MLA latents), a plain causal softmax (no sliding window, no sinks), key/value heads split
    as the query heads are; the GPU's Triton blocks are powers of two of at least 16 (head width,
    pages a step x page_size), the TPU's heads are lanes of 128 and its key/value heads per device
    a whole number of tiles (`ragged_paged_attention`'s own check)."""
    if cfg.mla.kv_rank:
        return "MLA caches latents, and the kernels read key and value pages"
    if cfg.csa.q_rank:
        return "DeepSeek-V4's attention (model.csa) caches one shared key/value row a token, and has sinks"
    if any(layer_windows(cfg)):
        return "the kernels have no sliding window or chunk (model.sliding_window, model.attention_chunk)"
    if cfg.attention_sinks:
        return "the kernels have no attention sinks (model.attention_sinks)"
    if drafts:
        return "a decode row with drafts (speculate=) has more than the one query the kernels take"
    K, h = kv_heads(cfg), head_dim(cfg)
    if K != cfg.num_heads and rules.spec("kv_heads") != rules.spec("heads"):
        return "the key/value heads are not split over the model axis as the query heads are"
    two = lambda x: x >= 16 and x & (x - 1) == 0  # noqa: E731
    if platform == "gpu":
        block = paged_kernel_blocks(pages_per_seq, page_size)[0] * page_size
        if not two(h):
            return f"the GPU kernel's head width must be a power of two of at least 16 (the model's: {h})"
        if not two(block):
            return (f"the GPU kernel reads {block} tokens a step (page_size={page_size} x pages), not a power of "
                    "two of at least 16 (a page_size of a power of two, such as 16, gives one)")
    if platform == "tpu":
        if h % 128:
            return f"the TPU kernel's head width must be a multiple of 128 (the model's: {h})"
        from spmdgpt.model.layers import dtype_of

        packing = 4 // dtype_of(cfg.compute_dtype).itemsize
        axes = rules.spec("kv_heads" if K != cfg.num_heads else "heads")[0] or ()
        tiles = 2 * K // math.prod(rules.mesh.shape[a] for a in ((axes,) if isinstance(axes, str) else axes))
        if tiles % packing or not (tiles // packing in (1, 2, 4, 8) or tiles // packing % 8 == 0):
            return (f"the TPU kernel takes 2 x key/value heads a device in whole tiles ({tiles} in "
                    f"{cfg.compute_dtype.value}: 2, 4, 8, 16 or a multiple of 16 in bfloat16)")
    return None
