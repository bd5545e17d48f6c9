"""`spmdgpt plan ... topology=NAME search=true`: let the compiler choose the layout.

The candidates are the packaged rule tables (configs/sharding/), each with every mesh shape the
slice's devices allow: the mesh's axes are MeshConfig's fields; the search chooses mesh.data and
mesh.model (tables that use the `model` axis: each divisor of the devices the other axes leave,
above 1, as mesh.model, the rest as mesh.data) and holds every other axis at the command's
size (stage, expert, context: 1 unless given); then the cheapest memory savers that make it fit:
model.remat none, dots, dots with train.microbatches 2, 4, 8 (those that divide the batch over
its data-parallel devices), full, full with those microbatches. Each is the real training step
compiled by the target's compiler in a process of its own (`spmdgpt plan ... format=json`),
`jobs` at a time; a layout's chain stops at the first saver that fits (more remat or
microbatches only cost time). The fitting layouts are ranked by the plan's estimated step time
(compute, memory traffic and collectives; spmdgpt.plan.plan.estimate), the serial estimate breaking
ties, and the winner's overrides end the report as a line to paste after `spmdgpt train`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Dict, List, Optional

MICROBATCHES = (2, 4, 8)  # tried when a layout does not fit without them


@dataclass
class Layout:
    table: str
    mesh: Dict[str, int]
    remat: str = "none"
    microbatches: int = 1
    result: Optional[dict] = None  # the plan's JSON (None: refused, see `error`)
    error: str = ""  # the plan's error line when it gave none

    def overrides(self) -> List[str]:
        return ([f"sharding={self.table}"] + [f"mesh.{a}={n}" for a, n in self.mesh.items()]
                + [f"model.remat={self.remat}", f"train.microbatches={self.microbatches}"])

    @property
    def fits(self) -> bool:
        return bool(self.result and self.result.get("fits"))

    @property
    def too_big(self) -> bool:
        """Compiled and over the device's memory, or refused by a compiler for that reason."""
        return (self.result is not None and not self.fits) or "does not fit" in self.error

    def key(self) -> tuple:
        r = self.result or {}
        return (r.get("step_seconds") or float("inf"), r.get("serial_step_seconds") or float("inf"),
                r.get("total_bytes") or 0)


def uses_model_axis(table: str) -> bool:
    """Whether the packaged rule table `table` maps any logical axis to the `model` mesh axis."""
    from spmdgpt.config import load_config, mesh_axes_of

    sharding = load_config([f"sharding={table}"]).sharding
    return any("model" in mesh_axes_of(v) for t in (sharding.params, sharding.compute) for v in t.values() if v)


CHOSEN = ("data", "model")  # the mesh axes the search chooses; the others are held (`held_axes`)


def held_axes(mesh) -> Dict[str, int]:
    """The sizes of the mesh axes the search does not choose, from a MeshConfig (every field but
    CHOSEN, in mesh order; -1 or unset: 1)."""
    return {f.name: max(getattr(mesh, f.name), 1) for f in dataclasses.fields(mesh) if f.name not in CHOSEN}


def meshes(table: str, devices: int, held: Optional[Dict[str, int]] = None) -> List[Dict[str, int]]:
    """The mesh shapes `table` can take on `devices` devices, every MeshConfig axis in mesh order:
    `held`'s sizes (default: 1 each), mesh.data and mesh.model chosen."""
    from spmdgpt.config import MeshConfig

    held = {**held_axes(MeshConfig(data=1)), **(held or {})}
    rest = devices // math.prod(held.values())
    models = [m for m in range(2, rest + 1) if rest % m == 0] if uses_model_axis(table) else [1]
    order = [f.name for f in dataclasses.fields(MeshConfig)]
    return [{a: {"data": rest // m, "model": m}.get(a, held.get(a)) for a in order} for m in models]


def chain(table: str, mesh: Dict[str, int], batch_size: int) -> List[Layout]:
    """The candidates of one table and mesh, cheapest first: remat none and dots, then dots with
    more microbatches (those that divide the batch over the data-parallel devices), then full
    remat, alone and with them (full remat runs each block's forward twice)."""
    parallel = mesh["data"] * mesh.get("expert", 1)  # (the axes the batch splits over)
    ks = [k for k in MICROBATCHES if batch_size % (k * parallel) == 0]
    return ([Layout(table, mesh, "none"), Layout(table, mesh, "dots")] + [Layout(table, mesh, "dots", k) for k in ks]
            + [Layout(table, mesh, "full")] + [Layout(table, mesh, "full", k) for k in ks])


def compile_layout(layout: Layout, base: List[str]) -> Layout:
    """The plan of `layout` (base: the command's own items: config overrides, topology, ...),
    compiled in a process of its own."""
    cmd = [sys.executable, "-m", "spmdgpt", "plan", *base, *layout.overrides(), "format=json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    lines = proc.stdout.strip().splitlines()
    try:
        layout.result = json.loads(lines[-1]) if lines else None
    except ValueError:
        layout.result = None
    if layout.result is None:
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("spmdgpt: error: ")]
        layout.error = (errors[-1].removeprefix("spmdgpt: error: ") if errors
                        else (proc.stderr.strip().splitlines() or ["no output"])[-1])
    return layout


def _ms(seconds, width: int) -> str:
    """An estimate's seconds as milliseconds in a column, '-' where the plan had none."""
    return f"{'-':>{width + 3}}" if seconds is None else f"{seconds * 1e3:>{width}.2f} ms"


def run_chain(layouts: List[Layout], base: List[str], done) -> List[Layout]:
    """Compile a chain's layouts in order up to the first that fits (or is refused as invalid)."""
    out = []
    for layout in layouts:
        out.append(compile_layout(layout, base))
        done()
        if layout.fits or not layout.too_big:
            break  # (fits: more savers only cost time; invalid: the others are too)
    return out


def search(base: List[str], devices: int, batch_size: int, tables: List[str], jobs: int,
           held: Optional[Dict[str, int]] = None, progress: bool = True) -> List[Layout]:
    """Every candidate layout's plan, compiled `jobs` chains at a time (`held`: the sizes of the
    mesh axes the search does not choose, `held_axes`)."""
    chains = [chain(t, m, batch_size) for t in tables for m in meshes(t, devices, held)]
    from tqdm import tqdm

    bar = tqdm(total=sum(len(c) for c in chains), unit="plan", disable=not progress, file=sys.stderr,
               desc="compiling layouts")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(lambda c: run_chain(c, base, lambda: bar.update(1)), chains))
    bar.total = bar.n  # (chains stop at their first layout that fits)
    bar.close()
    return [layout for r in results for layout in r]


def ranked(layouts: List[Layout]) -> List[Layout]:
    """The layouts that fit, fastest estimate first."""
    return sorted((lay for lay in layouts if lay.fits), key=Layout.key)


LAYOUT_KEYS = ("sharding", "mesh.", "model.remat", "train.microbatches")  # what a layout sets


def own_layout(item: str) -> bool:
    """Whether a command-line override sets what the search chooses (it is left out)."""
    from spmdgpt.config import override_key

    key = override_key(item)
    return any(key == k or (k.endswith(".") and key.startswith(k)) for k in LAYOUT_KEYS)


def default_jobs() -> int:
    """Compiles at a time: one per CPU core, at most one per 8 GiB of this host's memory, at most 4."""
    from spmdgpt.mesh.runtime import host_memory

    return max(1, min(os.cpu_count() or 1, host_memory() // (8 * 2**30), 4))


def report(layouts: List[Layout], overrides: List[str]) -> str:
    from spmdgpt.plan.plan import size

    best = ranked(layouts)
    # the mesh column: the chosen axes, and any other that some layout sets above 1 (mesh order)
    axes = [a for a in (layouts[0].mesh if layouts else CHOSEN)
            if a in CHOSEN or any(lay.mesh.get(a, 1) > 1 for lay in layouts)]
    rows = [f"{'rank':>4}  {'sharding':<8} {'mesh (' + ' x '.join(axes) + ')':<28} {'remat':<5} {'micro':>5}  "
            f"{'per chip':>10}  {'step (est.)':>11}  {'serial':>9}  {'MFU (est.)':>10}"]
    for i, lay in enumerate(best, 1):
        r = lay.result
        mesh = " x ".join(str(lay.mesh[a]) for a in axes)
        rows.append(f"{i:>4}  {lay.table:<8} {mesh:<28} {lay.remat:<5} {lay.microbatches:>5}  "
                    f"{size(r['total_bytes']):>10}  {_ms(r['step_seconds'], 8)}  "
                    f"{_ms(r['serial_step_seconds'], 6)}  {'-' if r['mfu'] is None else format(r['mfu'], '.0%'):>10}")
    too_big = [lay for lay in layouts if lay.too_big]
    refused = [lay for lay in layouts if not lay.fits and not lay.too_big]
    rows.append(f"{len(layouts)} layouts compiled: {len(best)} fit, {len(too_big)} did not fit, {len(refused)} "
                "refused" + (f" (e.g. {refused[0].table} {refused[0].mesh}: {refused[0].error})" if refused else ""))
    if best:
        rows.append("best: spmdgpt train " + " ".join([*overrides, *best[0].overrides()]))
    return "\n".join(rows)

