"""Reading a compiled program's HLO text: its computations, how often each loop body runs in one
step, and its collectives (kind, result bytes, the bytes a device sends for them on a ring, and
how much of that the compiler scheduled while a matmul runs). The plan (`plan.py`) and the
roofline benchmark read compiled programs through these.

Counts are of instructions in the program text: one inside a loop body (the layer scan when
model.scan_unroll=false, microbatches) runs once per trip of the loop (`runs_per_step`).
"""

from __future__ import annotations

import math
import re
from typing import Dict

COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "ragged-all-to-all", "collective-permute")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%\S+ = (.+?) (" + "|".join(sorted(COLLECTIVES, key=len, reverse=True))
                          + r")(?:-start)?\(")
_ARRAY = re.compile(r"\b(pred|s8|u8|s16|u16|f16|bf16|s32|u32|f32|s64|u64|f64)\[([0-9,]*)\]")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
          "f32": 4, "s64": 8, "u64": 8, "f64": 8}

# The bytes one device sends (and receives) for a collective over a group of p devices, as a

# multiple of the instruction's result bytes, on a ring (the scaling book's "How to Think About
# TPUs" and "Sharded Matrices" chapters): an all-gather passes on the p-1 shards it did not have,
# a reduce-scatter the p-1 partial shards of the others (its result is one shard), an all-reduce
# is both, an all-to-all keeps 1/p of its rows, a permute sends everything.
_TRAFFIC = {"all-gather": lambda p: (p - 1) / p, "reduce-scatter": lambda p: p - 1,
            "all-reduce": lambda p: 2 * (p - 1) / p, "all-to-all": lambda p: (p - 1) / p,
            "ragged-all-to-all": lambda p: (p - 1) / p, "collective-permute": lambda p: 1.0}
_IOTA_GROUPS = re.compile(r"replica_groups=\[(?:\d+,)*(\d+)\]<=")  # [groups,size]<=[devices]
_MESH_GROUPS = re.compile(r"replica_groups=mesh\[([^\]]*)\] \{([^}]*)\}")  # mesh['data'=2,..] {'model'}
_LIST_GROUPS = re.compile(r"replica_groups=\{\{([0-9,]*)\}")  # {{0,1},{2,3}}


def group_size(line: str, devices: int) -> int:
    """How many devices the collective instruction on this HLO line runs over (its replica
    group's size; every device when the line names no groups)."""
    if m := _IOTA_GROUPS.search(line):
        return int(m.group(1))
    if m := _MESH_GROUPS.search(line):
        sizes = {k.strip("'"): int(v) for k, v in (a.split("=") for a in m.group(1).split(","))}
        return math.prod(sizes[a.strip().strip("'")] for a in m.group(2).split(",") if a.strip())
    if m := _LIST_GROUPS.search(line):
        return len([d for d in m.group(1).split(",") if d])
    return devices


def _result_bytes(line: str, result: str, kind: str) -> int:
    if kind + "-start(" in line:  # async pair: the result tuple also holds the operands (and, for a
        # collective permute, two u32[] scalars of context: left out)
        arrays = [a for a in _ARRAY.findall(result) if a[1]]
        arrays = arrays[len(arrays) // 2:]
    else:
        arrays = _ARRAY.findall(result)
    return sum(_BYTES[t] * math.prod(int(d) for d in dims.split(",") if d) for t, dims in arrays)


_COMPUTATION = re.compile(r"^(?:ENTRY )?%(\S+) ")  # a computation's first line: "%name (params) -> ... {"
_WHILE = re.compile(r" while\(.*condition=%([^,\s]+), body=%([^,\s]+)")
_BOUND = re.compile(r"constant\((\d+)\)")


def computations(hlo_text: str) -> Dict[str, list]:
    """A compiled HLO module's text as {computation name: its instruction lines} (ENTRY: "")."""
    out: Dict[str, list] = {"": []}
    lines = out[""]  # (lines before any computation's header: the entry's)
    for line in hlo_text.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith("{") and (m := _COMPUTATION.match(line)):
            lines = out.setdefault("" if line.startswith("ENTRY") else m.group(1), [])
        elif line.strip() and line.strip() != "}":
            lines.append(line)
    return out


def runs_per_step(comps: Dict[str, list]) -> Dict[str, int]:
    """How many times each while loop's body runs in one step (nested loops multiplied): the
    trip count is the loop condition's `counter < constant(N)` (a scan's loop counts 0..N-1);
    a condition of another form counts as one trip. A computation a fusion or call runs
    (`calls=`, e.g. TPU's fusions of a collective with a matmul) as often as its caller. Other
    computations: once."""
    runs = {name: 1 for name in comps}
    todo = [""]
    while todo:
        name = todo.pop()
        for line in comps.get(name, []):
            if m := _WHILE.search(line):
                cond, body = (comps.get(c, []) for c in m.groups())
                bounds = [int(b) for ln in cond for b in _BOUND.findall(ln)]
                trips = bounds[0] if len(bounds) == 1 and any("direction=LT" in ln for ln in cond) else 1
                runs[m.group(2)] = runs[name] * trips
                todo.append(m.group(2))
            for called in _CALLS.findall(line):
                if called in comps and runs[name] > runs[called]:
                    runs[called] = runs[name]
                    todo.append(called)
    return runs


def _sent(hlo_text: str, devices: int):
    """(bytes one device sends for each collective of one step (see _TRAFFIC, a loop body's once
    per trip, `runs_per_step`), whether a matmul runs meanwhile) for every collective
    instruction of a compiled HLO module's text. Meanwhile: an asynchronous collective with a
    matmul (a dot, a convolution as TPU programs write matmuls, a cuBLAS call, or a fusion of
    one) scheduled between its -start and its -done, or a collective inside a fusion that also
    computes a matmul (TPU's async collective fusions: a collective fused with the matmul it
    overlaps)."""
    comps = computations(hlo_text)
    runs = runs_per_step(comps)
    matmul = {name: any(_MATMUL.search(ln) for ln in lines) for name, lines in comps.items()}
    fused = {c for lines in comps.values() for ln in lines if " fusion(" in ln for c in _CALLS.findall(ln)}

    def computes(line: str) -> bool:
        return bool(_MATMUL.search(line)) or any(matmul.get(c, False) for c in _CALLS.findall(line))

    for name, lines in comps.items():
        for i, line in enumerate(lines):
            if not (m := _INSTRUCTION.match(line)):
                continue
            result, kind = m.groups()
            overlapped = name in fused and matmul[name]
            if not overlapped and kind + "-start(" in line:
                done = re.compile(r"-done\(" + re.escape(line.split("=", 1)[0].strip().removeprefix("ROOT ")) + r"[,)]")
                for later in lines[i + 1:]:
                    if done.search(later):
                        break
                    if computes(later):
                        overlapped = True
                        break
            yield runs[name] * _result_bytes(line, result, kind) * _TRAFFIC[kind](group_size(line, devices)), overlapped


_MATMUL = re.compile(r" (?:convolution|dot)\(|custom_call_target=\"__cublas")
_CALLS = re.compile(r"calls=%([^,\s}]+)")


def traffic_of(hlo_text: str, devices: int) -> float:
    """The bytes one device sends for the collectives of one step of a compiled HLO module's
    text (see _TRAFFIC), a collective in a loop body once per trip (`runs_per_step`)."""
    return sum(sent for sent, _ in _sent(hlo_text, devices))


def overlapped_traffic(hlo_text: str, devices: int) -> float:
    """The part of `traffic_of` that the compiler scheduled while a matmul runs (`_sent`): what
    can hide behind compute, as far as that matmul lasts. The rest waits."""
    return sum(sent for sent, overlapped in _sent(hlo_text, devices) if overlapped)


def collectives_of(hlo_text: str) -> Dict[str, tuple]:
    """{kind: (instructions, result bytes)} of a compiled HLO module's text."""
    out = {k: [0, 0] for k in COLLECTIVES}
    for line in hlo_text.splitlines():
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        result, kind = m.groups()
        out[kind][0] += 1
        out[kind][1] += _result_bytes(line, result, kind)
    return {k: tuple(v) for k, v in out.items()}


_DOT = re.compile(r"^\s*(?:ROOT )?%(\S+) = (\S+) dot\(([^)]*)\)")
_DEF = re.compile(r"^\s*(?:ROOT )?%(\S+) = ([a-z0-9]+)\[")


def dot_kinds(hlo_text: str) -> Dict[str, int]:
    """How many dots a compiled module has by their operands' element types: {"f8e4m3fn x f8e4m3fn":
    n, "bf16 x bf16": m, ...} (instruction names are unique in a module; a loop body's dots once)."""
    types = {m.group(1): m.group(2) for line in hlo_text.splitlines() if (m := _DEF.match(line))}
    out: Dict[str, int] = {}
    for line in hlo_text.splitlines():
        if m := _DOT.match(line):
            kinds = sorted(types.get(o.strip().lstrip("%"), "?") for o in m.group(3).split(","))
            key = " x ".join(kinds)
            out[key] = out.get(key, 0) + 1
    return out
