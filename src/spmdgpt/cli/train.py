"""`spmdgpt train [overrides]`: compose the config, start JAX (and jax.distributed), train.
`spmdgpt train -m [--parallel N] key=a,b ...`: a sweep (spmdgpt.cli.sweep)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import List

from spmdgpt.cli.args import EXIT_DIVERGED, EXIT_OK, EXIT_USAGE, EXIT_WRITE_FAILED, parse


def run(items: List[str]) -> int:
    if "-m" in items or "--multirun" in items:  # a grid of runs (spmdgpt.cli.sweep)
        from spmdgpt.cli import sweep

        return sweep.run(items)
    _, overrides = parse(items)  # train owns no keys: every item overrides the config
    from spmdgpt.config import load_config
    from spmdgpt.mesh.distributed import initialize
    from spmdgpt.mesh.runtime import set_default_xla_flags

    cfg = load_config(overrides)
    set_default_xla_flags(cfg.train.deterministic)  # before JAX creates its backend
    initialize(cfg.dist)  # jax.distributed, when the run is multi-process
    from spmdgpt.loop import TrainingDiverged, train
    from spmdgpt.rl.rewards import RewardError
    from spmdgpt.run.files import WriteFailed

    try:
        result = train(cfg, argv=["spmdgpt", "train", *items])
    except TrainingDiverged as e:
        print(f"spmdgpt: error: {e}", file=sys.stderr)
        return EXIT_DIVERGED
    except RewardError as e:  # (one's own rl.reward raised or returned a non-number: the record is named)
        print(f"spmdgpt: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except WriteFailed as e:  # (a run stopped by it: how to resume, once there is room)
        how = f" and {resume_words(items, e.run_dir)}" if e.run_dir is not None else ""
        print(f"spmdgpt: error: {e}{how}", file=sys.stderr, flush=True)
        return EXIT_WRITE_FAILED  # (the console entry point then ends the process at once)
    if result.preempted:
        print(f"spmdgpt: stopped by signal after step {result.step}; checkpoint written. "
              f"{resume_hint(items, result.run_dir)}", file=sys.stderr)
    return EXIT_OK


RERUN = "rerun the same command to resume"
MAKE_TRAIN = ["+experiment=shakespeare_char"]  # what the Makefile's `train` target passes before $(ARGS)


def resume_hint(items: List[str], run_dir: Path) -> str:
    """How to resume a stopped run, as a sentence (`resume_words`)."""
    words = resume_words(items, run_dir)
    return words[0].upper() + words[1:] + ("." if words == RERUN else "")  # (a command ends without a stop)


def hydra_value(text: str) -> str:
    """`text` as a value Hydra's override grammar reads back as itself: as it is where it is plain,
    else in double quotes (a run name with a quote, a space or a bracket: "it's mine"); inside them
    a backslash is itself except before a quote or at the end, where it is doubled."""
    import re

    if re.fullmatch(r"[\w./:+~-]+", text):
        return text
    escaped = re.sub(r'(\\*)("|$)', lambda m: m[1] * 2 + ("\\" + m[2] if m[2] else ""), text)
    return f'"{escaped}"'


def resume_words(items: List[str], run_dir: Path) -> str:
    """How to resume a stopped run, a command to paste: the same one where it named run.dir
    ("rerun the same command to resume"); else (its run.dir a new timestamped folder) the same
    with run.dir= this run's folder ("resume it with: ..."), in `make train ARGS=...` form under
    make's `train` target."""
    if any(i.startswith("run.dir=") for i in items):
        return RERUN
    folder = f"run.dir={hydra_value(str(run_dir))}"
    if os.environ.get("MAKELEVEL") and items[:len(MAKE_TRAIN)] == MAKE_TRAIN:
        return f"resume it with: make train ARGS={shlex.quote(shlex.join([*items[len(MAKE_TRAIN):], folder]))}"
    prog = sys.argv[0] if Path(sys.argv[0]).name == "spmdgpt" else f"{sys.executable} -m spmdgpt"
    return f"resume it with: {prog} {shlex.join(['train', *items, folder])}"
