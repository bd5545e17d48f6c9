"""The Hugging Face architecture tables (spmdgpt/hf/tables.py), without transformers: every
model field is mapped, refused or training-only for each architecture; a new field cannot export
silently; every mapped field reaches config.json; tensors round-trip exactly through the table."""

import dataclasses
from functools import partial

import jax
import numpy as np
import pytest

from spmdgpt.config import (
    ROPE_SCALING_FIELDS,
    ConfigError,
    ModelConfig,
    RopeScaling,
    expert_hidden,
    load_config,
    moe_layers,
)
from spmdgpt.hf import ARCHITECTURES, architecture, check_weights, expected_shapes, hf_config, layer_values, to_hf
from spmdgpt.hf import hf_config as export_config
from spmdgpt.hf.convert import field_names, field_value, with_field
from spmdgpt.hf.tables import TRAINING_ONLY
from spmdgpt.model import is_info, param_info

ARCH_OVERRIDES = {"LlamaForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu"],
                  "Qwen2ForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.qkv_bias=true"],
                  "Qwen3ForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.qk_norm=true"],
                  "MistralForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.sliding_window=16"],
                  "GPTNeoXForCausalLM": ["model.norm=layernorm", "model.mlp=gelu"],
                  "MixtralForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.moe.num_experts=4"],
                  "Qwen3MoeForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.moe.num_experts=4",
                                          "model.qk_norm=true"],
                  "DeepseekV3ForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.mla.kv_rank=32",
                                            "model.moe.num_experts=4", "model.moe.router=sigmoid"],
                  "DeepseekV32ForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.mla.kv_rank=32",
                                             "model.mla.q_rank=16", "model.mla.index_heads=4",
                                             "model.mla.index_dim=64", "model.moe.num_experts=4",
                                             "model.moe.router=sigmoid"],
                  "Gemma3ForCausalLM": ["model.norm=rmsnorm", "model.mlp=geglu", "model.norm_plus_one=true",
                                        "model.post_norms=true", "model.embed_scale=true", "model.qk_norm=true"],
                  "Qwen3_5ForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.norm_plus_one=true",
                                         "model.qk_norm=true", "model.attention_gate=true", "model.num_kv_heads=1",
                                         "model.num_layers=4", "model.deltanet.full_attention_interval=2",
                                         "model.deltanet.key_heads=2"],
                  **{name: ["model.norm=rmsnorm", "model.mlp=swiglu", "model.norm_plus_one=true", "model.qk_norm=true",
                            "model.attention_gate=true", "model.num_kv_heads=1", "model.num_layers=4",
                            "model.deltanet.full_attention_interval=2", "model.deltanet.key_heads=2",
                            "model.moe.num_experts=4", "model.moe.shared_experts=1", "model.moe.shared_gate=true"]
                     for name in ("Qwen3_5MoeForCausalLM", "Qwen3NextForCausalLM")},
                  **{name: ["model.norm=rmsnorm", "model.mlp=swiglu", "model.pre_norms=false", "model.post_norms=true",
                            "model.qk_norm=true", "model.qk_norm_scale=true", "model.qk_norm_whole=true", *windows]
                     for name, windows in (("Olmo2ForCausalLM", []), ("Olmo3ForCausalLM", ["model.sliding_window=32",
                                                                                          "model.window_pattern=LG"]))},
                  "NanoChatForCausalLM": ["model.norm=rmsnorm", "model.mlp=relu2", "model.norm_scale=false",
                                          "model.embed_norm=true", "model.qk_norm=true"],
                  "Llama4ForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.moe.num_experts=4",
                                        "model.moe.router=sigmoid", "model.moe.shared_experts=1",
                                        "model.moe.normalize_top_k=false", "model.moe.weight_input=true",
                                        "model.qk_norm=true", "model.attention_chunk=8", "model.window_pattern=LG",
                                        "model.global_nope=true", "model.attn_temperature=0.1"],
                  "Gemma4ForCausalLM": ["model.norm=rmsnorm", "model.mlp=geglu", "model.post_norms=true",
                                        "model.embed_scale=true", "model.qk_norm=true", "model.qk_norm_scale=true",
                                        "model.query_pre_attn_scalar=1", "model.v_norm=true", "model.layer_scale=true",
                                        "model.sliding_window=16", "model.window_pattern=LG",
                                        "model.global_head_dim=32", "model.global_kv_heads=1",
                                        "model.global_k_eq_v=true", "model.rope_global_fraction=0.25",
                                        "model.rope_local_theta=100", "model.logit_softcap=15"],
                  "KimiLinearForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.num_layers=4",
                                            "model.deltanet.full_attention_interval=2", "model.deltanet.gate=channel",
                                            "model.deltanet.key_heads=2", "model.mla.kv_rank=32",
                                            "model.global_nope=true", "model.moe.num_experts=4",
                                            "model.moe.router=sigmoid", "model.moe.shared_experts=1",
                                            "model.tie_embeddings=false"],
                  "GptOssForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu_clamped", "model.bias=true",
                                        "model.attention_sinks=true", "model.moe.num_experts=4",
                                        "model.num_kv_heads=1"],
                  "DeepseekV4ForCausalLM": ["model.norm=rmsnorm", "model.mlp=swiglu_clip", "model.num_kv_heads=1",
                                            "model.csa.q_rank=16", "model.csa.rope_dim=8", "model.csa.out_groups=2",
                                            "model.csa.out_rank=8", "model.csa.pattern=SCH", "model.csa.index_dim=16",
                                            "model.csa.index_heads=2", "model.sliding_window=16",
                                            "model.hyper_connections=2", "model.moe.num_experts=4",
                                            "model.moe.shared_experts=1", "model.moe.router=sqrtsoftplus"]}


def model_cfg(arch: str, *overrides) -> ModelConfig:
    return load_config(["+experiment=staircase", *ARCH_OVERRIDES[arch], *overrides]).model


@pytest.mark.parametrize("arch", ARCHITECTURES, ids=lambda a: a.name)
def test_every_model_field_is_mapped_refused_or_training_only(arch):
    names = set(field_names(ModelConfig))
    assert {"moe.top_k", "moe.dispatch", "num_layers"} <= names and "moe" not in names
    mapped, refused, training = set(arch.fields), set(arch.refused), set(TRAINING_ONLY)
    assert mapped | refused | training == names
    # (a training-only field may be recorded: init_std as initializer_range)
    assert not (mapped & refused) and not (refused & training) and mapped & training <= {"init_std"}


def test_a_new_model_field_cannot_export_silently():
    Grown = dataclasses.make_dataclass("Grown", [("num_experts", int, 4)], bases=(ModelConfig,))
    for arch in ARCHITECTURES:
        base = model_cfg(arch.name)
        cfg = Grown(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)})
        with pytest.raises(ConfigError) as e:
            architecture(cfg, arch.name)
        assert e.value.messages == [f"model.num_experts: the {arch.name} table (spmdgpt/hf/tables.py) does not say "
                                  "how to represent it; map it to config.json there, or refuse it"]
    for overrides, refused in (
            (["model.qk_norm=true", "model.logit_softcap=30"], "model.logit_softcap=30.0: Qwen3ForCausalLM"),
            (["model.qkv_bias=true", "model.qk_norm=true"], "model.qkv_bias=True: Qwen3ForCausalLM"),
            (["model.qkv_bias=true", "model.num_kv_heads=2", "model.qk_norm_scale=true"],
             "model.qk_norm_scale=True: Qwen2ForCausalLM"),
            (["model.moe.num_experts=4", "model.moe.shared_experts=1", "model.moe.router=sigmoid"],
             "model.moe.shared_experts=1, model.moe.router=sigmoid: MixtralForCausalLM"),
            (["model.moe.num_experts=4", "model.qk_norm=true", "model.sliding_window=8"],
             "model.sliding_window=8: Qwen3MoeForCausalLM")):
        with pytest.raises(ConfigError) as e:
            architecture(model_cfg("LlamaForCausalLM", *overrides))
        assert e.value.messages == [f"{refused} (the Hugging Face architecture of this model.norm and model.mlp) does "
                                    "not compute that, so the model cannot be exported (train without it to export)"]
    with pytest.raises(ConfigError) as e:  # (Kimi Delta Attention's gate: not Qwen3.5's Gated DeltaNet)
        architecture(model_cfg("Qwen3_5ForCausalLM", "model.deltanet.gate=channel"), "Qwen3_5ForCausalLM")
    assert e.value.messages[0].startswith("model.deltanet.gate=channel: Qwen3_5ForCausalLM")
    with pytest.raises(ConfigError) as e:
        architecture(model_cfg("GPTNeoXForCausalLM", "model.num_kv_heads=2", "model.head_dim=32"))
    assert e.value.messages[0].startswith("model.num_kv_heads=2, model.head_dim=32: GPTNeoXForCausalLM")
    with pytest.raises(ConfigError) as e:  # (experts: only under the Llama family's norm and MLP)
        architecture(model_cfg("GPTNeoXForCausalLM", "model.moe.num_experts=4", "model.moe.top_k=1"))
    assert e.value.messages[0].startswith("model.moe.num_experts=4, model.moe.top_k=1: GPTNeoXForCausalLM")
    # restating a default is not a refusal: 4 key/value heads of 4, head_dim = 64 / 4, Q/K/V biases under bias
    assert architecture(model_cfg("GPTNeoXForCausalLM", "model.num_kv_heads=4", "model.head_dim=16",
                                  "model.bias=true", "model.qkv_bias=true")).name == "GPTNeoXForCausalLM"


CHANGED = {"num_layers": 3, "num_heads": 2, "d_model": 32, "mlp_factor": 2.0, "vocab_size": 70, "max_seq_len": 128,
           "tie_embeddings": False, "rope_theta": 500.0, "bias": True, "init_std": 0.01, "norm_eps": 1e-3,
           "num_kv_heads": 2, "head_dim": 32, "rope_scaling": RopeScaling.yarn, "rope_factor": 8.0,
           "rope_original_max_len": 64, "rope_low_freq_factor": 2.0, "rope_high_freq_factor": 8.0,
           "rope_beta_fast": 16.0, "rope_beta_slow": 2.0, "rope_attention_factor": 1.5, "rope_truncate": False,
           "glu_limit": 3.0, "glu_alpha": 1.0, "logit_softcap": 30.0,
           "sliding_window": 8,
           "window_pattern": "GL", "moe.num_experts": 8, "moe.top_k": 1, "moe.mlp_factor": 0.5,
           "moe.normalize_top_k": False, "moe.first_dense_layers": 1, "moe.interleave_step": 2,
           "rope_mscale": 0.5, "rope_mscale_all_dim": 1.0, "mla.kv_rank": 16, "mla.q_rank": 24, "mla.rope_dim": 8,
           "mla.index_heads": 8, "mla.index_dim": 96, "mla.index_topk": 64, "mla.nope_dim": 8, "mla.v_dim": 8,
           "moe.shared_experts": 2, "moe.groups": 2, "moe.top_groups": 2,
           "moe.route_scale": 2.5, "query_pre_attn_scalar": 64, "rope_local_theta": 500.0, "rope_fraction": 0.5,
           "deltanet.full_attention_interval": 4, "deltanet.key_heads": 4, "deltanet.value_heads": 4,
           "deltanet.key_dim": 32, "deltanet.value_dim": 32, "deltanet.conv": 3, "qk_norm": False,
           "attention_chunk": 16, "global_nope": False, "attn_temperature": 0.5, "attn_temperature_floor": 16,
           "global_head_dim": 64, "global_kv_heads": 2, "global_k_eq_v": False, "rope_global_fraction": 0.5,
           "per_layer_dim": 16, "kv_shared_layers": 2, "kv_shared_wide_mlp": True, "hyper_connections": 4,
           "hyper_sinkhorn_iters": 5, "hyper_eps": 1e-4, "moe.hash_layers": 1, "csa.q_rank": 24, "csa.rope_dim": 4,
           "csa.out_groups": 1, "csa.out_rank": 12, "csa.pattern": "HSC", "csa.sparse_rate": 8, "csa.heavy_rate": 16,
           "csa.compress_theta": 5000.0, "csa.index_heads": 4, "csa.index_dim": 32, "csa.index_topk": 7}


@pytest.mark.parametrize("arch", ARCHITECTURES, ids=lambda a: a.name)
def test_every_mapped_field_reaches_its_config_json_key(arch):
    cfg = model_cfg(arch.name)
    hf_config = partial(export_config, name=arch.name)  # (Qwen3-Next: when asked for; Qwen3.5-MoE computes the same)
    base = hf_config(cfg, eos_id=0)
    assert base["architectures"] == [arch.name] and base["model_type"] == arch.model_type
    for field, key in arch.fields.items():
        if key in ("architectures", None):  # these choose the architecture itself, or the tensors carry them
            continue
        # (a scaling's parameters are compared under that scaling)
        scaling = next((RopeScaling(k) for k, names in ROPE_SCALING_FIELDS.items() if field in names), None)
        before = cfg if scaling is None else dataclasses.replace(cfg, rope_scaling=scaling)
        if field == "window_pattern" and not cfg.attention_chunk:  # (read with a window, or Llama 4's chunks)
            before = dataclasses.replace(cfg, sliding_window=16)
        value = CHANGED.get(field)  # (Gemma 4's moe.dense_mlp, router_scales: below)
        if arch.name == "Gemma4ForCausalLM":  # (its last layer global; own key/value heads with values from keys)
            value = {"window_pattern": "G", "num_layers": 6}.get(field, value)
            before = dataclasses.replace(before, global_kv_heads=None) if field == "global_k_eq_v" else before
            if field.startswith("moe."):  # (its experts come with the dense MLP beside them and the router's scales)
                experts = dataclasses.replace(before, moe=dataclasses.replace(
                    before.moe, num_experts=4, dense_mlp=True, router_scales=True))
                if field in ("moe.dense_mlp", "moe.router_scales"):  # (enable_moe_block: the three together)
                    assert hf_config(experts, eos_id=0)[key] != hf_config(before, eos_id=0)[key], field
                    continue
                before = experts
        changed = hf_config(with_field(before, field, value), eos_id=0)
        assert changed[key] != hf_config(before, eos_id=0)[key], field
        assert field_value(with_field(before, field, value), field) == value


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
    ("LlamaForCausalLM", ["model.num_kv_heads=2", "model.head_dim=8", "model.bias=true"]),
    ("Qwen2ForCausalLM", ["model.num_kv_heads=2"]),
    ("Qwen3ForCausalLM", ["model.num_kv_heads=1", "model.head_dim=32", "model.qk_norm_scale=true"]),
    ("Qwen3ForCausalLM", []),
    ("Qwen3ForCausalLM", ["model.sliding_window=8", "model.window_pattern=LG"]),
    ("MistralForCausalLM", ["model.num_kv_heads=2"]),
    ("GPTNeoXForCausalLM", []),
    ("GPTNeoXForCausalLM", ["model.bias=true", "model.tie_embeddings=false"]),
    ("MixtralForCausalLM", ["model.num_kv_heads=2", "model.moe.mlp_factor=0.5"]),
    ("Qwen3MoeForCausalLM", ["model.moe.top_k=3", "model.qk_norm_scale=true"]),
    ("Qwen3MoeForCausalLM", ["model.num_layers=6", "model.moe.first_dense_layers=2", "model.moe.interleave_step=2"]),
    ("Qwen3MoeForCausalLM", ["model.num_layers=7", "model.moe.first_dense_layers=1", "model.moe.interleave_step=3"]),
])
def test_tensors_round_trip_exactly_through_the_table(arch, overrides):
    cfg = model_cfg(arch, "model.num_layers=2", *overrides)
    assert architecture(cfg).name == arch
    info = param_info(cfg)
    rng = np.random.default_rng(0)
    params = jax.tree.map(lambda i: rng.normal(size=i.shape).astype(np.float32), info, is_leaf=is_info)
    tensors = to_hf(cfg, params)
    assert {n: a.shape for n, a in tensors.items()} == expected_shapes(cfg)
    D, N, H, K = cfg.d_model, cfg.num_heads, cfg.head_dim or cfg.d_model // cfg.num_heads, cfg.num_kv_heads or 4
    attn = params.blocks.attn
    constant = {"not zero": 0.0, "not all 1.0": 1.0}  # the tensors an export fills with a constant, by value
    if arch == "GPTNeoXForCausalLM":  # rows interleaved per head: q, k, v of head 0, then head 1
        qkv = tensors["gpt_neox.layers.1.attention.query_key_value.weight"]
        np.testing.assert_array_equal(qkv[H:2 * H], attn.w_qkv[1][:, 1, 0].T)  # head 0's keys
        np.testing.assert_array_equal(qkv[3 * H:4 * H], attn.w_qkv[1][:, 0, 1].T)  # head 1's queries
        filled = {"not zero": 0 if cfg.bias else 2 * 4 + 1}  # LayerNorm and MLP biases: 4 per layer, the final norm's
    else:  # [out, in]; k_proj's rows are (key/value head, head_dim)
        k = attn.w_qkv[-1][:, 1] if K == N else attn.w_kv[-1][:, 0]  # [D, K, H] (the last layer: in blocks)
        last = cfg.num_layers - 1
        np.testing.assert_array_equal(tensors[f"model.layers.{last}.self_attn.k_proj.weight"], k.reshape(D, K * H).T)
        assert tensors["model.layers.1.self_attn.q_proj.weight"].shape == (N * H, D)
        filled = {"not zero": 2 if cfg.bias else 0}  # the gate biases spmdgpt has none of
        if arch.startswith("Qwen3") and not cfg.qk_norm_scale:
            filled["not all 1.0"] = 2 * cfg.num_layers  # q_norm and k_norm of each layer
        assert ("model.layers.0.self_attn.q_proj.bias" in tensors) == (cfg.bias or cfg.qkv_bias)
        assert ("model.layers.0.self_attn.o_proj.bias" in tensors) == cfg.bias
    if cfg.moe.num_experts:  # the router [E, D]; each expert's gate and down projections [out, in]
        moe, F = params.blocks.mlp, round((cfg.moe.mlp_factor or cfg.mlp_factor) * D)
        unit, gate, down = ("block_sparse_moe", "w1", "w2") if arch == "MixtralForCausalLM" else ("mlp", "gate_proj",
                                                                                                    "down_proj")
        a, b = [i for i, m in enumerate(moe_layers(cfg)) if m][-2:]  # (the last two MoE layers)
        np.testing.assert_array_equal(tensors[f"model.layers.{b}.{unit}.gate.weight"], moe.router[-1].T)
        np.testing.assert_array_equal(tensors[f"model.layers.{b}.{unit}.experts.3.{gate}.weight"], moe.w_gate[-1, 3].T)
        np.testing.assert_array_equal(tensors[f"model.layers.{a}.{unit}.experts.2.{down}.weight"], moe.w_down[-2, 2].T)
        assert tensors[f"model.layers.{a}.{unit}.experts.2.{down}.weight"].shape == (D, F)
        assert len([n for n in tensors if ".experts." in n]) == sum(moe_layers(cfg)) * 4 * 3
        dense = [i for i, m in enumerate(moe_layers(cfg)) if not m]  # Qwen3-MoE's dense layers: intermediate_size
        assert len([n for n in tensors if n.endswith("mlp.up_proj.weight")]) == len(dense)
        if dense:
            np.testing.assert_array_equal(tensors[f"model.layers.{dense[-1]}.mlp.up_proj.weight"],
                                          params.dense_blocks.mlp.w_up[-1].T)
            assert tensors[f"model.layers.{dense[-1]}.mlp.up_proj.weight"].shape == (4 * D, D)
            assert f"model.layers.{dense[-1]}.mlp.gate.weight" not in tensors
    for words, n in filled.items():
        assert sum(bool(np.all(a == constant[words])) for a in tensors.values()) == n
    files = DictFiles(tensors)
    check_weights(cfg, files)
    values = layer_values(cfg, files)
    back = jax.tree.map(lambda i, f: np.stack([f(k) for k in range(i.shape[0])]) if i.logical[0] == "layers" else f(),
                        info, values, is_leaf=is_info)
    jax.tree.map(np.testing.assert_array_equal, back, params)
    for words, n in filled.items():  # another value where spmdgpt has no parameter cannot be imported
        if n:
            files = DictFiles({n: (a + 0.5 if np.all(a == constant[words]) else a) for n, a in tensors.items()})
            with pytest.raises(ConfigError, match=f"is {words}"):
                check_weights(cfg, files)


def test_a_parameter_without_a_row_cannot_export_silently():
    from spmdgpt.hf.export import to_tensors
    from spmdgpt.hf.tables import LLAMA
    from spmdgpt.web import TABLE, web_tensors

    cfg = model_cfg("LlamaForCausalLM", "model.num_layers=2", "model.bias=true", "model.tie_embeddings=false")
    params = jax.tree.map(lambda i: np.full(i.shape, 0.5, np.float32), param_info(cfg), is_leaf=is_info)
    fewer = dataclasses.replace(LLAMA, tensors=tuple(t for t in LLAMA.tensors if t.leaf != "blocks.mlp.w_gate"))
    with pytest.raises(ConfigError) as e:
        to_tensors(cfg, params, fewer)
    assert e.value.messages == ["parameter(s) blocks.mlp.w_gate: the LlamaForCausalLM table (spmdgpt/hf/tables.py) "
                                "has no row for them; add one there, or refuse the field that creates them"]
    # the web page's table: every leaf, whole (layer axis and all), under its name without the unit
    web = web_tensors(cfg, params, "float16")
    assert {n: (a.shape, a.dtype.name) for n, a in web.items() if n.startswith("blocks.")} == {
        "blocks.ln1.scale": ((2, 64), "float16"), "blocks.ln2.scale": ((2, 64), "float16"),
        "blocks.w_qkv": ((2, 64, 3, 4, 16), "float16"), "blocks.b_qkv": ((2, 3, 4, 16), "float16"),
        "blocks.w_o": ((2, 4, 16, 64), "float16"), "blocks.b_o": ((2, 64), "float16"),
        "blocks.w_up": ((2, 64, 256), "float16"), "blocks.b_up": ((2, 256), "float16"),
        "blocks.w_gate": ((2, 64, 256), "float16"), "blocks.w_down": ((2, 256, 64), "float16"),
        "blocks.b_down": ((2, 64), "float16")}
    assert sorted(set(web) - {n for n in web if n.startswith("blocks.")}) == ["embed", "ln_f.scale", "unembed"]
    assert len(TABLE.tensors) == 17


@pytest.mark.parametrize("layers,first,step", [(6, 2, 2), (4, 1, 3), (4, 0, 2), (5, 1, 2), (3, 0, 1), (3, 2, 1)])
def test_qwen3_moe_dense_layers_survive_config_json(layers, first, step):
    """An MoE with dense layers exports as Qwen3-MoE's decoder_sparse_step / mlp_only_layers
    (whose layer i is MoE when i is not in mlp_only_layers and (i + 1) % step == 0) and imports
    back to the same layers, whichever spelling the pair takes."""
    from spmdgpt.config import model_config_from_dict
    from spmdgpt.hf import model_fields

    cfg = model_cfg("Qwen3MoeForCausalLM", f"model.num_layers={layers}", f"model.moe.first_dense_layers={first}",
                    f"model.moe.interleave_step={step}", "model.qk_norm_scale=true")
    hf = hf_config(cfg, eos_id=0)
    kinds = [i not in hf["mlp_only_layers"] and (i + 1) % hf["decoder_sparse_step"] == 0 for i in range(layers)]
    assert tuple(kinds) == moe_layers(cfg)
    back = model_config_from_dict(model_fields(hf, "test"), base=cfg)
    assert moe_layers(back) == moe_layers(cfg) and param_info(back) == param_info(cfg)


def test_an_import_turns_off_what_its_checkpoint_does_not_have():
    """config.json -> model fields over a run's config that has Gated DeltaNet layers, the output gate
    and partial RoPE (qwen3_5_small's and more): a Qwen3 checkpoint has none of them, so the imported
    model has none (never the run's own values)."""
    from spmdgpt.config import model_config_from_dict
    from spmdgpt.hf.fields import model_fields

    run = load_config(["+experiment=qwen3_5_small", "model.attention_gate=true", "model.rope_fraction=0.5"]).model
    hf = hf_config(model_cfg("Qwen3ForCausalLM"), eos_id=0)
    got = model_config_from_dict(model_fields(hf, "mem"), base=run)
    assert got.deltanet.full_attention_interval == 0 and not got.attention_gate and got.rope_fraction == 1.0
    assert got.qk_norm and got.num_layers == 2


def test_a_hybrid_exports_as_qwen3_5_only_with_its_softmax_layers():
    """A Gated DeltaNet hybrid is Qwen3_5ForCausalLM's to export; without Qwen3.5's softmax layers the
    refusal says which values it needs (not "train without it"), and multi-head attention is refused
    by the table's `requires`."""
    hybrid = ["model.norm=rmsnorm", "model.mlp=swiglu", "model.qk_norm=true", "model.num_layers=4",
              "model.deltanet.full_attention_interval=2"]
    with pytest.raises(ConfigError) as e:
        architecture(load_config(["+experiment=staircase", *hybrid, "model.num_kv_heads=2"]).model)
    assert e.value.messages == ["model.norm_plus_one=False, model.attention_gate=False: Qwen3_5ForCausalLM (the "
                                "Hugging Face architecture of this model.norm and model.mlp) does not compute that, so "
                                "the model cannot be exported (train with model.norm_plus_one=True, "
                                "model.attention_gate=True to export)"]
    with pytest.raises(ConfigError) as e:
        architecture(load_config(["+experiment=staircase", *hybrid, "model.norm_plus_one=true",
                                  "model.attention_gate=true"]).model)
    assert e.value.messages == ["model.num_kv_heads=None: Qwen3_5ForCausalLM needs fewer key/value heads than heads "
                                "(model.num_kv_heads: the table holds the gated queries beside grouped keys)"]
    assert architecture(load_config(["+experiment=qwen3_5_small"]).model).name == "Qwen3_5ForCausalLM"
    # OLMo's block (norms on the branches' outputs only, the whole projection's QK-norm): OLMo 3 with windows, else 2
    olmo = load_config(["+experiment=olmo3_small"]).model
    assert architecture(olmo).name == "Olmo3ForCausalLM"
    assert architecture(dataclasses.replace(olmo, sliding_window=0, rope_local_theta=None)).name == "Olmo2ForCausalLM"


@pytest.mark.parametrize("overrides", [["model.num_kv_heads=2"], ["model.num_layers=4", "model.moe.interleave_step=2"]])
def test_llama4_rows_hold_interleaved_pairs_and_fused_experts(overrides):
    """Llama4ForCausalLM's tensors from spmdgpt's: each head's query and key rows as interleaved RoPE
    pairs (row 2i: spmdgpt's i, row 2i + 1: its h/2 + i; values as they are), whether the heads are
    grouped (w_q, w_kv) or not (w_qkv); the experts' gate then up projections in one [E, D, 2F]
    gate_up_proj, down_proj [E, F, D]; the dense layers' feed_forward.*_proj; and back, exactly."""
    cfg = model_cfg("Llama4ForCausalLM", *overrides)
    assert architecture(cfg).name == "Llama4ForCausalLM"
    info = param_info(cfg)
    rng = np.random.default_rng(0)
    params = jax.tree.map(lambda i: rng.normal(size=i.shape).astype(np.float32), info, is_leaf=is_info)
    tensors = to_hf(cfg, params)
    assert {n: a.shape for n, a in tensors.items()} == expected_shapes(cfg)
    H, F, attn, moe, last = 16, expert_hidden(cfg), params.blocks.attn, params.blocks.mlp, cfg.num_layers - 1
    w_k = attn.w_kv[-1][:, 0] if cfg.num_kv_heads else attn.w_qkv[-1][:, 1]  # [D, K, H]
    w_v = attn.w_kv[-1][:, 1] if cfg.num_kv_heads else attn.w_qkv[-1][:, 2]
    np.testing.assert_array_equal(tensors[f"model.layers.{last}.self_attn.k_proj.weight"][H + 2], w_k[:, 1, 1])
    np.testing.assert_array_equal(tensors[f"model.layers.{last}.self_attn.k_proj.weight"][H + 3], w_k[:, 1, H // 2 + 1])
    np.testing.assert_array_equal(tensors[f"model.layers.{last}.self_attn.v_proj.weight"][H + 3], w_v[:, 1, 3])
    gate_up = tensors[f"model.layers.{last}.feed_forward.experts.gate_up_proj"]
    assert gate_up.shape == (4, 64, 2 * F)
    np.testing.assert_array_equal(gate_up[..., :F], moe.w_gate[-1])
    np.testing.assert_array_equal(gate_up[..., F:], moe.w_up[-1])
    np.testing.assert_array_equal(tensors[f"model.layers.{last}.feed_forward.experts.down_proj"], moe.w_down[-1])
    np.testing.assert_array_equal(tensors[f"model.layers.{last}.feed_forward.shared_expert.up_proj.weight"],
                                  moe.shared.w_up[-1].T)
    dense = [i for i, m in enumerate(moe_layers(cfg)) if not m]
    assert [n for n in tensors if n.endswith("feed_forward.up_proj.weight")] == [
        f"model.layers.{i}.feed_forward.up_proj.weight" for i in dense]
    values = layer_values(cfg, DictFiles(tensors))
    back = jax.tree.map(lambda i, f: np.stack([f(k) for k in range(i.shape[0])]) if i.logical[0] == "layers" else f(),
                        info, values, is_leaf=is_info)
    jax.tree.map(np.testing.assert_array_equal, back, params)


def test_llama4_config_json_reads_its_layers_or_refuses_them_in_one_line():
    """A Llama 4 config.json exported from spmdgpt reads back to the same model; one whose RoPE
    layers are not its chunked ones (nor every layer), whose chunked layers have no chunk size, or
    without an MoE layer, is one line naming the field; every RoPE layer and no chunk is a model
    without NoPE layers."""
    from spmdgpt.config import model_config_from_dict
    from spmdgpt.hf import model_fields

    cfg = model_cfg("Llama4ForCausalLM", "model.num_layers=4", "model.moe.first_dense_layers=2")
    hf = hf_config(cfg, eos_id=0)
    assert (hf["layer_types"], hf["no_rope_layers"], hf["moe_layers"]) == (
        ["chunked_attention", "full_attention"] * 2, [1, 0, 1, 0], [2, 3])
    back = model_config_from_dict(model_fields(hf, "mem"), base=cfg)
    assert architecture(back).name == "Llama4ForCausalLM" and hf_config(back, eos_id=0) == hf
    for change, message in (
            ({"no_rope_layers": [1, 1, 0, 0]}, "no_rope_layers=[1, 1, 0, 0]; spmdgpt needs 4 flags, RoPE (1) in "
             "exactly the chunked_attention layers or in every layer (spmdgpt's NoPE layers are its global ones, "
             "model.global_nope)"),
            ({"attention_chunk_size": None}, "attention_chunk_size=None; spmdgpt needs a chunk size for the "
             "chunked_attention layers"),
            ({"moe_layers": []}, "moe_layers=[]; spmdgpt needs at least one MoE layer (spmdgpt's Llama 4 has "
             "experts)")):
        with pytest.raises(ConfigError) as e:
            model_fields({**hf, **change}, "mem")
        assert e.value.messages[0] == f"mem: config.json has {message}"
    rope = model_fields({**hf, "no_rope_layers": [1] * 4, "layer_types": ["full_attention"] * 4,
                         "attention_chunk_size": None}, "mem")
    assert (rope["global_nope"], rope["attention_chunk"], rope["attn_temperature"]) == (False, 0, 0.0)


def test_kimi_linear_config_json_reads_its_layers_or_refuses_them_in_one_line():
    """A Kimi Linear config.json exported from spmdgpt reads back to the same model, and so does the
    checkpoint's own form (linear_attn_config: 1-based full_attn_layers and kda_layers, num_heads,
    head_dim, short_conv_kernel_size; first_k_dense_replace); the published 48B-A3B's layers (27: six
    groups of 3 KDA + 1 MLA, then 2 + 1; its first layer's MLP dense, model.moe.first_dense_layers=1)
    read as such, and a small model of that kind exports and reads back, its tensors exactly (the dense
    layer's MLP read under Moonshot's names too, `mlp.*`; written as transformers saves it,
    `block_sparse_moe.*`); dense layers past the first group, layers not in groups of k - 1 linear and
    one full, or another router's activation, are one line naming the field; value heads or widths of
    their own are refused by export naming them."""
    from spmdgpt.config import model_config_from_dict
    from spmdgpt.hf import model_fields

    cfg = model_cfg("KimiLinearForCausalLM")
    hf = hf_config(cfg, eos_id=0)
    assert (hf["layer_types"], hf["mlp_layer_types"], hf["pad_token_id"]) == (
        ["linear_attention", "full_attention"] * 2, ["sparse"] * 4, 0)
    back = model_config_from_dict(model_fields(hf, "mem"), base=cfg)
    assert architecture(back).name == "KimiLinearForCausalLM" and hf_config(back, eos_id=0) == hf
    own = {k: v for k, v in hf.items() if k not in ("layer_types", "mlp_layer_types", "linear_num_heads",
                                                    "linear_head_dim", "linear_conv_kernel_dim")}
    own.update(first_k_dense_replace=0, linear_attn_config={
        "full_attn_layers": [2, 4], "kda_layers": [1, 3], "num_heads": 2, "head_dim": 64, "short_conv_kernel_size": 4})
    assert hf_config(model_config_from_dict(model_fields(own, "mem"), base=cfg), eos_id=0) == hf
    published = model_fields({**own, "num_hidden_layers": 27, "first_k_dense_replace": 1, "linear_attn_config": {
        **own["linear_attn_config"], "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
        "kda_layers": [i for i in range(1, 27) if i % 4]}}, "mem")
    assert (published["num_layers"], published["deltanet"]["full_attention_interval"],
            published["moe"]["first_dense_layers"]) == (27, 4, 1)
    first = model_cfg("KimiLinearForCausalLM", "model.num_layers=7", "model.deltanet.full_attention_interval=4",
                      "model.moe.first_dense_layers=1")
    hf = hf_config(first, eos_id=0)
    assert (hf["layer_types"], hf["mlp_layer_types"]) == (
        ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 2 + ["full_attention"],
        ["dense"] + ["sparse"] * 6)
    assert hf_config(model_config_from_dict(model_fields(hf, "mem"), base=cfg), eos_id=0) == hf
    rng = np.random.default_rng(0)
    params = jax.tree.map(lambda i: rng.normal(size=i.shape).astype(np.float32), param_info(first), is_leaf=is_info)
    assert jax.tree.leaves(params.dense_blocks.attn)[0].shape[0] == 1  # (its first layer: KDA beside the dense MLP)
    tensors = to_hf(first, params)
    np.testing.assert_array_equal(tensors["model.layers.0.block_sparse_moe.up_proj.weight"],
                                  params.dense_blocks.mlp.w_up[0].T)
    np.testing.assert_array_equal(tensors["model.layers.4.self_attn.b_proj.weight"], params.linear_blocks.attn.w_b[2].T)
    moonshot = {n.replace("0.block_sparse_moe.", "0.mlp.") if n.startswith("model.layers.0.") else n: a
                for n, a in tensors.items()}
    for files in (DictFiles(tensors), DictFiles(moonshot)):
        check_weights(first, files)
        back = jax.tree.map(lambda i, f: np.stack([f(k) for k in range(i.shape[0])]) if i.logical[0] == "layers"
                            else f(), param_info(first), layer_values(first, files), is_leaf=is_info)
        jax.tree.map(np.testing.assert_array_equal, back, params)
    for change, message in (
            ({"first_k_dense_replace": 2}, "first_k_dense_replace=2; spmdgpt needs the 4 layers' MLPs all dense, or "
             "the first N dense and the others sparse with N from 0 to 1 (Kimi Delta Attention layers of the first "
             "group of 2: model.moe.first_dense_layers)"),
            ({"linear_attn_config": {**own["linear_attn_config"], "full_attn_layers": [1, 4], "kda_layers": [2, 3]}},
             "layer_types=None; spmdgpt needs 4 layers in groups of k - 1 linear_attention and one full_attention, "
             "the last group of layers mod k alike (k >= 2; model.deltanet.full_attention_interval)"),
            ({"moe_router_activation_func": "softmax"}, "moe_router_activation_func='softmax'; spmdgpt needs sigmoid "
             "(Kimi Linear's router)")):
        with pytest.raises(ConfigError) as e:
            model_fields({**own, **change}, "mem")
        assert e.value.messages[0] == f"mem: config.json has {message}"
    with pytest.raises(ConfigError) as e:
        architecture(model_cfg("KimiLinearForCausalLM", "model.deltanet.value_dim=32"))
    assert e.value.messages == ["model.deltanet.value_heads=2, value_dim=32: KimiLinearForCausalLM's linear layers "
                                "have as many value heads as key heads (2) and values as wide as keys (64); leave "
                                "them null"]


def test_a_width_that_the_weights_contradict_is_one_line_naming_the_config_json_field():
    """A config.json whose hidden_size_per_layer_input (model.per_layer_dim) or expert count is not the
    weights' is one line naming that key, the value the weights have and a tensor that shows it (it
    was six lines of shapes); a model's other shape errors are listed as before. A Gemma 4 with as many
    key/value heads as heads imports its own export (its global layer's v_proj was expected, never written)."""
    cfg = model_cfg("Gemma4ForCausalLM", "model.per_layer_dim=16", "model.num_kv_heads=2")
    rng = np.random.default_rng(0)
    weights = lambda c: DictFiles(to_hf(c, jax.tree.map(lambda i: rng.normal(size=i.shape).astype(np.float32),  # noqa
                                                         param_info(c), is_leaf=is_info)))
    files, plain = weights(cfg), weights(dataclasses.replace(cfg, per_layer_dim=0))
    mha = model_cfg("Gemma4ForCausalLM")  # (as many key/value heads as heads: w_qkv in the local layers alone)
    params = jax.tree.map(lambda i: rng.normal(size=i.shape).astype(np.float32), param_info(mha), is_leaf=is_info)
    tensors = to_hf(mha, params)
    assert {n: a.shape for n, a in tensors.items()} == expected_shapes(mha)  # (it wanted a global v_proj)
    check_weights(mha, DictFiles(tensors))
    back = jax.tree.map(lambda i, f: np.stack([f(k) for k in range(i.shape[0])]) if i.logical[0] == "layers" else f(),
                        param_info(mha), layer_values(mha, DictFiles(tensors)), is_leaf=is_info)
    jax.tree.map(np.testing.assert_array_equal, back, params)
    for model, folder, now, value, seen in (
            (dataclasses.replace(cfg, per_layer_dim=8), files, 8, 16, "model.layers.0.per_layer_input_gate.weight has "
             "shape [16, 64], the model config gives [8, 64]"),
            (cfg, plain, 16, 0, "model.layers.0.per_layer_input_gate.weight is missing")):
        with pytest.raises(ConfigError) as e:
            check_weights(model, folder)
        assert e.value.messages == [f"mem: config.json has hidden_size_per_layer_input={now} (model.per_layer_dim), "
                                    f"but the weights are those of {value} (tensor {seen}); set "
                                    f"hidden_size_per_layer_input to {value} in config.json"]
    mixtral = model_cfg("MixtralForCausalLM", "model.num_layers=1")
    with pytest.raises(ConfigError) as e:
        check_weights(dataclasses.replace(mixtral, moe=dataclasses.replace(mixtral.moe, num_experts=2)),
                      weights(mixtral))
    assert e.value.messages == ["mem: config.json has num_local_experts=2 (model.moe.num_experts), but the weights are "
                                "those of 4 (tensor model.layers.0.block_sparse_moe.gate.weight has shape [4, 64], the "
                                "model config gives [2, 64]); set num_local_experts to 4 in config.json"]
    with pytest.raises(ConfigError) as e:  # (not one field's: the shapes as they are)
        check_weights(dataclasses.replace(cfg, d_model=32), files)
    assert e.value.messages[0] == ("mem: tensor model.layers.0.input_layernorm.weight has shape [64], the model config "
                                   "gives [32]") and e.value.messages[5] == "... and 27 more"


def test_gemma4_config_json_reads_its_layers_or_refuses_them_in_one_line():
    """A Gemma 4 config.json exported from spmdgpt (Google's form: global_head_dim,
    num_global_key_value_heads) reads back to the same model, and so does transformers 5.24's form
    (per_layer_config), and one with experts (enable_moe_block, 26B-A4B's: model.moe.dense_mlp and
    router_scales), per-layer inputs (hidden_size_per_layer_input, E2B's and E4B's: model.per_layer_dim) or
    layers without keys and values of their own (num_kv_shared_layers, use_double_wide_mlp: model.kv_shared_layers,
    kv_shared_wide_mlp); bidirectional attention, experts without their count and a per-layer table of
    another vocabulary are one line naming the field; its global layers' values from keys,
    their key/value heads of their own and the last layer global are what export needs."""
    from spmdgpt.config import model_config_from_dict
    from spmdgpt.hf import model_fields

    cfg = model_cfg("Gemma4ForCausalLM")
    hf = hf_config(cfg, eos_id=0)
    assert (hf["architectures"], hf["layer_types"], hf["global_head_dim"], hf["num_global_key_value_heads"],
            hf["attention_k_eq_v"], hf["rope_parameters"]["full_attention"]) == (
        ["Gemma4ForCausalLM"], ["sliding_attention", "full_attention"], 32, 1, True,
        {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 10000.0})
    back = model_config_from_dict(model_fields(hf, "mem"), base=cfg)
    assert architecture(back).name == "Gemma4ForCausalLM" and hf_config(back, eos_id=0) == hf
    newer = {k: v for k, v in hf.items() if k not in ("global_head_dim", "num_global_key_value_heads")}
    newer["per_layer_config"] = {"1": {"head_dim": 32, "num_key_value_heads": 1}}
    assert model_config_from_dict(model_fields(newer, "mem"), base=cfg) == back
    experts = dataclasses.replace(cfg, moe=dataclasses.replace(cfg.moe, num_experts=4, top_k=2, mlp_factor=0.25,
                                                               dense_mlp=True, router_scales=True))
    hf_moe = hf_config(experts, eos_id=0)  # (26B-A4B's layers: experts beside the dense MLP)
    assert (hf_moe["enable_moe_block"], hf_moe["num_experts"], hf_moe["top_k_experts"],
            hf_moe["moe_intermediate_size"]) == (True, 4, 2, 16)
    assert model_config_from_dict(model_fields(hf_moe, "mem"), base=cfg) == experts
    ple = dataclasses.replace(cfg, per_layer_dim=16)  # (E2B's and E4B's per-layer inputs)
    hf_ple = hf_config(ple, eos_id=0)
    assert (hf_ple["hidden_size_per_layer_input"], hf_ple["vocab_size_per_layer_input"]) == (16, cfg.vocab_size)
    assert model_config_from_dict(model_fields(hf_ple, "mem"), base=cfg) == ple
    shared = dataclasses.replace(ple, num_layers=4, kv_shared_layers=2, kv_shared_wide_mlp=True)  # (E2B's last layers)
    hf_shared = hf_config(shared, eos_id=0)
    assert (hf_shared["num_kv_shared_layers"], hf_shared["use_double_wide_mlp"]) == (2, True)
    assert model_config_from_dict(model_fields(hf_shared, "mem"), base=cfg) == shared
    # transformers' semantics: experts only with enable_moe_block, double-wide MLPs only in the layers that share
    for change in ({"enable_moe_block": False, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 16},
                   {"use_double_wide_mlp": True, "num_kv_shared_layers": 0}):
        assert model_config_from_dict(model_fields({**hf_ple, **change}, "mem"), base=cfg) == ple
    for change, message in (
            ({"hidden_size_per_layer_input": 256, "vocab_size_per_layer_input": 1024}, "vocab_size_per_layer_input="
             "1024; spmdgpt needs vocab_size (16: the per-layer inputs' table as many rows as the embedding's)"),
            ({"enable_moe_block": True, "num_experts": 4, "moe_intermediate_size": 16}, "enable_moe_block=True; "
             "spmdgpt needs num_experts, top_k_experts, moe_intermediate_size whole numbers >= 1 beside it (the "
             "experts it adds; now top_k_experts=None), or false"),
            ({"enable_moe_block": "false"}, "enable_moe_block='false'; spmdgpt needs true or false"),
            ({"num_kv_shared_layers": "two"}, "num_kv_shared_layers='two'; spmdgpt needs a whole number >= 0 (the "
             "last layers that read an earlier layer's keys and values; 0: none)"),
            ({"hidden_size_per_layer_input": float("nan")}, "hidden_size_per_layer_input=nan; spmdgpt needs a whole "
             "number >= 0 (0: no per-layer inputs; E2B, E4B: 256)"),
            ({"sliding_window": "big"}, "sliding_window='big' (model.sliding_window): Value 'big' of type 'str' could "
             "not be converted to Integer; check that field against the class's config in transformers"),
            ({"use_bidirectional_attention": "all"}, "use_bidirectional_attention='all'; spmdgpt needs null (causal "
             "attention)"),
            ({"per_layer_config": {"0": {"head_dim": 32}}}, "per_layer_config={'0': {'head_dim': 32}}; spmdgpt needs "
             "the same head_dim / num_key_value_heads in every full_attention layer and nothing else (the G layers' "
             "own geometry)")):
        with pytest.raises(ConfigError) as e:
            model_fields({**hf, **change}, "mem")
        assert e.value.messages == [f"mem: config.json has {message}"]
    for change, message in (
            ({"window_pattern": "GL"}, "model.window_pattern=GL: Gemma4ForCausalLM's last layer is global "
             "(full_attention; transformers makes it so), this model's is local; end the pattern with G"),
            ({"global_k_eq_v": False}, "model.global_kv_heads=1: Gemma4ForCausalLM gives the G layers key/value heads "
             "of their own only with values from keys; set model.global_k_eq_v=true or leave global_kv_heads unset"),
            ({"moe": dataclasses.replace(cfg.moe, num_experts=4)}, "model.moe.num_experts=4, dense_mlp=False, "
             "router_scales=False: Gemma4ForCausalLM's experts (enable_moe_block) come beside the dense MLP with its "
             "router's scales; set all three (experts > 0, true, true) or none")):
        with pytest.raises(ConfigError) as e:
            architecture(dataclasses.replace(cfg, **change))
        assert e.value.messages == [message]


def test_a_hugging_face_folders_errors_name_the_field_the_command_was_given(tmp_path, capsys):
    """`sample run.dir=hf:DIR` with a config.json spmdgpt cannot import: one line, exit 2, naming
    run.dir (the field given), not the checkpoint.init_from that the command builds from it."""
    import json

    from spmdgpt.cli import main

    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}))
    assert main(["sample", f"run.dir=hf:{tmp_path}", "prompt=a"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spmdgpt: error: run.dir=hf:{tmp_path}: architecture 'GPT2LMHeadModel' is not supported")
    assert err.count("\n") == 1 and "checkpoint.init_from" not in err
    # a size missing from config.json is said to be missing (it read "has hidden_size=None")
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_attention_heads": 4,
                                                      "num_hidden_layers": 2, "vocab_size": 64}))
    assert main(["sample", f"run.dir=hf:{tmp_path}", "prompt=a"]) == 2
    assert capsys.readouterr().err == (f"spmdgpt: error: run.dir=hf:{tmp_path}: config.json has no hidden_size; "
                                       "spmdgpt needs a whole number >= 1\n")
    # a number as a string: one line naming the key (OmegaConf converted it without a word)
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
                                                      "num_attention_heads": 4, "num_hidden_layers": 2,
                                                      "vocab_size": 64, "intermediate_size": 128,
                                                      "rms_norm_eps": "1e-6"}))
    assert main(["sample", f"run.dir=hf:{tmp_path}", "prompt=a"]) == 2
    assert capsys.readouterr().err == (f"spmdgpt: error: run.dir=hf:{tmp_path}: config.json has rms_norm_eps='1e-6' "
                                       "(model.norm_eps): a string where a number belongs; write the number without "
                                       "quotes\n")
