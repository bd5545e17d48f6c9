"""Trained runs that several test files share, each built once per test run.

Loaded by tests/conftest.py (`pytest_plugins`). The tests only read these run directories (a test
that damages or trains on one works on its own copy), so one run serves every file: under
pytest-xdist the first worker that needs a run trains it, under a lock in the folder the workers
share, and the other finds it there."""

import fcntl
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

# The staircase experiment's 300 steps on one CPU device (as `make train` on a laptop), in a `spmdgpt
# train` process compiled as a user's run is (without the test processes' -O0): a metrics row every
# step, evaluations at 100, 200 and 300 with 2 rollouts (temperature 0.8) of 20 tokens from
# 8-token validation prompts each (samples.jsonl), checkpoints at 150 and 300. Used by test_train (convergence,
# metrics, run directory) and test_generate (sampling from the trained run, damaged copies).
STAIRCASE_300 = ["+experiment=staircase", "train.log_every=1", "train.progress=false", "train.rollout_tokens=20",
                 "train.rollout_prompt_tokens=8", "checkpoint.every=150"]

# A barely trained staircase run: 30 steps from init_std 0.2 on the 8 test devices (dp), evaluated at
# step 30 (its only checkpoint too). Its log-probabilities still vary (viz's colours). Used by test_eval
# and test_viz. (test_serve trains its own 20 steps: at 30, three seeded samples at temperature 1 came out
# the same, and its check that samples vary needs them apart.)
STAIRCASE_30 = ["+experiment=staircase", "train.steps=30", "train.eval_every=30", "model.init_std=0.2",
                "train.progress=false"]


def _shared_run(tmp_path_factory, name: str, overrides: list, child: bool = False) -> tuple:
    """(the resolved config, the run directory, the final training loss) of `overrides` trained
    once per test run, in a folder named "stair": in this process, or with `child` in a `spmdgpt
    train` process of one CPU device whose XLA optimises its kernels (for runs of many steps,
    which -O0's kernels and eight simulated devices' rendezvous slow more than they save: the
    staircase's 300 steps took 23 s on 8 devices, 10 s on one)."""
    from spmdgpt import train
    from spmdgpt.config import load_config

    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # (one per `pytest -n` run, the same in its workers)
    root = tmp_path_factory.getbasetemp()
    root = root.parent / f"shared-{run_id}" if run_id else root
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    run_dir, done = folder / "stair", folder / "result.json"
    cfg = load_config([*overrides, f"run.dir={run_dir}"])
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (a worker that finds it taken waits for the other's run)
        if not done.is_file() and child:
            flags = " ".join(f for f in os.environ["XLA_FLAGS"].split()
                             if "xla_backend_optimization_level" not in f and "device_count" not in f)
            subprocess.run([sys.executable, "-m", "spmdgpt", "train", *overrides, f"run.dir={run_dir}"], check=True,
                           env={**os.environ, "XLA_FLAGS": flags}, capture_output=True, timeout=600)
            rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
            done.write_text(json.dumps({"final_loss": [r["loss"] for r in rows if "loss" in r][-1]}))
        elif not done.is_file():
            done.write_text(json.dumps({"final_loss": train(cfg, argv=["pytest"]).final_loss}))
    return cfg, run_dir, json.loads(done.read_text())["final_loss"]


@pytest.fixture(scope="session")
def staircase_300(tmp_path_factory):
    """STAIRCASE_300's run: .run_dir and .final_loss (train()'s)."""
    _, run_dir, final_loss = _shared_run(tmp_path_factory, "staircase-300", STAIRCASE_300, child=True)
    return SimpleNamespace(run_dir=run_dir, final_loss=final_loss)


@pytest.fixture(scope="session")
def staircase_30(tmp_path_factory):
    """(the resolved config, the run directory) of STAIRCASE_30."""
    cfg, run_dir, _ = _shared_run(tmp_path_factory, "staircase-30", STAIRCASE_30)
    return cfg, run_dir
