"""Checkpoints: bitwise-exact resume after kill -9 / SIGTERM, damaged checkpoints, other layouts."""

import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import PATIENCE_S, read_jsonl, wait_until

from spmdgpt import train
from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import param_info
from spmdgpt.optim import build_optimizer
from spmdgpt.training.checkpoint import CheckpointManager
from spmdgpt.training.state import init_state

# A 1-device staircase run of 40 steps, checkpointed every 5 steps, one metrics row per step;
# with dropout on, so that every resume test also checks that the masks resume exactly.
RUN40 = ["+experiment=staircase", "train.steps=40", "train.log_every=1", "train.eval_every=20",
         "checkpoint.every=5", "train.progress=false", "mesh.data=1", "model.dropout=0.1"]
ENV1 = {**os.environ, "XLA_FLAGS": "", "PYTHONUNBUFFERED": "1"}  # one CPU device


def spmdgpt(args):
    return [sys.executable, "-m", "spmdgpt", "train", *args]


def losses(run_dir):
    return {r["step"]: r["loss"] for r in read_jsonl(Path(run_dir) / "metrics.jsonl") if "loss" in r}


def final_params(run_dir, overrides=("mesh.data=1",), step=None):
    cfg = load_config(["+experiment=staircase", *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding)
        state = init_state(cfg, rules, build_optimizer(cfg.optimizer, param_info(cfg.model), 10))
        mngr = CheckpointManager.reader(run_dir)
        params, opt_state, meta = mngr.restore(step or mngr.steps()[-1], state.params, state.opt_state)
    return jax.device_get(params), jax.device_get(opt_state), meta


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("ckpt") / "straight"
    out = subprocess.run(spmdgpt([*RUN40, f"run.dir={run_dir}"]), env=ENV1, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return run_dir


def run_until_step(run_dir, step, timeout=PATIENCE_S, cwd=None):
    """Start the 40-step run and return the process once metrics.jsonl has reached `step`.
    run_dir None: the default run.dir (runs/<time>-<name> under `cwd`)."""
    proc = subprocess.Popen(spmdgpt([*RUN40, *([f"run.dir={run_dir}"] if run_dir else [])]), env=ENV1, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"finished before step {step}: {proc.stderr.read()}")
            found = [run_dir / "metrics.jsonl"] if run_dir else list(Path(cwd).glob("runs/*/metrics.jsonl"))
            if any(m.exists() and any(r.get("step", 0) >= step for r in _rows(m)) for m in found):
                return proc
            time.sleep(0.01)
        raise AssertionError("timed out")
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def _rows(path):
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


def assert_same_as_uninterrupted(run_dir, uninterrupted):
    a, b = losses(uninterrupted), losses(run_dir)
    assert sorted(b) == list(range(1, 41))  # no duplicated or missing steps
    assert [b[s] for s in range(1, 41)] == [a[s] for s in range(1, 41)]  # bitwise
    pa, oa, _ = final_params(uninterrupted)
    pb, ob, _ = final_params(run_dir)
    for x, y in zip(jax.tree.leaves((pa, oa)), jax.tree.leaves((pb, ob)), strict=True):
        np.testing.assert_array_equal(x, y)


def test_kill_9_then_resume_is_bitwise_identical(tmp_path, uninterrupted):
    run_dir = tmp_path / "killed"
    proc = run_until_step(run_dir, 20)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert max(losses(run_dir)) < 40
    assert json.loads((run_dir / "run.lock").read_text())["pid"] == proc.pid  # the dead holder's
    out = subprocess.run(spmdgpt([*RUN40, f"run.dir={run_dir}"]), env=ENV1, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr  # the kernel dropped the lock with the process
    assert "resumed from the checkpoint at step" in out.stderr
    assert_same_as_uninterrupted(run_dir, uninterrupted)
    # keep=3: only the newest three checkpoints remain
    assert CheckpointManager.reader(run_dir).steps() == [30, 35, 40]


def test_sigterm_writes_a_checkpoint_and_exits_0(tmp_path, uninterrupted, monkeypatch):
    """SIGTERM: a checkpoint at the step it stopped after, exit 0, and a message that names the
    command resuming it; the run had the default run.dir (a new timestamped folder each time), so
    the command adds run.dir=<its folder>, and pasted, it resumes the run to the uninterrupted
    one's numbers, bitwise. (Under `make train` the command is make's: ARGS=...)"""
    from spmdgpt.cli.train import resume_hint

    proc = run_until_step(None, 18, cwd=tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=PATIENCE_S)
    assert proc.returncode == 0, err
    run_dir, = (tmp_path / "runs").iterdir()
    assert "stopped by signal after step" in err
    stopped = int(err.split("stopped by signal after step ")[1].split(";")[0])
    assert 18 <= stopped < 40
    steps = CheckpointManager.reader(run_dir).steps()
    assert steps[-1] == stopped  # checkpoint written on the signal, not only at every=5
    assert max(losses(run_dir)) == stopped
    command = err.split("Resume it with: ")[1].strip()
    assert command == shlex.join([sys.executable, "-m", "spmdgpt", "train", *RUN40,
                                  f"run.dir=runs/{run_dir.name}"])
    out = subprocess.run(shlex.split(command), cwd=tmp_path, env=ENV1, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"resumed from the checkpoint at step {stopped}" in out.stderr
    assert_same_as_uninterrupted(run_dir, uninterrupted)
    monkeypatch.setenv("MAKELEVEL", "1")
    assert resume_hint(["+experiment=shakespeare_char", "train.steps=50"], Path("runs/r1")) == (
        "Resume it with: make train ARGS='train.steps=50 run.dir=runs/r1'")
    assert resume_hint(["+experiment=shakespeare_char", "run.dir=runs/r1"], Path("runs/r1")) == (
        "Rerun the same command to resume.")
    # a folder named after a run name with a quote: quoted for Hydra, then for the shell, it reads back as itself
    monkeypatch.delenv("MAKELEVEL")
    named = Path("runs/20261129-it's \"mine\"")
    pasted = shlex.split(resume_hint(["+experiment=staircase"], named).removeprefix("Resume it with: "))
    assert pasted[-1].startswith("run.dir=")
    assert load_config(["+experiment=staircase", pasted[-1]]).run.dir == str(named)


def test_second_run_on_a_locked_run_dir_is_refused(tmp_path, capsys):
    """A second `train` on a run.dir in use exits 2 at once, names the holder and touches
    nothing; the first run goes on and loses no metric row. (The second in this process: the
    lock is an flock, which another process cannot take, this one included.)"""
    import socket

    run_dir = tmp_path / "r"
    args = ["+experiment=staircase", "train.steps=100000", "train.log_every=1", "train.eval_every=0",
            "checkpoint.every=5", "train.progress=false", "mesh.data=1", f"run.dir={run_dir}"]
    first = subprocess.Popen(spmdgpt(args), env=ENV1, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until((run_dir / "checkpoints" / "5").is_dir, first, "checkpoint 5")
        capsys.readouterr()
        assert main(["train", *[a for a in args if a != "mesh.data=1"]]) == 2  # (in process: 8 devices)
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"spmdgpt: error: run.dir={run_dir} is in use by a running training job "
                              f"(host {socket.gethostname()}, PID {first.pid}, started 20") and "\n" not in err
        assert first.poll() is None
        first.send_signal(signal.SIGTERM)
        _, first_err = first.communicate(timeout=PATIENCE_S)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, first_err
    stopped = int(first_err.split("stopped by signal after step ")[1].split(";")[0])
    assert sorted(losses(run_dir)) == list(range(1, stopped + 1))  # every row of the first run
    assert CheckpointManager.reader(run_dir).steps()[-1] == stopped


def test_unusable_run_dir_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    code = main(["train", *_inproc(blocker / "run", "train.steps=2")])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"spmdgpt: error: run.dir={blocker / 'run'} cannot be used (Not a "
                                 "directory); choose a writable directory\n")
    assert blocker.read_text() == "x"


def _damage(step_dir: Path):
    """Truncate the largest file of a checkpoint's parameters to half its size."""
    biggest = max((p for p in (step_dir / "params").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data = biggest.read_bytes()
    biggest.write_bytes(data[: len(data) // 2])


def _inproc(run_dir, *extra):
    return ["+experiment=staircase", "train.log_every=1", "train.progress=false",
            "checkpoint.every=5", f"run.dir={run_dir}", *extra]


def test_damaged_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, capsys):
    run_dir = tmp_path / "r"
    train(load_config(_inproc(run_dir, "train.steps=10")), argv=["pytest"])  # (checkpoints 5 and 10)
    _damage(run_dir / "checkpoints" / "10")
    capsys.readouterr()
    result = train(load_config(_inproc(run_dir, "train.steps=15")), argv=["pytest"])
    err = capsys.readouterr().err
    assert f"checkpoint {run_dir.resolve() / 'checkpoints' / '10'} cannot be loaded" in err
    assert result.resumed_from == 5
    assert sorted(losses(run_dir)) == list(range(1, 16))
    assert (run_dir / "checkpoints-damaged" / "10" / "params").is_dir()  # kept, not deleted
    assert CheckpointManager.reader(run_dir).steps() == [5, 10, 15]


def _snapshot(d: Path):
    """Every file's hash (except run.lock, which each run that takes the lock stamps with its
    host, PID and start time)."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(d.rglob("*")) if p.name != "run.lock"}


def test_no_loadable_checkpoint_stops_without_touching_the_run(tmp_path, capsys):
    run_dir = tmp_path / "r"
    train(load_config(_inproc(run_dir, "train.steps=10")), argv=["pytest"])
    for step_dir in (run_dir / "checkpoints").iterdir():
        if step_dir.name.isdigit():
            _damage(step_dir)
    before = _snapshot(run_dir)
    capsys.readouterr()
    code = main(["train", *_inproc(run_dir, "train.steps=20")])
    err = capsys.readouterr().err
    assert code == 2
    assert "has checkpoints but none can be loaded" in err
    assert _snapshot(run_dir) == before  # nothing rewritten, nothing started from step 0


LAYOUT = ["optimizer.schedule=constant", "optimizer.warmup_steps=2", "train.eval_every=0", "model.num_layers=4"]
CIRCULAR = ["mesh.stage=2", "model.pipeline_repeats=2"]  # (2 passes through 2 stages: the stack held by stage)


def test_resume_on_other_layouts(tmp_path):
    """A checkpoint holds the same arrays whatever the layout: 4-device data x 2 pipeline stages
    (the circular schedule, which holds the layers in another order) -> 4x2 fsdp_tp (in process)
    and -> 1 device (subprocess); 8-device dp -> 2 stages."""
    straight, part, back = tmp_path / "straight", tmp_path / "part", tmp_path / "back"
    train(load_config(_inproc(straight, "train.steps=10", *LAYOUT)), argv=["pytest"])
    train(load_config(_inproc(part, "train.steps=5", *LAYOUT, "mesh.data=4", *CIRCULAR)), argv=["pytest"])
    train(load_config(_inproc(back, "train.steps=5", *LAYOUT)), argv=["pytest"])
    one = tmp_path / "one"
    shutil.copytree(part, one)
    r = train(load_config(_inproc(part, "train.steps=10", *LAYOUT, "sharding=fsdp_tp",
                                  "mesh.data=4", "mesh.model=2")), argv=["pytest"])
    assert r.resumed_from == 5
    assert jax.typeof(r.state.params.blocks.attn.w_qkv).sharding.spec[:2] == (None, ("data", "context"))
    r = train(load_config(_inproc(back, "train.steps=10", *LAYOUT, "mesh.data=4", *CIRCULAR)), argv=["pytest"])
    assert r.resumed_from == 5 and jax.typeof(r.state.params.blocks.attn.w_qkv).sharding.spec[0] == "stage"
    out = subprocess.run(spmdgpt(_inproc(one, "train.steps=10", *LAYOUT, "mesh.data=1")),  # (-O0: a quicker compile)
                         env={**ENV1, "XLA_FLAGS": "--xla_backend_optimization_level=0"}, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    ref = losses(straight)
    # Stated tolerance: other layouts reduce in another order (float32 rounding), 5e-6 absolute.
    for run in (part, one, back):
        got = losses(run)
        assert sorted(got) == list(range(1, 11))
        np.testing.assert_allclose([got[s] for s in range(6, 11)], [ref[s] for s in range(6, 11)],
                                   rtol=0, atol=5e-6)


@pytest.mark.parametrize("overrides", [["sharding=fsdp", "mesh.data=8"],
                                       ["sharding=fsdp_tp", "mesh.data=4", "mesh.model=2", "optimizer.name=muon"],
                                       ["sharding=tp", "mesh.data=4", "mesh.model=2", "optimizer.name=manifold_muon"]])
def test_restore_target_is_the_fresh_state_layout_without_allocating(overrides):
    """The restore target of a resume or init_from (state.abstract_state) has every leaf's shape,
    dtype and sharding of a real fresh state (params and optimizer state, on 8 devices), and is
    built without running the initialisation: no array is created."""
    from spmdgpt.training.checkpoint import abstract
    from spmdgpt.training.state import abstract_state

    cfg = load_config(["model.d_model=64", "model.num_heads=4", "model.num_layers=2", *overrides])
    mesh = make_mesh(cfg.mesh, jax.devices())
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding)
        opt = build_optimizer(cfg.optimizer, param_info(cfg.model), 100)
        before = len(jax.live_arrays())
        target = abstract_state(cfg, rules, opt)
        assert len(jax.live_arrays()) == before
        real = abstract(init_state(cfg, rules, opt))
    got, want = jax.tree.leaves(target), jax.tree.leaves(real)
    assert jax.tree.structure(target) == jax.tree.structure(real) and len(got) > 20
    for a, b in zip(got, want):
        assert (a.shape, a.dtype, a.sharding.spec) == (b.shape, b.dtype, b.sharding.spec)
        assert a.sharding.mesh == mesh and a.sharding.is_equivalent_to(b.sharding, len(a.shape))


def test_init_from_loads_parameters_only(tmp_path, capsys):
    src = tmp_path / "src"
    train(load_config(_inproc(src, "train.steps=30")), argv=["pytest"])
    src_losses = losses(src)
    r = train(load_config(_inproc(tmp_path / "ft", "train.steps=2", f"checkpoint.init_from={src}")),
              argv=["pytest"])
    ft = losses(tmp_path / "ft")
    assert r.resumed_from is None and sorted(ft) == [1, 2]
    assert ft[1] < 0.5 * src_losses[1]  # starts from the trained parameters, not from scratch
    assert (f"initialised from checkpoint.init_from={src}: its parameters (its newest checkpoint's), a fresh "
            "optimizer state, from step 0") in capsys.readouterr().err
    code = main(["train", *_inproc(tmp_path / "bad", "model.d_model=32", f"checkpoint.init_from={src}")])
    err = capsys.readouterr().err
    assert code == 2
    assert "parameter shapes do not match the config: model.d_model=32 (checkpoint: 64)" in err
    assert not (tmp_path / "bad").exists()
    # a damaged newest checkpoint, or a folder of junk: one line naming the step, nothing written
    shutil.copytree(src, tmp_path / "damaged")
    _damage(tmp_path / "damaged" / "checkpoints" / "30")
    (tmp_path / "junk" / "checkpoints" / "100").mkdir(parents=True)
    (tmp_path / "junk" / "checkpoints" / "100" / "x").write_bytes(bytes(range(100)))
    (tmp_path / "junk" / "config.yaml").write_text("a: [\n")
    for name, step in (("damaged", 30), ("junk", 100)):
        code = main(["train", *_inproc(tmp_path / f"ft-{name}", f"checkpoint.init_from={tmp_path / name}")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith(
            f"spmdgpt: error: checkpoint.init_from={tmp_path / name}: its newest checkpoint cannot be loaded, "
            f"step: {step} ("), err
        assert not (tmp_path / f"ft-{name}").exists()


def test_incomplete_checkpoint_folder_is_an_error(tmp_path, capsys):
    run_dir = tmp_path / "r"
    (run_dir / "checkpoints" / "7").mkdir(parents=True)  # a step folder orbax never finished
    (run_dir / "metrics.jsonl").write_text('{"step": 7, "loss": 1.0}\n')
    code = main(["train", *_inproc(run_dir, "train.steps=10")])
    assert code == 2
    err = capsys.readouterr().err
    assert "has checkpoints but none can be loaded: 7 (" in err
    assert (run_dir / "metrics.jsonl").read_text() == '{"step": 7, "loss": 1.0}\n'
    code = main(["train", *_inproc(run_dir, "train.steps=10", "checkpoint.enabled=false")])
    assert code == 2
    assert "resuming it needs checkpoint.enabled=true" in capsys.readouterr().err


def test_resume_with_another_model_is_refused(tmp_path, capsys):
    run_dir = tmp_path / "r"
    train(load_config(_inproc(run_dir, "train.steps=2")), argv=["pytest"])
    code = main(["train", *_inproc(run_dir, "train.steps=10", "model.num_layers=3")])
    assert code == 2
    assert "holds checkpoints of another model: model.num_layers=3 (checkpoint: 2)" in capsys.readouterr().err


def test_metadata_records_pip_freeze_and_xla_flags(tmp_path):
    run_dir = tmp_path / "r"
    train(load_config(_inproc(run_dir, "train.steps=2")), argv=["pytest"])
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert f"jax=={jax.__version__}" in meta["pip_freeze"] and "orbax-checkpoint==0.12.8" in meta["pip_freeze"]
    assert "--xla_force_host_platform_device_count=8" in meta["xla_flags"]
    _, _, ckpt_meta = final_params(run_dir, overrides=("mesh.data=1",))
    assert ckpt_meta["step"] == 2 and ckpt_meta["config"]["model"]["d_model"] == 64
    assert ckpt_meta["data"] == {"kind": "step-indexed", "next_step": 2}


def test_shape_mismatches_are_derived_from_param_info():
    """Only the model fields that change a parameter shape are named (none for knobs such as
    attention, remat or dtypes); a field that changes shapes only together with others is named
    with them."""
    import dataclasses

    from spmdgpt.config import to_dict
    from spmdgpt.training.state import shape_mismatches

    m = load_config(["+experiment=staircase"]).model
    saved = to_dict(m)
    assert shape_mismatches(saved, m) == []
    assert shape_mismatches({**saved, "attention": "xla", "remat": "full", "compute_dtype": "bfloat16",
                             "init_std": 0.5, "future_field": 1}, m) == []
    assert shape_mismatches({**saved, "mlp": "swiglu"}, m) == ["model.mlp=gelu (checkpoint: swiglu)"]
    assert not m.bias and shape_mismatches({**saved, "norm": "rmsnorm"}, m) == []  # same shapes
    with_bias = dataclasses.replace(m, bias=True)
    assert shape_mismatches({**saved, "bias": True, "norm": "rmsnorm", "remat": "full"}, with_bias) == [
        "model.norm=layernorm (checkpoint: rmsnorm)"]  # RMSNorm has no bias vector
    assert shape_mismatches({**saved, "d_model": 32, "init_std": 0.5}, m) == ["model.d_model=64 (checkpoint: 32)"]


def test_failed_checkpoint_write_stops_cleanly_and_the_rerun_resumes(tmp_path):
    """A checkpoint that cannot be written (here: files capped at 60 kB with RLIMIT_FSIZE, as a
    full disk would): exit 4 with a line naming the cause and the newest complete checkpoint;
    the rerun, with room again, resumes from it and no metric row is lost or doubled."""
    # A small launcher caps the file size, ignores SIGXFSZ (a write past the cap then fails
    # with EFBIG) and execs spmdgpt: both survive exec (no preexec_fn fork from this JAX process).
    capped = [sys.executable, "-c", "import os, resource, signal, sys; "
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
              "resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000)); "
              "os.execv(sys.executable, [sys.executable, '-m', 'spmdgpt', 'train', *sys.argv[1:]])"]
    run_dir = tmp_path / "r"
    # (optimizer.schedule=constant: the 10- and 30-step runs share one program)
    args = ["+experiment=staircase", "train.log_every=1", "train.eval_every=0", "checkpoint.every=10",
            "optimizer.schedule=constant", "train.progress=false", "mesh.data=1", f"run.dir={run_dir}"]
    first = subprocess.run(spmdgpt([*args, "train.steps=10"]), env=ENV1, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    full = subprocess.run([*capped, *args, "train.steps=30"], env=ENV1, capture_output=True, text=True,
                          timeout=300)
    assert full.returncode == 4, full.stderr[-2000:]
    # orbax's own reports of the refused write (ERROR lines with tracebacks from its threads)
    # and its abandoned writes' "Event loop is closed" reports are dropped: one error line
    assert "Traceback" not in full.stderr and "ERROR:" not in full.stderr, full.stderr[-3000:]
    assert full.stderr.strip().splitlines()[-1] == (
        f"spmdgpt: error: writing a checkpoint into {run_dir.resolve() / 'checkpoints'} failed (File too "
        "large); the newest complete checkpoint is step 10; free space (or fix the filesystem) and "
        "rerun the same command to resume")
    assert CheckpointManager.reader(run_dir).steps() == [10]
    again = subprocess.run(spmdgpt([*args, "train.steps=30"]), env=ENV1, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "resumed from the checkpoint at step 10" in again.stderr
    assert sorted(losses(run_dir)) == list(range(1, 31))
    assert CheckpointManager.reader(run_dir).steps() == [10, 20, 30]
    assert not list((run_dir / "checkpoints").glob("*tmp*"))  # the torn write was cleaned up


def test_background_save_failure_stops_the_run_at_the_next_logged_step(tmp_path, monkeypatch, capsys):
    """An asynchronous save that fails in the background (orbax hands the error to
    check_for_errors; faked here after the step-10 save has started) stops the run at the next
    logged step, step 11, not at the next save (step 15): exit 4, one line naming the cause and
    the newest complete checkpoint, no later step taken or saved."""
    import errno

    import orbax.checkpoint as ocp

    saved = []
    real_save = ocp.CheckpointManager.save

    def save(self, step, *a, **k):
        saved.append(step)
        return real_save(self, step, *a, **k)

    def check_for_errors(self):
        if 10 in saved:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ocp.CheckpointManager, "save", save)
    monkeypatch.setattr(ocp.CheckpointManager, "check_for_errors", check_for_errors)
    monkeypatch.chdir(tmp_path)  # (run.dir left to its default, a new folder under runs/: the message names it)
    items = [i for i in _inproc("", "train.steps=30", "train.eval_every=0") if not i.startswith("run.dir=")]
    assert main(["train", *items]) == 4
    run_dir, = (tmp_path / "runs").iterdir()
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"spmdgpt: error: writing a checkpoint into {run_dir.resolve() / 'checkpoints'} failed (No space "
                   "left on device); the newest complete checkpoint is step 10; free space (or fix the filesystem) "
                   f"and resume it with: {sys.executable} -m spmdgpt train {shlex.join(items)} run.dir=runs/"
                   f"{run_dir.name}")
    assert saved == [5, 10]
    assert max(losses(run_dir)) == 10  # step 11's row never written: the run stopped before reporting it


@pytest.mark.slow
def test_soak_short(tmp_path):
    """benchmarks/soak.py in short: 3 kill -9 / restart cycles (random, during a checkpoint
    write, during evaluation), then bitwise equality with an uninterrupted run."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "soak.py"
    out = subprocess.run([sys.executable, str(script), "--cycles", "3", "--steps", "120",
                          "--dir", str(tmp_path / "soak")], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "every step once, in order: True | losses bitwise equal: True" in out.stdout


def test_kill_before_the_first_checkpoint_restarts_from_step_0(tmp_path, uninterrupted, capsys):
    """Found by benchmarks/soak.py: a run killed before its first checkpoint left a run.dir that
    every rerun refused. The same command now starts it again from step 0 (logs cut back);
    another config is still refused."""
    run_dir = tmp_path / "early"
    args = [a for a in RUN40 if not a.startswith("checkpoint.every")] + ["checkpoint.every=1000",
                                                                         f"run.dir={run_dir}"]
    proc = subprocess.Popen(spmdgpt(args), env=ENV1, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (run_dir / "metrics.jsonl").exists() and _rows(run_dir / "metrics.jsonl"), proc,
                   "the first metrics row", poll=0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not CheckpointManager.reader(run_dir).steps() and max(losses(run_dir)) < 40
    other = [a for a in args if a != "mesh.data=1"] + ["train.seed=1"]
    assert main(["train", *other]) == 2  # another config: refused (in process: cheap)
    assert "was started with another config" in capsys.readouterr().err
    again = subprocess.run(spmdgpt(args), env=ENV1, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "restarted from step 0: the run stopped before its first checkpoint" in again.stderr
    got, ref = losses(run_dir), losses(uninterrupted)
    assert sorted(got) == list(range(1, 41)) and [got[s] for s in range(1, 41)] == [ref[s] for s in range(1, 41)]


def test_start_up_file_that_cannot_be_written_is_exit_4(tmp_path, capsys):
    run_dir = tmp_path / "r"
    (run_dir / "config.yaml").mkdir(parents=True)  # os.replace onto a directory fails
    assert main(["train", *_inproc(run_dir, "train.steps=2")]) == 4
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"spmdgpt: error: writing into {run_dir} failed (Is a directory)")


def test_keep_every_keeps_its_multiples(tmp_path):
    """checkpoint.keep=1 keeps only the newest of the checkpoints written every 2 steps;
    checkpoint.keep_every=4 also keeps, for good, those at multiples of 4 (not 2, 6)."""
    steps = {}
    for keep_every in (None, 4):
        run_dir = tmp_path / f"k{keep_every}"
        assert main(["train", "+experiment=staircase", "train.steps=10", "checkpoint.every=2", "checkpoint.keep=1",
                     f"checkpoint.keep_every={'null' if keep_every is None else keep_every}",
                     "train.eval_every=0", "train.progress=false", f"run.dir={run_dir}"]) == 0
        steps[keep_every] = CheckpointManager.reader(run_dir).steps()
    assert steps == {None: [10], 4: [4, 8, 10]}


def _fixture_state():
    """The state of tests/data/checkpoints-tree's checkpoints: their model's fresh state as the
    restore target, and the values they hold, by name (`expected.npz`)."""
    from spmdgpt.training.state import init_state

    cfg = load_config(["+experiment=staircase", "model.num_layers=2", "model.d_model=16", "model.num_heads=2",
                       "model.bias=true", "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    with jax.set_mesh(mesh):
        state = init_state(cfg, rules, build_optimizer(cfg.optimizer, param_info(cfg.model), 100))
    return state, dict(np.load(Path(__file__).parent / "data" / "checkpoints-tree" / "expected.npz"))


@pytest.mark.parametrize("layout", ["units", "unitless"])
def test_checkpoints_stored_as_trees_restore_by_name(tmp_path, layout):
    """Checkpoints written before leaves were stored by name (the pytree itself, commit 4b99926;
    tests/data/README.md): today's blocks ("units"), and the blocks of before units, whose
    attention and MLP leaves sat side by side ("unitless", renamed by `RENAMES`), restore into
    today's state, every leaf bitwise, the optimizer state too, and pass their fingerprint."""
    import shutil

    from spmdgpt.model.info import by_name

    state, expected = _fixture_state()
    shutil.copytree(Path(__file__).parent / "data" / "checkpoints-tree" / layout, tmp_path / layout)
    params, opt_state, meta = CheckpointManager.reader(tmp_path / layout).restore(3, state.params, state.opt_state)
    assert meta["step"] == 3 and isinstance(meta["fingerprint"], list)
    assert jax.tree.structure((params, opt_state)) == jax.tree.structure((state.params, state.opt_state))
    got = {f"params/{k}": v for k, v in by_name(params).items()} | {f"opt_state/{k}": v
                                                                    for k, v in by_name(opt_state).items()}
    assert sorted(got) == sorted(expected) and "params/blocks.attn.b_qkv" in got and len(got) == 47
    for k, want in expected.items():
        np.testing.assert_array_equal(np.asarray(got[k]), want, err_msg=k)


def test_checkpoints_are_stored_by_name_and_checked_by_name(tmp_path):
    """A new checkpoint holds {name: array} items and a fingerprint by name; restoring it into a
    model with another leaf set is a one-line ConfigError naming the leaves."""
    import orbax.checkpoint as ocp

    from spmdgpt.config import CheckpointConfig
    from spmdgpt.config.schema import ConfigError

    state, _ = _fixture_state()
    mngr = CheckpointManager(tmp_path, CheckpointConfig())
    mngr.save(5, state, {})
    mngr.close()
    stored = ocp.StandardCheckpointHandler().metadata(tmp_path / "checkpoints" / "5" / "params").tree
    assert isinstance(stored, dict) and stored["blocks.attn.w_qkv"].shape == (2, 16, 3, 2, 8)
    reader = CheckpointManager.reader(tmp_path)
    params, opt, meta = reader.restore(5, state.params)
    assert opt is None and meta["fingerprint"]["embed"] == pytest.approx(float(np.sum(state.params.embed)), rel=1e-5)
    np.testing.assert_array_equal(np.asarray(params.blocks.attn.w_qkv), np.asarray(state.params.blocks.attn.w_qkv))
    fewer = state.params._replace(blocks=state.params.blocks._replace(attn=state.params.blocks.attn._replace(b_o=None)))
    with pytest.raises(ConfigError, match=r"its params has blocks\.attn\.b_o, which this model does not"):
        reader.restore(5, fewer)


def test_abandoned_reads_of_a_damaged_checkpoint_report_nothing():
    """What a damaged checkpoint's abandoned reads leave behind is dropped from the first read on:
    TensorStore's callbacks failing on orbax's closed event loop (they can report while the read's
    error is still being raised, before any line of ours: pytest fails a test on such a report)
    and asyncio's "Future exception was never retrieved" naming TensorStore's error; other reports
    are not."""
    import logging
    import types

    from spmdgpt.config import ConfigError
    from spmdgpt.training.checkpoint import _is_abandoned_io_report, _is_abandoned_task_report, first_loadable

    def call_soon_threadsafe():  # (the frame the report's traceback names)
        raise RuntimeError("Event loop is closed")

    def report(fail=call_soon_threadsafe):
        try:
            fail()
        except Exception as e:
            u = types.SimpleNamespace(exc_type=type(e), exc_value=e, exc_traceback=e.__traceback__,
                                      err_msg="Exception ignored in", object=None)
            sys.unraisablehook(u)
            return u

    def load(step):
        report()  # (during the read, before it fails)
        raise ValueError("OUT_OF_RANGE: Error reading \"embed/0.0\" in OCDBT database")

    mngr = types.SimpleNamespace(directory=Path("/tmp/run/checkpoints"))
    with pytest.raises(ConfigError, match=r"none can be loaded: 5 \(OUT_OF_RANGE: Error reading"):
        first_loadable(mngr, [5], load, "none can be loaded", "fix them")
    assert not _is_abandoned_io_report(types.SimpleNamespace(exc_value=RuntimeError("Event loop is closed"),
                                                             exc_traceback=None, object=None))
    future = logging.LogRecord("asyncio", logging.ERROR, "", 0, "Future exception was never retrieved\nfuture: "
                               "<Future finished exception=ValueError('OUT_OF_RANGE: Error reading \"embed/0.0\" in "
                               "OCDBT database')>", None, None)
    other = logging.LogRecord("asyncio", logging.ERROR, "", 0, "Task exception was never retrieved\nfuture: "
                              "<Task finished coro=<mine()> exception=KeyError('x')>", None, None)
    assert _is_abandoned_task_report(future) and not _is_abandoned_task_report(other)
