"""Where raw training data comes from: the synthetic staircase, or a text file under data.path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import numpy as np

from spmdgpt.config import ConfigError, DataConfig

STAIRCASE_PERIOD = "012345678987654321"  # repeated: 0123456789876543210123456789...


def find_data_root(explicit: Optional[str] = None) -> Optional[Path]:
    """data.path, else $SPMDGPT_DATA, else the nearest `shared/data` above cwd or this package."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("SPMDGPT_DATA")
    if env:
        return Path(env).expanduser()
    starts = [Path.cwd().resolve(), Path(__file__).resolve().parent]
    for start in starts:
        for p in [start, *start.parents]:
            if (p / "shared" / "data").is_dir():
                return p / "shared" / "data"
    return None


def staircase_tokens(n: int) -> np.ndarray:
    """The digit sequence 0,1,...,9,8,...,1,0,1,... of length n as token ids 0-9."""
    cycle = np.array([int(c) for c in STAIRCASE_PERIOD], dtype=np.uint16)
    return np.resize(cycle, n)


def text_path(cfg: DataConfig) -> Path:
    """Resolve data.text_file against the data root; ConfigError if it is missing."""
    p = Path(cfg.text_file).expanduser()
    if not p.is_absolute():
        root = find_data_root(cfg.path)
        if root is None:
            raise ConfigError(
                [
                    "data.path is not set and no shared/data folder was found above the working "
                    "directory; set data.path=<folder with the data> or SPMDGPT_DATA"
                ]
            )
        p = root / p
    if not p.is_file():
        raise ConfigError(
            [f"data.text_file={cfg.text_file}: no such file {p}; set data.path or data.text_file"]
        )
    return p


def read_text(path: Path, encoding: str) -> str:
    try:
        text = path.read_text(encoding=encoding)
    except (UnicodeDecodeError, LookupError) as e:
        raise ConfigError(
            [f"data.encoding={encoding} cannot read {path}: {e}; try data.encoding=latin-1"]
        ) from None
    return text.replace("\r\n", "\n")
