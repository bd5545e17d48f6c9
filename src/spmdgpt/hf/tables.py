"""The Hugging Face architectures a spmdgpt model can be: one declarative table each.

A table says, for one `transformers` class, everything export and import need:

- `tensors`: every Hugging Face tensor, its name ("{i}" is the layer), the spmdgpt leaf it holds
  and the einops layout from one layer of that leaf to it ("d c n h -> c (n h) d": axes
  d = d_model, c = q/k/v, n = heads, h = head_dim, f = MLP width, v = vocabulary). Several names
  split the Hugging Face side's first axis among them (Llama's q/k/v projections of the fused
  w_qkv). A tensor whose leaf this model does not have is absent, or, with `zeros=True`, stored
  as zeros (and required to be zero on import): GPT-NeoX always has LayerNorm and MLP biases.
- `fields`: every `model.*` field that changes what the model computes, and the config.json key
  that carries it; `refused`: fields this architecture cannot represent, with the one value it
  can. A field that is in neither (nor in `TRAINING_ONLY`) is an error on export: a new model
  field can never export silently to a folder that computes something else.

Facts the tables rest on (read from transformers 5.23's modeling code, and true of 4.x):
- RoPE: both rotate the pairs (x[i], x[i + h/2]) of each head (`rotate_half`), with inverse
  frequencies theta^(-2i/h): spmdgpt's `layers.rope` pairing, so q/k rows need no permutation.
- Linear weights are [out, in] (spmdgpt's are [in, out]). Llama's q/k/v_proj rows are
  (head, head_dim); GPT-NeoX's fused `query_key_value` rows are interleaved per head: q, k, v of
  head 0, then of head 1, ... (the output is viewed as [.., heads, 3 * head_dim] and chunked).
- GPT-NeoX always has biases in its MLP and LayerNorms (`attention_bias` governs only the
  attention's). Llama has `attention_bias` (q, k, v, o) and `mlp_bias` (gate, up, down);
  spmdgpt has no gate bias, so a biased model stores zeros there.
- The unembedding is `lm_head.weight` (Llama) / `embed_out.weight` (GPT-NeoX's name on the
  Hub, which transformers 5 renames to lm_head on load; import takes either); tied models omit it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from spmdgpt.config import MlpType, ModelConfig, NormType

# model fields that change how a model is trained or run, never the function it computes
TRAINING_ONLY = ("attention", "remat", "scan_unroll", "attention_block", "param_dtype", "compute_dtype",
                 "logits_dtype", "z_loss", "zero_init_out", "dropout", "attention_dropout", "loss_block")


@dataclasses.dataclass(frozen=True)
class Tensor:
    names: tuple  # Hugging Face names ("{i}": the layer); several: the first HF axis split among them
    leaf: Optional[str]  # the spmdgpt parameter ("blocks.attn.w_qkv"); None: one spmdgpt never has
    layout: str  # einops, one layer: "spmdgpt axes -> Hugging Face axes" (leaf None: the HF axes)
    zeros: bool = False  # stored as zeros when the model has no such leaf (else left out)
    when: Optional[Callable[[ModelConfig], bool]] = None  # (leaf None) present only for these configs

    @property
    def stacked(self) -> bool:
        """The spmdgpt leaf has a layer axis."""
        return self.leaf is not None and self.leaf.startswith("blocks.")

    @property
    def per_layer(self) -> bool:
        """One Hugging Face tensor (set) per layer (its names hold "{i}")."""
        return "{i}" in self.names[0]


@dataclasses.dataclass(frozen=True)
class Architecture:
    name: str  # the transformers class, config.json's "architectures"
    model_type: str
    norm: NormType
    mlp: MlpType
    tensors: tuple
    fields: dict  # model field -> the config.json key that carries it
    refused: dict  # model field -> the one value this architecture can represent
    aliases: dict = dataclasses.field(default_factory=dict)  # HF name -> another name import accepts


def _t(names, leaf, layout, **kw) -> Tensor:
    return Tensor((names,) if isinstance(names, str) else tuple(names), leaf, layout, **kw)


def _layer(prefix: str, tensors: list) -> list:
    return [dataclasses.replace(t, names=tuple(prefix + n for n in t.names)) for t in tensors]


COMMON_FIELDS = {"num_layers": "num_hidden_layers", "num_heads": "num_attention_heads", "d_model": "hidden_size",
                 "mlp_factor": "intermediate_size", "vocab_size": "vocab_size",
                 "max_seq_len": "max_position_embeddings", "tie_embeddings": "tie_word_embeddings",
                 "rope_theta": "rope_parameters", "bias": "attention_bias", "init_std": "initializer_range",
                 "norm": "architectures", "mlp": "architectures"}
# neither computes these (num_kv_heads: grouped-query attention, which Llama computes but these
# tables do not map yet; `architecture` says so by name)
REFUSED = {"qk_norm": False, "logit_softcap": 0.0, "num_kv_heads": None}

LLAMA = Architecture(
    name="LlamaForCausalLM", model_type="llama", norm=NormType.rmsnorm, mlp=MlpType.swiglu,
    tensors=tuple(_layer("model.layers.{i}.", [
        _t("input_layernorm.weight", "blocks.ln1.scale", "d -> d"),
        _t("post_attention_layernorm.weight", "blocks.ln2.scale", "d -> d"),
        _t([f"self_attn.{c}_proj.weight" for c in "qkv"], "blocks.attn.w_qkv", "d c n h -> c (n h) d"),
        _t([f"self_attn.{c}_proj.bias" for c in "qkv"], "blocks.attn.b_qkv", "c n h -> c (n h)"),
        _t("self_attn.o_proj.weight", "blocks.attn.w_o", "n h d -> d (n h)"),
        _t("self_attn.o_proj.bias", "blocks.attn.b_o", "d -> d"),
        _t("mlp.gate_proj.weight", "blocks.mlp.w_gate", "d f -> f d"),
        _t("mlp.gate_proj.bias", None, "f", when=lambda cfg: cfg.bias),  # mlp_bias: spmdgpt's gate has none
        _t("mlp.up_proj.weight", "blocks.mlp.w_up", "d f -> f d"),
        _t("mlp.up_proj.bias", "blocks.mlp.b_up", "f -> f"),
        _t("mlp.down_proj.weight", "blocks.mlp.w_down", "f d -> d f"),
        _t("mlp.down_proj.bias", "blocks.mlp.b_down", "d -> d"),
    ]) + [
        _t("model.embed_tokens.weight", "embed", "v d -> v d"),
        _t("model.norm.weight", "ln_f.scale", "d -> d"),
        _t("lm_head.weight", "unembed", "d v -> v d"),
    ]),
    fields={**COMMON_FIELDS, "norm_eps": "rms_norm_eps"},
    refused=REFUSED,
)

NEOX = Architecture(
    name="GPTNeoXForCausalLM", model_type="gpt_neox", norm=NormType.layernorm, mlp=MlpType.gelu,
    tensors=tuple(_layer("gpt_neox.layers.{i}.", [
        _t("input_layernorm.weight", "blocks.ln1.scale", "d -> d"),
        _t("input_layernorm.bias", "blocks.ln1.bias", "d -> d", zeros=True),
        _t("post_attention_layernorm.weight", "blocks.ln2.scale", "d -> d"),
        _t("post_attention_layernorm.bias", "blocks.ln2.bias", "d -> d", zeros=True),
        _t("attention.query_key_value.weight", "blocks.attn.w_qkv", "d c n h -> (n c h) d"),
        _t("attention.query_key_value.bias", "blocks.attn.b_qkv", "c n h -> (n c h)"),
        _t("attention.dense.weight", "blocks.attn.w_o", "n h d -> d (n h)"),
        _t("attention.dense.bias", "blocks.attn.b_o", "d -> d"),
        _t("mlp.dense_h_to_4h.weight", "blocks.mlp.w_up", "d f -> f d"),
        _t("mlp.dense_h_to_4h.bias", "blocks.mlp.b_up", "f -> f", zeros=True),
        _t("mlp.dense_4h_to_h.weight", "blocks.mlp.w_down", "f d -> d f"),
        _t("mlp.dense_4h_to_h.bias", "blocks.mlp.b_down", "d -> d", zeros=True),
    ]) + [
        _t("gpt_neox.embed_in.weight", "embed", "v d -> v d"),
        _t("gpt_neox.final_layer_norm.weight", "ln_f.scale", "d -> d"),
        _t("gpt_neox.final_layer_norm.bias", "ln_f.bias", "d -> d", zeros=True),
        _t("embed_out.weight", "unembed", "d v -> v d"),
    ]),
    fields={**COMMON_FIELDS, "norm_eps": "layer_norm_eps"},
    refused=REFUSED,
    aliases={"embed_out.weight": "lm_head.weight"},
)

ARCHITECTURES = (LLAMA, NEOX)

# Not a Hugging Face class: the PyTorch reference model of the CPU comparison
# (benchmarks/torch_gpt.py; pre-norm LayerNorm without bias, tanh GELU, tied embeddings), whose
# state dict the tests fill from spmdgpt's parameters to compare losses and gradients.
TORCH_GPT = Architecture(
    name="benchmarks/torch_gpt.py", model_type="torch_gpt", norm=NormType.layernorm, mlp=MlpType.gelu,
    tensors=tuple(_layer("blocks.{i}.", [
        _t("ln1.weight", "blocks.ln1.scale", "d -> d"),
        _t("qkv.weight", "blocks.attn.w_qkv", "d c n h -> (c n h) d"),
        _t("proj.weight", "blocks.attn.w_o", "n h d -> d (n h)"),
        _t("ln2.weight", "blocks.ln2.scale", "d -> d"),
        _t("up.weight", "blocks.mlp.w_up", "d f -> f d"),
        _t("down.weight", "blocks.mlp.w_down", "f d -> d f"),
    ]) + [
        _t("embed.weight", "embed", "v d -> v d"),
        _t("ln_f.weight", "ln_f.scale", "d -> d"),
    ]),
    fields={"num_layers": "layers", "num_heads": "heads", "d_model": "d", "vocab_size": "vocab",
            "max_seq_len": "seq", "rope_theta": "theta"},
    refused={"bias": False, "tie_embeddings": True, "mlp_factor": 4.0, "qk_norm": False, "logit_softcap": 0.0},
)

