"""spmdgpt: a legible, scalable, reproducible GPT trainer in plain JAX.

The public API (each subpackage's `__init__` lists its own: spmdgpt.config, spmdgpt.model,
spmdgpt.data, spmdgpt.optim):

    from spmdgpt import load_config, train
    cfg = load_config(["+experiment=staircase", "train.steps=100"])
    result = train(cfg)     # -> TrainResult(run_dir, state, step, final_loss, val_loss, ...)

    from spmdgpt import Engine, EngineConfig, Request, Rules, make_mesh, forward, init_params
    # the model and the inference engine under any mesh and rule table (see docs/serving.md)

`import spmdgpt` loads only the config package; everything else is imported on first use.

The parts, low to high (each imports only from its own floor or below; tests/test_layout.py):

    config, mesh, run              the config schema; the mesh and its rules; a run's folder and logs
    model, data, optim, hf, tasks  the model's units; corpora and tokenizers; optimizers;
      web                          Hugging Face in and out; eval tasks; the page's export
    training, engine               the step and what runs around it; inference and its server
    eval                           the validation loss, lm-eval's backend
    plan                           programs compiled ahead of time: memory, FLOPs, collectives
    scaling, rl                    run sizes and scaling laws; GRPO and its rewards and tools
    kinds                          the kinds of run (text, GRPO) the loop runs without naming
    loop                           the training loop: `train(cfg)`
    cli                            the `spmdgpt` commands

(The loop is `spmdgpt.loop` and the step's package `spmdgpt.training`, not `spmdgpt.train`: a
submodule of that name would replace the `spmdgpt.train` function once imported.)
"""

import importlib

from spmdgpt.config import Config, ConfigError, load_config, load_run_config, validate

_LAZY = {  # name -> the module that defines it
    "train": "spmdgpt.loop",
    "TrainResult": "spmdgpt.loop",
    "TrainingDiverged": "spmdgpt.loop",
    "make_train_step": "spmdgpt.training.step",
    "TrainState": "spmdgpt.training.state",
    "init_state": "spmdgpt.training.state",
    "Rules": "spmdgpt.mesh.sharding",
    "make_mesh": "spmdgpt.mesh.sharding",
    "forward": "spmdgpt.model",
    "init_params": "spmdgpt.model",
    "loss_fn": "spmdgpt.model",
    "param_info": "spmdgpt.model",
    "Engine": "spmdgpt.engine",
    "EngineConfig": "spmdgpt.engine",
    "Request": "spmdgpt.engine",
    "SamplingParams": "spmdgpt.engine.generate",
    "build_optimizer": "spmdgpt.optim",
    "load_dataset": "spmdgpt.data",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'spmdgpt' has no attribute {name!r}")


__all__ = ["Config", "ConfigError", "load_config", "load_run_config", "validate", *_LAZY]
__version__ = "0.1.0"
