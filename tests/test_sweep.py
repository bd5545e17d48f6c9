"""spmdgpt train -m: a 2 x 2 grid in four run directories, a summary that matches their metrics,
and a rerun that skips finished runs and resumes the others."""

import json
import shutil

from conftest import read_jsonl

from spmdgpt.cli import main


def test_a_2x2_sweep_runs_summarises_and_resumes(tmp_path, capsys, monkeypatch):
    # four "GPUs" (CPU runs ignore them): two runs at a time get two each
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
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
    # the first two runs started together, in slots 0 and 1; each run records what it saw
    seen = [json.loads((sweep / n / "metadata.json").read_text())["cuda_visible_devices"] for n in names]
    assert seen[:2] == ["0,1", "2,3"] and set(seen) == {"0,1", "2,3"}
    out = capsys.readouterr()
    assert "2 at a time (GPUs 0,1 | 2,3)" in out.err and f"{names[1]}: running on GPUs 2,3" in out.err
    table = out.out
    assert (
        table.splitlines()[0].startswith("| optimizer.lr | model.d_model | status |") and table.count("| done |") == 4
    )

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
    # a value every point's config is checked for before any run starts
    assert sweep("optimizer.lr=1e-3,-1") == (2, "spmdgpt: error: sweep point optimizer.lr=-1: optimizer.lr=-1.0 "
                                                "must be > 0")
    assert not (tmp_path / "s").exists()
    # one only a run finds (the mesh, against its devices): the run's error line and its log
    capsys.readouterr()
    assert main(["train", "-m", "+experiment=staircase", f"run.dir={tmp_path / 's'}", "mesh.data=3,5"]) == 2
    err = capsys.readouterr().err
    for i, n in enumerate((3, 5)):
        log = tmp_path / "s" / "logs" / f"00{i}-data-{n}.log"
        assert (f"  00{i}-data-{n}: failed (2): mesh.data={n} x mesh.stage=1 x mesh.expert=1 x mesh.context=1 x "
                "mesh.model=1 does not fit ") in err and f"(log: {log})" in err and log.is_file()


def test_parallel_runs_get_disjoint_gpu_groups(tmp_path, capsys, monkeypatch):
    from spmdgpt.cli.sweep import gpu_groups, visible_gpus

    proc = tmp_path / "gpus"  # the driver's /proc/driver/nvidia/gpus: one folder per GPU
    for bus in ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"):
        (proc / bus).mkdir(parents=True)
    assert visible_gpus({}, proc) == ["0", "1", "2"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "4, 6"}, proc) == ["4", "6"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, proc) == []
    assert visible_gpus({}, tmp_path / "no-driver") == []
    gpus = [str(i) for i in range(8)]
    assert gpu_groups(4, gpus) == ["0,1", "2,3", "4,5", "6,7"]
    assert gpu_groups(3, gpus) == ["0,1", "2,3", "4,5"]  # 6 and 7 left unused
    assert gpu_groups(8, gpus) == gpus
    assert gpu_groups(1, gpus) == [None] and gpu_groups(2, []) == [None, None]

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert main(["train", "-m", "--parallel", "3", "+experiment=staircase", "optimizer.lr=1e-3,2e-3",
                 f"run.dir={tmp_path / 's'}"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "spmdgpt: error: --parallel 3 with 2 GPU(s) (0,1): runs at a time do not share a GPU; use --parallel 2 "
        "or fewer")
    assert not (tmp_path / "s").exists()
