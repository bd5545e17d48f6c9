"""`spmdgpt config [SECTION] [overrides]`: the configuration a command would run with.

    spmdgpt config +experiment=shakespeare_char            # the whole resolved config, as YAML
    spmdgpt config rl                                      # each rl.* field: its value and what it is
    spmdgpt config model.moe +experiment=deepseek_v3_small # a nested section, under an experiment

With a section, each field is one line: `section.field = value  # the schema's comment` (the
comment written beside the field in spmdgpt/config/schema.py), so the fields a user can set are
listed without reading the source. The overrides are Hydra's, as `train` takes them; nothing
starts JAX and nothing is written. A config that `train` would refuse is refused here too, in the
same lines (exit 2), but for the mesh's checks against the devices, which need them.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Dict, List

from spmdgpt.cli.args import EXIT_OK
from spmdgpt.config import ConfigError

_FIELD = re.compile(r"^\s+(\w+):[^=#]*(?:=[^#]*)?#\s?(.*)$")
_MORE = re.compile(r"^\s+#\s?(.*)$")


def comments(cls) -> Dict[str, str]:
    """{field: the comment on its line in the class's source, with the comment lines that go on
    from it} of a config dataclass."""
    out, last = {}, None
    for line in inspect.getsource(cls).splitlines():
        m = _FIELD.match(line)
        if m and m.group(1) not in out:
            out[m.group(1)], last = m.group(2).strip(), m.group(1)
        elif last and (more := _MORE.match(line)):
            out[last] += " " + more.group(1).strip()
        else:
            last = None
    return out


def section_lines(prefix: str, node) -> List[str]:
    """`prefix.field = value  # comment` for each field of the config dataclass `node`; a nested
    section's fields under their own prefix."""
    from spmdgpt.config import to_dict

    notes, lines = comments(type(node)), []
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if dataclasses.is_dataclass(value):
            lines += section_lines(f"{prefix}.{f.name}", value)
            continue
        shown = to_dict(value) if isinstance(value, dict) else getattr(value, "value", value)
        text = f"{prefix}.{f.name} = {'null' if shown is None else shown}"
        lines.append(f"{text:<48}  # {notes[f.name]}" if notes.get(f.name) else text)
    return lines


def run(items: List[str]) -> int:
    from spmdgpt.config import Config, load_config, to_yaml, validate
    from spmdgpt.config.validate import SECTIONS

    section = items[0] if items and "=" not in items[0] and not items[0].startswith(("+", "~")) else None
    cfg = load_config(items[1:] if section else items)
    # what `train` would refuse, refused here too (all but the layout's checks: they need the devices)
    errs = validate(cfg, 1, sections=tuple(s for s in SECTIONS if s != "layout"))
    if errs:
        raise ConfigError(errs)
    if cfg.train.tokens_per_param is not None and not validate(cfg, 1, sections=("model", "batch")):
        from spmdgpt.scaling.size import with_token_budget

        cfg = with_token_budget(cfg)  # (the steps a run would take, as it starts)
    if section is None:
        print(to_yaml(cfg), end="")
        return EXIT_OK
    node = cfg
    for part in section.split("."):
        if not dataclasses.is_dataclass(node) or part not in {f.name for f in dataclasses.fields(node)} or \
                not dataclasses.is_dataclass(getattr(node, part)):
            names = [f.name for f in dataclasses.fields(Config)]
            raise ConfigError([f"{section!r} is not a config section; sections: {', '.join(names)} (and nested "
                               "ones such as model.moe), or no section for the whole config"])
        node = getattr(node, part)
    doc = type(node).__doc__  # (a dataclass without one of its own gets its signature: no header then)
    if doc and not doc.startswith(f"{type(node).__name__}("):
        doc = inspect.cleandoc(doc)
        print("# " + doc.split("\n\n")[0].replace("\n", "\n# "))
    print("\n".join(section_lines(section, node)))
    return EXIT_OK
