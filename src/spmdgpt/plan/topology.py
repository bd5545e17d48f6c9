"""Devices to compile for that this machine does not have: `spmdgpt plan topology=NAME`.

`jax.experimental.topologies.get_topology_desc` makes compile-only devices, and a step lowered
onto a mesh of them is compiled by the real compiler of that platform: memory_analysis() and
the collectives are what those devices would run. Two kinds of name:

- **NVIDIA GPUs**, `h100-N` (N GPUs: 1-8 on one host, or a multiple of 8 in hosts of 8). XLA
  compiles for a GPU from a description of it (a GpuTargetConfigProto in text form: compute
  capability, SMs, memory, caches, clock, cuDNN version), with no GPU present. The descriptions
  live in `configs/gpu/<kind>.txtpb`, each written by XLA itself on a real device
  (`benchmarks/gpu.py target`); JAX's CUDA plugin reads them (the `gpu-plan` extra). Checked on
  an H100 (benchmarks/BENCHMARKS.md, GPU): the plan made without a GPU predicts the measured
  peak memory of the GPT-2 124M step to 0.01%.
- **TPU pod slices**, named as Cloud TPU accelerator types so that the number means what it
  means when renting: `v5p-N` (N TensorCores, 2 per chip), `v5litepod-N` or `v5e-N` (N chips),
  `v6e-N` (N chips). libtpu compiles for them (the `tpu-plan` extra).

Each kind carries its data-sheet memory and bandwidth for the plan's fit test and its estimate
(the peak FLOP/s come from spmdgpt.plan.flops, by device kind, as for MFU).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from typing import List, Optional, Tuple

from spmdgpt.config import ConfigError

GPUS_PER_HOST = 8  # an HGX/DGX host


@dataclass(frozen=True)
class Chip:
    """Data-sheet figures of one device kind."""

    name: str
    platform: str  # "gpu" | "tpu"
    memory: Optional[int]  # bytes per device (GPUs: None, read from the stored description)
    bandwidth: float  # memory bytes/s per device (peak FLOP/s: spmdgpt.plan.flops.PEAK_FLOPS)
    ici: float = 0.0  # bytes/s a device sends in a ring collective over one mesh axis: a TPU
    # chip's bidirectional ICI bandwidth over its ports (one link each way, both neighbours), an
    # H100's NVLink one way (NCCL's ring sends to one peer through the NVSwitch)
    dims: int = 0  # TPU: the slice's torus dimensions (2 or 3)
    cores_per_chip: int = 1  # TPU: TensorCores counted by the accelerator type's number


# Vendor data sheets (NVIDIA H100 SXM: NVLink 900 GB/s bidirectional; Google Cloud TPU system
# architecture pages: bidirectional ICI per chip v5e 400 GB/s over 4 ports, v5p 1200 GB/s over
# 6, v6e 800 GB/s over 4).
CHIPS = {
    "h100": Chip("NVIDIA H100 80GB HBM3", "gpu", None, 3.35e12, ici=450e9),
    "v5e": Chip("TPU v5e", "tpu", 16 * 2**30, 819e9, ici=400e9 / 4, dims=2),
    "v5p": Chip("TPU v5p", "tpu", 95 * 2**30, 2765e9, ici=1200e9 / 6, dims=3, cores_per_chip=2),
    "v6e": Chip("TPU v6e", "tpu", 32 * 2**30, 1640e9, ici=800e9 / 4, dims=2),
}
ALIASES = {"v5litepod": "v5e"}
INSTALL = {
    "gpu": ("pip install 'spmdgpt[gpu-plan-cudnn]' (JAX's CUDA plugin and cuDNN at the pinned JAX version; "
            "no GPU or driver needed)"),
    "tpu": "pip install 'spmdgpt[tpu-plan]' (libtpu at the pinned JAX version; no TPU needed)",
}
_UNKNOWN_FIELD = re.compile(r'has no field named "(\w+)"')


@dataclass(frozen=True)
class Topology:
    name: str  # as given, e.g. v5p-128
    kind: str  # a key of CHIPS
    devices: int  # devices JAX will show (GPUs, TPU chips of every slice)
    xla_name: str  # GPU: slices x hosts x GPUs per host; TPU: <generation>:<torus shape> (one slice)
    slices: int = 1  # TPU: pod slices of that shape, joined over the data-center network (multislice)

    @property
    def chip(self) -> Chip:
        return CHIPS[self.kind]


def _torus(chips: int, dims: int) -> List[int]:
    """The Cloud TPU slice shape of `chips` chips: from 2x2 (x1), doubling the smallest axis (the
    last of equal ones) at each step: v5p 4x4x4 (64 chips), 4x4x8, 4x8x8; v5e 2x4, 4x4, 4x8."""
    shape = [2, 2] + [1] * (dims - 2)
    while shape[0] * shape[1] * (shape[2] if dims == 3 else 1) < chips:
        i = max(j for j in range(dims) if shape[j] == min(shape))
        shape[i] *= 2
    return shape


def parse_topology(name: str, slices: int = 1) -> Topology:
    """'h100-16' -> 16 GPUs in 2 hosts ('1x2x8'); 'v5p-128' -> 64 chips ('v5p:4x4x4');
    'v5e-16' -> 16 chips ('v5e:4x4'); with slices=K, K such TPU slices (multislice: the devices of
    all of them, slice after slice). ConfigError for anything else."""
    kind, _, count = name.partition("-")
    kind = ALIASES.get(kind, kind)
    if kind not in CHIPS:
        known = ", ".join(["h100-N (N GPUs)", "v5p-N (N TensorCores)", "v5litepod-N or v5e-N (N chips)",
                           "v6e-N (N chips)"])
        raise ConfigError([f"topology={name}: unknown device kind {kind!r}; known: {known}"])
    if count and not count.isdigit():
        raise ConfigError([f"topology={name}: expected {kind}-N with N a whole number, e.g. {kind}-8"])
    chip = CHIPS[kind]
    n = int(count or 1)
    if slices < 1:
        raise ConfigError([f"slices={slices} must be >= 1 (the number of {name} pod slices)"])
    if slices > 1 and chip.platform != "tpu":
        raise ConfigError([f"slices={slices} joins TPU pod slices; GPUs count every host in the name "
                           f"(e.g. {kind}-{GPUS_PER_HOST * slices} for {slices} hosts of {GPUS_PER_HOST})"])
    if chip.platform == "gpu":
        if n < 1 or (n > GPUS_PER_HOST and n % GPUS_PER_HOST):
            raise ConfigError([f"topology={name}: N={n} GPUs must be 1-{GPUS_PER_HOST} (one host) or a multiple "
                               f"of {GPUS_PER_HOST} (hosts of {GPUS_PER_HOST})"])
        hosts, per_host = (1, n) if n <= GPUS_PER_HOST else (n // GPUS_PER_HOST, GPUS_PER_HOST)
        return Topology(name, kind, n, f"1x{hosts}x{per_host}")
    chips = n // chip.cores_per_chip
    least = 4 * chip.cores_per_chip
    if n % chip.cores_per_chip or chips < 4 or chips & (chips - 1):
        unit = "TensorCores (2 per chip)" if chip.cores_per_chip == 2 else "chips"
        raise ConfigError([f"topology={name}: N counts {unit} and must be {least}, {2 * least}, {4 * least}, ... "
                           f"(a power of two from {least}), e.g. {kind}-{16 * least}"])
    return Topology(name, kind, chips * slices, f"{kind}:" + "x".join(map(str, _torus(chips, chip.dims))), slices)


def target_config(kind: str) -> str:
    """The stored GPU description configs/gpu/<kind>.txtpb."""
    return resources.files("spmdgpt").joinpath("configs", "gpu", f"{kind}.txtpb").read_text()


def capacity(top: Topology) -> Tuple[int, str]:
    """(bytes one device offers a step, what that number is). GPUs: the share of the memory
    that JAX's allocator takes (XLA_PYTHON_CLIENT_MEM_FRACTION, default 0.75); TPUs: the HBM."""
    chip = top.chip
    if chip.platform == "gpu":  # the memory the GPU reported (its description), not the data sheet's
        memory = int(re.search(r"device_memory_size:\s*(\d+)", target_config(top.kind)).group(1))
        fraction = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))
        return int(memory * fraction), (f"the {fraction:.0%} of a GPU's {memory / 2**30:.2f} GiB that JAX's "
                                        "allocator takes, XLA_PYTHON_CLIENT_MEM_FRACTION")
    return chip.memory, f"a {chip.name} chip's HBM (data sheet; its compiler leaves a little less to a program)"


def without_field(text: str, field: str) -> str:
    """The description without every `field: value` line (a field this XLA does not know)."""
    return re.sub(rf"(?m)^\s*{re.escape(field)}:.*\n", "", text)


def compile_only_devices(name: str, make=None, slices: int = 1) -> List:
    """The compile-only devices of topology `name` (`slices` of them, for TPUs). ConfigError when the
    platform's compiler (JAX's CUDA plugin, libtpu) is missing. GPUs: fields of the stored description that the
    installed XLA does not know (one written by a newer XLA) are dropped one by one, as its parser
    names them. `make(top, target_config)` -> devices (default: JAX's topologies; tests pass a fake)."""
    top = parse_topology(name, slices)
    make = make or _jax_topology
    platform = top.chip.platform
    text = target_config(top.kind) if platform == "gpu" else ""
    dropped: List[str] = []
    while True:
        with tempfile.TemporaryFile(mode="w+") as log:
            try:
                with _stderr_to(log):  # compilers' C++ logs: an unknown field is named there only
                    return make(top, text)
            except Exception as e:
                if isinstance(e, (NotImplementedError, ImportError)) or "TPU support not installed" in str(e):
                    raise ConfigError([f"topology={name} compiles with the {platform.upper()} compiler, which is "
                                       f"not installed: {INSTALL[platform]}"]) from None
                field = _unknown_field(e, log)
                if field is None or field in dropped:
                    raise
        dropped.append(field)
        text = without_field(text, field)


def target_default(mesh):
    """A context in which the first device of `mesh` (compile-only GPUs: a plan's) is JAX's default
    device; none for other meshes. Kernels that pick their variant for the default device's GPU
    (tokamax's: `model.attention=tokamax`, `model.moe.grouped=tokamax`), in their forward and their
    backward, then compile for the target's GPU, as on the GPU itself, and not for this CPU."""
    import jax

    device = None if mesh is None else mesh.devices.flat[0]
    if device is None or device.platform != "gpu":
        return contextlib.nullcontext()
    return jax.default_device(device)


def _unknown_field(e: Exception, log):
    log.seek(0)
    m = _UNKNOWN_FIELD.search(str(e)) or _UNKNOWN_FIELD.search(log.read())
    return m.group(1) if m else None


@contextlib.contextmanager
def _stderr_to(f):
    """File descriptor 2 (where XLA's and libtpu's C++ logs go) into the file f for the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _jax_topology(top: Topology, text: str) -> List:
    from jax.experimental import topologies

    if top.chip.platform == "gpu":
        desc = topologies.get_topology_desc(platform="cuda", target_config=text, topology=top.xla_name)
    else:  # (libtpu takes a lock meant for a TPU host; compiling needs none: plans may run side by side)
        os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
        desc = topologies.get_topology_desc(topology_name=top.xla_name, platform="tpu", num_slices=top.slices)
    return list(desc.devices)
