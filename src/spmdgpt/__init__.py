"""spmdgpt: a legible, scalable, reproducible GPT trainer in plain JAX.

Public API (everything else is an implementation detail):

    from spmdgpt import load_config, train
    cfg = load_config(["+experiment=staircase", "train.steps=100"])
    result = train(cfg)            # -> TrainResult(run_dir, state, final_loss, val_loss)
"""

from spmdgpt.config import Config, ConfigError, load_config, validate


def train(cfg, argv=None):
    from spmdgpt.train import train as _train

    return _train(cfg, argv)


__all__ = ["Config", "ConfigError", "load_config", "train", "validate"]
__version__ = "0.1.0"
