"""The one way every subcommand reads its arguments.

A command line is `spmdgpt <command> key=value ...`. Keys the command owns are the fields of its
arguments dataclass (sample's `prompt`, `temperature`, ...; launch's `nproc`): their values are
taken literally (no YAML, so prompt="ROMEO:" stays text) and converted to the field's type.
Every other item is a Hydra override of the run's config (`model.d_model=384`, `sharding=fsdp`,
`+experiment=staircase`). A dotted key may be spelled for a field (`run.dir` for `run_dir`).
Problems become one ConfigError listing every bad item; `spmdgpt` prints each as one line,
`spmdgpt: error: ...`, and exits with code 2.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple, Type, TypeVar

from spmdgpt.config import ConfigError

T = TypeVar("T")

EXIT_OK, EXIT_USAGE, EXIT_DIVERGED, EXIT_WRITE_FAILED, EXIT_INTERRUPTED = 0, 2, 3, 4, 130
CONFIG_GROUPS = ("sharding", "experiment")  # bare keys that are config overrides (Hydra groups)


def _bool(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise ValueError(value)


def _field_name(key: str) -> str:
    return key.replace(".", "_")


def parse(items: List[str], spec: Optional[Type[T]] = None) -> Tuple[Optional[T], List[str]]:
    """(the command's own arguments, the config overrides) of a list of key=value items.

    A bare key (no dot, no +/~ prefix) that is neither the command's nor a config group is an
    error naming the keys the command knows; dotted keys go to the config, where Hydra/OmegaConf
    check them."""
    fields = {f.name: f for f in dataclasses.fields(spec)} if spec else {}
    values, overrides, errs = {}, [], []
    for item in items:
        key, sep, value = item.partition("=")
        name = _field_name(key)
        if sep and name in fields:
            kind = str(fields[name].type).removeprefix("Optional[").removesuffix("]")
            try:
                values[name] = (int(value) if kind == "int" else float(value) if kind == "float"
                                else _bool(value) if kind == "bool" else value)
            except ValueError:
                errs.append(f"{key}={value} is not a valid {kind}")
        elif spec and ("=" not in item or ("." not in key and key.lstrip("+~") not in CONFIG_GROUPS)):
            known = ", ".join(f.replace("_", ".") if f == "run_dir" else f for f in fields)
            errs.append(f"{item!r}: expected key=value with a key among {known}, or a config "
                        "override such as mesh.data=2 or sharding=fsdp")
        else:
            overrides.append(item)
    if errs:
        raise ConfigError(errs)
    return (spec(**values) if spec else None), overrides
