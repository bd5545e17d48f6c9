"""Process-level settings that must be in place before JAX starts its backends."""

from __future__ import annotations

import os

# Measured on the 2-core CPU box (benchmarks/BENCHMARKS.md): letting YNNPACK fuse only plain
# dots, and XLA's own emitters the elementwise ops around them, makes a B1 training step about
# 10% faster than the default (which also pulls elementwise ops into YNNPACK fusions).
DEFAULT_XLA_FLAGS = ("--xla_cpu_experimental_ynn_fusion_type=dot",)


def set_default_xla_flags(deterministic: bool = False) -> None:
    """Append spmdgpt's default XLA flags to $XLA_FLAGS, leaving any flag the user set alone.

    deterministic: also ask GPU backends for deterministic ops (reproducible reductions and
    scatters, at some speed cost); the CPU backend is deterministic already.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    wanted = DEFAULT_XLA_FLAGS + (("--xla_gpu_deterministic_ops=true",) if deterministic else ())
    for flag in wanted:
        if flag.split("=")[0] not in flags:
            flags = f"{flags} {flag}".strip()
    os.environ["XLA_FLAGS"] = flags
