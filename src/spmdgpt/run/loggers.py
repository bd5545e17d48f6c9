"""Where metrics go: metrics.jsonl (full float32 precision) and the console (tqdm bar)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Optional

from tqdm import tqdm

from spmdgpt.run.files import WriteFailed, os_reason


def strict_json_row(row: dict) -> dict:
    """JSON has no NaN or Infinity: a non-finite float becomes null and its key is listed under
    "nonfinite" (e.g. {"loss": null, "nonfinite": ["loss"]}), so every reader can parse the row."""
    bad = [k for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)]
    if not bad:
        return row
    return {**{k: None if k in bad else v for k, v in row.items()}, "nonfinite": bad}


class JsonlLogger:
    """One JSON object per line; floats are written with repr, so float32 values round-trip;
    non-finite values as null (`strict_json_row`). Each row is one unbuffered append (O_APPEND),
    so nothing waits in a buffer and a failed write (disk full) leaves at most a torn last line,
    which the resumed run drops."""

    def __init__(self, path: Path):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(self, row: dict) -> None:
        line = json.dumps(strict_json_row(row), default=str, allow_nan=False, ensure_ascii=False) + "\n"
        try:
            os.write(self._fd, line.encode("utf-8"))
        except OSError as e:
            raise WriteFailed(f"writing {self.path} failed ({os_reason(e)})") from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def append_rows(path: Path, rows) -> None:
    """Append rows to a JSONL file (samples.jsonl), each one append; WriteFailed if one fails."""
    log = JsonlLogger(path)
    try:
        for row in rows:
            log.log(row)
    finally:
        log.close()


def format_rate(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"


class Console:
    """A tqdm progress bar (loss, tokens/s, MFU), or plain log lines when it is off."""

    def __init__(self, total: int, initial: int, enabled: bool, log_every: int, active: bool = True):
        """enabled: a progress bar (else log lines); active: print at all (process 0 only)."""
        enabled = enabled and active
        self.active = active
        self.enabled = enabled
        self.log_every = log_every
        self.total = total
        self.bar = (
            tqdm(total=total, initial=initial, dynamic_ncols=True, unit="step", file=sys.stderr)
            if enabled
            else None
        )

    def step(self, step: int, loss: float, tokens_per_sec: Optional[float], mfu: Optional[float]):
        mfu_s = "-" if mfu is None else f"{100 * mfu:.1f}%"
        if self.bar is not None:
            self.bar.set_postfix_str(
                f"loss {loss:.4f} | {format_rate(tokens_per_sec)} tok/s | MFU {mfu_s}", refresh=False
            )
            self.bar.update(step - self.bar.n)
        elif self.active and (step % self.log_every == 0 or step == self.total):
            self.write(
                f"step {step}/{self.total} | loss {loss:.4f} | "
                f"{format_rate(tokens_per_sec)} tok/s | MFU {mfu_s}"
            )

    def set_total(self, total: int) -> None:
        """A new step count (train.time_budget's re-plan)."""
        self.total = total
        if self.bar is not None:
            self.bar.total = total
            self.bar.refresh()

    def write(self, msg: str) -> None:
        if not self.active:
            return
        if self.bar is not None:
            self.bar.write(msg, file=sys.stderr)
        else:
            print(msg, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
