"""Where PyTorch runs for the comparisons (peer.py, step_parts.py, gpu.py) and the tests.

spmdgpt needs Python >= 3.12 (JAX 0.12); the CPU build of PyTorch these machines carry is a
Python 3.11 wheel, and PyPI's torch for Linux brings several GB of CUDA packages. So PyTorch
lives in a side environment, `.venv-torch` (made by `make torch-env`, which `make test` runs:
torch, transformers, safetensors, numpy; requirements-torch.txt), and everything that needs it
runs there as a child process, exchanging arrays as files. This module imports neither.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIDE = ROOT / ".venv-torch" / "bin" / "python"


def torch_python() -> str | None:
    """The interpreter that has PyTorch: $SPMDGPT_TORCH_PYTHON, else the checkout's
    .venv-torch, else this interpreter when it has torch itself (the GPU machines' system
    Python), else None."""
    env = os.environ.get("SPMDGPT_TORCH_PYTHON")
    if env:
        if not Path(env).is_file():
            raise FileNotFoundError(f"SPMDGPT_TORCH_PYTHON={env} does not exist; run `make torch-env` or unset it")
        return env
    if SIDE.is_file():
        return str(SIDE)
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    return None


def require_torch_python(who: str) -> str:
    """torch_python(), or exit with one line saying how to get it."""
    py = torch_python()
    if py is None:
        sys.exit(f"{who}: no Python with PyTorch found; run `make torch-env` (builds .venv-torch) "
                 "or set SPMDGPT_TORCH_PYTHON")
    return py
