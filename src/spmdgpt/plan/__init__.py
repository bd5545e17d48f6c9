"""Plans: what a run needs and does before it runs (floor 4).

    plan        every program of a run compiled ahead of time: memory, FLOPs, collectives, fit
    preflight   `spmdgpt train`'s check of those programs against the device before step 1
    search      compiles candidate layouts and names the best
    roofline    the kernels read from compiled HLO (GEMMs, attention, grouped MoE) with their FLOPs
    hlo         collectives and their traffic read from HLO text
    topology    named topologies (h100-8, v5p-64, ...) as compile-only devices
    flops       the 6N + attention formula

May import: floors 0-3 (`eval`, `training`, `engine`) and each other."""
