"""Hugging Face interop: exported folders load in `transformers` and compute the same logits,
greedy generation and token ids; bad input is refused without writing anything. transformers
runs in the PyTorch side environment (the `torch_side` fixture, tests/torch_side.py)."""

import dataclasses
import errno
import json
from pathlib import Path

import jax
import numpy as np
import pytest

from spmdgpt import train
from spmdgpt.cli import main
from spmdgpt.config import RopeScaling, load_config
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import forward, init_params

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


ARCHS = {"neox": [],  # the default model: LayerNorm + GELU, tied
         "llama": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.tie_embeddings=false"],
         # QK-norm without learned scales (the main job's): Qwen3 with scales of one
         "qwen3": ["model.norm=rmsnorm", "model.mlp=swiglu", "model.qk_norm=true", "model.num_kv_heads=2"]}


@pytest.fixture(scope="module")
def trained_runs(tmp_path_factory):
    """Staircase models trained 40 steps (on the 8 simulated devices) and exported by the CLI,
    made on first use: {arch: (cfg, run_dir, out)}."""
    runs = {}

    def get(arch):
        if arch not in runs:
            run_dir = tmp_path_factory.mktemp("hf") / "stair"
            cfg = load_config(["+experiment=staircase", "train.progress=false", f"run.dir={run_dir}",
                               "train.steps=40", "train.eval_batches=1", *ARCHS[arch]])
            train(cfg, argv=["pytest"])
            cfg.mesh.data = cfg.mesh.model = 1  # compared on one device
            out = run_dir.parent / "exported"
            assert main(["export", f"run.dir={run_dir}", f"out={out}"]) == 0
            runs[arch] = cfg, run_dir, out
        return runs[arch]

    return get


@pytest.fixture
def staircase_run(trained_runs):
    return trained_runs("neox")


@pytest.mark.parametrize("arch", ["neox", "llama", "qwen3"])
def test_exported_run_loads_in_transformers_with_the_same_logits_and_greedy_text(arch, trained_runs, torch_side,
                                                                                 capsys):
    cfg, run_dir, out = trained_runs(arch)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "generation_config.json", "model.safetensors",
                                                    "spmdgpt.json", "tokenizer.json", "tokenizer_config.json"]
    config = json.loads((out / "config.json").read_text())
    if arch == "neox":
        assert (config["architectures"], config["use_parallel_residual"], config["hidden_act"]) == (
            ["GPTNeoXForCausalLM"], False, "gelu_pytorch_tanh")
        assert config["rope_parameters"] == {"rope_type": "default", "rope_theta": 10000.0,
                                             "partial_rotary_factor": 1.0}
    elif arch == "llama":
        assert (config["architectures"], config["hidden_act"], config["tie_word_embeddings"]) == (
            ["LlamaForCausalLM"], "silu", False)
    else:
        assert (config["architectures"], config["num_key_value_heads"], config["tie_word_embeddings"]) == (
            ["Qwen3ForCausalLM"], 2, True)
        from safetensors.numpy import load_file

        norms = [a for n, a in load_file(str(out / "model.safetensors")).items() if n.endswith(("q_norm.weight",
                                                                                                  "k_norm.weight"))]
        assert len(norms) == 4 and all(np.all(a == 1.0) for a in norms)
    toks = np.random.default_rng(0).integers(0, 10, (3, 48)).astype(np.int32)
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    from spmdgpt.training.state import load_params

    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding)
        _, params = load_params(run_dir, cfg.model, rules)
        ours = np.asarray(jax.jit(lambda p, t: forward(cfg.model, rules, p, t)[0])(params, toks))
    theirs = torch_side.logits(out, toks)
    assert np.abs(ours - theirs).max() <= 1e-4
    assert np.abs(ours).max() > 1.0  # trained logits, not near zero

    # greedy generation of 50 tokens: transformers' generate == spmdgpt sample temperature=0
    capsys.readouterr()
    assert main(["sample", f"run.dir={run_dir}", "prompt=0123", "max_new_tokens=50", "temperature=0",
                 "mesh.data=1"]) == 0
    ours_text = capsys.readouterr().out.strip()
    theirs = torch_side.ask("generate", folder=str(out), prompt="0123", max_new_tokens=50)
    assert theirs["prompt_ids"] == [[0, 1, 2, 3]]
    theirs_text = theirs["text"]
    assert len(theirs_text) == 54 and theirs_text == ours_text
    assert theirs_text.startswith("012345678987654321")  # the staircase, learnt
    # and spmdgpt samples the exported folder itself (run.dir=hf:DIR) to the same text
    assert main(["sample", f"run.dir=hf:{out}", "prompt=0123", "max_new_tokens=50", "temperature=0",
                 "mesh.data=1"]) == 0
    assert capsys.readouterr().out.strip() == ours_text
    if arch == "llama":
        _padding_ids_are_never_drawn(out, ours_text, torch_side, capsys)


def _padding_ids_are_never_drawn(out, text, torch_side, capsys):
    """The exported folder lists the padding ids (the model's 16 rows past the tokenizer's 10) as
    `suppress_tokens`: with their logits raised by hand above the digits', transformers' generate
    and `spmdgpt sample run.dir=hf:` still give the trained text; without the list, generate
    draws them (they decode to nothing)."""
    import shutil

    from safetensors.numpy import load_file, save_file

    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["suppress_tokens"] == [10, 11, 12, 13, 14, 15]
    raised = out.parent / "raised"
    shutil.copytree(out, raised)
    tensors = load_file(str(raised / "model.safetensors"))
    tensors["lm_head.weight"][10:16] = 1.5 * tensors["lm_head.weight"][:6]  # (beats digits 0-5 wherever they win)
    save_file(tensors, str(raised / "model.safetensors"), metadata={"format": "pt"})
    assert torch_side.ask("generate", folder=str(raised), prompt="0123", max_new_tokens=50)["text"] == text
    capsys.readouterr()
    assert main(["sample", f"run.dir=hf:{raised}", "prompt=0123", "max_new_tokens=50", "temperature=0",
                 "mesh.data=1"]) == 0
    assert capsys.readouterr().out.strip() == text
    del generation["suppress_tokens"]
    (raised / "generation_config.json").write_text(json.dumps(generation))
    drawn = torch_side.ask("generate", folder=str(raised), prompt="0123", max_new_tokens=50)["text"]
    assert len(drawn) < len(text) and drawn.startswith("0123")  # (padding ids drawn, decoded to nothing)


def random_params(cfg, rules, seed=1):
    """Every leaf random (norm scales around 1, biases non-zero): each one's mapping matters."""
    with jax.set_mesh(rules.mesh):
        params = init_params(cfg, jax.random.key(seed), rules)
    leaves, tree = jax.tree.flatten(jax.device_get(params))
    rng = np.random.default_rng(seed)
    leaves = [np.asarray(x) + rng.normal(0, 0.1, x.shape).astype(np.float32) for x in leaves]
    return jax.tree.unflatten(tree, leaves)


@pytest.mark.parametrize("arch,overrides", [
    ("GPTNeoXForCausalLM", ["model.bias=true", "model.tie_embeddings=false"]),
    ("LlamaForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu"]),
    ("LlamaForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu", "model.bias=true", "model.tie_embeddings=false"]),
    ("LlamaForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu", "model.num_kv_heads=2", "model.head_dim=8",
                          "model.rope_scaling=llama3", "model.rope_factor=4", "model.rope_original_max_len=32"]),
    ("Qwen2ForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu", "model.qkv_bias=true", "model.num_kv_heads=1",
                          "model.sliding_window=8", "model.window_pattern=LG"]),
    ("MistralForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu", "model.num_kv_heads=2",
                            "model.sliding_window=8"]),
    ("Qwen3ForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu", "model.qk_norm=true", "model.num_kv_heads=2"]),
    ("MixtralForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu", "model.num_kv_heads=2", "model.moe.num_experts=4",
                            "model.moe.top_k=2", "model.moe.mlp_factor=1", "model.sliding_window=8"]),
    ("Qwen3MoeForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu", "model.qk_norm=true", "model.moe.num_experts=4",
                             "model.moe.top_k=3", "model.moe.normalize_top_k=false", "model.moe.mlp_factor=0.5"]),
    ("Qwen3ForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu", "model.qk_norm=true", "model.qk_norm_scale=true",
                          "model.head_dim=32", "model.tie_embeddings=false", "model.rope_scaling=yarn",
                          "model.rope_factor=4", "model.rope_original_max_len=16", "model.rope_attention_factor=1.3"]),
    # MLA without a query latent, a router bias that moves (exported as e_score_correction_bias), dense layers first
    ("DeepseekV3ForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu", "model.num_layers=3", "model.mla.kv_rank=24",
                               "model.mla.rope_dim=8", "model.mla.v_dim=8", "model.moe.num_experts=4",
                               "model.moe.router=sigmoid", "model.moe.first_dense_layers=1",
                               "model.moe.bias_update_rate=0.001", "model.moe.shared_experts=2", "model.moe.groups=2",
                               "model.moe.top_groups=1", "model.moe.route_scale=1.5", "model.moe.mlp_factor=0.5"]),
    # Gemma 3's layers; learned QK-norm scales; the local layer's own RoPE base
    ("Gemma3ForCausalLM", ["model.norm=rmsnorm", "model.mlp=geglu", "model.norm_plus_one=true", "model.post_norms=true",
                           "model.embed_scale=true", "model.qk_norm=true", "model.qk_norm_scale=true",
                           "model.num_kv_heads=2", "model.sliding_window=8", "model.window_pattern=LG",
                           "model.rope_local_theta=50", "model.query_pre_attn_scalar=20"]),
    # without learned QK-norm scales (exported as zeros: 1 + 0), every layer's RoPE the global one, YaRN
    ("Gemma3ForCausalLM", ["model.norm=rmsnorm", "model.mlp=geglu", "model.norm_plus_one=true", "model.post_norms=true",
                           "model.embed_scale=true", "model.qk_norm=true", "model.sliding_window=8",
                           "model.window_pattern=GL", "model.rope_scaling=yarn", "model.rope_factor=4",
                           "model.rope_original_max_len=16", "model.tie_embeddings=false"]),
    # Gemma 4's layers: the global layer's own head width (values their own: no attention_k_eq_v), half its RoPE pairs
    # rotating, value norms, a scalar per layer, soft-capped logits; tied
    ("Gemma4ForCausalLM", ["model.norm=rmsnorm", "model.mlp=geglu", "model.post_norms=true", "model.embed_scale=true",
                           "model.qk_norm=true", "model.qk_norm_scale=true", "model.query_pre_attn_scalar=1",
                           "model.v_norm=true", "model.layer_scale=true", "model.num_kv_heads=2",
                           "model.sliding_window=8", "model.window_pattern=LG", "model.global_head_dim=32",
                           "model.rope_global_fraction=0.5", "model.rope_local_theta=50", "model.logit_softcap=5"]),
    # gpt-oss: biased grouped attention with sinks, alternating windows, biased router and clamped-SwiGLU experts
    ("GptOssForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu_clamped", "model.glu_limit=1.0", "model.bias=true",
                           "model.attention_sinks=true", "model.num_kv_heads=2", "model.sliding_window=8",
                           "model.window_pattern=LG", "model.moe.num_experts=4", "model.moe.mlp_factor=0.5",
                           "model.tie_embeddings=false", "model.rope_scaling=yarn", "model.rope_factor=4",
                           "model.rope_original_max_len=16", "model.rope_truncate=false"]),
    # Qwen3.5's hybrid: Gated DeltaNet (grouped value heads, values narrower than keys) and gated, partially
    # rotated softmax attention with QK-norm, every norm (1 + w)
    ("Qwen3_5ForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu", "model.norm_plus_one=true", "model.qk_norm=true",
                            "model.qk_norm_scale=true", "model.num_kv_heads=2", "model.attention_gate=true",
                            "model.rope_fraction=0.5", "model.num_layers=4", "model.deltanet.full_attention_interval=2",
                            "model.deltanet.key_heads=2", "model.deltanet.value_heads=4", "model.deltanet.key_dim=8",
                            "model.deltanet.value_dim=6", "model.deltanet.chunk=16"]),
    # Kimi Linear's hybrid, dense: Kimi Delta Attention (a decay per key channel, the low-rank sigmoid output gate),
    # then MLA without RoPE and without a query latent
    ("KimiLinearForCausalLM", ["model.norm=rmsnorm", "model.mlp=swiglu", "model.qk_norm=false", "model.num_layers=2",
                               "model.deltanet.full_attention_interval=2", "model.deltanet.gate=channel",
                               "model.deltanet.key_heads=2", "model.deltanet.key_dim=8", "model.deltanet.chunk=16",
                               "model.mla.kv_rank=24", "model.mla.rope_dim=8", "model.mla.v_dim=8",
                               "model.global_nope=true", "model.tie_embeddings=false"]),
    # the hybrid with experts in every layer beside a gated shared expert (two experts wide): Qwen3.5-MoE, or
    # Qwen3-Next where the k weights are not renormalised (its grouped in_proj_qkvz / in_proj_ba)
    *[(arch, ["model.norm=rmsnorm", "model.mlp=swiglu", "model.norm_plus_one=true", "model.qk_norm=true",
              "model.qk_norm_scale=true", "model.num_kv_heads=2", "model.attention_gate=true", "model.num_layers=4",
              "model.deltanet.full_attention_interval=2", "model.deltanet.key_heads=2", "model.deltanet.value_heads=4",
              "model.deltanet.key_dim=8", "model.deltanet.value_dim=6", "model.deltanet.chunk=16",
              "model.moe.num_experts=4", "model.moe.mlp_factor=0.5", "model.moe.shared_experts=2",
              "model.moe.shared_gate=true", *more])
      for arch, more in (("Qwen3_5MoeForCausalLM", []),
                         ("Qwen3NextForCausalLM", ["model.moe.normalize_top_k=false", "model.moe.top_k=3"]))],
])
def test_every_parameter_maps_onto_transformers(arch, overrides, torch_side, tmp_path):
    """Random values in every leaf (biases and norms included), tied and untied, written as
    several safetensors shards with an index: the same logits as spmdgpt's forward."""
    from spmdgpt.hf import hf_config, to_hf, write_folder

    cfg = load_config(["+experiment=staircase", "mesh.data=1", "model.rope_theta=500", *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding)
    params = random_params(cfg.model, rules)
    tensors = to_hf(cfg.model, params)
    config = hf_config(cfg.model, eos_id=None)
    assert config["architectures"] == [arch]
    write_folder(tmp_path, tensors, {"config.json": json.dumps(config)}, max_shard_bytes=150_000)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) >= 3 and index["metadata"]["total_size"] == sum(a.nbytes for a in tensors.values())
    toks = np.random.default_rng(2).integers(0, cfg.model.vocab_size, (2, 40)).astype(np.int32)
    with jax.set_mesh(mesh):
        ours = np.asarray(jax.jit(lambda p, t: forward(cfg.model, rules, p, t)[0])(params, toks))
    theirs = torch_side.logits(tmp_path, toks)
    assert np.abs(ours - theirs).max() <= 1e-4 and np.abs(ours).max() > 1.0


def tokenizers_under_test():
    from spmdgpt.data.tokenizers import CharTokenizer, GPT2Tokenizer, HFTokenizer

    text = (DATA / "tinyshakespeare" / "input.txt").read_text()
    yield "char", CharTokenizer.from_text(text[:100_000])
    yield "gpt2", GPT2Tokenizer(DATA / "gpt2-tokenizer" / "tiktoken_cache")
    yield "hf", HFTokenizer((DATA / "gpt2-tokenizer" / "tokenizer.json").read_text())


@pytest.mark.parametrize("kind", ["char", "gpt2", "hf"])
def test_tokenizer_round_trip_through_autotokenizer(kind, torch_side, tmp_path):
    """AutoTokenizer on the exported files encodes held-out text to spmdgpt's ids and decodes them
    back exactly; the end-of-text token is the run's."""
    from spmdgpt.hf import tokenizer_files

    tok = dict(tokenizers_under_test())[kind]
    for name, text in tokenizer_files(tok, 256).items():
        (tmp_path / name).write_text(text)
    held_out = (DATA / "tinyshakespeare" / "input.txt").read_text()[-3000:]  # not in the char sample
    if kind == "char":
        held_out = "".join(c for c in held_out if c in tok.chars)
    hf = torch_side.ask("tokenize", folder=str(tmp_path), text=held_out)
    assert hf["ids"] == tok.encode(held_out) and len(hf["ids"]) > 600
    assert hf["decoded"] == held_out
    assert (hf["eos_token_id"], hf["eos_token"]) == (tok.eos_id, "<|endoftext|>")


def test_export_refuses_bad_input_and_never_half_writes(staircase_run, tmp_path, capsys, monkeypatch):
    _, run_dir, _ = staircase_run

    def export(*items):
        capsys.readouterr()
        code = main(["export", f"run.dir={run_dir}", *items])
        return code, capsys.readouterr().err.strip()

    code, err = export(f"out={tmp_path / 'a'}", "model.norm=rmsnorm")
    assert code == 2 and err == (
        "spmdgpt: error: model.norm=rmsnorm with model.mlp=gelu has no Hugging Face architecture that computes "
        "the same thing; exportable: norm=rmsnorm + mlp=swiglu (Llama, Mistral, Qwen2, Qwen3, Mixtral, Qwen3-MoE, "
        "DeepSeek-V3, Qwen3.5, Qwen3.5-MoE, Qwen3-Next), norm=rmsnorm + mlp=geglu (Gemma 3), norm=rmsnorm + "
        "mlp=swiglu_clamped (gpt-oss) or norm=layernorm + mlp=gelu (GPT-NeoX)")
    code, err = export(f"out={tmp_path / 'a'}", "hf_class=Qwen3NextForCausalLM")  # (a class that cannot hold it)
    assert code == 2 and err == (
        "spmdgpt: error: hf_class=Qwen3NextForCausalLM cannot hold this model (its norm and MLP are "
        "model.norm=rmsnorm, model.mlp=swiglu); GPTNeoXForCausalLM can: leave hf_class unset")
    code, err = export(f"out={tmp_path / 'a'}", "hf_class=Qwen4ForCausalLM")
    assert code == 2 and err.startswith("spmdgpt: error: hf_class=Qwen4ForCausalLM: choose one of "
                                        "KimiLinearForCausalLM, Qwen3_5MoeForCausalLM, Qwen3NextForCausalLM, ")
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    code, err = export(f"out={full}")
    assert code == 2 and "is not empty; choose another folder or pass overwrite=true" in err
    assert [p.name for p in full.iterdir()] == ["keep.txt"] and (full / "keep.txt").read_text() == "mine"
    code, err = export(f"out={full / 'keep.txt'}")
    assert code == 2 and err.endswith("is a file; give a folder")
    code, err = export(f"out={tmp_path / 'b'}", "step=7")
    assert code == 2 and err == f"spmdgpt: error: step=7: run.dir={run_dir} has checkpoints at steps 40"
    code, err = export(f"out={tmp_path / 'b'}", "dtype=int8")
    assert code == 2 and err == "spmdgpt: error: dtype=int8: choose one of float32, bfloat16, float16"
    assert main(["export", f"run.dir={tmp_path / 'nope'}", f"out={tmp_path / 'b'}"]) == 2

    # a write that fails half-way (a full disk): exit 4, the old folder untouched, no leftovers
    import spmdgpt.hf

    def fail(folder, tensors, files, max_shard_bytes):
        (Path(folder) / "model.safetensors").write_bytes(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spmdgpt.hf, "write_folder", fail)
    code, err = export(f"out={full}", "overwrite=true")
    assert code == 4 and err.startswith(f"spmdgpt: error: writing {full} failed (No space left on device)")
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]  # no temporary folder left
    monkeypatch.undo()
    code, _ = export(f"out={full}", "overwrite=true", "dtype=bfloat16")
    assert code == 0 and "keep.txt" not in {p.name for p in full.iterdir()}
    from safetensors.numpy import load_file

    assert {str(a.dtype) for a in load_file(str(full / "model.safetensors")).values()} == {"bfloat16"}
    # a folder whose config.json has fewer ids than its tokenizer: sampling it is refused, as training it is
    config = json.loads((full / "config.json").read_text())
    (full / "config.json").write_text(json.dumps({**config, "vocab_size": 8}))
    capsys.readouterr()
    assert main(["sample", f"run.dir=hf:{full}", "prompt=0", "mesh.data=1"]) == 2
    assert f"run.dir=hf:{full}: tokenizer.json has 10 ids and config.json's vocab_size is 8" in capsys.readouterr().err


LLAMA_SHAPE = {"vocab_size": 96, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 128,
               "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "rope_theta": 5000.0}
HF_CONFIGS = {
    "llama": LLAMA_SHAPE,
    # grouped-query attention, a head width other than hidden_size / heads (32, not 16)
    "mistral": {**LLAMA_SHAPE, "num_key_value_heads": 2, "head_dim": 32, "sliding_window": None},
    "qwen2": {**LLAMA_SHAPE, "num_key_value_heads": 2, "tie_word_embeddings": True},
    "qwen3": {**LLAMA_SHAPE, "num_key_value_heads": 1, "head_dim": 32},
    # 4 experts of 64 (Mixtral: intermediate_size) or 32 (Qwen3-MoE: moe_intermediate_size), top 2
    "mixtral": {**LLAMA_SHAPE, "num_key_value_heads": 2, "intermediate_size": 64, "num_local_experts": 4,
                "num_experts_per_tok": 2},
    "qwen3_moe": {**LLAMA_SHAPE, "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
                  "moe_intermediate_size": 32, "norm_topk_prob": True},
    # MLA (a query latent, 16 + 8 query/key and 16 value dimensions per head), one dense layer then two MoE
    # layers of 4 sigmoid-routed experts in 2 groups (1 chosen) beside a shared one, weights scaled by 2.5
    "deepseek_v3": {**LLAMA_SHAPE, "num_hidden_layers": 3, "kv_lora_rank": 32, "q_lora_rank": 48,
                    "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16, "n_routed_experts": 4,
                    "n_shared_experts": 1, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                    "first_k_dense_replace": 1, "n_group": 2, "topk_group": 1, "routed_scaling_factor": 2.5,
                    "norm_topk_prob": True},
    # a local layer (window 8, RoPE base 100) then a global one (base 5000, linear scaling 4), 2 key/value heads of
    # 32, scores x 24^-0.5; tied
    "gemma3": {**LLAMA_SHAPE, "num_key_value_heads": 2, "head_dim": 32, "sliding_window": 8,
               "query_pre_attn_scalar": 24,
               "layer_types": ["sliding_attention", "full_attention"], "tie_word_embeddings": True,
               "rope_parameters": {"full_attention": {"rope_type": "linear", "rope_theta": 5000.0, "factor": 4.0},
                                   "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}}},
    # Qwen3.5: Gated DeltaNet layers 0 and 2 (4 key heads of 8, 8 value heads of 8, grouped), gated softmax attention
    # in layers 1 and 3 (2 key/value heads of 16, a quarter of each head rotated), every norm (1 + w)
    "qwen3_5": {**LLAMA_SHAPE, "num_hidden_layers": 4, "num_key_value_heads": 2, "head_dim": 16,
                "layer_types": ["linear_attention", "full_attention"] * 2, "linear_num_key_heads": 4,
                "linear_num_value_heads": 8, "linear_key_head_dim": 8, "linear_value_head_dim": 8},
    # Qwen3-Next / Qwen3.5-MoE: Qwen3.5's layers (2 key heads of 8, 4 value heads of 8: two to a key head, so
    # Qwen3-Next's grouped in_proj_qkvz rows interleave) with 4 experts of 32 (top 2) beside a gated shared one of 32
    "qwen3_next": {**LLAMA_SHAPE, "num_hidden_layers": 4, "num_key_value_heads": 2, "head_dim": 16,
                   "layer_types": ["linear_attention", "full_attention"] * 2, "linear_num_key_heads": 2,
                   "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8, "num_experts": 4,
                   "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32},
    # gpt-oss: 2 key/value heads of 16 with biases and sinks, a window of 8 then a full layer, 4 experts of 32 (top 2)
    # with a small clamp (1.5, so that it acts on these random weights), YaRN untruncated
    "gpt_oss": {**LLAMA_SHAPE, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32,
                "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 8, "swiglu_limit": 1.5,
                "layer_types": ["sliding_attention", "full_attention"],
                "rope_parameters": {"rope_type": "yarn", "rope_theta": 5000.0, "factor": 4.0, "beta_fast": 32.0,
                                    "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 32}},
    # OLMo 2: 4 heads (the fused projection), its QK-norm over all of them; OLMo 3: 2 key/value heads, a local
    # layer (window 8, RoPE base 100) then a global one (base 5000)
    "olmo2": LLAMA_SHAPE,
    "olmo3": {**LLAMA_SHAPE, "num_key_value_heads": 2, "sliding_window": 8,
              "layer_types": ["sliding_attention", "full_attention"],
              "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 5000.0},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}}},
    # nanochat: RMSNorms without parameters (the embedding's too), QK-norm after its reversed RoPE, squared ReLU, logits
    # soft-capped at 15 (which these random weights reach)
    "nanochat": {**LLAMA_SHAPE, "hidden_act": "relu2", "final_logit_softcapping": 15.0},
    # Llama 4: chunks of 8 (layers 0 and 2) and NoPE layers with the attention temperature at a floor of 4 (1 and 3);
    # 2 key/value heads, RoPE on interleaved pairs with Scout's llama3 bands (low = high: a step), the QK-norm; MoE
    # layers 1 and 3 (4 experts of 32, top 1, the weight on the expert's input, a shared expert), dense ones of 96
    "llama4": {**LLAMA_SHAPE, "num_hidden_layers": 4, "num_key_value_heads": 2, "head_dim": 16,
               "intermediate_size": 32, "intermediate_size_mlp": 96, "num_local_experts": 4, "num_experts_per_tok": 1,
               "interleave_moe_layer_step": 2, "attention_chunk_size": 8, "no_rope_layer_interval": 2,
               "use_qk_norm": True, "attn_temperature_tuning": True, "attn_scale": 0.5, "floor_scale": 4,
               "rope_parameters": {"rope_type": "llama3", "rope_theta": 5000.0, "factor": 4.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 1.0, "original_max_position_embeddings": 16}},
    # Gemma 4: a local layer (window 8, RoPE base 100; 2 key/value heads of 16) then a global one of its own geometry
    # (one key/value head of 32, its values the keys' projection, a quarter of the RoPE pairs rotating on base 5000),
    # values RMS-normed, a scalar per layer, logits soft-capped at 3 (which these random weights reach); untied
    "gemma4": {**{k: v for k, v in LLAMA_SHAPE.items() if k != "rope_theta"}, "num_hidden_layers": 2,
               "num_key_value_heads": 2, "head_dim": 16, "global_head_dim": 32, "num_global_key_value_heads": 1,
               "attention_k_eq_v": True, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"],
               "hidden_size_per_layer_input": 0, "final_logit_softcapping": 3.0,
               "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                   "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                      "rope_theta": 5000.0}}},
    "neox": {"vocab_size": 96, "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
             "num_attention_heads": 4, "max_position_embeddings": 128, "hidden_act": "gelu_new",
             "use_parallel_residual": False, "rotary_pct": 1.0, "tie_word_embeddings": False}}


HF_CONFIGS["qwen3_5_moe"] = HF_CONFIGS["qwen3_next"]
# DeepSeek-V3.2: DeepSeek-V3's layers with the lightning indexer (16 heads of 16, their first 8 dimensions rotated),
# each query attending to its 8 best keys of up to 40 (16 heads: a score of exactly zero, a tie, is unlikely)
HF_CONFIGS["deepseek_v32"] = {**HF_CONFIGS["deepseek_v3"], "index_n_heads": 16, "index_head_dim": 16, "index_topk": 8}
# Kimi Linear: Kimi Delta Attention layers (2 heads of 16, a decay per key channel) and MLA without RoPE (a 32-wide
# latent, 16 + 8 query/key and 16 value dimensions per head, its 8 rotary ones unrotated) in the published 48B-A3B's
# pattern, smaller: 8 layers, groups of 2 KDA + 1 MLA and a last group of 1 + 1 (full_attn_layers 3, 6, 8; its 27:
# six groups of 3 + 1, then 2 + 1), the first layer's MLP dense (first_k_dense_replace=1, 160 wide), the others MoE:
# 4 sigmoid-routed experts of 32 in 2 groups (1 chosen) beside a shared one, weights scaled by 2.5; a pad id inside the
# vocabulary
HF_CONFIGS["kimi_linear"] = {
    **LLAMA_SHAPE, "num_hidden_layers": 8, "first_k_dense_replace": 1,
    "layer_types": ["full_attention" if i in (2, 5, 7) else "linear_attention" for i in range(8)],
    "kv_lora_rank": 32, "q_lora_rank": None, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16,
    "num_experts": 4, "num_experts_per_token": 2, "num_shared_experts": 1, "moe_intermediate_size": 32,
    "num_expert_group": 2, "topk_group": 1, "routed_scaling_factor": 2.5, "linear_num_heads": 2,
    "linear_head_dim": 16, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


def make_hf_model(torch_side, kind: str, folder: Path, tokens=None, **overrides):
    """A small randomly initialised transformers model (every weight perturbed, biases too),
    saved as safetensors; its logits of `tokens` when given."""
    request = {"kind": kind, "folder": str(folder), "config": {**HF_CONFIGS[kind], **overrides}}
    if tokens is None:
        torch_side.ask("make_model", **request)
        return None
    return torch_side.ask_array("make_model", tokens, **request)[1]


LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 5000.0, "factor": 4.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}  # (short: most frequencies scaled)
YARN_ROPE = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32}
IMPORTED = {  # name -> (transformers kind, its config beyond HF_CONFIGS[kind], the model fields import sets
    #                    beyond the shapes, the architecture spmdgpt exports it as)
    "llama": ("llama", {}, [], "LlamaForCausalLM"),
    "llama3-rope": (
        "llama",
        {"rope_parameters": LLAMA3_ROPE},
        ["model.rope_scaling=llama3", "model.rope_factor=4.0", "model.rope_original_max_len=64"],
        "LlamaForCausalLM",
    ),
    "mistral": ("mistral", {}, ["model.num_kv_heads=2", "model.head_dim=32"], "LlamaForCausalLM"),  # (no window)
    "mistral-window": ("mistral", {"sliding_window": 8}, ["model.sliding_window=8"], "MistralForCausalLM"),
    # (tied, as staircase; gpt-oss's YaRN: the ramp's ends not rounded)
    "qwen2-yarn": (
        "qwen2",
        {"rope_parameters": {**YARN_ROPE, "truncate": False}},
        ["model.num_kv_heads=2", "model.qkv_bias=True", "model.rope_scaling=yarn", "model.rope_original_max_len=32",
         "model.rope_truncate=False"],
        "Qwen2ForCausalLM",
    ),
    "qwen3-window": (
        "qwen3",
        {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1},
        ["model.num_kv_heads=1", "model.head_dim=32", "model.qk_norm=True", "model.qk_norm_scale=True",
         "model.sliding_window=8", "model.window_pattern=GL"],
        "Qwen3ForCausalLM",
    ),  # layer 1 local
    "mixtral": ("mixtral", {}, ["model.num_kv_heads=2", "model.moe={num_experts: 4}"], "MixtralForCausalLM"),
    # the k weights not renormalised; layers 0-2 and 4 dense (mlp_only_layers, decoder_sparse_step)
    "qwen3_moe": (
        "qwen3_moe",
        {"norm_topk_prob": False, "num_hidden_layers": 6, "mlp_only_layers": [1], "decoder_sparse_step": 2},
        [
            "model.qk_norm=True",
            "model.num_layers=6",
            "model.moe={num_experts: 4, first_dense_layers: 2, "
            "interleave_step: 2, mlp_factor: 0.5, normalize_top_k: False}",
        ],
        "Qwen3MoeForCausalLM",
    ),
    "deepseek_v3": (
        "deepseek_v3",
        {},
        ["model.num_layers=3", "model.mla={kv_rank: 32, q_rank: 48, rope_dim: 8, nope_dim: 16, v_dim: 16}",
         "model.moe={num_experts: 4, first_dense_layers: 1, mlp_factor: 0.5, shared_experts: 1, router: sigmoid, "
         "bias_update_rate: 0.001, groups: 2, route_scale: 2.5}"],
        "DeepseekV3ForCausalLM",
    ),
    "deepseek_v32": (
        "deepseek_v32",
        {},
        ["model.num_layers=3", "model.mla={kv_rank: 32, q_rank: 48, rope_dim: 8, nope_dim: 16, v_dim: 16, "
         "index_heads: 16, index_dim: 16, index_topk: 8}",
         "model.moe={num_experts: 4, first_dense_layers: 1, mlp_factor: 0.5, shared_experts: 1, router: sigmoid, "
         "bias_update_rate: 0.001, groups: 2, route_scale: 2.5}"],
        "DeepseekV32ForCausalLM",
    ),
    # a full query projection; DeepSeek's YaRN (mscale, mscale_all_dim: the softmax scale grows too)
    "deepseek_v3-yarn": (
        "deepseek_v3",
        {"q_lora_rank": None, "rope_parameters": {**YARN_ROPE, "mscale": 0.8, "mscale_all_dim": 1.0}},
        ["model.rope_scaling=yarn", "model.rope_mscale=0.8", "model.rope_mscale_all_dim=1.0"],
        "DeepseekV3ForCausalLM",
    ),
    "gemma3": (
        "gemma3",
        {},
        ["model.mlp=geglu", "model.num_kv_heads=2", "model.head_dim=32", "model.sliding_window=8",
         "model.window_pattern=LG", "model.query_pre_attn_scalar=24", "model.rope_local_theta=100.0",
         "model.rope_scaling=linear", "model.rope_factor=4.0", "model.norm_plus_one=True", "model.post_norms=True",
         "model.embed_scale=True", "model.qk_norm=True", "model.qk_norm_scale=True"],
        "Gemma3ForCausalLM",
    ),
    "qwen3_5": ("qwen3_5", {}, ["model.attention_gate=True", "model.rope_fraction=0.25", "model.norm_plus_one=True"],
                "Qwen3_5ForCausalLM"),
    # the k weights not renormalised: exported as Qwen3-Next (Qwen3.5-MoE always renormalises them)
    "qwen3_next": ("qwen3_next", {"norm_topk_prob": False}, [
        "model.attention_gate=True",
        "model.moe={num_experts: 4, mlp_factor: 0.5, shared_experts: 1, shared_gate: True, normalize_top_k: False}"],
        "Qwen3NextForCausalLM"),
    # a shared expert twice an expert's width, three experts a token
    "qwen3_5_moe": ("qwen3_5_moe", {"shared_expert_intermediate_size": 64, "num_experts_per_tok": 3}, [
        "model.attention_gate=True", "model.moe={num_experts: 4, top_k: 3, mlp_factor: 0.5, shared_experts: 2, "
        "shared_gate: True}"], "Qwen3_5MoeForCausalLM"),
    "gpt_oss": ("gpt_oss", {}, ["model.attention_sinks=True", "model.mlp=swiglu_clamped", "model.glu_limit=1.5",
                                "model.bias=True", "model.rope_truncate=False", "model.window_pattern=LG"],
                "GptOssForCausalLM"),
    "olmo2": ("olmo2", {}, ["model.pre_norms=False", "model.post_norms=True", "model.qk_norm_whole=True",
                            "model.norm_eps=1e-06"], "Olmo2ForCausalLM"),
    "olmo3": ("olmo3", {}, ["model.num_kv_heads=2", "model.sliding_window=8", "model.window_pattern=LG",
                            "model.rope_local_theta=100.0", "model.qk_norm_whole=True", "model.pre_norms=False"],
              "Olmo3ForCausalLM"),
    "nanochat": ("nanochat", {}, ["model.mlp=relu2", "model.norm_scale=False", "model.embed_norm=True",
                                  "model.qk_norm=True", "model.logit_softcap=15.0"], "NanoChatForCausalLM"),
    "llama4": ("llama4", {}, ["model.num_layers=4", "model.num_kv_heads=2", "model.attention_chunk=8",
                              "model.window_pattern=LGLG", "model.global_nope=True", "model.attn_temperature=0.5",
                              "model.attn_temperature_floor=4", "model.qk_norm=True", "model.rope_scaling=llama3",
                              "model.rope_high_freq_factor=1.0", "model.mlp_factor=1.5"], "Llama4ForCausalLM"),
    "gemma4": ("gemma4", {}, ["model.window_pattern=LG", "model.global_head_dim=32",
                              "model.global_kv_heads=1", "model.global_k_eq_v=True", "model.rope_global_fraction=0.25",
                              "model.v_norm=True", "model.layer_scale=True", "model.query_pre_attn_scalar=1",
                              "model.rope_local_theta=100.0", "model.logit_softcap=3.0", "model.tie_embeddings=False"],
               "Gemma4ForCausalLM"),
    # Gemma 4 26B-A4B's layers: 4 experts of 32 (top 2) beside the dense MLP of 96 in both layers, Gemma 4's router
    "gemma4_moe": ("gemma4", {"enable_moe_block": True, "num_experts": 4, "top_k_experts": 2,
                              "moe_intermediate_size": 32},
                   ["model.global_k_eq_v=True", "model.moe={num_experts: 4, mlp_factor: 0.5, dense_mlp: True, "
                    "router_scales: True}"], "Gemma4ForCausalLM"),
    # Gemma 4 E2B's and E4B's layers: per-layer inputs (a second table of 4 x 16 per token and the embedding's
    # projection), the last two layers (local, global) attending over layers 0's and 1's keys and values, their MLPs
    # twice as wide
    "gemma4_e2b": ("gemma4", {"hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": 96,
                              "num_hidden_layers": 4, "layer_types": ["sliding_attention", "full_attention"] * 2,
                              "num_kv_shared_layers": 2, "use_double_wide_mlp": True},
                   ["model.per_layer_dim=16", "model.num_layers=4", "model.kv_shared_layers=2",
                    "model.kv_shared_wide_mlp=True"], "Gemma4ForCausalLM"),
    "kimi_linear": ("kimi_linear", {}, [
        "model.num_layers=8", "model.global_nope=True", "model.mla={kv_rank: 32, rope_dim: 8, nope_dim: 16, v_dim: 16}",
        "model.deltanet={full_attention_interval: 3, key_heads: 2, value_heads: 2, key_dim: 16, value_dim: 16, "
        "gate: channel}", "model.moe={num_experts: 4, first_dense_layers: 1, mlp_factor: 0.5, shared_experts: 1, "
        "router: sigmoid, bias_update_rate: 0.001, groups: 2, route_scale: 2.5}"], "KimiLinearForCausalLM"),
    "neox": ("neox", {}, ["model.bias=True"], "GPTNeoXForCausalLM"),
}


# The imports whose greedy generation is checked against transformers' too: one for each decoding
# that runs code of its own: Llama 3's scaled RoPE (llama3-rope) and YaRN's (deepseek_v3-yarn,
# gpt_oss: untruncated, as qwen2-yarn) at positions past the prompt, a window in every layer
# (mistral-window) or in one of two (gemma3, gpt_oss; as qwen3-window), MLA's latent cache
# (deepseek_v3-yarn), Gated DeltaNet's recurrent state (qwen3_5; Qwen3-Next's is the same layer
# beside experts), attention sinks (gpt_oss), blocks without pre-norms and QK-norms over the whole
# projection (olmo3, windowed too), norms without parameters and nanochat's RoPE (nanochat), chunks, NoPE layers
# and their temperature, experts weighted on their input (llama4), the global layers' own pages of another shape,
# values from keys, value norms and proportional RoPE (gemma4), Kimi Delta Attention's per-channel state
# beside MLA without RoPE (kimi_linear), DeepSeek Sparse Attention's top-k over the indexer's cached keys
# (deepseek_v32: 8 of up to 36 positions). The others' attention and MoE units decode as the
# full forward pass computes (test_engine.py, unit by unit), whose logits are transformers' here.
OWN_DECODING = {"llama3-rope", "mistral-window", "deepseek_v3-yarn", "deepseek_v32", "gemma3", "qwen3_5", "gpt_oss",
                "olmo3", "nanochat", "llama4", "gemma4", "gemma4_moe", "gemma4_e2b", "kimi_linear"}


ONE_DEVICE = {"qwen3_5_moe", "deepseek_v3"}
# the imports whose export's config.json is loaded by transformers here (the others': test_exported_run_loads_...
# for a trained run, test_hf_tables for every field's key)
EXPORT_CONFIG_LOADS = {"olmo2", "olmo3", "nanochat", "llama4", "gemma4", "gemma4_moe", "gemma4_e2b", "kimi_linear",
                       "deepseek_v32"}


@pytest.mark.parametrize("name", list(IMPORTED))
def test_import_gives_transformers_logits_on_one_and_eight_devices(name, torch_side, tmp_path):
    """checkpoint.init_from=hf:DIR: the model config comes from DIR's config.json, each leaf is
    read into its sharded layout (fsdp_tp on 2 x 4 devices: really split; 1 or 2 key/value heads
    are replicated over the model axis of 4; an MoE's experts on 2 x 2 x 2, split over the
    expert axis too), the logits equal transformers' (every weight
    random: norm scales, QK-norm scales, biases; RoPE scaled as Llama 3.1 and YaRN do; sliding
    windows of 8 in every layer or in one of two, over 40 tokens: each changes the logits), greedy
    generation (spmdgpt's inference engine) gives transformers' ids (OWN_DECODING), and an export
    of the imported parameters gives byte-identical tensors."""
    from safetensors.numpy import load_file

    from spmdgpt.engine import Engine, EngineConfig, Request
    from spmdgpt.hf import hf_config, load_params, to_hf, with_hf_model

    kind, config, fields, arch = IMPORTED[name]
    toks = np.random.default_rng(0).integers(0, 96, (8, 40)).astype(np.int32)
    theirs = make_hf_model(torch_side, kind, tmp_path, toks, **config)
    original = load_file(str(tmp_path / "model.safetensors"))
    moe = any(k in {**HF_CONFIGS[kind], **config} for k in ("num_experts", "num_local_experts", "n_routed_experts"))
    layout = ["mesh.data=2", "mesh.expert=2", "mesh.model=2"] if moe else ["mesh.data=2", "mesh.model=4"]
    # (Qwen3.5-MoE: one device; its computation is Qwen3-Next's, whose case runs on the 8 too. DeepSeek-V3 with a
    # query latent: one device; test_imported_deepseek_v3_trains_alike_on_one_device_and_sharded reads the same
    # folder into this layout, checks its splits and its loss against one device's; deepseek_v3-yarn runs here on 8)
    for overrides, n in ((["mesh.data=1"], 1), (["sharding=fsdp_tp", *layout], 8))[:1 if name in ONE_DEVICE else 2]:
        cfg, changes = with_hf_model(load_config(["+experiment=staircase", f"checkpoint.init_from=hf:{tmp_path}",
                                                  *overrides]))
        assert {"model.vocab_size=96", *fields} <= set(changes)
        assert hf_config(cfg.model, eos_id=None)["architectures"] == [arch]
        mesh = make_mesh(cfg.mesh, jax.devices()[:n])
        with jax.set_mesh(mesh):
            rules = Rules(mesh, cfg.sharding, cfg.model)
            params = load_params(cfg.model, tmp_path, rules, "test")
            if n == 8:
                a, P = params.blocks.attn, jax.sharding.PartitionSpec
                if moe:  # the experts split over the expert axis, each one's width over the model axis
                    w = params.blocks.mlp.w_up
                    assert w.sharding.spec == P(None, "expert", ("data", "context"), "model")
                    assert w.addressable_shards[0].data.shape == (w.shape[0], 2, 32, w.shape[-1] // 2)
                    if kind in ("deepseek_v3", "deepseek_v32"):  # MLA: the latent's up-projection split by latent
                        # (FSDP) and head
                        assert a.w_ukv.sharding.spec == P(None, ("data", "context"), "model", None)
                        assert a.w_ukv.addressable_shards[0].data.shape == (2, 16, 2, 32)
                elif kind in ("llama", "neox", "olmo2", "nanochat"):
                    assert a.w_qkv.sharding.spec == P(None, ("data", "context"), None, "model", None)
                    assert a.w_qkv.addressable_shards[0].data.shape == (2, 32, 3, 1, 16)
                else:  # the queries split by head, 1 or 2 key/value heads replicated over the model axis of 4
                    (_, _, _, K, H) = a.w_kv.shape
                    assert a.w_q.sharding.spec == P(None, ("data", "context"), "model", None)
                    assert a.w_kv.sharding.spec == P(None, ("data", "context"), None, None, None)
                    # (Gemma 4's global layers: a stack of their own, their keys alone)
                    assert a.w_kv.addressable_shards[0].data.shape == (*a.w_kv.shape[:1], 32, *a.w_kv.shape[2:])
            ours = np.asarray(jax.jit(lambda p, t: forward(cfg.model, rules, p, t)[0])(params, toks))
            if moe and n == 1 and kind not in ("deepseek_v3", "deepseek_v32", "kimi_linear", "gemma4"):  # fine-
                # tuning with the balancing bias: zeros at first (DeepSeek-V3's, V3.2's and Kimi Linear's files hold
                # theirs; Gemma 4's G layers' own stack does not take it yet)
                biased = dataclasses.replace(cfg.model, moe=dataclasses.replace(cfg.model.moe, bias_update_rate=1e-3))
                again = load_params(biased, tmp_path, rules, "test")
                assert again.blocks.mlp.router_bias.shape == params.blocks.mlp.router.shape[::2]  # [MoE layers, E]
                assert not np.any(np.asarray(again.blocks.mlp.router_bias))
                np.testing.assert_array_equal(again.blocks.mlp.w_up, params.blocks.mlp.w_up)
            if n == 1 and name in OWN_DECODING:  # greedy generation of 24 tokens (past the windows of 8)
                prompts = toks[:2, :12].tolist()
                # (both prompts prefilled in one step, then decoded together: two programs)
                engine = Engine(cfg.model, rules, params, config=EngineConfig(slots=2, page_size=8, prefills=2))
                if name == "gemma4_e2b":  # (pages for layers 0 and 1 alone: layers 2 and 3 read theirs)
                    from spmdgpt.engine.paged import paged_layers, pool_index

                    assert paged_layers(cfg.model) == {"blocks": 1, "local_blocks": 1}
                    assert pool_index(cfg.model).tolist() == [0, 0, 0, 0]
                ours_ids = [r.tokens for r in engine.run([Request(p, 24, temperature=0.0) for p in prompts])]
                theirs_ids = torch_side.ask("generate_ids", folder=str(tmp_path), prompts=prompts,
                                            max_new_tokens=24)["ids"]
                assert ours_ids == theirs_ids
            if ("rope_parameters" in config or "sliding_window" in config) and n == 1:
                # (the scaling, the window matter: without them the logits differ)
                plain = dataclasses.replace(cfg.model, rope_scaling=RopeScaling.none, sliding_window=0)
                plain_logits = jax.jit(lambda p, t: forward(plain, rules, p, t)[0])(params, toks)
                assert np.abs(np.asarray(plain_logits) - theirs).max() > 1e-2
        assert np.abs(ours - theirs).max() <= 1e-4 and np.abs(theirs).max() > 1.0
        # (as the folder's class: Qwen3-Next and Qwen3.5-MoE compute the same models, their tensors named apart)
        folder_class = json.loads((tmp_path / "config.json").read_text())["architectures"][0]
        again = to_hf(cfg.model, jax.tree.map(np.asarray, jax.device_get(params)), folder_class)
        assert sorted(again) == sorted(original)
        assert all(again[k].tobytes() == original[k].tobytes() for k in original)
    if name in EXPORT_CONFIG_LOADS:  # export's config.json with those tensors: transformers computes the same
        from safetensors.numpy import save_file

        folder = tmp_path / "exported"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(hf_config(cfg.model, eos_id=None)))
        save_file(again, str(folder / "model.safetensors"))
        assert np.abs(torch_side.logits(folder, toks) - theirs).max() <= 1e-5


def test_olmo3_rope_and_bad_fields_read_as_transformers_reads_them(torch_side, tmp_path, capsys):
    """An OLMo 3 config.json in transformers 4.x's form (a top-level rope_theta of 5000 and YaRN in
    rope_scaling, no rope_parameters) gives transformers' logits: the full layers YaRN on 5000, the
    windowed ones 500,000 unscaled (Olmo3Config's reading: the top-level base is not theirs); a field
    of the wrong type, or missing, is one line (exit 2), never a traceback."""
    from spmdgpt.hf import load_params, with_hf_model

    toks = np.random.default_rng(1).integers(0, 96, (2, 40)).astype(np.int32)
    make_hf_model(torch_side, "olmo3", tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["rope_parameters"]
    config.update(rope_theta=5000.0, rope_scaling={**YARN_ROPE, "rope_theta": 5000.0})
    (tmp_path / "config.json").write_text(json.dumps(config))
    theirs = torch_side.logits(tmp_path, toks)
    cfg, changes = with_hf_model(load_config(["+experiment=staircase", f"checkpoint.init_from=hf:{tmp_path}",
                                              "mesh.data=1"]))
    assert {"model.rope_scaling=yarn", "model.rope_theta=5000.0", "model.rope_local_theta=500000.0"} <= set(changes)
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        ours = np.asarray(jax.jit(lambda p, t: forward(cfg.model, rules, p, t)[0])(
            load_params(cfg.model, tmp_path, rules, "test"), toks))
    assert np.abs(ours - theirs).max() <= 1e-4
    for key, value in (("hidden_size", "64"), ("num_attention_heads", True), ("num_hidden_layers", None)):
        (tmp_path / "config.json").write_text(json.dumps({**config, key: value}))
        assert main(["sample", f"run.dir=hf:{tmp_path}", "prompt=x", "mesh.data=1"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"config.json has {key}={value!r}; spmdgpt needs a whole number" in err


def test_mxfp4_experts_read_as_transformers_dequantizes_them(torch_side, tmp_path):
    """gpt-oss's published folders hold each layer's experts in MXFP4 (NAME_blocks: 4-bit values,
    NAME_scales: a power of two per 32): such a folder imports with every expert weight equal to
    transformers' own dequantization of the same bytes (the gate and up columns de-interleaved),
    every other tensor as stored."""
    from safetensors.numpy import load_file, save_file

    from spmdgpt.hf import load_params, with_hf_model

    make_hf_model(torch_side, "gpt_oss", tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    rng, want = np.random.default_rng(0), {}
    for name in [n for n in tensors if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        experts, inputs, rows = tensors.pop(name).shape  # [E, in, out]
        blocks = rng.integers(0, 256, (experts, rows, inputs // 32, 16), dtype=np.uint8)
        scales = rng.integers(122, 130, (experts, rows, inputs // 32), dtype=np.uint8)
        tensors[f"{name}_blocks"], tensors[f"{name}_scales"] = blocks, scales
        out = torch_side._file()
        torch_side.ask("mxfp4", blocks=torch_side._file(blocks), scales=torch_side._file(scales), out=out)
        want[name] = np.load(out)
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    cfg, _ = with_hf_model(load_config(["+experiment=staircase", f"checkpoint.init_from=hf:{tmp_path}", "mesh.data=1"]))
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        params = jax.device_get(load_params(cfg.model, tmp_path, Rules(mesh, cfg.sharding, cfg.model), "test"))
    mlp = params.blocks.mlp
    for i in range(2):
        gate_up, down = (want[f"model.layers.{i}.mlp.experts.{p}"] for p in ("gate_up_proj", "down_proj"))
        assert np.abs(gate_up).max() > 1.0 and len(np.unique(gate_up)) > 30  # (many codes, several scales)
        np.testing.assert_array_equal(mlp.w_gate[i], gate_up[..., 0::2])
        np.testing.assert_array_equal(mlp.w_up[i], gate_up[..., 1::2])
        np.testing.assert_array_equal(mlp.w_down[i], down)
    np.testing.assert_array_equal(params.embed, tensors["model.embed_tokens.weight"])


MULTIMODAL = {  # a multimodal class -> (its kind in torch_side, its text model's, a small vision tower)
    "Qwen3_5ForConditionalGeneration": ("qwen3_5_vl", "qwen3_5", {
        "depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64,
        "patch_size": 4, "spatial_merge_size": 2, "temporal_patch_size": 2, "num_position_embeddings": 16}),
    "Qwen3_5MoeForConditionalGeneration": ("qwen3_5_moe_vl", "qwen3_5_moe", {
        "depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64,
        "patch_size": 4, "spatial_merge_size": 2, "temporal_patch_size": 2, "num_position_embeddings": 16}),
    "Gemma3ForConditionalGeneration": ("gemma3_vl", "gemma3", {
        "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
        "image_size": 16, "patch_size": 4}),
    "Gemma4ForConditionalGeneration": ("gemma4_vl", "gemma4", {  # (the published Gemma 4 folders' class)
        "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 2, "head_dim": 16, "patch_size": 4, "position_embedding_size": 64}),
    "Llama4ForConditionalGeneration": ("llama4_vl", "llama4", {  # (the published Scout's and Maverick's class)
        "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
        "image_size": 16, "patch_size": 4, "vision_output_dim": 32, "projector_input_dim": 32,
        "projector_output_dim": 32}),
}


@pytest.mark.parametrize("arch", list(MULTIMODAL))
def test_a_multimodal_checkpoints_language_model_imports(arch, torch_side, tmp_path):
    """A multimodal folder (a vision tower beside the language model): its text_config and its
    language model's weights (Qwen3.5: model.language_model.*; Gemma 3: language_model.model.*)
    import as the text class, the vision tower is said to be left out, and the logits of text
    equal the multimodal model's."""
    from spmdgpt.hf import load_params, with_hf_model
    from spmdgpt.hf.fields import LANGUAGE_MODELS

    kind, text, vision = MULTIMODAL[arch]
    toks = np.random.default_rng(0).integers(0, 96, (2, 24)).astype(np.int32)
    request = {"kind": kind, "folder": str(tmp_path), "config": {"text_config": HF_CONFIGS[text],
                                                                  "vision_config": vision}}
    theirs = torch_side.ask_array("make_model", toks, **request)[1]
    cfg, changes = with_hf_model(load_config(["+experiment=staircase", "mesh.data=1",
                                              f"checkpoint.init_from=hf:{tmp_path}"]))
    assert (f"{arch}: its language model only ({LANGUAGE_MODELS[arch]}'s weights); the vision tower is left "
            "out") in changes
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        params = load_params(cfg.model, tmp_path, rules, "test")
        ours = np.asarray(jax.jit(lambda p, t: forward(cfg.model, rules, p, t)[0])(params, toks))
    assert np.abs(ours - theirs).max() <= 1e-4 and np.abs(theirs).max() > 1.0


def test_imported_deepseek_v3_trains_alike_on_one_device_and_sharded(torch_side, tmp_path, capsys):
    """A random DeepseekV3ForCausalLM imported: loss and gradients (MLA, the sigmoid-routed MoE with
    its grouped choice, the router bias, shared experts, a dense first layer) on one device equal
    those under FSDP over 2 x expert parallelism over 2 x tensor parallelism over 2 within 1e-5;
    `spmdgpt train` from it (FSDP 4 x expert 2) for 12 steps lowers the loss by 20%."""
    from layouts import assert_close

    from spmdgpt.hf import load_params, with_hf_model
    from spmdgpt.model.loss import objective

    make_hf_model(torch_side, "deepseek_v3", tmp_path / "hf")
    toks = np.random.default_rng(1).integers(0, 96, (8, 33)).astype(np.int32)
    results = []
    sharded = ["sharding=fsdp_tp", "mesh.data=2", "mesh.expert=2", "mesh.model=2"]
    for overrides, n in ((["mesh.data=1"], 1), (sharded, 8)):
        cfg, _ = with_hf_model(load_config(["+experiment=staircase", f"checkpoint.init_from=hf:{tmp_path / 'hf'}",
                                            *overrides]))
        mesh = make_mesh(cfg.mesh, jax.devices()[:n])
        with jax.set_mesh(mesh):
            rules = Rules(mesh, cfg.sharding, cfg.model)
            params = load_params(cfg.model, tmp_path / "hf", rules, "test")
            if n == 8:  # (as test_import_gives_transformers_logits_on_one_and_eight_devices checks the other imports)
                P, w, a = jax.sharding.PartitionSpec, params.blocks.mlp.w_up, params.blocks.attn
                assert w.sharding.spec == P(None, "expert", ("data", "context"), "model")
                assert w.addressable_shards[0].data.shape == (2, 2, 32, w.shape[-1] // 2)
                assert a.w_ukv.sharding.spec == P(None, ("data", "context"), "model", None)
                assert a.w_ukv.addressable_shards[0].data.shape == (2, 16, 2, 32)
            grad = jax.value_and_grad(lambda p: objective(cfg.model, rules, p, toks[:, :-1], toks[:, 1:])[0])
            results.append(jax.device_get(jax.jit(grad)(params)))
    (loss1, grads1), (loss8, grads8) = results
    assert abs(loss8 - loss1) <= 1e-5 * abs(loss1) and loss1 > 1.0
    assert_close(grads8, grads1)
    run = tmp_path / "run"
    assert main(["train", "+experiment=staircase", f"checkpoint.init_from=hf:{tmp_path / 'hf'}", "train.steps=12",
                 "train.log_every=6", "train.eval_every=12", "train.progress=false", "sharding=fsdp", "mesh.data=4",
                 "mesh.expert=2", f"run.dir={run}"]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    assert rows[-1]["loss"] < 0.8 * rows[0]["loss"]
    assert "model.mla={kv_rank: 32, q_rank: 48, rope_dim: 8, nope_dim: 16, v_dim: 16}" in capsys.readouterr().err


def test_import_train_export_round_trip(torch_side, tmp_path, capsys):
    """End to end: `spmdgpt train checkpoint.init_from=hf:DIR` (the model fields printed and
    recorded), one step at learning rate 1e-30 (no weight moves by an ulp), then `spmdgpt export`: the same bytes as
    DIR's."""
    from safetensors.numpy import load_file

    make_hf_model(torch_side, "neox", tmp_path / "hf")
    run_dir = tmp_path / "run"
    code = main(["train", "+experiment=staircase", f"checkpoint.init_from=hf:{tmp_path / 'hf'}", "train.steps=1",
                 "optimizer.lr=1e-30", "train.progress=false", f"run.dir={run_dir}"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert (f"checkpoint.init_from=hf:{tmp_path / 'hf'}: the model is the checkpoint's: model.vocab_size=96 "
            "model.bias=True model.tie_embeddings=False") in err
    assert "vocab_size: 96" in (run_dir / "config.yaml").read_text()
    assert main(["export", f"run.dir={run_dir}", f"out={tmp_path / 'out'}"]) == 0
    original, again = load_file(str(tmp_path / "hf" / "model.safetensors")), load_file(
        str(tmp_path / "out" / "model.safetensors"))
    assert sorted(again) == sorted(original)
    assert all(again[k].tobytes() == original[k].tobytes() for k in original)


def test_import_refuses_what_it_cannot_represent(torch_side, tmp_path, capsys):
    def start(folder):
        capsys.readouterr()
        code = main(["train", "+experiment=staircase", f"checkpoint.init_from=hf:{folder}", "train.steps=1",
                     "train.progress=false", f"run.dir={tmp_path / 'run'}"])
        return code, capsys.readouterr().err.strip().splitlines()

    where = f"spmdgpt: error: checkpoint.init_from=hf:{tmp_path}"
    (tmp_path / "empty").mkdir()
    assert start(tmp_path / "empty") == (2, [f"{where}/empty: no config.json there; give a Hugging Face model "
                                             "folder (config.json + safetensors weights)"])
    make_hf_model(torch_side, "llama", tmp_path / "dynamic",
                  rope_parameters={"rope_type": "dynamic", "rope_theta": 5000.0, "factor": 2.0})
    assert start(tmp_path / "dynamic") == (2, [
        f"{where}/dynamic: config.json has rope_type='dynamic'; spmdgpt needs default, linear, llama3 or yarn "
        "(the RoPE scalings spmdgpt computes)"])
    make_hf_model(torch_side, "qwen3", tmp_path / "biased", attention_bias=True)
    assert start(tmp_path / "biased") == (2, [
        f"{where}/biased: config.json has attention_bias=True; spmdgpt needs false (no attention biases)"])
    make_hf_model(torch_side, "qwen3_moe", tmp_path / "sparse", mlp_only_layers=[1])  # (the last layer dense)
    assert start(tmp_path / "sparse") == (2, [
        f"{where}/sparse: config.json has mlp_only_layers=[1]; spmdgpt needs MoE layers laid out as the first N "
        "layers dense, then every k-th layer MoE, the last layer MoE (model.moe.first_dense_layers, interleave_step)"])
    make_hf_model(torch_side, "qwen3_next", tmp_path / "next", mlp_only_layers=[1], shared_expert_intermediate_size=48)
    assert start(tmp_path / "next") == (2, [
        f"{where}/next: config.json has shared_expert_intermediate_size=48; spmdgpt needs a positive multiple of "
        "moe_intermediate_size=32 (model.moe.shared_experts experts wide)",
        f"{where}/next: config.json has mlp_only_layers=[1]; spmdgpt needs [] (an MoE in every layer of a hybrid)"])
    make_hf_model(torch_side, "neox", tmp_path / "parallel", use_parallel_residual=True)
    assert start(tmp_path / "parallel") == (2, [
        f"{where}/parallel: config.json has use_parallel_residual=True; spmdgpt needs false (a sequential residual)"])
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}))
    assert start(gpt2) == (2, [f"{where}/gpt2: architecture 'GPT2LMHeadModel' is not supported; spmdgpt imports "
                               "KimiLinearForCausalLM, Qwen3_5MoeForCausalLM, Qwen3NextForCausalLM, "
                               "Qwen3_5ForCausalLM, GptOssForCausalLM, "
                               "Llama4ForCausalLM, DeepseekV32ForCausalLM, DeepseekV3ForCausalLM, Qwen3MoeForCausalLM, "
                               "MixtralForCausalLM, Qwen3ForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, "
                               "LlamaForCausalLM, Gemma4ForCausalLM, Gemma3ForCausalLM, GPTNeoXForCausalLM, "
                               "Olmo3ForCausalLM, "
                               "Olmo2ForCausalLM, NanoChatForCausalLM, DeepseekV4ForCausalLM checkpoints"])
    make_hf_model(torch_side, "deepseek_v3", tmp_path / "ds", rope_interleave=False)
    assert start(tmp_path / "ds") == (2, [f"{where}/ds: config.json has rope_interleave=False; spmdgpt needs true "
                                          "(interleaved RoPE pairs, DeepSeek's checkpoints)"])
    v32 = tmp_path / "v32"  # (DeepSeek-V3.2: a layer without the indexer, an indexer narrower than its RoPE)
    v32.mkdir()
    (v32 / "config.json").write_text(json.dumps({
        **HF_CONFIGS["deepseek_v32"], "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
        "layer_types": ["indexed_attention", "full_attention", "indexed_attention"], "index_head_dim": 4}))
    assert start(v32) == (2, [
        f"{where}/v32: config.json has layer_types=['indexed_attention', 'full_attention', 'indexed_attention']; "
        "spmdgpt needs 3 of indexed_attention",
        f"{where}/v32: config.json has index_head_dim=4; spmdgpt needs an even whole number >= qk_rope_head_dim=8 "
        "(its first qk_rope_head_dim dimensions rotate)"])
    # a config.json that does not match its weights
    make_hf_model(torch_side, "llama", tmp_path / "wrong")
    config = json.loads((tmp_path / "wrong" / "config.json").read_text())
    (tmp_path / "wrong" / "config.json").write_text(json.dumps({**config, "intermediate_size": 192}))
    code, err = start(tmp_path / "wrong")
    assert code == 2 and (f"{where}/wrong: tensor model.layers.0.mlp.gate_proj.weight has shape [160, 64], "
                          "the model config gives [192, 64]") in err
    # pickled weights are refused, never opened
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text(json.dumps(config))
    (pickled / "pytorch_model.bin").write_bytes(b"not even a pickle: never opened")
    code, err = start(pickled)
    assert code == 2 and err[-1].startswith(f"{where}/pickled holds only pickled PyTorch weights (pytorch_model.bin), "
                                           "which spmdgpt never opens")
    assert not (tmp_path / "run").exists()  # nothing was written
