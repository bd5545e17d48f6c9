"""spmdgpt plot: PNGs of the stated sizes with every run drawn in its colour; bad input."""

import json

import numpy as np
import pytest

from spmdgpt.cli import main

matplotlib = pytest.importorskip("matplotlib")
import matplotlib.colors  # noqa: E402, F811
import matplotlib.image  # noqa: E402


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two run folders as training leaves them (config.yaml, metrics.jsonl with training rows,
    validation rows, an event and a torn last line), with made-up curves."""
    from spmdgpt.config import load_config, to_yaml

    base = tmp_path_factory.mktemp("plot")
    for k, name in enumerate(("slow", "fast")):
        run = base / name
        run.mkdir()
        (run / "config.yaml").write_text(to_yaml(load_config(["+experiment=staircase"])))
        rows = [
            {
                "step": s,
                "loss": 3.0 * (0.97 - 0.02 * k) ** s,
                "lr": 1e-3 * (1 + k) * min(1, s / 5),
                "grad_norm": (5.0 + 2 * k) / s,
                "tokens_per_sec": 5e4 if s > 1 else None,
                "mfu": 0.05 + 0.001 * s + 0.01 * k if s > 1 else None,
            }
            for s in range(1, 31)
        ]
        rows += [{"step": s, "val/loss": 3.1 * (0.97 - 0.02 * k) ** s} for s in (10, 20, 30)]
        rows.append({"step": 12, "event": "loss_spike", "loss": 9.0, "median": 2.0})
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 31, "lo')
    return base


def has_colour(img: np.ndarray, colour) -> bool:
    rgb = np.array(matplotlib.colors.to_rgb(colour))
    return bool((np.abs(img[..., :3] - rgb).max(-1) < 0.02).sum() > 50)


def test_plots_have_the_stated_sizes_and_every_run(two_runs, tmp_path, capsys, monkeypatch):
    out = tmp_path / "plots"
    assert main(["plot", str(two_runs / "slow"), str(two_runs / "fast"), f"out={out}", "names=lr 1e-3,lr 3e-3"]) == 0
    assert capsys.readouterr().out.split() == [str(out / f"{n}.png") for n in ("loss", "lr", "grad_norm", "mfu")]
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"][:2]
    for name, size in (("loss", (600, 1400)), ("lr", (600, 1000)), ("grad_norm", (600, 1000)), ("mfu", (600, 1000))):
        img = matplotlib.image.imread(out / f"{name}.png")
        assert img.shape[:2] == size
        assert all(has_colour(img, c) for c in colours), name  # both runs are drawn
    # without out=: a folder of their own in the runs' common folder, named by their paths from there (another
    # pair's beside it, also when the runs' own names are the same: x/a/r and x/b/r)
    assert main(["plot", str(two_runs / "slow"), str(two_runs / "fast")]) == 0
    assert capsys.readouterr().out.split()[0] == str(two_runs / "plots" / "slow+fast" / "loss.png")
    assert main(["plot", str(two_runs / "fast"), str(two_runs / "slow"), "names=lr 3e-3,lr/1e-3"]) == 0
    assert capsys.readouterr().out.split()[0] == str(two_runs / "plots" / "fast+slow" / "loss.png")
    import shutil

    for parent, run in (("a", "slow"), ("b", "fast"), ("c", "fast")):
        shutil.copytree(two_runs / run, tmp_path / "x" / parent / "r")
    for pair in (("a", "b"), ("a", "c")):
        assert main(["plot", *(str(tmp_path / "x" / p / "r") for p in pair)]) == 0
        assert capsys.readouterr().out.split()[0] == str(tmp_path / "x" / "plots" / f"{pair[0]}_r+{pair[1]}_r" /
                                                         "loss.png")
    from spmdgpt.cli import plot as plot_cli
    from spmdgpt.cli.plot import read_run  # (the legend: the same names told apart by their paths too)

    seen = []
    monkeypatch.setattr(plot_cli, "read_run", lambda p, n: seen.append(n) or read_run(p, n))
    assert main(["plot", str(tmp_path / "x" / "a" / "r"), str(tmp_path / "x" / "b" / "r")]) == 0
    assert seen == ["a/r", "b/r"]
    from spmdgpt.cli.plot import together

    assert together([f"run{i:02d}" for i in range(30)]) == "+".join(f"run{i:02d}" for i in range(11)) + "+19more"


def test_plot_refuses_bad_input(two_runs, tmp_path, capsys):
    def plot(*items):
        capsys.readouterr()
        code = main(["plot", *items])
        return code, capsys.readouterr().err.strip()

    assert plot() == (2, "spmdgpt: error: give one or more run directories: spmdgpt plot runs/a runs/b [out=DIR]")
    (tmp_path / "empty").mkdir()
    assert plot(str(tmp_path / "empty")) == (
        2, f"spmdgpt: error: {tmp_path / 'empty'}: no metrics.jsonl there; give training run directories")
    assert plot(str(two_runs / "slow"), "names=a,b") == (2, "spmdgpt: error: names= gives 2 names for 1 runs")
    assert plot(str(two_runs / "slow"), str(two_runs / "slow")) == (
        2, f"spmdgpt: error: {two_runs / 'slow'} is given twice; give each run once")
    (tmp_path / "file").write_text("x")
    assert plot(str(two_runs / "slow"), f"out={tmp_path / 'file'}") == (
        2, f"spmdgpt: error: out={tmp_path / 'file'} is a file, not a folder; give a folder for the PNGs")
    (tmp_path / "binary").mkdir()  # a metrics.jsonl that is not text, or not JSON: no rows, not a traceback
    (tmp_path / "binary" / "metrics.jsonl").write_bytes(bytes(range(32, 256)) + b"\n[1, 2]\n{bad\n")
    assert plot(str(tmp_path / "binary")) == (
        2, f"spmdgpt: error: {tmp_path / 'binary' / 'metrics.jsonl'}: no training or validation rows yet (3 line(s) "
           "that are not JSON rows of metrics)")


def test_a_grpo_run_gets_its_reward_plot(tmp_path, capsys):
    """A run with rl/reward rows and val/reward rows: reward.png beside the others, drawn."""
    run = tmp_path / "rl"
    run.mkdir()
    rows = [{"step": s, "loss": 0.0, "lr": 1e-4, "grad_norm": 1.0, "rl/reward": 0.1 + 0.01 * s} for s in range(1, 41)]
    rows += [{"step": s, "val/reward": 0.2 + 0.005 * s} for s in (20, 40)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["plot", str(run), f"out={tmp_path / 'p'}"]) == 0
    assert capsys.readouterr().out.split()[-1] == str(tmp_path / "p" / "reward.png")
    # without out=: into the run's own folder (never the current directory)
    assert main(["plot", str(run)]) == 0
    assert capsys.readouterr().out.split()[-1] == str(run / "plots" / "reward.png")
    img = matplotlib.image.imread(tmp_path / "p" / "reward.png")
    assert img.shape[:2] == (600, 1000) and has_colour(img, matplotlib.rcParams["axes.prop_cycle"].by_key()["color"][0])
