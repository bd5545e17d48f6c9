"""A run's folder and records (floor 0, beside `config` and `mesh`).

    files      atomic writes, WriteFailed with the OS's reason, reading JSONL logs back
    rundir     the run directory: resolved config, metadata, log truncation on resume, the lock
    loggers    metrics.jsonl and the console
    trackers   TensorBoard and Weights & Biases beside metrics.jsonl

May import: `spmdgpt.config` and each other."""
