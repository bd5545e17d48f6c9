"""spmdgpt ladder: the isoFLOP grid's numbers, the fits of its points (a known law recovered), the
command end to end (finished points skipped, one trained for real, ladder.json, the plots), the
learning-rate mode, and the refusals."""

import json
import math

import pytest

from spmdgpt.cli import main
from spmdgpt.config import ConfigError, load_config
from spmdgpt.scaling.laws import Law

STAIRCASE = ["+experiment=staircase", "ladder.budgets=[1e11,3e11,1e12]", "ladder.sizes=[1,2,3]", "ladder.bootstrap=2"]
TRUE = Law(E=0.5, A=50.0, B=50.0, alpha=0.4, beta=0.35)


def fake_finished(run_dir, steps, loss, metric="val/loss"):
    """A point as a finished run leaves it for the sweep (a checkpoint at its last step) and the
    fit (its final metric)."""
    (run_dir / "checkpoints" / str(steps)).mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text(json.dumps({"step": steps, metric: loss}) + "\n")


def test_the_grid_counts_parameters_tokens_and_steps():
    from spmdgpt.scaling.ladder import plan_grid

    cfg = load_config(STAIRCASE)
    points = plan_grid(cfg, STAIRCASE)
    assert [(p.budget, p.size) for p in points] == [(c, s) for c in (1e11, 3e11, 1e12) for s in (1, 2, 3)]
    # model.size=N: N layers of 64 N; N counts the blocks' matrices and the 16 x 64 N unembedding
    assert [p.params for p in points[:3]] == [50176, 395264, 1330176]
    for p in points:
        assert p.steps == round(p.budget / (6 * p.params * 1024)) and p.tokens == p.steps * 1024
        assert p.overrides == [f"model.size={p.size}", f"train.steps={p.steps}",
                               f"optimizer.warmup_steps={round(0.1 * p.steps)}"]
    assert [p.steps for p in points[:3]] == [324, 41, 12] and points[0].name == "C1e11-size1"


def test_the_fit_of_a_ladder_recovers_a_known_law_and_forecasts_it():
    from spmdgpt.scaling.ladder import analyse, plan_grid, report

    cfg = load_config(STAIRCASE)
    points = plan_grid(cfg, STAIRCASE)
    for p in points:
        p.loss, p.status = float(TRUE.loss(p.params, p.tokens)), "done"
    out = analyse(cfg, STAIRCASE, points)
    for k, v in TRUE.as_dict().items():
        assert out["law"][k] == pytest.approx(v, rel=1e-3), k
    # approach 2 on the same points: each budget's parabola vertex, the exponent near beta / (alpha + beta)
    assert [m["budget"] for m in out["isoflop"]["minima"]] == [1e11, 3e11, 1e12]
    assert out["isoflop"]["exponent"] == pytest.approx(0.35 / 0.75, abs=0.1)
    # the forecast: 4x the largest budget at the size whose N is nearest the optimum's, its loss the law's
    f = out["forecast"]
    assert f["budget"] == 4e12 and f["steps"] == round(4e12 / (6 * f["params"] * 1024))
    n_opt = TRUE.optimal(4e12)[0]
    sizes = {s: p for s, p in ((1, 50176), (2, 395264), (3, 1330176), (4, 3145728))}
    assert f["size"] == min(sizes, key=lambda s: abs(math.log(sizes[s] / n_opt)))
    assert f["loss"] == pytest.approx(float(TRUE.loss(f["params"], f["tokens"])), rel=1e-4)
    assert f["optimal_params"] == pytest.approx(n_opt, rel=1e-2)
    lo, hi = f["mean_interval"]
    assert lo - 1e-6 <= f["loss"] <= hi + 1e-6 and hi - lo < 0.05 * f["loss"]  # exact points: a narrow interval
    # (exact points: no scatter around the law, so a run's interval is the mean's, to float rounding)
    assert f["prediction_interval"] == pytest.approx(f["mean_interval"], rel=1e-6)
    assert out["compute_optimal"]["a"] == pytest.approx(0.35 / 0.75, rel=1e-3)
    assert "forecast: model.size=" in report(out) and "alpha 0.4000" in report(out)


def test_ladder_runs_the_grid_skips_finished_points_and_writes_the_fit(tmp_path, capsys):
    from spmdgpt.scaling.ladder import plan_grid

    out = tmp_path / "ladder"
    cfg = load_config(STAIRCASE)
    points = plan_grid(cfg, STAIRCASE)
    real = points[2]  # model.size=3 at 1e11: 12 steps, trained for real
    for p in points:
        if p is not real:
            fake_finished(out / p.name, p.steps, float(TRUE.loss(p.params, p.tokens)))
    assert main(["ladder", *STAIRCASE, f"out={out}"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("finished earlier, skipped") == 8 and f"{real.name}: running" in captured.err
    result = json.loads((out / "ladder.json").read_text())
    rows = {r["run"]: r for r in result["points"]}
    measured = [json.loads(ln) for ln in (out / real.name / "metrics.jsonl").read_text().splitlines()]
    assert rows[real.name]["loss"] == [r["val/loss"] for r in measured if "val/loss" in r][-1]
    assert rows[real.name]["status"] == "done" and rows[points[0].name]["status"] == "skipped (finished)"
    law = Law(**result["law"])
    f = result["forecast"]
    assert f["loss"] == pytest.approx(float(law.loss(f["params"], f["tokens"])), rel=1e-9)
    assert set(result["intervals"]) == {"E", "A", "B", "alpha", "beta"}
    assert f["prediction_interval"][0] <= f["mean_interval"][0] <= f["mean_interval"][1] <= f["prediction_interval"][1]
    for name in ("isoflop.png", "law.png", "forecast.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "ladder.md").read_text().strip() == captured.out.strip()
    assert captured.out.splitlines()[0] == ("| budget (FLOPs) | model.size | N | D | tokens/param | steps | val/loss | "
                                            "status |")


def test_ladder_lr_finds_the_best_rate_per_width(tmp_path, capsys):
    from spmdgpt.scaling.ladder import analyse_lr

    # hand numbers: width 64 best at 3e-3, width 128 best at 1e-3, the best loss better when wider
    pts = [{"width": w, "lr": lr, "loss": v} for w, lr, v in
           [(64, 1e-3, 2.2), (64, 3e-3, 2.1), (128, 1e-3, 2.0), (128, 3e-3, 2.05)]]
    r = analyse_lr(pts, "val/loss")
    assert r["best"] == {64: {"lr": 3e-3, "loss": 2.1}, 128: {"lr": 1e-3, "loss": 2.0}}
    assert r["shift"] == pytest.approx(3.0) and r["monotone"] is True
    # the command: every point finished already, so it reads, reports and plots
    items = ["+experiment=staircase", "model.parametrization=mup", "model.tie_embeddings=false", "optimizer.name=adamw",
             "ladder.widths=[64,128]", "ladder.lrs=[1e-3,3e-3]"]
    out = tmp_path / "lr"
    for p in pts:
        fake_finished(out / f"w{p['width']}-lr{p['lr']:.3g}", 300, p["loss"])
    assert main(["ladder", "lr", *items, f"out={out}"]) == 0
    text = capsys.readouterr().out
    saved = json.loads((out / "ladder_lr.json").read_text())
    assert saved["best"] == {"64": {"lr": 3e-3, "loss": 2.1}, "128": {"lr": 1e-3, "loss": 2.0}}
    assert "the best learning rate moves 3x across the widths; the best loss improves with every wider model" in text
    assert "note: at d_model 64, 128 the best rate is at the grid's edge" in text
    assert (out / "lr.png").read_bytes()[:4] == b"\x89PNG"
    # under μP the first width is the base: each point's config records it
    from spmdgpt.scaling.ladder import lr_grid

    grid = lr_grid(load_config(items), items)
    assert grid[3]["overrides"] == ["model.d_model=128", "optimizer.lr=0.003", "model.base_width=64"]


def test_ladder_refuses_bad_grids_in_one_line(tmp_path, capsys):
    def ladder(*items):
        capsys.readouterr()
        code = main(["ladder", *items, f"out={tmp_path / 'l'}"])
        return code, capsys.readouterr().err.strip().splitlines()[-1]

    code, err = ladder("+experiment=staircase")
    assert code == 2 and "ladder.budgets=[...]" in err
    code, err = ladder("+experiment=staircase", "ladder.budgets=[1e11,3e11]", "ladder.sizes=[1,2]")
    assert code == 2 and err.endswith("2 budget(s) x 2 size(s) cannot fit L(N, D) = E + A/N^alpha + B/D^beta (5 "
                                      "parameters): give at least 2 budgets and 2 sizes, 5 runs or more (3 sizes a "
                                      "budget for the isoFLOP minima)")
    code, err = ladder(*STAIRCASE[:1], "ladder.budgets=[1e10,3e11]", "ladder.sizes=[1,2,3]")
    assert (code, err) == (2, "spmdgpt: error: ladder: budget 1e+10 FLOPs at model.size=2 (N = 395,264 matmul "
                              "parameters) is 4 step(s) of 1,024 tokens; a point needs 10 or more: raise the budget "
                              "to 2.43e+10 or drop the size")
    code, err = ladder(*STAIRCASE, "model.size=2")
    assert (code, err) == (2, "spmdgpt: error: model.size=2: spmdgpt ladder sets model.size for each point; leave it "
                              "out")
    assert ladder(*STAIRCASE, "optimizer.warmup_share=0.1") == (
        2, "spmdgpt: error: optimizer.warmup_share=0.1: spmdgpt ladder sets each point's optimizer.warmup_steps to "
        "ladder.warmup (a share) of its steps; set ladder.warmup instead")
    # more tokens than the corpus holds, without saying how many epochs are allowed
    code, err = ladder("+experiment=ladder_tiny", "ladder.epochs=1")
    assert (code, err) == (2, "spmdgpt: error: ladder: C1.5e12-size1 trains 4,661,248 tokens, 4.64 epochs of dataset "
                              "'main' (ladder.epochs=1): allow them with ladder.epochs=4.7, or lower the budgets")
    assert not (tmp_path / "l").exists()
    # a metric no run logs: before anything runs
    assert ladder(*STAIRCASE, "ladder.metric=val/los") == (2, "spmdgpt: error: ladder.metric=val/los is not a metric "
                                                               "the runs log; choose val/loss, loss")
    assert not (tmp_path / "l").exists()
    # every point finished, none logged the (training) loss the fit reads
    from spmdgpt.scaling.ladder import plan_grid

    for p in plan_grid(load_config(STAIRCASE), STAIRCASE):
        fake_finished(tmp_path / "l" / p.name, p.steps, 2.0)
    code, err = ladder(*STAIRCASE, "ladder.metric=loss")
    assert code == 2 and err.startswith("spmdgpt: error: the ladder cannot be fitted (0 of 9 points have a final "
                                        "loss, ladder.metric): 0 runs cannot fit")
    with pytest.raises(ConfigError, match="two or more of each"):
        from spmdgpt.scaling.ladder import lr_grid

        lr_grid(load_config(["ladder.widths=[64]", "ladder.lrs=[1e-3,2e-3]"]), [])


def test_the_packaged_ladders_plan():
    from spmdgpt.cli.sweep import checked_point
    from spmdgpt.scaling.ladder import check_epochs, plan_grid

    for name, runs, fewest in (("ladder_tiny", 6, 60), ("ladder_gutenberg", 9, 102)):
        items = [f"+experiment={name}"]
        cfg = load_config(items)
        points = plan_grid(cfg, items)
        assert len(points) == runs and min(p.steps for p in points) == fewest
        check_epochs(cfg, points)  # (within the epochs each allows)
        largest = checked_point(items, points[-1].overrides).model
        assert (largest.num_layers, largest.d_model, largest.num_heads) == (points[-1].size, 64 * points[-1].size,
                                                                            points[-1].size)
    assert points[0].params == 409600  # ladder_gutenberg's model.size=2 with its 128-row vocabulary
