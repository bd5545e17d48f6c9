"""Install packages into the environment of the Python that runs this, with uv where it can.

    .venv/bin/python tools/install.py -e '.[dev]'
    .venv-torch/bin/python tools/install.py -r requirements-torch.txt

uv (pinned below, installed into the environment by pip first) resolves and installs the same
pinned packages about twice as fast as pip: a fresh install of CI's extras and the PyTorch side at
once took 56 s with pip and 21 s with uv on the 2-core Intel Xeon (AVX-512, AMX), from an empty
cache, to the same `pip freeze`. uv does not read pip's configuration, so pip's own settings
(`pip config list`: pip.conf files and PIP_* variables) are handed over as uv's flags: find-links,
constraints, index URLs, the certificate and the timeout. A setting this script cannot hand over,
a failed install of uv, or a failed uv install falls back to pip (`--no-compile`, as before),
saying why on one line: the environment then is what pip makes of it, as it was before uv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

UV = "uv==0.13.9"
# pip setting -> uv flag (each value a whitespace-separated list, as pip reads it)
FLAGS = {"find-links": "--find-links", "constraint": "--constraint", "extra-index-url": "--extra-index-url",
         "index-url": "--index-url"}
ENV = {"cert": "SSL_CERT_FILE", "default-timeout": "UV_HTTP_TIMEOUT"}
IGNORED = {"disable-pip-version-check", "no-compile", "quiet", "progress-bar", "no-cache-dir", "root-user-action",
           "no-warn-script-location"}
SCOPES = (":env:", "global", "install")  # (pip's precedence: the environment's variables over the files)


def pip_settings(python: str) -> dict:
    """{setting: value} of pip's configuration that an install reads (`pip config list`)."""
    return parse_settings(subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True,
                                         check=True).stdout)


def parse_settings(out: str) -> dict:
    """`pip config list`'s lines (scope.key='value') as {key: value}, the environment's PIP_*
    variables (scope :env:) winning over the files' global and install sections, other sections
    left out; raises ValueError naming a setting uv cannot be given."""
    found: dict = {}
    for line in out.splitlines():
        if "=" not in line or "." not in line.split("=", 1)[0]:
            continue
        name, value = line.split("=", 1)
        scope, key = name.rsplit(".", 1)
        value = value.strip().strip("'\"")
        if scope not in SCOPES or key in IGNORED:
            continue
        if key not in FLAGS and key not in ENV:
            raise ValueError(f"pip setting {name}={value!r} has no uv counterpart here")
        rank = SCOPES.index(scope)
        if key not in found or rank < found[key][0]:
            found[key] = (rank, value)
    return {k: v for k, (_, v) in found.items()}


def uv_command(python: str, args: list[str]) -> tuple[list[str], dict]:
    settings = pip_settings(python)
    flags = [f for k, v in settings.items() if k in FLAGS for item in v.split() for f in (FLAGS[k], item)]
    env = {ENV[k]: v for k, v in settings.items() if k in ENV}
    uv = str(Path(python).parent / "uv")
    # (pip's way with several indexes: the best match over all of them; uv's default reads the first
    # index that has a package and no other)
    return ([uv, "pip", "install", "--python", python, "-q", "--index-strategy", "unsafe-best-match", *flags, *args],
            {**os.environ, **env})


def main(args: list[str]) -> int:
    python = sys.executable
    pip = [python, "-m", "pip", "install", "-q", "--no-compile"]
    if os.environ.get("SPMDGPT_INSTALL_WITH_PIP") == "1":
        print("install: with pip (SPMDGPT_INSTALL_WITH_PIP=1)", file=sys.stderr)
    else:
        try:
            subprocess.run([*pip, UV], check=True)
            command, env = uv_command(python, args)
            if subprocess.run(command, env=env).returncode == 0:
                return 0
            why = "uv failed"
        except (subprocess.CalledProcessError, ValueError, OSError) as e:
            why = str(e)
        print(f"install: with pip ({why})", file=sys.stderr)
    return subprocess.run([*pip, *args]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
