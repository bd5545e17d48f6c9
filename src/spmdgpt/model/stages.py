"""The layer stack's order under a circular pipeline (`model.pipeline`): parameters (and an
optimizer state holding them) between layer order, which checkpoints hold, and the order the
stages hold them in (`pipeline.stack_order`); the whole stack gathered for passes that do not
pipeline."""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from spmdgpt.mesh.sharding import Rules
from spmdgpt.model.params import Params
from spmdgpt.model.pipeline import reorder, stack_order

Array = jax.Array


def whole_stack(rules: Rules, params: Params) -> Params:
    """params with the layer stack gathered from the pipeline stages onto every device, in layer
    order (for the passes that do not pipeline: statistics, cached decoding); unchanged without
    stages."""
    if rules.stage_size() == 1:
        return params

    def whole(a):
        spec = tuple(jax.typeof(a).sharding.spec) + (None,) * a.ndim
        return jax.sharding.reshard(a, P(None, *spec[1:a.ndim]))

    blocks = jax.tree.map(whole, params.blocks)
    order = _stack_order(rules, blocks)
    if order is not None:
        blocks = jax.tree.map(lambda a: jnp.take(a, np.argsort(order), axis=0), blocks)
    return params._replace(blocks=blocks)


def _stack_order(rules: Rules, blocks) -> Optional[np.ndarray]:
    return stack_order(jax.tree.leaves(blocks)[0].shape[0], rules.stage_size(), rules.repeats)


def _reordered(tree, index: Array):
    def blocks(p):
        n = index.shape[0]
        return p._replace(blocks=jax.tree.map(lambda a: reorder(a, index) if a.ndim and a.shape[0] == n else a,
                                              p.blocks))

    return jax.tree.map(lambda x: blocks(x) if isinstance(x, Params) else x, tree,
                        is_leaf=lambda x: isinstance(x, Params))


_reorder_copy = jax.jit(_reordered)
_reorder_in_place = jax.jit(_reordered, donate_argnums=0)


def to_stage_order(rules: Rules, tree, donate: bool = True):
    """tree (parameters, or an optimizer state holding Params) with every layer stack in the
    order a circular pipeline holds it (`pipeline.stack_order`), from layer order: what a run
    does to the parameters it initialises or restores. The tree itself without one. donate:
    tree's arrays are not used again (their memory is reused)."""
    return _reorder(rules, tree, donate, invert=False)


def to_layer_order(rules: Rules, tree, donate: bool = False):
    """The inverse of `to_stage_order` (what a checkpoint holds)."""
    return _reorder(rules, tree, donate, invert=True)


def _reorder(rules: Rules, tree, donate: bool, invert: bool):
    stacks = [p.blocks for p in jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, Params))
              if isinstance(p, Params) and jax.tree.leaves(p.blocks)]
    order = _stack_order(rules, stacks[0]) if stacks else None
    if order is None:
        return tree
    index = jnp.asarray(np.argsort(order) if invert else order, jnp.int32)
    return (_reorder_in_place if donate else _reorder_copy)(tree, index)
