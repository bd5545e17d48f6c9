"""The mesh: where arrays live and how processes join (floor 0, beside `config` and `run`).

    sharding      the device mesh from config and the logical-axis rule tables (`Rules`)
    distributed   multi-process start-up through jax.distributed
    runtime       process settings needed before JAX starts (XLA flags, malloc tunables)

May import: `spmdgpt.config` only (and each other)."""
