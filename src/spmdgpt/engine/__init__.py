"""Inference (floor 2): the engine and what serves it.

    scheduler   Engine: continuous batching over a paged KV cache, per-request sampling and streams
    paged       the one compiled step over a pool of pages (`paged.Step`), sampling rows
    pages       the pool's page accounting and prefix sharing
    generate    what the sampling commands share: SamplingParams, the context check, Conversation
    server      `spmdgpt serve`: the OpenAI-compatible HTTP server over an Engine

May import: floors 0-1 (`config`, `mesh`, `run`, `model`, `data`) and each other. The package
exports the engine's names (below); `generate` and `server` are imported by name. See
docs/serving.md."""

from spmdgpt.engine.paged import init_pool, layouts, pool_bytes, sample_rows
from spmdgpt.engine.scheduler import Engine, EngineConfig, Request, batch_engine

__all__ = ["Engine", "EngineConfig", "Request", "batch_engine", "init_pool", "layouts", "pool_bytes", "sample_rows"]
