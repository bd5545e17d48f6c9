"""Loading configs: Hydra compose of the packaged YAML (``spmdgpt/configs``) with CLI overrides,
one-line errors, and the YAML / dict round trip of a resolved config."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from spmdgpt.config.schema import Config, ConfigError, ModelConfig

_REGISTERED = False


def register_configs() -> None:
    """Register the schema in Hydra's ConfigStore (the packaged config.yaml extends it)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="spmdgpt_schema", node=Config)
    _REGISTERED = True


def load_config(overrides: List[str]) -> Config:
    """Compose packaged YAML + CLI overrides into a typed Config. Raises ConfigError."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="spmdgpt.configs", version_base="1.3"):
            dcfg = compose(config_name="config", overrides=list(overrides))
        cfg = OmegaConf.to_object(dcfg)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError([_one_line_hydra_error(e)]) from None
    finally:
        GlobalHydra.instance().clear()
    assert isinstance(cfg, Config)
    return steps_over_budget(cfg, overrides)


def steps_over_budget(cfg: Config, overrides: List[str]) -> Config:
    """An explicit train.steps=N among the overrides (and no train.time_budget there) turns off
    a budget that a config file set (e.g. the shakespeare_char experiment's): N steps it is."""
    def given(key: str) -> bool:
        return any(o.lstrip("+~").split("=", 1)[0] == key for o in overrides)

    if cfg.train.time_budget is not None and given("train.steps") and not given("train.time_budget"):
        return fixed_steps(cfg, cfg.train.steps)
    return cfg


def fixed_steps(cfg: Config, steps: int) -> Config:
    """cfg training exactly `steps` steps, with no time budget (what a budget resolves to)."""
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=steps, time_budget=None))


def _one_line_hydra_error(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    # OmegaConf appends "full_key: ..., object_type=..." context lines; keep the message and key.
    msg = lines[0] if lines else type(e).__name__
    key = next((ln for ln in lines[1:] if ln.startswith("full_key:")), None)
    if key and key.split(":", 1)[1].strip() and key.split(":", 1)[1].strip() not in msg:
        msg = f"{key.split(':', 1)[1].strip()}: {msg}"
    if "Could not find 'experiment/" in msg or "Could not load 'experiment/" in msg:
        msg += f" (packaged experiments: {', '.join(packaged_names('experiment'))})"
    if "sharding/" in msg and ("Could not find" in msg or "Could not load" in msg):
        msg += f" (packaged tables: {', '.join(packaged_names('sharding'))})"
    return msg


def packaged_names(group: str) -> List[str]:
    d = Path(__file__).parent.parent / "configs" / group
    return sorted(p.stem for p in d.glob("*.yaml"))


def load_run_config(run_dir: Path, overrides: Sequence[str] = ()) -> Config:
    """The resolved Config a run wrote to run_dir/config.yaml, with `overrides` applied on top
    (`apply_overrides`)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise ConfigError([f"run.dir={run_dir}: no config.yaml there; give the directory of a training run"])
    try:
        merged = OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.load(path))
        cfg = OmegaConf.to_object(merged)
    except OmegaConfBaseException as e:
        raise ConfigError([f"{path}: {_one_line_hydra_error(e)}"]) from None
    return apply_overrides(cfg, overrides)


def apply_overrides(cfg: Config, overrides: Sequence[str]) -> Config:
    """A resolved Config with command-line overrides on top, in Hydra's override syntax:
    `key.path=value` for a field, `sharding=NAME` for a packaged rule table. (Presets such as
    +experiment=... describe a training run from scratch: they do not apply here.)"""
    if not overrides:
        return cfg
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    node = OmegaConf.structured(cfg)
    try:
        for o in OverridesParser.create().parse_overrides(list(overrides)):
            key = o.key_or_group
            if o.is_delete() or o.is_add() or o.package or key == "experiment":
                raise ConfigError([f"{o.input_line}: only key=value overrides of the run's config "
                                   "(and sharding=NAME) apply here"])
            if key == "sharding":
                table = Path(__file__).parent.parent / "configs" / "sharding" / f"{o.value()}.yaml"
                if not table.is_file():
                    raise ConfigError([f"sharding={o.value()}: no such rule table (packaged tables: "
                                       f"{', '.join(packaged_names('sharding'))})"])
                node.sharding = OmegaConf.merge(OmegaConf.structured(type(cfg.sharding)), OmegaConf.load(table))
            else:
                OmegaConf.update(node, key, o.value(), merge=False)
        return OmegaConf.to_object(node)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError([_one_line_hydra_error(e)]) from None


def to_yaml(cfg: Config) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def to_dict(cfg: Config) -> Dict[str, Any]:
    def conv(x):
        if isinstance(x, enum.Enum):
            return x.value
        if dataclasses.is_dataclass(x):
            return {f.name: conv(getattr(x, f.name)) for f in dataclasses.fields(x)}
        if isinstance(x, dict):
            return {k: conv(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [conv(v) for v in x]
        return x

    return conv(cfg)



def model_config_from_dict(d: Dict[str, Any], base: Optional[ModelConfig] = None) -> ModelConfig:
    """A ModelConfig from a dict as `to_dict` writes it (e.g. a checkpoint's meta), enums and
    types restored; fields the dict lacks (or that this version does not know) come from
    `base` (default: the schema's defaults)."""
    from omegaconf import OmegaConf

    known = {f.name for f in dataclasses.fields(ModelConfig)}
    merged = OmegaConf.merge(OmegaConf.structured(base or ModelConfig()),
                             {k: v for k, v in d.items() if k in known})
    return OmegaConf.to_object(merged)
