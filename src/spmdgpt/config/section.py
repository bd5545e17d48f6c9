"""The base of every config section (`Section`: mutable while loading, frozen once validated),
and how messages show a nested one (`changed_fields`)."""

from __future__ import annotations

import dataclasses
import enum


class Section:
    """A config section: built and overridden freely while loading, frozen once validated
    (`freeze`): assigning a field then raises, and a change is a new section
    (`dataclasses.replace`), validated again."""

    def __setattr__(self, name, value):
        if self.__dict__.get("_frozen"):
            raise dataclasses.FrozenInstanceError(
                f"{type(self).__name__}.{name}: config sections are frozen after validation; "
                "make a new one with dataclasses.replace and validate it")
        object.__setattr__(self, name, value)


def freeze(cfg):
    """Freeze `cfg` and every section in it (a validated config; returns it)."""
    if isinstance(cfg, Section) and dataclasses.is_dataclass(cfg):
        for f in dataclasses.fields(cfg):
            v = getattr(cfg, f.name)
            for item in v.values() if isinstance(v, dict) else [v]:
                freeze(item)
        object.__setattr__(cfg, "_frozen", True)
    return cfg


def changed_fields(section) -> str:
    """A nested section as messages show it: "{field: value, ...}" of the fields that differ from
    the defaults."""
    value = lambda v: v.value if isinstance(v, enum.Enum) else v  # noqa: E731
    changed = [f"{f.name}: {value(getattr(section, f.name))}" for f in dataclasses.fields(section)
               if getattr(section, f.name) != f.default]
    return "{" + ", ".join(changed) + "}"
