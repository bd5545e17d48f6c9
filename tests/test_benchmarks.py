"""Benchmark scripts: those a session with a GPU only has to run run here, tiny, on a CPU; the
PyTorch reference of the CPU and GPU comparisons is checked to be spmdgpt's model."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_benchmark_speed_runs_tiny_on_cpu(tmp_path):
    """benchmarks/gpu.py speed --tiny: the XLA-attention run reports its tokens/s, loss near
    ln(512) at init and XLA's planned memory; the cuDNN run fails with the backend's one-line
    error (no GPU here) without stopping the others; speed.json holds both rows."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "speed", "--tiny", "--only",
           "jax-xla-1k,jax-cudnn-1k", "--out", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {r["name"]: r for r in json.loads((tmp_path / "speed.json").read_text())}
    xla = rows["jax-xla-1k"]
    assert (xla["impl"], xla["attention"], xla["seq"], xla["batch"]) == ("jax", "xla", 128, 2)
    assert xla["tokens_per_sec"] > 0 and xla["planned_bytes"] > 0
    assert abs(xla["loss"] - math.log(512)) < 0.5
    assert "model.attention=cudnn needs an NVIDIA GPU" in rows["jax-cudnn-1k"]["error"]


def test_gpu_profile_summary_sums_stream_kernels(tmp_path):
    """benchmarks/gpu.py's trace summary: kernel time per step by kind from the GPU's stream rows
    only (its XLA Ops row repeats them), busy time as the union of overlapping kernels, wall from
    the first kernel's start to the last one's end."""
    import gzip

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu
    finally:
        sys.path.pop(0)
    meta = [{"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
            {"ph": "M", "name": "thread_name", "pid": 7, "tid": 2, "args": {"name": "Stream #14(Compute)"}},
            {"ph": "M", "name": "thread_name", "pid": 7, "tid": 3, "args": {"name": "XLA Ops"}}]
    kernels = [("nvjet_sm90_tst_128x160_NNT", 0, 4000), ("loop_add_fusion_12", 4000, 1000),
               ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop", 4500, 1500),
               ("input_reduce_fusion_31", 7000, 1000)]
    events = meta + [{"ph": "X", "pid": 7, "tid": 2, "name": n, "ts": t, "dur": d} for n, t, d in kernels]
    events += [{"ph": "X", "pid": 7, "tid": 3, "name": "fusion", "ts": 0, "dur": 8000},
               {"ph": "X", "pid": 1, "tid": 9, "name": "host work", "ts": 0, "dur": 50000}]
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    s = gpu.summarize_trace(path, steps=2)
    assert s["by_kind"] == {"GEMM": 2.0, "attention (cuDNN)": 0.75, "other fusion": 0.5, "reduction": 0.5}
    assert s["wall_ms_per_step"] == 4.0 and s["busy_ms_per_step"] == 3.5 and s["kernel_ms_per_step"] == 3.75


def test_pytorch_reference_is_spmdgpt_model(torch_side):
    """benchmarks/torch_gpt.py, the PyTorch side of benchmarks/peer.py, is the same model: with
    spmdgpt's initial parameters copied in (every one of its parameters, strictly), it gives
    spmdgpt's loss on the same tokens, and the same gradient for the embedding (to float32
    rounding)."""
    import jax
    import numpy as np
    from safetensors.numpy import save_file

    from spmdgpt.config import load_config
    from spmdgpt.hf.export import to_tensors
    from spmdgpt.hf.tables import TORCH_GPT
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.model import init_params, loss_fn

    v, d, n, L, t = 65, 64, 4, 2, 32
    cfg = load_config([f"model.vocab_size={v}", f"model.d_model={d}", f"model.num_heads={n}", f"model.num_layers={L}",
                       f"model.max_seq_len={t}", f"data.seq_len={t}", "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    toks = np.random.default_rng(0).integers(0, v, (2, t + 1)).astype(np.int32)
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding)
        params = init_params(cfg.model, jax.random.key(0), rules)
        loss, grads = jax.value_and_grad(lambda p: loss_fn(cfg.model, rules, p, toks[:, :-1], toks[:, 1:]))(params)
    state = to_tensors(cfg.model, jax.tree.map(np.asarray, params), TORCH_GPT)  # by the reference's table
    assert sorted(state) == sorted(["embed.weight", "ln_f.weight"] + [f"blocks.{i}.{n}.weight" for i in range(L)
                                   for n in ("ln1", "qkv", "proj", "ln2", "up", "down")])
    save_file(state, str(torch_side.dir / "torch_gpt.safetensors"))
    ref, embed_grad = torch_side.ask_array("torch_gpt", toks, state=str(torch_side.dir / "torch_gpt.safetensors"),
                                           dims={TORCH_GPT.fields[f]: getattr(cfg.model, f) for f in
                                                 ("vocab_size", "d_model", "num_heads", "num_layers", "max_seq_len")})
    assert abs(ref["loss"] - float(loss)) < 1e-5, (ref["loss"], float(loss))
    np.testing.assert_allclose(embed_grad, np.asarray(grads.embed), atol=1e-6, rtol=1e-4)


def test_attention_grad_variants_are_attentions_gradient(monkeypatch):
    """benchmarks/attention_grad.py's hand-written backwards (at small shapes) give autodiff's
    gradients of the same blocked causal attention, so its timings compare like with like."""
    import importlib.util

    import jax
    import jax.numpy as jnp

    spec = importlib.util.spec_from_file_location("attention_grad", ROOT / "benchmarks" / "attention_grad.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for name, value in {"B": 2, "N": 2, "T": 32, "H": 8, "BLOCK": 8}.items():
        monkeypatch.setattr(bench, name, value)
    q, k, v, w = (jax.random.normal(key, (2, 2, 32, 8)) for key in jax.random.split(jax.random.key(1), 4))
    rules = bench.one_device_rules()
    with jax.set_mesh(rules.mesh):
        want = bench.layer_grad(bench.autodiff(rules))(q, k, v, w)
        assert float(jnp.max(jnp.abs(want[1][:, :, -1]))) > 0  # the last key gets gradient from the last query
        for attend in (bench.by_hand(False), bench.by_hand(True), bench.key_major()):
            for g, r in zip(bench.layer_grad(attend)(q, k, v, w), want):
                assert g.shape == r.shape and float(jnp.max(jnp.abs(g - r))) < 1e-5


def test_step_parts_times_both_libraries_at_the_same_shapes(torch_python):
    """benchmarks/step_parts.py, tiny: every part is timed for spmdgpt and PyTorch, and both
    models' loss at initialization is near ln(65) = 4.17 (a model at another vocabulary would be
    far from it), so both were built at the overridden shapes (PyTorch's in its own process)."""
    tiny = ["model.num_layers=1", "model.d_model=32", "model.num_heads=2", "model.max_seq_len=16",
            "data.seq_len=16", "data.batch_size=2", "model.attention_block=8"]
    cmd = [sys.executable, str(ROOT / "benchmarks" / "step_parts.py"), "--rounds", "1", *tiny]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env={**os.environ, "SPMDGPT_TORCH_PYTHON": torch_python})
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    parts = {"forward", "forward + backward", "step", "attention"}
    for lib in ("spmdgpt", "pytorch"):
        assert set(res[lib]) == parts and all(ms > 0 for ms in res[lib].values())
        assert abs(res["loss"][lib] - math.log(65)) < 0.05, res["loss"]
