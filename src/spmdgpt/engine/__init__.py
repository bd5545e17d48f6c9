"""The inference engine: continuous batching over a paged KV cache (`scheduler.Engine`), one
compiled step over a pool of pages (`paged.Step`). See docs/serving.md."""

from spmdgpt.engine.paged import init_pool, layouts, pool_bytes, sample_rows
from spmdgpt.engine.scheduler import Engine, EngineConfig, Request, batch_engine

__all__ = ["Engine", "EngineConfig", "Request", "batch_engine", "init_pool", "layouts", "pool_bytes", "sample_rows"]
