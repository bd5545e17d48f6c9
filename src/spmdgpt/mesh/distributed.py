"""Multi-process start-up through jax.distributed (the engine JAX ships; nothing home-made).

A run is multi-process when dist.coordinator/num_processes/process_id are given (the local
launcher, plain multi-host) or when JAX can detect the cluster (SLURM, Open MPI, TPU VM pod
slices). Single-process runs skip initialisation. CPU runs use gloo for collectives.
"""

from __future__ import annotations

import os

from spmdgpt.config import ConfigError, DistConfig, validate_dist


def detected_cluster() -> str | None:
    """The cluster kind jax.distributed.initialize() would detect, if this is a multi-process job."""
    if int(os.environ.get("SLURM_NTASKS", "1")) > 1 and "SLURM_JOB_ID" in os.environ:
        return "slurm"
    if int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:
        return "openmpi"
    if "," in os.environ.get("TPU_WORKER_HOSTNAMES", ""):  # a TPU VM slice of several workers
        return "tpu"
    return None


def initialize(dist: DistConfig) -> bool:
    """Start jax.distributed when the run is multi-process; returns whether it did."""
    errs = validate_dist(dist)
    if errs:
        raise ConfigError(errs)
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if dist.coordinator is not None:
        if dist.num_processes == 1:
            return False
        jax.distributed.initialize(
            coordinator_address=dist.coordinator,
            num_processes=dist.num_processes,
            process_id=dist.process_id,
        )
        return True
    if dist.auto and detected_cluster():
        jax.distributed.initialize()  # JAX reads the cluster's environment itself
        return True
    return False
