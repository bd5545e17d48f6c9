"""spmdgpt: a legible, scalable, reproducible GPT trainer in plain JAX.

The public API (each subpackage's `__init__` lists its own: spmdgpt.config, spmdgpt.model,
spmdgpt.data, spmdgpt.optim):

    from spmdgpt import load_config, train
    cfg = load_config(["+experiment=staircase", "train.steps=100"])
    result = train(cfg)     # -> TrainResult(run_dir, state, step, final_loss, val_loss, ...)

    from spmdgpt import Engine, EngineConfig, Request, Rules, make_mesh, forward, init_params
    # the model and the inference engine under any mesh and rule table (see docs/serving.md)

`import spmdgpt` loads only the config package; everything else is imported on first use.
(The loop lives in `spmdgpt.trainer`, not `spmdgpt.train`: a submodule of that name would
replace the `spmdgpt.train` function once imported.)
"""

import importlib

from spmdgpt.config import Config, ConfigError, load_config, load_run_config, validate

_LAZY = {  # name -> the module that defines it
    "train": "spmdgpt.trainer",
    "TrainResult": "spmdgpt.trainer",
    "TrainingDiverged": "spmdgpt.trainer",
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
