"""Checkpoints with orbax: exact resume, resume on another layout, init from another run.

A checkpoint is `run_dir/checkpoints/<step>/` with three items:

    params     the parameters, {name: array} (orbax StandardSave: per-shard, any layout)
    opt_state  the optax state, {name: array}
    meta       JSON: step, loader state, RNG derivation, fingerprint, resolved config, git sha

Every leaf is stored under its path's name (`model.info.path_name`: "blocks.attn.w_qkv",
"1.0.mu.blocks.attn.w_qkv"), not as the Python tree, and is restored by that name into whatever
tree the code has now: a change to the NamedTuples needs no conversion of old checkpoints, and a
renamed leaf one line in `RENAMES`. Checkpoints written before (the pytree itself) restore the
same way: orbax names their leaves by the same paths.

The data loader's whole state is the step (batches are drawn from (seed, step)), and all
randomness derives from `train.seed` folded with the step, so params + opt_state + step restore
the exact continuation. Saves are asynchronous (orbax copies the arrays to host, then writes in
a background thread while training goes on) and atomic (written to a temporary folder that is
renamed when complete), so a kill at any moment leaves only complete checkpoints and temporary
folders (removed on the next start). The fingerprint (per-leaf sums) catches a checkpoint whose
files were damaged after it was written.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import sys
import traceback
from pathlib import Path
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from spmdgpt.config import CheckpointConfig, Config, ConfigError, to_dict
from spmdgpt.model.info import by_name, path_name
from spmdgpt.run.files import WriteFailed, os_reason

CHECKPOINT_DIR = "checkpoints"


def _ocp():
    import orbax.checkpoint as ocp  # heavy import: only when checkpoints are used

    return ocp


@functools.cache
def _one_writer_per_shard() -> None:
    """In a single process, orbax's replica-parallel save (its default off GPUs) splits each
    replicated shard into one slice per replica, each cut by its own eager `slice` on the device,
    only for this one process to write them all: with 8 devices and replicated weights, thousands
    of dispatches per save (6 of the 22 seconds of a short DPO test on 8 CPU devices). One writer
    per shard stores the same bytes in the same files. (A writing manager calls this once the
    process knows its peers: with several, replica-parallel spreads the writing over the hosts,
    and stays.)"""
    import jax

    ocp = _ocp()
    with _quiet_absl():  # (orbax warns of every override)
        ocp.type_handlers.register_type_handler(jax.Array, ocp.type_handlers.ArrayHandler(use_replica_parallel=False),
                                                override=True)


@contextlib.contextmanager
def _quiet_absl():
    """orbax announces (through absl) every option a read-only manager ignores; hide that."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def abstract(tree: Any) -> Any:
    """ShapeDtypeStructs carrying each leaf's (current, possibly new) sharding: restore targets."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree)


# Renames of leaves, (old name's keys, new name's keys), applied wherever the old keys occur in a
# stored name (the parameters' and the optimizer state's): checkpoints written in an earlier layout.
RENAMES = (
    # before blocks had units: the attention's and the MLP's leaves side by side in the block
    *(((stack, leaf), (stack, unit, leaf)) for stack in ("blocks", "dense_blocks")
      for unit, leaves in (("attn", ("w_qkv", "b_qkv", "w_o", "b_o")),
                           ("mlp", ("w_up", "b_up", "w_gate", "w_down", "b_down")))
      for leaf in leaves),
)


def renamed(name: str) -> str:
    """A stored leaf's name today (`RENAMES`)."""
    keys = name.split(".")
    for old, new in RENAMES:
        for i in range(len(keys) - len(old), -1, -1):
            if tuple(keys[i:i + len(old)]) == old:
                keys[i:i + len(old)] = new
    return ".".join(keys)


@jax.jit
def _leaf_sums(named: dict) -> dict:
    return {k: jnp.sum(x.astype(jnp.float32)) for k, x in named.items()}


def fingerprint(params) -> dict:
    """{leaf name: sum of its values}: saved with the parameters, checked when they are restored."""
    return {k: float(v) for k, v in jax.device_get(_leaf_sums(by_name(params))).items()}


def fingerprints_match(now: dict, saved) -> bool:
    """Sums over shards are reduced in a layout-dependent order: compared with a float32 tolerance,
    by name (a checkpoint written before names kept a list in its tree's leaf order: compared as
    sorted lists)."""
    if isinstance(saved, dict):
        saved = {renamed(k): v for k, v in saved.items()}
        if saved.keys() != now.keys():
            return False
        a, b = [now[k] for k in sorted(now)], [saved[k] for k in sorted(now)]
    else:
        a, b = sorted(now.values()), sorted(saved)
    return len(a) == len(b) and bool(np.allclose(a, b, rtol=1e-4, atol=1e-3))


class CheckpointManager:
    """Thin wrapper over orbax's CheckpointManager for one run directory."""

    @classmethod
    def reader(cls, run_dir: Path) -> "CheckpointManager":
        """A read-only manager (lists and restores; never saves, deletes or cleans up)."""
        return cls(run_dir, CheckpointConfig(async_save=False), read_only=True)

    def __init__(self, run_dir: Path, cfg: CheckpointConfig, read_only: bool = False):
        ocp = _ocp()
        self.directory = Path(run_dir).resolve() / CHECKPOINT_DIR
        with _quiet_absl() if read_only else contextlib.nullcontext():
            options = ocp.CheckpointManagerOptions(
                max_to_keep=cfg.keep,
                keep_period=cfg.keep_every,
                enable_async_checkpointing=cfg.async_save,
                create=not read_only,
                read_only=read_only,
                cleanup_tmp_directories=not read_only,
            )
            self._mngr = ocp.CheckpointManager(self.directory, options=options)
        if not read_only:
            _report_write_failures_once()
            if jax.process_count() == 1:
                _one_writer_per_shard()

    def steps(self) -> list:
        return sorted(self._mngr.all_steps())

    def save(self, step: int, state, meta: dict) -> None:
        """Start writing `step` (asynchronously with async_save). Raises WriteFailed when this
        save, or the previous asynchronous one it first waits for, could not be written."""
        ocp = _ocp()
        meta = {**meta, "step": step, "fingerprint": fingerprint(state.params)}
        try:
            self._mngr.save(
                step,
                args=ocp.args.Composite(
                    params=ocp.args.StandardSave(by_name(state.params)),
                    opt_state=ocp.args.StandardSave(by_name(state.opt_state)),
                    meta=ocp.args.JsonSave(meta),
                ),
                force=True,
            )
        except Exception as e:
            raise self._write_failed(e) from None

    def check(self) -> None:
        """Raise WriteFailed if an asynchronous save has already failed in the background (it
        does not wait for one in progress), so that a run learns of it at once rather than at
        its next save, checkpoint.every steps later."""
        try:
            self._mngr.check_for_errors()
        except Exception as e:
            raise self._write_failed(e) from None

    def _stored(self, step: int, item: str, target) -> Any:
        """A restore target in the tree that `item` of `step` was stored as (a {name: leaf} dict;
        before names, the pytree of then), each leaf taking the shape, dtype and sharding of the
        leaf of `target` (a tree of arrays or ShapeDtypeStructs) with its name. ConfigError when the
        names or shapes differ."""
        ocp = _ocp()
        stored = ocp.StandardCheckpointHandler().metadata(self.directory / str(step) / item).tree
        ours = by_name(abstract(target))
        names = {path_name(p): renamed(path_name(p)) for p, _ in jax.tree_util.tree_flatten_with_path(stored)[0]}
        where = f"checkpoint {self.directory / str(step)}"
        missing = sorted(set(ours) - set(names.values()))
        extra = sorted(n for n, new in names.items() if new not in ours)
        if missing or extra:
            raise ConfigError([f"{where}: its {item} " + "; ".join(
                ([f"lacks {', '.join(missing[:5])}"] if missing else []) + ([f"has {', '.join(extra[:5])}, which "
                 "this model does not"] if extra else [])) + "; restore it with the model config it was written "
                 "with (its config.yaml)"])

        def leaf(path, md):
            want = ours[names[path_name(path)]]
            if tuple(md.shape) != tuple(want.shape):
                raise ConfigError([f"{where}: {item} {path_name(path)} has shape {tuple(md.shape)}, the model "
                                   f"{tuple(want.shape)}; restore it with the model config it was written with"])
            return want

        return jax.tree_util.tree_map_with_path(leaf, stored)

    def restore(self, step: int, params_target, opt_state_target=None):
        """Restore `step` into the trees and layout (shardings) of the targets, leaf by name; the
        optimizer state only when a target for it is given. Returns (params, opt_state or None,
        meta)."""
        ocp = _ocp()
        targets = {"params": params_target, "opt_state": opt_state_target}
        targets = {k: v for k, v in targets.items() if v is not None}
        items = {k: ocp.args.StandardRestore(self._stored(step, k, v)) for k, v in targets.items()}
        out = self._mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore(), **items))
        restored = {}
        for k, target in targets.items():
            got = {renamed(n): x for n, x in by_name(out[k]).items()}
            restored[k] = jax.tree_util.tree_map_with_path(lambda p, _: got[path_name(p)], target)
        meta = out["meta"]
        if not fingerprints_match(fingerprint(restored["params"]), meta.get("fingerprint", [])):
            raise ValueError("parameter values do not match the fingerprint saved with them")
        return restored["params"], restored.get("opt_state"), meta

    def read_meta(self, step: int) -> dict:
        ocp = _ocp()
        return self._mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]

    def close(self) -> None:
        """Wait for the last asynchronous save and close; WriteFailed if it could not be written."""
        failed = None
        try:
            self._mngr.wait_until_finished()
        except Exception as e:
            failed = self._write_failed(e)
        finally:
            try:
                self._mngr.close()
            except Exception as e:
                failed = failed or self._write_failed(e)
        if failed is not None:
            raise failed

    def _write_failed(self, e: Exception) -> WriteFailed:
        # From here on the one-line message below says it: orbax's own reports of the failure
        # are dropped, and so are its abandoned writes'.
        logging.getLogger("absl").setLevel(logging.CRITICAL)
        _quiet_abandoned_io()
        return WriteFailed(f"writing a checkpoint into {self.directory} failed ({os_reason(e)})")


def is_os_write_failure(e: Optional[BaseException]) -> bool:
    """An error (or one it was raised from) in which the operating system refused a write:
    an OSError, or TensorStore's report of one (which carries `os_error_code`)."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno is not None or "[os_error_code=" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


class _DropReportedWriteFailures(logging.Filter):
    """Drops orbax's ERROR reports (a traceback each, from its writer and finalize threads, as
    soon as a write fails) of a checkpoint write that the operating system refused (disk full,
    file too large, I/O error): the run reports that same failure as its one-line error and
    exit code 4 when it next waits for the save (`CheckpointManager.save` / `close`). Every
    other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (record.levelno >= logging.ERROR and is_os_write_failure(exc))


_REPORTING_WRITE_FAILURES = False


def _report_write_failures_once() -> None:
    """Before a writing manager's first save: orbax's own reports of a refused write, and the
    reports its abandoned writes leave, are dropped from the start (they come from its threads
    before the run can know, as pages of traceback above the run's one-line error)."""
    global _REPORTING_WRITE_FAILURES
    if not _REPORTING_WRITE_FAILURES:
        logging.getLogger("absl").addFilter(_DropReportedWriteFailures())
        _install_abandoned_io_hook()
        _REPORTING_WRITE_FAILURES = True


def warn(msg: str) -> None:
    print(f"spmdgpt: warning: {msg}", file=sys.stderr, flush=True)


# orbax coroutines that report "Exception ignored" when closed unfinished after a failed
# restore (a damaged checkpoint) or save (disk full).
_ABANDONED = ("_read_array_index_and_device_put", "async_serialize_from_host.<locals>.write_fragment",
              "async_serialize_from_host")


def _is_abandoned_io_report(u) -> bool:
    """The reports orbax 0.12.8 leaves behind when one shard read (write) fails and the restore
    (save) gives up on the others:
    - its shard coroutines catch BaseException, so closing one unfinished turns GeneratorExit
      into an Exception: "Exception ignored in <coroutine ...>";
    - reads or writes still in flight in TensorStore's threads complete after orbax's event
      loop has closed and their callbacks fail: "RuntimeError: Event loop is closed"."""
    if getattr(u.object, "__qualname__", "") in _ABANDONED:
        return True
    return (isinstance(u.exc_value, RuntimeError) and str(u.exc_value) == "Event loop is closed"
            and any(f.name == "call_soon_threadsafe" for f in traceback.extract_tb(u.exc_traceback)))


def _is_abandoned_task_report(record: logging.LogRecord) -> bool:
    """asyncio's "... exception was never retrieved" for a task, gather or future of orbax's reads
    (a future's report names only TensorStore's error: "OUT_OF_RANGE: Error reading ... in OCDBT
    database")."""
    msg = record.getMessage()
    if "exception was never retrieved" not in msg:
        return False
    tb = record.exc_info[2] if record.exc_info else None
    return (any(name in msg for name in ("orbax", "TensorStore", "OCDBT"))
            or any("orbax" in f.filename for f in traceback.extract_tb(tb)))


_QUIET_ABANDONED_IO = False


def _install_abandoned_io_hook() -> None:
    """From now on drop exactly the reports of abandoned reads/writes (they arrive whenever the
    collector or TensorStore's threads get to them, as pages of traceback in the middle of
    training); every other report reaches the hook that was in place."""
    global _QUIET_ABANDONED_IO
    if not _QUIET_ABANDONED_IO:
        previous = sys.unraisablehook

        def hook(u):
            if not _is_abandoned_io_report(u):
                previous(u)

        sys.unraisablehook = hook
        # (and orbax's deserialisation tasks that failed after the restore gave up: asyncio logs
        # "Task exception was never retrieved" when the collector destroys them)
        logging.getLogger("asyncio").addFilter(lambda r: not _is_abandoned_task_report(r))
        _QUIET_ABANDONED_IO = True


def _quiet_abandoned_io() -> None:
    """After a failed restore or save: drop the abandoned reads'/writes' reports and collect
    them now."""
    _install_abandoned_io_hook()
    gc.collect()


def restore_latest(mngr: CheckpointManager, target_state):
    """Newest checkpoint that loads and verifies, skipping damaged ones with a warning.

    Returns (step, params, opt_state, meta, skipped_steps), or None when there is no
    checkpoint at all. Raises ConfigError when checkpoints exist but none can be loaded.
    """
    steps = mngr.steps()
    if not steps:
        return None
    step, (params, opt_state, meta), skipped = first_loadable(
        mngr, steps, lambda s: mngr.restore(s, target_state.params, target_state.opt_state),
        f"run.dir={mngr.directory.parent} has checkpoints but none can be loaded",
        "fix or move them, or choose a new run.dir")
    return step, params, opt_state, meta, skipped


def damage_reason(e: BaseException) -> str:
    """One line on why a checkpoint did not load: the first line of the innermost cause
    (TensorStore's "OUT_OF_RANGE: Error reading ... Requested byte range ... is not valid for
    value of size 100" rather than orbax's wrapper and its spec repr), at most 200 characters (cut
    between words)."""
    while e.__cause__ is not None or (e.__context__ is not None and not e.__suppress_context__):
        e = e.__cause__ or e.__context__
    text = str(e).strip().split(" See full TensorStore details")[0]
    if not text:
        return type(e).__name__
    line = text.splitlines()[0]
    return line if len(line) <= 200 else line[:200].rsplit(" ", 1)[0] + " ..."  # (cut between words)


def first_loadable(mngr: CheckpointManager, steps: list, load, what: str, fix: str):
    """(step, load(step), the newer steps skipped) for the newest of `steps` whose checkpoint
    loads, each damaged one before it reported in a warning (orbax and TensorStore raise many
    kinds of errors for damaged files; a ConfigError, e.g. other shapes, is not damage and
    passes through). ConfigError "{what}: each step (its reason); {fix}" when none loads."""
    failures, skipped = [], []
    # (before the first read: a damaged file's abandoned reads can report from TensorStore's threads
    # while the failure is still being raised, before any line of ours; 1 run in 4 printed them)
    _install_abandoned_io_hook()
    for step in reversed(steps):
        try:
            return step, load(step), skipped
        except ConfigError:
            raise
        except Exception as e:
            reason = damage_reason(e)
            failures.append(f"{step} ({reason})")
            skipped.append(step)
            if step != steps[0]:
                warn(f"checkpoint {mngr.directory / str(step)} cannot be loaded ({reason}); trying an older one")
        _quiet_abandoned_io()  # outside the except block: the traceback no longer holds them
    raise ConfigError([f"{what}: {'; '.join(failures)}; {fix}"])


def set_aside(run_dir: Path, steps: list) -> None:
    """Move damaged checkpoints to run_dir/checkpoints-damaged/ (kept for inspection, never
    deleted) so that the resumed run can write those steps again."""
    if not steps:
        return
    dest = Path(run_dir) / "checkpoints-damaged"
    dest.mkdir(exist_ok=True)
    for step in steps:
        target = dest / str(step)
        n = 1
        while target.exists():
            target, n = dest / f"{step}.{n}", n + 1
        (Path(run_dir) / CHECKPOINT_DIR / str(step)).rename(target)
        warn(f"moved the damaged checkpoint {step} to {target}")


def checkpoint_meta(cfg: Config, git_sha: Optional[str], data_step: int) -> dict:
    return {
        "config": to_dict(cfg),
        "git_sha": git_sha,
        "data": {"kind": "step-indexed", "next_step": data_step},
        "rng": {"seed": cfg.train.seed, "derivation": "fold_in(key(train.seed), step)"},
    }

