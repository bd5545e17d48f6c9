"""Mesh from config and the logical-axis rules that place every array on it.

Model code names only logical axes (`batch`, `seq`, `tokens`, `stream`, `embed`, `heads`,
`head_dim`, `mlp`, `vocab`, `layers`, ...). `tokens` is the flattened batch x seq dimension:
split over the batch's mesh axes and then the sequence's (context parallelism), as a [batch,
seq] array's reshape to [batch * seq] leaves it. `stream` is the residual stream's tokens
dimension between the units: `tokens`, and with model.collective_matmul also split over the
tensor axes (sequence parallelism, `model.collective`). The tables set neither. A rule table
(``configs/sharding/*.yaml``) maps them to mesh axes
twice: `params` says where parameters *live*, `compute` where activations live and the layout
parameters are resharded to right before use. With `params.embed: data` and no `embed` entry in
`compute` that reshard is exactly FSDP's just-in-time all-gather (and its transpose, the
gradient reduce-scatter). DP, FSDP, TP and their mixes are different tables, never model edits.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Mapping, Optional, Sequence

import jax
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from spmdgpt.config import (
    ConfigError,
    MeshConfig,
    ModelConfig,
    ShardingConfig,
    kv_heads,
    mesh_axes_of,
    resolve_mesh_shape,
)

Logical = Sequence[Optional[str]]


def platform() -> str:
    """The platform ('cpu', 'gpu', 'tpu') the code being traced runs on: that of the mesh set by
    jax.set_mesh, else the default device's. (A plan compiles for devices this process does not
    run on: `spmdgpt plan topology=h100-8` on a CPU.)"""
    mesh = jax.sharding.get_abstract_mesh()  # (also inside jit, where get_mesh() is refused)
    device = None if mesh.empty else getattr(mesh, "abstract_device", None)
    return jax.devices()[0].platform if device is None else device.platform


def make_mesh(cfg: MeshConfig, devices: Optional[Sequence[jax.Device]] = None) -> Mesh:
    """The mesh of cfg's named axes (MeshConfig's fields, in order: data, stage, expert, context, model),
    explicit axis types, over `devices` (default: all)."""
    devices = list(jax.devices() if devices is None else devices)
    shape = resolve_mesh_shape(cfg, len(devices))
    types = (AxisType.Explicit,) * len(shape)
    slices = len({getattr(d, "slice_index", 0) for d in devices})
    if slices > 1:  # TPU multislice: the first axis (data) spans the slices, the others stay inside one
        sizes = list(shape.values())
        if sizes[0] % slices:
            raise ConfigError([f"mesh.{next(iter(shape))}={sizes[0]} must be a multiple of the {slices} pod slices "
                               "it spans (the other axes stay inside a slice)"])
        from jax.experimental import mesh_utils

        grid = mesh_utils.create_hybrid_device_mesh([sizes[0] // slices] + sizes[1:], [slices] + [1] * (len(sizes) - 1),
                                                    devices)
        return Mesh(grid, tuple(shape), axis_types=types)
    try:
        return jax.make_mesh(tuple(shape.values()), tuple(shape), axis_types=types, devices=devices)
    except NotImplementedError:  # (a TPU torus whose physical axes the sizes do not match, e.g. 2 on 4x4x4)
        from jax.experimental import mesh_utils

        grid = mesh_utils.create_device_mesh(tuple(shape.values()), devices, allow_split_physical_axes=True)
        return Mesh(grid, tuple(shape), axis_types=types)


def _spec(logical: Logical, table: Mapping[str, Any]) -> P:
    used: set = set()
    out = []
    for name in logical:
        if name in ("tokens", "stream") and name not in table:  # batch x seq flattened
            value = list(mesh_axes_of(table.get("batch"))) + list(mesh_axes_of(table.get("seq")))
        else:
            value = table.get(name) if name is not None else None
        axes = mesh_axes_of(value) if value else ()
        # A mesh axis can shard only one dimension of an array: the first dimension that asks
        # for it gets it (e.g. a square embed x embed weight under FSDP).
        axes = tuple(a for a in axes if a not in used)
        used.update(axes)
        out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return P(*out)


class Rules:
    """Turns logical axis names into PartitionSpecs / NamedShardings for one mesh.

    With the model config: grouped-query attention's `kv_heads` rule is dropped (the K key/value
    heads replicated over those mesh axes, each device computing all K) when K does not divide
    over them (or the G layers' own, model.global_kv_heads, do not), e.g. Qwen2.5-0.5B's 2 key/value
    heads under mesh.model=4; the query heads stay
    split, and the attention then repeats each key/value head for its query heads on the device
    that holds them (`kernels.local_kv`). The `layers` rule (pipeline stages) is dropped when its
    axes have one device, and those axes from the other rules; with stages,
    model.pipeline_repeats (`repeats`) orders the stack by stage (`model.pipeline.stack_order`).
    And model.collective_matmul (uni, bi) over a tensor axis of more than one device splits the
    residual stream over it too (the `stream` axis; `collective`: the matmuls that gather and
    reduce-scatter it, `model.collective`)."""

    def __init__(self, mesh: Mesh, cfg: ShardingConfig, model: Optional[ModelConfig] = None):
        self.mesh = mesh
        self.params_table = dict(cfg.params)
        self.compute_table = dict(cfg.compute)
        self.collective = "none"  # model.collective_matmul where it applies (a tensor axis), else none
        self.fp8 = model is not None and model.matmul_dtype.value == "fp8"  # (the projections' matmuls: model.fp8)
        self.repeats = 1  # model.pipeline_repeats where it applies (pipeline stages), else 1
        if self.stage_size() == 1:  # (no pipeline: the layer stack whole, as scans over it need, and the
            # stage axes out of every rule)
            stages = self.stage_axes()
            self.params_table.pop("layers", None)
            for table in (self.params_table, self.compute_table):
                for name, value in table.items():
                    axes = mesh_axes_of(value)
                    if set(axes) & set(stages):
                        table[name] = [a for a in axes if a not in stages]
        elif model is not None:
            self.repeats = model.pipeline_repeats
        if model is not None:
            heads = {kv_heads(model), model.global_kv_heads or kv_heads(model)}  # (Gemma 4: the G layers' own)
            for table in (self.params_table, self.compute_table):
                n = math.prod(mesh.shape[a] for a in mesh_axes_of(table.get("kv_heads")))
                if any(k % n for k in heads):
                    del table["kv_heads"]
            if model.collective_matmul.value != "none" and self.tensor_size() > 1:
                self.collective = model.collective_matmul.value
                self.compute_table["stream"] = self.token_axes() + self.tensor_axes()

    def whole_sequences(self) -> "Rules":
        """These rules without context parallelism (each sequence whole on every device of the
        ring) and without a split residual stream: for cached decoding, whose steps have one
        token per sequence."""
        if "seq" not in self.compute_table and self.collective == "none":
            return self
        rules = copy.copy(self)
        rules.compute_table = {k: v for k, v in self.compute_table.items() if k not in ("seq", "stream")}
        rules.collective = "none"
        return rules

    def in_stages(self) -> "Rules":
        """These rules without the stage axes in the batch's split: inside a pipeline's stages,
        where the stage axes carry the stages (outside, the embedding and the loss split the batch
        over them too, as over every other device)."""
        stages = self.stage_axes()
        if not set(stages) & set(self.batch_axes()):
            return self
        rules = copy.copy(self)
        rules.compute_table = dict(self.compute_table)
        rules.compute_table["batch"] = [a for a in self.batch_axes() if a not in stages]
        return rules

    def tensor_axes(self) -> tuple:
        """The mesh axes of tensor parallelism: those the `mlp` and `heads` rules split over
        (besides the batch's and the sequence's)."""
        tokens = self.token_axes()
        return tuple(dict.fromkeys(a for name in ("heads", "mlp") for a in mesh_axes_of(self.compute_table.get(name))
                                   if a not in tokens))

    def tensor_size(self) -> int:
        return math.prod(self.mesh.shape[a] for a in self.tensor_axes())

    def stage_axes(self) -> tuple:
        """The mesh axes the layer stack is split over (pipeline stages: the `layers` parameter
        rule)."""
        return mesh_axes_of(self.params_table.get("layers"))

    def stage_size(self) -> int:
        return math.prod(self.mesh.shape[a] for a in self.stage_axes())

    def param_spec(self, logical: Logical) -> P:
        """Where a parameter with these logical axes is stored."""
        return _spec(logical, self.params_table)

    def spec(self, *logical: Optional[str]) -> P:
        """Compute layout of an activation (or of a parameter about to be used)."""
        return _spec(logical, self.compute_table)

    def token_axes(self) -> tuple:
        """The mesh axes the flattened tokens (`tokens`: batch x seq) are split over: the
        batch's, then the sequence's."""
        return self.batch_axes() + self.seq_axes()

    def seq_axes(self) -> tuple:
        """The mesh axes each sequence is split over (context parallelism; possibly none)."""
        return tuple(a for a in mesh_axes_of(self.compute_table.get("seq")) if a not in self.batch_axes())

    def context_size(self) -> int:
        """How many ways each sequence is split (mesh.context under the packaged tables)."""
        return math.prod(self.mesh.shape[a] for a in self.seq_axes())

    def param_sharding(self, logical: Logical) -> NamedSharding:
        return NamedSharding(self.mesh, self.param_spec(logical))

    def sharding(self, *logical: Optional[str]) -> NamedSharding:
        return NamedSharding(self.mesh, self.spec(*logical))

    def gather(self, x: jax.Array, logical: Logical) -> jax.Array:
        """Reshard a stored parameter to its compute layout (the FSDP all-gather)."""
        return jax.sharding.reshard(x, self.spec(*logical))

    def batch_sharding(self) -> NamedSharding:
        """Where a batch of token ids [batch, seq] goes: split like the batch, each sequence whole
        (under context parallelism the model reorders it and takes its chunks, `model.context`)."""
        return self.sharding("batch", None)

    def batch_axes(self) -> tuple:
        """The mesh axes the batch dimension is split over (possibly none)."""
        return mesh_axes_of(_spec(("batch",), self.compute_table)[0])

    def batch_divisor(self) -> int:
        """How many ways the batch dimension is split (batches must be a multiple of it)."""
        n = 1
        for ax in self.batch_axes():
            n *= self.mesh.shape[ax]
        return n


def local_row_range(sharding: NamedSharding, global_shape: Sequence[int]) -> tuple[int, int]:
    """[start, stop) of dimension 0 that this process's devices hold (its local batch rows)."""
    idx = sharding.addressable_devices_indices_map(tuple(global_shape))
    starts, stops = [], []
    for slices in idx.values():
        s = slices[0]
        starts.append(s.start or 0)
        stops.append(global_shape[0] if s.stop is None else s.stop)
    return min(starts), max(stops)


def bytes_per_device(tree: Any) -> dict:
    """Bytes each device holds of a pytree of arrays (for checking that sharding really splits)."""
    out: dict = {}
    for leaf in jax.tree.leaves(tree):
        for shard in leaf.addressable_shards:
            out[shard.device] = out.get(shard.device, 0) + shard.data.nbytes
    return out


def to_host(x: jax.Array):
    """A global array's values as a numpy array on every process (gathered across hosts when
    there are several: rows of a batch live on the hosts that hold them)."""
    import numpy as np

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(jax.device_get(x))


def shard_bytes(tree) -> int:
    """Bytes of one device's shards of a pytree of arrays or ShapeDtypeStructs (unsharded leaves
    whole)."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        shape = leaf.shape if leaf.sharding is None else leaf.sharding.shard_shape(leaf.shape)
        total += math.prod(shape) * jax.numpy.dtype(leaf.dtype).itemsize
    return total
