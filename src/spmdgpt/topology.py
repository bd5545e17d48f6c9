"""Devices to compile for that this machine does not have: `spmdgpt plan topology=h100-8`.

XLA compiles for an NVIDIA GPU from a description of it (a GpuTargetConfigProto in text form:
compute capability, SMs, memory, cache, clock, cuDNN version), with no GPU present. The
descriptions live in `configs/gpu/<kind>.txtpb`, each written by XLA itself on a real device
(`benchmarks/gpu.py target`). `jax.experimental.topologies.get_topology_desc(platform="cuda",
target_config=..., topology="<slices>x<hosts>x<gpus per host>")` turns one into compile-only
devices through JAX's CUDA plugin (the `gpu-plan` extra: jax-cuda13-plugin and -pjrt at the
pinned JAX version, plus cuDNN for cuDNN attention), and a step lowered onto a mesh of them is
compiled by the real GPU compiler: memory_analysis() and the collectives are what that GPU
would run. Checked on an H100 (benchmarks/BENCHMARKS.md, GPU): the plan made without a GPU
predicts the measured peak memory of the GPT-2 124M step to 0.01%.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from importlib import resources
from typing import List, Tuple

from spmdgpt.config import ConfigError

GPUS_PER_HOST = 8  # an HGX/DGX host
GPU_KINDS = ("h100",)  # configs/gpu/<kind>.txtpb
INSTALL = ("pip install 'spmdgpt[gpu-plan]' (JAX's CUDA plugin and cuDNN at the pinned JAX version; "
           "no GPU or driver needed)")
_UNKNOWN_FIELD = re.compile(r'has no field named "(\w+)"')


def parse_topology(name: str) -> Tuple[str, int, str]:
    """'h100-16' -> ('h100', 16, '1x2x8'): the GPU kind, the number of GPUs and XLA's topology
    string (slices x hosts x GPUs per host; up to 8 GPUs on one host, more in hosts of 8).
    A bare kind ('h100') is one GPU. ConfigError for anything else."""
    kind, _, count = name.partition("-")
    if kind not in GPU_KINDS:
        raise ConfigError([f"topology={name}: unknown device kind {kind!r}; known: "
                           + ", ".join(f"{k}-N (N GPUs)" for k in GPU_KINDS)])
    if count and not count.isdigit():
        raise ConfigError([f"topology={name}: expected {kind}-N with N a whole number of GPUs, e.g. {kind}-8"])
    n = int(count or 1)
    if n < 1 or (n > GPUS_PER_HOST and n % GPUS_PER_HOST):
        raise ConfigError([f"topology={name}: N={n} GPUs must be 1-{GPUS_PER_HOST} (one host) or a multiple "
                           f"of {GPUS_PER_HOST} (hosts of {GPUS_PER_HOST})"])
    hosts, per_host = (1, n) if n <= GPUS_PER_HOST else (n // GPUS_PER_HOST, GPUS_PER_HOST)
    return kind, n, f"1x{hosts}x{per_host}"


def target_config(kind: str) -> str:
    """The stored text of configs/gpu/<kind>.txtpb."""
    return resources.files("spmdgpt").joinpath("configs", "gpu", f"{kind}.txtpb").read_text()


def device_memory(kind: str) -> int:
    """The GPU's memory in bytes (the description's device_memory_size)."""
    return int(re.search(r"device_memory_size:\s*(\d+)", target_config(kind)).group(1))


def usable_memory(kind: str) -> Tuple[int, float]:
    """(bytes a JAX process can use on one such GPU, the fraction): JAX's allocator takes
    XLA_PYTHON_CLIENT_MEM_FRACTION of the memory (default 0.75)."""
    fraction = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))
    return int(device_memory(kind) * fraction), fraction


def without_field(text: str, field: str) -> str:
    """The description without every `field: value` line (a field this XLA does not know)."""
    return re.sub(rf"(?m)^\s*{re.escape(field)}:.*\n", "", text)


def compile_only_devices(name: str, make=None) -> List:
    """The compile-only devices of topology `name` (e.g. 'h100-8'). Fields of the stored
    description that the installed XLA does not know (a description written by a newer one) are
    dropped one by one, as its parser names them. ConfigError when JAX's CUDA plugin is missing.
    `make(target_config, topology)` -> devices (default: JAX's topologies; tests pass a fake)."""
    kind, _, topology = parse_topology(name)
    make = make or _jax_topology
    text = target_config(kind)
    dropped: List[str] = []
    while True:
        with tempfile.TemporaryFile(mode="w+") as log:
            try:
                with _stderr_to(log):  # XLA's parser names a field it does not know in its log only
                    return make(text, topology)
            except NotImplementedError:  # no topology factory for "cuda": the plugin is not installed
                raise ConfigError([f"topology={name} compiles for NVIDIA GPUs through JAX's CUDA plugin, "
                                   f"which is not installed: {INSTALL}"]) from None
            except Exception as e:
                log.seek(0)
                field = _UNKNOWN_FIELD.search(str(e)) or _UNKNOWN_FIELD.search(log.read())
                if field is None or field.group(1) in dropped:
                    raise
        dropped.append(field.group(1))
        text = without_field(text, field.group(1))


@contextlib.contextmanager
def _stderr_to(f):
    """File descriptor 2 (where XLA's C++ logs go) into the file f for the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _jax_topology(text: str, topology: str) -> List:
    from jax.experimental import topologies

    return list(topologies.get_topology_desc(platform="cuda", target_config=text, topology=topology).devices)
