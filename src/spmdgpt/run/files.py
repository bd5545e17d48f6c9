"""Writing files safely, and saying why a write failed: atomic writes (a temporary file, fsync,
rename) and WriteFailed with the operating system's reason; and reading a run's JSONL logs back.
A leaf module, shared by the token store, the run directory, checkpoints and the commands."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path


def jsonl_rows(path: Path) -> list:
    """The rows (JSON objects) of a JSONL log such as a run's metrics.jsonl, a line that does not
    parse skipped (a killed run's torn last line); [] when the file is missing."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def write_atomic(path: Path, data: bytes) -> None:
    """`data` into `path` through a temporary file, fsync and rename: never a partial file."""
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """`text` (UTF-8) into `path` by `write_atomic` (a temporary file, fsync, rename): never
    half-written; a failed write raises OSError and leaves no temporary file."""
    write_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=1, ensure_ascii=False) + "\n")


class WriteFailed(RuntimeError):
    """Writing into run.dir failed (disk full, I/O error, quota): the run stops; every complete
    checkpoint stays loadable and a rerun resumes from the newest one. `run_dir`: the run it
    stopped (its command line then says how to resume it), else None."""

    def __init__(self, message: str, run_dir=None):
        super().__init__(message)
        self.run_dir = run_dir


def os_reason(e: BaseException) -> str:
    """The operating system's words for a failed write, e.g. "No space left on device"."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    text = str(e)
    m = re.search(r"Failed to write [^:]*: (.+?) \[os_error_code", text)  # TensorStore (orbax)
    first = m.group(1) if m else (text.strip().splitlines() or [type(e).__name__])[0]
    # TensorStore follows the bare reason with its own payloads, in either form, e.g.
    # "File too large [tensorstore_spec='{...}'] [source locations='...']": keep the reason
    return re.split(r" \[(?:tensorstore_spec|source locations|os_error_code)", first)[0][:200]
