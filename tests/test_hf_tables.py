"""The Hugging Face architecture tables (spmdgpt/hf/tables.py), without transformers: every
model field is mapped, refused or training-only for each architecture; a new field cannot export
silently; every mapped field reaches config.json; tensors round-trip exactly through the table."""

import dataclasses

import jax
import numpy as np
import pytest

from spmdgpt.config import ConfigError, ModelConfig, load_config
from spmdgpt.hf import ARCHITECTURES, architecture, check_weights, expected_shapes, hf_config, layer_values, to_hf
from spmdgpt.hf.tables import TRAINING_ONLY
from spmdgpt.model import is_info, param_info

ARCH_OVERRIDES = {"LlamaForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu"],
                  "GPTNeoXForCausalLM": ["model.norm=layernorm", "model.mlp=gelu"]}


def model_cfg(arch: str, *overrides) -> ModelConfig:
    return load_config(["+experiment=staircase", *ARCH_OVERRIDES[arch], *overrides]).model


@pytest.mark.parametrize("arch", ARCHITECTURES, ids=lambda a: a.name)
def test_every_model_field_is_mapped_refused_or_training_only(arch):
    names = {f.name for f in dataclasses.fields(ModelConfig)}
    mapped, refused, training = set(arch.fields), set(arch.refused), set(TRAINING_ONLY)
    assert mapped | refused | training == names
    assert not (mapped & refused) and not (mapped & training) and not (refused & training)


def test_a_new_model_field_cannot_export_silently():
    Grown = dataclasses.make_dataclass("Grown", [("num_experts", int, 4)], bases=(ModelConfig,))
    for arch in ARCHITECTURES:
        cfg = Grown(**dataclasses.asdict(model_cfg(arch.name)))
        with pytest.raises(ConfigError) as e:
            architecture(cfg)
        assert e.value.messages == [f"model.num_experts: the {arch.name} table (spmdgpt/hf/tables.py) does not say "
                                  "how to represent it; map it to config.json there, or refuse it"]
    with pytest.raises(ConfigError) as e:
        architecture(model_cfg("LlamaForCausalLM", "model.qk_norm=true", "model.logit_softcap=30"))
    assert e.value.messages == ["model.qk_norm=True, model.logit_softcap=30.0: neither Llama nor GPT-NeoX computes "
                              "that, so the model cannot be exported to Hugging Face (train without it to export)"]


CHANGED = {"num_layers": 3, "num_heads": 2, "d_model": 32, "mlp_factor": 2.0, "vocab_size": 70, "max_seq_len": 128,
           "tie_embeddings": False, "rope_theta": 500.0, "bias": True, "init_std": 0.01, "norm_eps": 1e-3}


@pytest.mark.parametrize("arch", ARCHITECTURES, ids=lambda a: a.name)
def test_every_mapped_field_reaches_its_config_json_key(arch):
    cfg = model_cfg(arch.name)
    base = hf_config(cfg, eos_id=0)
    assert base["architectures"] == [arch.name] and base["model_type"] == arch.model_type
    for field, key in arch.fields.items():
        if field in ("norm", "mlp"):  # these choose the architecture itself
            continue
        changed = hf_config(dataclasses.replace(cfg, **{field: CHANGED[field]}), eos_id=0)
        assert changed[key] != base[key], field


class DictFiles:
    """A Hugging Face folder's weights held in memory (WeightFiles' interface)."""

    def __init__(self, tensors):
        self.tensors, self.weight_map, self.where = tensors, {n: "model.safetensors" for n in tensors}, "mem"

    def shape(self, name):
        return self.tensors[name].shape

    def get(self, name):
        return self.tensors[name].astype(np.float32)


@pytest.mark.parametrize("arch,overrides", [
    ("LlamaForCausalLM", []),
    ("LlamaForCausalLM", ["model.bias=true", "model.tie_embeddings=false"]),
    ("GPTNeoXForCausalLM", []),
    ("GPTNeoXForCausalLM", ["model.bias=true", "model.tie_embeddings=false"]),
])
def test_tensors_round_trip_exactly_through_the_table(arch, overrides):
    cfg = model_cfg(arch, "model.num_layers=2", *overrides)
    info = param_info(cfg)
    rng = np.random.default_rng(0)
    params = jax.tree.map(lambda i: rng.normal(size=i.shape).astype(np.float32), info, is_leaf=is_info)
    tensors = to_hf(cfg, params)
    assert {n: a.shape for n, a in tensors.items()} == expected_shapes(cfg)
    D, N, H = cfg.d_model, cfg.num_heads, cfg.d_model // cfg.num_heads
    w_qkv = params.blocks.attn.w_qkv[1]  # [D, 3, N, H]
    if arch == "LlamaForCausalLM":  # [out, in]; k_proj's rows are (head, head_dim)
        np.testing.assert_array_equal(tensors["model.layers.1.self_attn.k_proj.weight"], w_qkv[:, 1].reshape(D, N * H).T)
        n_zero = 2 if cfg.bias else 0  # the gate biases spmdgpt has none of
    else:  # rows interleaved per head: q, k, v of head 0, then head 1
        qkv = tensors["gpt_neox.layers.1.attention.query_key_value.weight"]
        np.testing.assert_array_equal(qkv[H:2 * H], w_qkv[:, 1, 0].T)  # head 0's keys
        np.testing.assert_array_equal(qkv[3 * H:4 * H], w_qkv[:, 0, 1].T)  # head 1's queries
        n_zero = 0 if cfg.bias else 2 * 4 + 1  # LayerNorm and MLP biases: per layer 4, and the final norm's
    assert sum(not a.any() for a in tensors.values()) == n_zero
    files = DictFiles(tensors)
    check_weights(cfg, files)
    values = layer_values(cfg, files)
    back = jax.tree.map(lambda i, f: np.stack([f(k) for k in range(i.shape[0])]) if i.logical[0] == "layers" else f(),
                        info, values, is_leaf=is_info)
    jax.tree.map(np.testing.assert_array_equal, back, params)
    if n_zero:  # a non-zero value where spmdgpt has no parameter cannot be imported
        files = DictFiles({n: (np.ones(a.shape) if not a.any() else a) for n, a in to_hf(cfg, params).items()})
        with pytest.raises(ConfigError, match="is not zero"):
            check_weights(cfg, files)
