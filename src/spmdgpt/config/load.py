"""Loading configs: Hydra compose of the packaged YAML (``spmdgpt/configs``) with CLI overrides,
one-line errors, and the YAML / dict round trip of a resolved config."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from spmdgpt.config.choices import Parametrization
from spmdgpt.config.derived import head_dim
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
    check_override_keys(overrides)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="spmdgpt.configs", version_base="1.3"):
            dcfg = compose(config_name="config", overrides=list(overrides))
        cfg = OmegaConf.to_object(dcfg)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError([_value_error(e) or _one_line_hydra_error(e)]) from None
    finally:
        GlobalHydra.instance().clear()
    assert isinstance(cfg, Config)
    refuse_unread(cfg, overrides)
    return sized(steps_over_budget(cfg, overrides), overrides)


def override_key(item: str) -> str:
    """The config key a command-line override sets (`+model.x=1`, `~a.b`, `a.b=c`: model.x, a.b, a.b)."""
    return item.lstrip("+~").split("=", 1)[0]


def override_value(overrides: Sequence[str], key: str) -> Optional[str]:
    """The value of `key=value` among the overrides (the last one), else None."""
    values = [o.split("=", 1)[1] for o in overrides if "=" in o and override_key(o) == key]
    return values[-1] if values else None


def refuse_unread(cfg: Config, overrides: Sequence[str]) -> None:
    """ConfigError for an override that the composed config would never read (silently
    training on something else): data.text_file where data.datasets or the staircase source
    decides the corpus."""
    from spmdgpt.config.schema import DataSource

    text_file = override_value(overrides, "data.text_file")
    if text_file is None:
        return
    if cfg.data.source == DataSource.staircase:
        raise ConfigError([f"data.text_file={text_file} is not read: data.source=staircase generates its tokens; "
                           "set data.source=text to train on the file"])
    if cfg.data.datasets:
        raise ConfigError(
            [
                f"data.text_file={text_file} is not read: this config's corpus is data.datasets "
                f"({', '.join(cfg.data.datasets)}); add the file as +data.datasets.NAME.paths=[{text_file}], "
                "or start from an experiment without data.datasets"
            ]
        )


SIZE_WARMUP_SHARE = 0.0  # train.tokens_per_param's warmup, a share of the steps (BENCHMARKS.md, "Size rules")
SIZE_HEAD = 64  # model.size's head width (model.head_dim, when given, instead)
SIZE_ASPECT = 64  # model.size's d_model per layer (nanochat's choice: depth 20 -> 1,280)
# model.size = N: each derived field and its rule (a field given on the command line keeps its value)
SIZE_RULES = {
    "model.num_layers": "N",
    "model.d_model": f"{SIZE_ASPECT} x N",
    "model.num_heads": f"d_model / head_dim (model.head_dim, default {SIZE_HEAD}): N heads of {SIZE_HEAD}",
    "model.base_width, model.base_depth": "under mup / completep: the config's own d_model (completep: and "
    "num_layers), the shape its rates were set at, so that μP's multipliers carry them to the new size",
    "model.base_head_dim": "under mup / completep: the sized model's head width (the base has fewer heads of the "
    "same width), so that attention's scale is the same at every size",
    "optimizer.lr, optimizer.muon_lr": "unchanged: under mup / completep they transfer (the base above); under "
    "standard a rule from the config's rate made the ladder's smallest size worse (BENCHMARKS.md, \"A second "
    "ladder\"): tune at a small size under mup, or sweep (spmdgpt ladder lr)",
    "data.batch_size": "unchanged: at fixed compute the best batch was the smallest tried at both budgets measured, "
    "the best rate falling with it (BENCHMARKS.md, \"Size rules\"): below their critical batch, no exponent to fit",
    "train.steps": "with train.tokens_per_param=T: T x the matmul parameters / tokens per step",
    "optimizer.warmup_share": f"with train.tokens_per_param: {SIZE_WARMUP_SHARE:g} of the steps (no warmup) unless "
    "optimizer.warmup_steps or warmup_share is given: none was the best of 0, 2% and 10% at both budgets measured "
    "(BENCHMARKS.md, \"Size rules\"; nanochat trains without one too)",
}


def _refuse_unfit_base(m) -> None:
    """ConfigError when the base the size knob keeps (the config's own d_model) cannot be μP's base
    of the sized model `m` (it keeps m's heads: a whole, even head width, a whole MLP width),
    naming the nearest base width that can."""
    from spmdgpt.config.validate import feature_errors  # (μP's own checks, spmdgpt.model.parametrization)

    def unfit(width: int) -> List[str]:
        return [e for e in feature_errors("parametrization", dataclasses.replace(m, base_width=width))
                if "base_width" in e]

    if not unfit(m.base_width):
        return
    fits = next((w for w in sorted(range(1, 4 * m.base_width + 1), key=lambda w: (abs(w - m.base_width), w))
                 if not unfit(w)), None)
    fix = f"give model.base_width={fits} (the nearest that fits)" if fits else "give model.base_width"
    raise ConfigError([f"model.size={m.size} under {m.parametrization.value}: the config's d_model {m.base_width}, "
                       f"the base the knob keeps, cannot be μP's base of this size: "
                       f"{unfit(m.base_width)[0].split(';')[0]}; {fix}, or another size"])


def sized(cfg: Config, overrides: Sequence[str]) -> Config:
    """The composed Config with model.size's shape applied (`SIZE_RULES`; a field given among
    `overrides` keeps its value), and train.tokens_per_param checked (refused beside an explicit
    train.steps or train.time_budget; an experiment's time budget turned off). The steps it sets
    need the model's parameter count: `scaling.with_token_budget`, where a run starts. The rates
    are left as they are; under mup / completep the base shape becomes the config's own (unless
    given), so that they transfer to the new size."""
    def given(key: str) -> bool:
        return override_value(overrides, key) is not None

    m, t = cfg.model, cfg.train
    warmups = [k for k in ("optimizer.warmup_steps", "optimizer.warmup_share") if given(k)]
    if len(warmups) == 2:
        raise ConfigError(["optimizer.warmup_steps and optimizer.warmup_share were both given: choose one (the share "
                           "of the run's steps, when set, is the warmup)"])
    if warmups == ["optimizer.warmup_steps"] and cfg.optimizer.warmup_share is not None:  # (a config file's share)
        cfg = dataclasses.replace(cfg, optimizer=dataclasses.replace(cfg.optimizer, warmup_share=None))
    if m.size is not None:
        if not m.size > 0:
            raise ConfigError([f"model.size={m.size} must be a depth > 0 (num_layers = size, d_model = "
                               f"{SIZE_ASPECT} x size), or null for the fields as they are"])
        width = m.d_model if given("model.d_model") else SIZE_ASPECT * m.size
        fields = {"num_layers": m.num_layers if given("model.num_layers") else m.size, "d_model": width,
                  "num_heads": m.num_heads if given("model.num_heads") else max(1, width // (m.head_dim or SIZE_HEAD))}
        if not given("model.num_kv_heads"):
            fields["num_kv_heads"] = None
        if m.parametrization != Parametrization.standard:  # μP's base: the shape the config's rates were set at
            fields["base_width"] = m.base_width or m.d_model
            # (the knob widens by heads of one width: the base has fewer of the same, and attention's scale stays)
            fields["base_head_dim"] = m.base_head_dim or head_dim(dataclasses.replace(m, **fields))
            if m.parametrization == Parametrization.completep:
                fields["base_depth"] = m.base_depth or m.num_layers
            if m.base_width is None:
                _refuse_unfit_base(dataclasses.replace(m, **fields))
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(m, **fields))
    if t.tokens_per_param is not None:
        if not t.tokens_per_param > 0:
            raise ConfigError([f"train.tokens_per_param={t.tokens_per_param} must be > 0 (Chinchilla's "
                               "compute-optimal: about 20), or null for train.steps as given"])
        clash = [k for k in ("train.steps", "train.time_budget") if given(k)]
        if clash:
            raise ConfigError([f"train.tokens_per_param={t.tokens_per_param:g} sets the steps, and {clash[0]} was "
                               "given too: choose one"])
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(t, time_budget=None))
        if not warmups and cfg.optimizer.warmup_share is None:
            cfg = dataclasses.replace(cfg, optimizer=dataclasses.replace(cfg.optimizer,
                                                                        warmup_share=SIZE_WARMUP_SHARE))
    return cfg


def steps_over_budget(cfg: Config, overrides: List[str]) -> Config:
    """An explicit train.steps=N among the overrides (and no train.time_budget there) turns off
    a budget that a config file set (e.g. the shakespeare_char experiment's): N steps it is."""
    def given(key: str) -> bool:
        return override_value(overrides, key) is not None

    if cfg.train.time_budget is not None and given("train.steps") and not given("train.time_budget"):
        return fixed_steps(cfg, cfg.train.steps, cfg.train.replans)
    return cfg


def fixed_steps(cfg: Config, steps: int, replans: Sequence[str] = ()) -> Config:
    """cfg training exactly `steps` steps (re-planned at `replans`, train.replans), with no time
    budget: what a budget resolves to."""
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=steps, time_budget=None,
                                                              replans=list(replans)))


GROUPS = ("experiment", "sharding", "gpu")  # the packaged config groups (spmdgpt/configs/<group>/NAME.yaml)
FREE = object()  # (a field whose keys are free: a dict of rule tables or datasets)


def field_type(path: Sequence[str], cls=Config):
    """The type of the config field at a dotted path (["train", "steps"]), FREE below a dict
    field, None where the schema has no such field."""
    import typing

    hints = typing.get_type_hints(cls)
    if not path or path[0] not in hints:
        return None
    t = hints[path[0]]
    if len(path) == 1:
        return t
    if dataclasses.is_dataclass(t):
        return field_type(path[1:], t)
    return FREE if typing.get_origin(t) is dict or t is Any else None


def _field_paths(cls=Config, prefix: str = "") -> List[str]:
    """Every field of the schema as a dotted path, sections included."""
    import typing

    out = []
    for name, t in typing.get_type_hints(cls).items():
        out.append(prefix + name)
        if dataclasses.is_dataclass(t):
            out += _field_paths(t, f"{prefix}{name}.")
    return out


def check_override_keys(overrides: Sequence[str]) -> None:
    """ConfigError naming each override whose key is no config field (the closest field first,
    else the section's fields), `+key=...` of a field included, and a config group given without
    its `+` where one is needed (experiment)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException:  # (a syntax error: Hydra's own message, from compose)
        return
    errs = []
    for o in parsed:
        key = o.key_or_group
        if o.package or key.split(".")[0] == "hydra":
            continue
        if key in GROUPS:
            if key == "experiment" and not (o.is_add() or o.is_delete()):
                errs.append(f"{o.input_line}: an experiment is added to the defaults, with a leading +: "
                            f"+{o.input_line}")
            continue
        t = field_type(key.split("."))
        if t is not None:
            value = o.value() if not (o.is_delete() or o.is_sweep_override()) else None
            if t is bool and isinstance(value, (int, float)) and not isinstance(value, bool) and value not in (0, 1):
                # (OmegaConf takes any number for a bool: 2 would read as true)
                errs.append(f"{key}={o.get_value_element_as_str()}: expected {describe_type(t)}")
            continue
        near = _closest_field(key)
        section = key.rsplit(".", 1)[0] if "." in key else ""
        known = [p for p in _field_paths() if p.rsplit(".", 1)[0] == section and p != section] if section and \
            dataclasses.is_dataclass(field_type(section.split("."))) else []
        hint = (f"; did you mean {near}?" if near else
                f"; {section}'s fields: {', '.join(p.rsplit('.', 1)[1] for p in known)}" if known else
                f"; the sections: {', '.join(p for p in _field_paths() if '.' not in p)}")
        errs.append(f"{key}: no such config field{hint}")
    if errs:
        raise ConfigError(errs)


def _closest_field(key: str) -> Optional[str]:
    """The field a mistyped key most likely meant: one of the same name in another section
    (train.lr -> optimizer.lr), else the closest whole path (modle.d_model -> model.d_model), else
    the closest name in the same section (model.moe.top -> model.moe.top_k)."""
    import difflib

    paths = [p for p in _field_paths() if not dataclasses.is_dataclass(field_type(p.split(".")))]
    name = key.rsplit(".", 1)[-1]
    same = [p for p in paths if p.rsplit(".", 1)[-1] == name]
    if same:
        return same[0]
    near = difflib.get_close_matches(key, paths, n=1, cutoff=0.75)
    return near[0] if near else None


def describe_type(t) -> str:
    """What a config field of type t accepts, in words ("an integer", "one of adamw, muon")."""
    import typing

    args = [a for a in typing.get_args(t) if a is not type(None)]
    if typing.get_origin(t) is typing.Union:
        return f"{describe_type(args[0])} or null"
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in t)
    if typing.get_origin(t) is list:
        return "a list, e.g. [a,b]"
    if typing.get_origin(t) is dict:
        return "a mapping, e.g. {a: 1}"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(t, str(t))


def _value_error(e: Exception) -> Optional[str]:
    """A one-line message for Hydra's "Error merging override key=value" (`_wrong_type`)."""
    msg = str(e).splitlines()[0] if str(e) else ""
    prefix = "Error merging override "
    if not msg.startswith(prefix) or "=" not in msg:
        return None
    key, value = msg[len(prefix):].split("=", 1)
    return _wrong_type(key.lstrip("+~"), value)


def _wrong_type(key: str, value: str) -> Optional[str]:
    """"key=value: expected <what the field accepts>" (with an enum's closest value), or None
    where key is no typed field."""
    import difflib
    import typing

    t = field_type(key.split("."))
    if t is None or t is FREE:
        return None
    base = next((a for a in typing.get_args(t) if a is not type(None)), t)
    near = difflib.get_close_matches(value, [str(m.value) for m in base], n=1, cutoff=0.5) \
        if isinstance(base, type) and issubclass(base, enum.Enum) else []
    return f"{key}={value}: expected {describe_type(t)}" + (f"; did you mean {key}={near[0]}?" if near else "")


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
    if msg.startswith(("LexerNoViableAltException: ", "mismatched input", "no viable alternative",
                       "token recognition")):
        # (Hydra's override grammar: a quote, bracket or other special character in a value)
        import re

        key = re.match(r"LexerNoViableAltException: ([\w.+~]+)=", msg)
        key = key[1].lstrip("+~") if key else "run.name"
        msg += (" (a value with a quote, bracket or other special character goes in quotes for Hydra, and those "
                f"in quotes for the shell: \"{key}=\\\"...\\\"\")")
    return msg


def packaged_names(group: str) -> List[str]:
    """The packaged configs of `group` (a name starting with "_" is a part the others include)."""
    d = Path(__file__).parent.parent / "configs" / group
    return sorted(p.stem for p in d.glob("*.yaml") if not p.stem.startswith("_"))


def packaged_table(name: str):
    """The packaged rule table `name` (configs/sharding/NAME.yaml) as an OmegaConf node, its
    `defaults` (the shared `_base`, then itself) merged as Hydra merges them."""
    from omegaconf import OmegaConf

    d = Path(__file__).parent.parent / "configs" / "sharding"
    node = OmegaConf.load(d / f"{name}.yaml")
    parts = list(node.pop("defaults", None) or ["_self_"])
    return OmegaConf.merge(*(node if part == "_self_" else OmegaConf.load(d / f"{part}.yaml") for part in parts))


def load_run_config(run_dir: Path, overrides: Sequence[str] = ()) -> Config:
    """The resolved Config a run wrote to run_dir/config.yaml, with `overrides` applied on top
    (`apply_overrides`)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise ConfigError([f"run.dir={run_dir}: no config.yaml there; give the directory of a training run"])
    import yaml

    try:
        merged = OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.load(path))
        cfg = OmegaConf.to_object(merged)
    except OmegaConfBaseException as e:
        raise ConfigError([f"{path}: {_one_line_hydra_error(e)}"]) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError([f"{path}: not valid YAML ({what}{at}); restore the file the run wrote"]) from None
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

    check_override_keys([o for o in overrides if o.split("=", 1)[0] not in GROUPS])  # (refused below)
    node = OmegaConf.structured(cfg)
    try:
        for o in OverridesParser.create().parse_overrides(list(overrides)):
            key = o.key_or_group
            if o.is_delete() or o.is_add() or o.package or key == "experiment":
                raise ConfigError([f"{o.input_line}: only key=value overrides of the run's config "
                                   "(and sharding=NAME) apply here"])
            if key == "sharding":
                if o.value() not in packaged_names("sharding"):
                    raise ConfigError([f"sharding={o.value()}: no such rule table (packaged tables: "
                                       f"{', '.join(packaged_names('sharding'))})"])
                node.sharding = OmegaConf.merge(OmegaConf.structured(type(cfg.sharding)), packaged_table(o.value()))
            else:
                try:
                    OmegaConf.update(node, key, o.value(), merge=False)
                except OmegaConfBaseException:
                    wrong = _wrong_type(key, o.input_line.split("=", 1)[1])
                    if wrong is None:
                        raise
                    raise ConfigError([wrong]) from None
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
