"""Benchmark scripts that a session with a GPU only has to run: they run here, tiny, on a CPU."""

import json
import math
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
