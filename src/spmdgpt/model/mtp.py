"""Multi-token prediction (DeepSeek-V3, arXiv:2412.19437 section 2.2): `model.mtp_depth` = D
sequential modules after the model, module k predicting the token k + 1 places past the next one.

Module k (1..D) takes, at each position i, the previous depth's hidden state h^{k-1}_i (h^0: the
main model's residual stream before its final norm) and the embedding of token t_{i+k} (the
shared embedding), normalises each (RMSNorm or LayerNorm as `model.norm`), projects their
concatenation [embedding; hidden] (2D -> D) and runs one transformer block of the model's
attention with a dense MLP over it: h^k_i. Its final norm and the shared output head predict
t_{i+k+1}. Its loss is the mean cross-entropy over the positions whose target exists, is counted
(>= 0) and lies in the same document; the training objective adds model.mtp_weight x the mean of
the D losses (DeepSeek-V3: 0.3, later 0.1), logged as `mtp/loss`. Evaluation, sampling and export
use the main model alone (transformers ignores MTP modules; export leaves them out).

Shapes (D modules; d = d_model): norm_h, norm_e, ln_f: Norm [D, d]; w_in [D, 2, d, d] (the
embedding's rows, then the hidden state's); block: a Block of the model's units stacked [D, ...]
(its MLP dense: DeepSeek-V3's modules hold an MoE layer; here the MoE balancing is the main
stack's alone). The modules' forward and loss: `model.loss.mtp_loss` (beside the loss it adds to).
"""

from __future__ import annotations

from typing import Any, List, NamedTuple

import jax

from spmdgpt.config import Config, ModelConfig
from spmdgpt.model.info import matrix, stacked
from spmdgpt.model.layers import Norm, norm_info

Array = jax.Array


class Mtp(NamedTuple):
    norm_h: Norm
    norm_e: Norm
    w_in: Array
    block: Any  # params.Block, stacked over the modules
    ln_f: Norm


def mtp_info(cfg: ModelConfig, block_info) -> Mtp:
    """The D modules' parameters; block_info: one layer's Block of ParamInfo (params' builder)."""
    d = cfg.d_model
    one = Mtp(norm_h=norm_info(cfg), norm_e=norm_info(cfg),
              w_in=matrix((2, d, d), ("mtp_in", "embed", "mtp_out"), ("mtp_in", "embed"), ("mtp_out",), cfg.init_std),
              block=block_info, ln_f=norm_info(cfg))
    return stacked(one, cfg.mtp_depth)


def config_errors(cfg: Config) -> List[str]:
    """model.mtp_depth, mtp_weight and what multi-token prediction cannot be combined with yet."""
    m = cfg.model
    if m.mtp_depth < 0 or m.mtp_weight < 0:
        return [f"model.mtp_depth={m.mtp_depth} and model.mtp_weight={m.mtp_weight} must be >= 0 (depth 0: off)"]
    if not m.mtp_depth:
        return []
    errs = []
    for axis, what in (("stage", "pipeline stages"), ("context", "context parallelism")):
        if getattr(cfg.mesh, axis) > 1:
            errs.append(f"model.mtp_depth={m.mtp_depth} with mesh.{axis}={getattr(cfg.mesh, axis)}: multi-token "
                        f"prediction does not run under {what} yet; set model.mtp_depth=0 or mesh.{axis}=1")
    if cfg.lora.rank:
        errs.append(f"model.mtp_depth={m.mtp_depth} with lora.rank={cfg.lora.rank}: LoRA trains adapters of the main "
                    "blocks only; set model.mtp_depth=0 to fine-tune with LoRA")
    return errs
