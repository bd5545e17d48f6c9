"""Hugging Face interop: a model's parameters as a `transformers` checkpoint, and back.

These `transformers` architectures compute exactly what a spmdgpt model computes, so these are
the ones an export can be (any other config is a one-line error naming the field, never a folder
that loads but computes something else):

    model.norm=rmsnorm, model.mlp=swiglu          ->  LlamaForCausalLM (grouped-query attention:
                                                      num_key_value_heads; head_dim)
      + model.qkv_bias=true                       ->  Qwen2ForCausalLM
      + model.qk_norm=true                        ->  Qwen3ForCausalLM (QK-norm scales: learned with
                                                      model.qk_norm_scale, else ones)
      + model.sliding_window=W (every layer)      ->  MistralForCausalLM (Qwen2/3: any window_pattern)
      + model.moe.num_experts=E                   ->  MixtralForCausalLM (softmax routing, no shared
                                                      experts; with model.qk_norm: Qwen3MoeForCausalLM)
      + model.deltanet.full_attention_interval=k  ->  Qwen3_5ForCausalLM (Gated DeltaNet hybrids: with
                                                      model.attention_gate, qk_norm, norm_plus_one,
                                                      grouped keys and values; rope_fraction)
        + model.moe.num_experts=E, shared_gate    ->  Qwen3_5MoeForCausalLM, or Qwen3NextForCausalLM
                                                      (the same models; by name, `architecture`)
      + model.mla.kv_rank=R, sigmoid experts      ->  DeepseekV3ForCausalLM
    model.norm=rmsnorm, model.mlp=geglu           ->  Gemma3ForCausalLM (Gemma's layer options)
    model.norm=rmsnorm, model.mlp=swiglu_clamped  ->  GptOssForCausalLM (biases, sinks, experts)
    model.norm=layernorm, model.mlp=gelu          ->  GPTNeoXForCausalLM, sequential residual
                                                      (use_parallel_residual=false), full rotary
                                                      (partial_rotary_factor=1), tanh GELU
                                                      (hidden_act=gelu_pytorch_tanh)

Each is one declarative table (`spmdgpt.hf.tables`): tensor names, layouts, fused splits, the
config fields. The code here reads the tables, the same way for all: `to_hf` (export),
`layer_values` (import), `expected_shapes` and `check_weights` (what an import must find).
RoPE's base goes in `rope_parameters.rope_theta` (the current field; also written as the legacy
top-level `rope_theta`, which older versions read). The vocabulary keeps the model's padded
size (`model.vocab_size` >= the tokenizer's, as Pythia's 50,304 rows for a 50,277-token
tokenizer); padding ids are never a training target, and the CLI's export lists them as
`suppress_tokens` in generation_config.json (transformers' `generate` never draws them).

Tensors are numpy arrays keyed by their `transformers` names; `to_hf` and `from_hf` are exact
inverses (an import exported again gives byte-identical tensors).
"""

from spmdgpt.hf.convert import architecture, check_weights, expected_shapes, layer_values
from spmdgpt.hf.export import hf_config, to_hf
from spmdgpt.hf.fields import TANH_GELUS, model_fields
from spmdgpt.hf.files import (
                                DTYPES,
                                HF_PREFIX,
                                WeightFiles,
                                cast,
                                hf_folder,
                                load_params,
                                open_weights,
                                read_hf_config,
                                read_params,
                                shard_names,
                                tokenizer_files,
                                total_bytes,
                                with_hf_model,
                                write_folder,
)
from spmdgpt.hf.tables import ARCHITECTURES, LLAMA, NEOX

__all__ = ["ARCHITECTURES", "DTYPES", "HF_PREFIX", "LLAMA", "NEOX", "TANH_GELUS", "WeightFiles", "architecture", "cast",
           "check_weights", "expected_shapes", "hf_config", "hf_folder", "layer_values", "load_params", "model_fields",
           "open_weights", "read_hf_config", "read_params", "shard_names", "to_hf", "tokenizer_files", "total_bytes",
           "with_hf_model", "write_folder"]
