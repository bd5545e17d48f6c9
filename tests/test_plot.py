"""spmdgpt plot: PNGs of the stated sizes with every run drawn in its colour; bad input."""

import numpy as np
import pytest

from spmdgpt.cli import main

matplotlib = pytest.importorskip("matplotlib")
import matplotlib.colors  # noqa: E402
import matplotlib.image  # noqa: E402


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("plot")
    for name, lr in (("slow", "1e-3"), ("fast", "3e-3")):
        assert main(["train", "+experiment=staircase", "train.steps=30", "train.log_every=1", "train.eval_every=10",
                     "train.progress=false", f"optimizer.lr={lr}", f"run.dir={base / name}"]) == 0
    return base


def has_colour(img: np.ndarray, colour) -> bool:
    rgb = np.array(matplotlib.colors.to_rgb(colour))
    return bool((np.abs(img[..., :3] - rgb).max(-1) < 0.02).sum() > 50)


def test_plots_have_the_stated_sizes_and_every_run(two_runs, tmp_path, capsys):
    out = tmp_path / "plots"
    assert main(["plot", str(two_runs / "slow"), str(two_runs / "fast"), f"out={out}", "names=lr 1e-3,lr 3e-3"]) == 0
    assert capsys.readouterr().out.split() == [str(out / f"{n}.png") for n in ("loss", "lr", "grad_norm", "mfu")]
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"][:2]
    for name, size in (("loss", (600, 1400)), ("lr", (600, 1000)), ("grad_norm", (600, 1000)), ("mfu", (600, 1000))):
        img = matplotlib.image.imread(out / f"{name}.png")
        assert img.shape[:2] == size
        assert all(has_colour(img, c) for c in colours), name  # both runs are drawn


def test_plot_refuses_bad_input(two_runs, tmp_path, capsys):
    def plot(*items):
        capsys.readouterr()
        code = main(["plot", *items])
        return code, capsys.readouterr().err.strip()

    assert plot() == (2, "spmdgpt: error: give one or more run directories: spmdgpt plot runs/a runs/b [out=plots]")
    (tmp_path / "empty").mkdir()
    assert plot(str(tmp_path / "empty")) == (
        2, f"spmdgpt: error: {tmp_path / 'empty'}: no metrics.jsonl there; give training run directories")
    assert plot(str(two_runs / "slow"), "names=a,b") == (2, "spmdgpt: error: names= gives 2 names for 1 runs")
