"""spmdgpt train -m: a 2 x 2 grid in four run directories, a summary that matches their metrics,
and a rerun that skips finished runs and resumes the others."""

import json
import shutil

from conftest import read_jsonl

from spmdgpt.cli import main


def test_a_2x2_sweep_runs_summarises_and_resumes(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    args = ["train", "-m", "--parallel", "2", "+experiment=staircase", "train.eval_every=0", "train.log_every=2",
            "train.steps=6", "checkpoint.every=2", "optimizer.lr=1e-3,3e-3", "model.d_model=32,64", f"run.dir={sweep}"]
    assert main(args) == 0
    names = ["000-lr-0.001_d_model-32", "001-lr-0.001_d_model-64", "002-lr-0.003_d_model-32", "003-lr-0.003_d_model-64"]
    assert sorted(p.name for p in sweep.iterdir() if (p / "metrics.jsonl").is_file()) == names
    summary = json.loads((sweep / "summary.json").read_text())["runs"]
    assert [r["run"] for r in summary] == names
    assert [r["values"] for r in summary] == [{"optimizer.lr": lr, "model.d_model": d}
                                             for lr in ("0.001", "0.003") for d in ("32", "64")]
    for r in summary:
        rows = read_jsonl(sweep / r["run"] / "metrics.jsonl")
        assert (r["status"], r["step"]) == ("done", 6)
        assert r["train_loss"] == [x["loss"] for x in rows if "loss" in x][-1]
        assert r["val_loss"] == [x["val/loss"] for x in rows if "val/loss" in x][-1]
        assert f"d_model: {r['values']['model.d_model']}\n" in (sweep / r["run"] / "config.yaml").read_text()
    table = capsys.readouterr().out
    assert table.splitlines()[0].startswith("| optimizer.lr | model.d_model | status |") and table.count("| done |") == 4

    # the same sweep again, one run interrupted before its last checkpoint (as a kill would
    # leave it): the finished runs are skipped, that one resumes from its newest checkpoint
    shutil.rmtree(sweep / names[3] / "checkpoints" / "6")
    assert main(args) == 0
    err = capsys.readouterr().err
    assert err.count("finished earlier, skipped") == 3 and f"{names[3]}: running (resuming)" in err
    assert "resumed from the checkpoint at step 4" in (sweep / "logs" / f"{names[3]}.log").read_text()
    steps = [x["step"] for x in read_jsonl(sweep / names[3] / "metrics.jsonl") if "loss" in x]
    assert steps == [2, 4, 6]  # step 6 logged once: the resumed run cut the log back to step 4
    assert [r["status"] for r in json.loads((sweep / "summary.json").read_text())["runs"]] == [
        "skipped (finished)"] * 3 + ["done"]


def test_sweep_refuses_bad_input(tmp_path, capsys):
    def sweep(*items):
        capsys.readouterr()
        code = main(["train", "-m", "+experiment=staircase", f"run.dir={tmp_path / 's'}", *items])
        return code, capsys.readouterr().err.strip().splitlines()[-1]

    assert sweep("optimizer.lr=1e-3") == (2, "spmdgpt: error: train -m needs at least one swept override, e.g. "
                                             "optimizer.lr=1e-3,3e-3")
    assert sweep("--parallel", "0", "optimizer.lr=1e-3,2e-3") == (2, "spmdgpt: error: --parallel 0 must be >= 1")
    code, err = sweep("model.nope=1,2")
    assert code == 2 and "model.nope" in err
    assert not (tmp_path / "s").exists()
