"""Experiment trackers beside metrics.jsonl: TensorBoard (tensorboardX) and Weights & Biases.

`train.loggers` names where a run's rows go: `console` (progress bar / log lines), `jsonl`
(run.dir/metrics.jsonl: the run's record, which resume relies on; always on), `tensorboard`
(event files in run.dir/tb) and `wandb`. Only process 0 logs. Every row that reaches
metrics.jsonl (training rows, evaluation rows, events) reaches each tracker too, after it:
numbers as scalars at the row's step, events as text.

TensorBoard: tensorboardX's writer (a small package: numpy + protobuf; tensorboard itself,
needed only to view the files, pulls grpcio, werkzeug and its data server). A resumed run opens
its writer with `purge_step` = the resumed step + 1, so the steps the interrupted run had logged
past its last checkpoint are hidden instead of drawn twice.

wandb: optional, never required (`pip install wandb`); the run's id is kept in
run.dir/wandb_id, so a resumed run continues the same wandb run (resume="allow").
`WANDB_MODE=offline` writes the run under run.dir/wandb for a later `wandb sync`.
"""

from __future__ import annotations

import json
import math
import secrets
import string
from pathlib import Path
from typing import List, Optional

LOGGERS = ("console", "jsonl", "tensorboard", "wandb")
PACKAGES = {"tensorboard": ("tensorboardX", "tensorboardX==2.6.5"), "wandb": ("wandb", "wandb==0.31.0")}


def check_loggers(loggers: List[str]) -> List[str]:
    """Errors for train.loggers: unknown names, a missing jsonl, a tracker whose package is not
    installed."""
    import importlib.util

    errs = [f"train.loggers: unknown logger {name!r}; choose among {', '.join(LOGGERS)}"
            for name in loggers if name not in LOGGERS]
    if "jsonl" not in loggers:
        errs.append("train.loggers must include jsonl: run.dir/metrics.jsonl is the run's record, which "
                    "resuming relies on")
    for name, (module, pin) in PACKAGES.items():
        if name in loggers:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):  # (a module set to None in sys.modules)
                found = False
            if not found:
                errs.append(f"train.loggers includes {name}, which needs the {module} package: pip install "
                            f"'{pin}' (or the spmdgpt[trackers] extra), or drop {name} from train.loggers")
    return errs


def _numbers(row: dict) -> dict:
    return {k: float(v) for k, v in row.items()
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class TensorBoard:
    def __init__(self, run_dir: Path, config_yaml: str, metadata: dict, purge_step: Optional[int]):
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(logdir=str(run_dir / "tb"), purge_step=purge_step)
        self.writer.add_text("config", _code(config_yaml), 0)
        self.writer.add_text("metadata", _code(json.dumps(metadata, indent=2)), 0)

    def log(self, row: dict) -> None:
        step = row["step"]
        if "event" in row:
            self.writer.add_text(f"events/{row['event']}", _code(json.dumps(row)), step)
            return
        for k, v in _numbers(row).items():
            self.writer.add_scalar(k, v, step)

    def close(self) -> None:
        self.writer.close()


def _code(text: str) -> str:
    """Markdown code block (TensorBoard's text tab renders markdown)."""
    return "\n".join("    " + line for line in text.splitlines())


class Wandb:
    def __init__(self, run_dir: Path, name: str, project: str, config: dict, metadata: dict):
        import wandb

        id_file = run_dir / "wandb_id"
        if id_file.is_file():
            run_id = id_file.read_text().strip()
        else:  # wandb's id format: 8 lowercase letters and digits
            run_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
        id_file.write_text(run_id + "\n")
        self.wandb = wandb
        self.run = wandb.init(project=project, name=name, id=run_id, resume="allow", dir=str(run_dir),
                              config={**config, "run_metadata": metadata},
                              settings=wandb.Settings(console="off", silent=True))

    def log(self, row: dict) -> None:
        if "event" in row:
            self.run.log({f"events/{row['event']}": 1}, step=row["step"])
        else:
            self.run.log(_numbers(row), step=row["step"])

    def close(self) -> None:
        self.run.finish()


class RunLog:
    """metrics.jsonl first (a failed write raises files.WriteFailed before any tracker sees the
    row), then each tracker."""

    def __init__(self, jsonl, trackers: list):
        self.jsonl, self.trackers = jsonl, trackers

    def log(self, row: dict) -> None:
        self.jsonl.log(row)
        for t in self.trackers:
            t.log(row)

    def close(self) -> None:
        self.jsonl.close()
        for t in self.trackers:
            t.close()


def open_trackers(cfg, run_dir: Path, resumed_from: Optional[int]) -> list:
    """The trackers train.loggers names (call on process 0 only, after run.dir is written)."""
    from spmdgpt.config import to_dict, to_yaml

    out = []
    metadata_file = run_dir / "metadata.json"
    metadata = json.loads(metadata_file.read_text()) if metadata_file.is_file() else {}
    if "tensorboard" in cfg.train.loggers:
        purge = None if resumed_from is None else resumed_from + 1
        out.append(TensorBoard(run_dir, to_yaml(cfg), metadata, purge))
    if "wandb" in cfg.train.loggers:
        out.append(Wandb(run_dir, cfg.run.name or run_dir.name, cfg.train.wandb_project, to_dict(cfg), metadata))
    return out
