"""Parameters as batches of matrices: which ones Muon / manifold Muon govern, and how.

Which axes of a parameter form "the matrix" comes from its metadata (`ParamInfo.fan_in` x
`ParamInfo.fan_out`); every other axis is a batch of independent matrices. So the stacked fused
QKV weight [L, D, 3, N, H] is L*3 matrices D x (N*H) (one each for q, k, v of every layer, not
one 4-D blob), w_o [L, N, H, D] is L matrices (N*H) x D, w_up [L, D, F] is L matrices D x F.
Embedding and unembedding are excluded (their rows are per-token vectors, not a linear map
between hidden spaces), as are norms and biases: those go to AdamW.

Sharding: a parameter may be split along its matrix axes (FSDP, tensor parallelism). Before the
orthogonalisation each batch of matrices is resharded so that every matrix is whole on one
device and the batch (layers, q/k/v) is spread over the mesh axes that divide it; the result is
resharded back to the parameter's layout. Each device thus orthogonalises a slice of the
matrices (an all-to-all and an all-gather per step) instead of every device doing all of them.
optax's own `contrib.muon` cannot be used here: its reshape of sharded parameters is rejected
under explicit sharding ("This reshape is not supported"), and it has no manifold variant.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
from optax.transforms import MaskedNode

from spmdgpt.model import ParamInfo, Params, is_info
from spmdgpt.optim.msign import msign

Array = jax.Array


def is_hidden_matrix(info: ParamInfo) -> bool:
    """Governed by Muon / manifold Muon: a matrix between hidden spaces (not the vocabulary)."""
    return bool(info.fan_in) and bool(info.fan_out) and "vocab" not in info.logical


class MatrixView(NamedTuple):
    """How one parameter maps to a batch of tall matrices [B, m, n] (m >= n) and back."""

    shape: tuple  # the parameter's shape
    perm: tuple  # batch axes, then fan_in axes, then fan_out axes
    num_batch_axes: int
    fan_in: int  # product of the fan_in axes' sizes
    fan_out: int

    @classmethod
    def of(cls, info: ParamInfo) -> "MatrixView":
        ins, outs = info.axes(info.fan_in), info.axes(info.fan_out)
        batch = tuple(a for a in range(len(info.shape)) if a not in ins + outs)
        fan_in = math.prod(info.shape[a] for a in ins)
        fan_out = math.prod(info.shape[a] for a in outs)
        return cls(info.shape, batch + ins + outs, len(batch), fan_in, fan_out)

    @property
    def batch(self) -> int:
        return math.prod(self.shape) // (self.fan_in * self.fan_out)

    @property
    def wide(self) -> bool:
        return self.fan_in < self.fan_out

    def _batch_spec(self) -> Optional[P]:
        """Layout of [B, m, n]: B split over the mesh axes whose sizes divide the leading batch
        axis (only that axis, so merging the batch axes keeps the split); None without a mesh."""
        mesh = jax.sharding.get_abstract_mesh()
        if mesh.empty:
            return None
        lead = self.shape[self.perm[0]] if self.num_batch_axes else 1
        axes, ways = [], 1
        for name, size in zip(mesh.axis_names, mesh.axis_sizes, strict=True):
            if size > 1 and lead % (ways * size) == 0:
                axes.append(name)
                ways *= size
        return P(tuple(axes) or None, None, None)

    def to_matrices(self, x: Array) -> Array:
        spec = self._batch_spec()
        if spec is not None:
            dims = [None] * len(self.shape)
            if self.num_batch_axes:
                dims[self.perm[0]] = spec[0]
            x = jax.sharding.reshard(x, P(*dims))
        x = jnp.transpose(x, self.perm)
        x = jnp.reshape(x, (self.batch, self.fan_in, self.fan_out), out_sharding=spec)
        return jnp.swapaxes(x, -1, -2) if self.wide else x

    def from_matrices(self, x: Array, spec: Optional[P]) -> Array:
        """Inverse of to_matrices; `spec` is the parameter's own layout (None without a mesh)."""
        if self.wide:
            x = jnp.swapaxes(x, -1, -2)
        permuted = tuple(self.shape[a] for a in self.perm)
        out = None
        if spec is not None:
            lead = self._batch_spec()[0] if self.num_batch_axes else None
            out = P(lead, *([None] * (len(permuted) - 1)))
        x = jnp.reshape(x, permuted, out_sharding=out)
        x = jnp.transpose(x, tuple(self.perm.index(a) for a in range(len(self.shape))))
        return x if spec is None else jax.sharding.reshard(x, spec)


def spec_of(x: Array) -> Optional[P]:
    return None if jax.sharding.get_abstract_mesh().empty else jax.typeof(x).sharding.spec


def map_matrices(fn: Callable, info: Params, tree, *rest):
    """fn(view, leaf, *rest_leaves) on every hidden-matrix leaf; other leaves are passed through
    (MaskedNode leaves, from optax.partition, too)."""

    def leaf(i, x, *xs):
        if i is None or isinstance(x, MaskedNode) or not is_hidden_matrix(i):
            return x
        return fn(MatrixView.of(i), x, *xs)

    return jax.tree.map(leaf, info, tree, *rest, is_leaf=is_info)


def orthogonalize(view: MatrixView, x: Array, steps: int) -> Array:
    """msign of every matrix of one parameter, in the parameter's own shape and layout."""
    return view.from_matrices(msign(view.to_matrices(x), steps), spec_of(x))
