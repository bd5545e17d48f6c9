"""Trackers and profiling: TensorBoard event files that TensorBoard's reader parses back to
metrics.jsonl's values (once per step across a resume), wandb offline runs that a resume
continues, profiler traces, and one-line errors for bad train.loggers / train.profile."""

import gzip
import json
import struct
import sys

import pytest
from conftest import read_jsonl

from spmdgpt.cli import main

ARGS = ["+experiment=staircase", "train.progress=false", "train.log_every=1", "train.eval_every=10",
        "checkpoint.every=10"]


def rows(run_dir, key):
    return {r["step"]: r[key] for r in read_jsonl(run_dir / "metrics.jsonl") if key in r}


def wandb_records(path):
    """The records of a .wandb file (a LevelDB-style log of protobuf records: 32 KiB blocks,
    each record chunk behind a 7-byte header of CRC, length and type)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, buf, out = 7, 32768, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + n], pos + 7 + n
        if kind == 0:
            continue
        buf = chunk if kind in (1, 2) else buf + chunk  # FULL / FIRST start a record
        if kind in (1, 4):  # FULL / LAST end it
            r = pb.Record()
            r.ParseFromString(buf)
            out.append(r)
    return out


def test_tensorboard_and_wandb_get_every_row_once_across_a_resume(tmp_path, monkeypatch):
    """One run with both trackers, stopped at step 10 and resumed to 20: TensorBoard's reader
    parses the event files back to metrics.jsonl's values, each step once (the resumed writer
    purges what an interrupted run would have left past its checkpoint); the offline wandb run is
    one run id over both sessions, its history holds the same values, its config the run's."""
    pytest.importorskip("tensorboardX")
    pytest.importorskip("wandb")
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    monkeypatch.setenv("WANDB_MODE", "offline")
    run_dir = tmp_path / "r"
    common = [*ARGS, f"run.dir={run_dir}", "train.loggers=[console,jsonl,tensorboard,wandb]",
              "train.wandb_project=tests"]
    assert main(["train", *common, "train.steps=10"]) == 0
    run_id = (run_dir / "wandb_id").read_text().strip()
    assert main(["train", *common, "train.steps=20"]) == 0

    acc = accumulator.EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    for key in ("loss", "val/loss", "lr", "grad_norm"):
        events = acc.Scalars(key)
        logged = rows(run_dir, key)
        assert [e.step for e in events] == sorted(logged)  # every logged step once, in order
        assert [e.value for e in events] == pytest.approx([logged[s] for s in sorted(logged)], rel=1e-6)
    assert len(acc.Scalars("loss")) == 20 and [e.step for e in acc.Scalars("val/loss")] == [10, 20]
    config = acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "d_model: 64" in config and "loggers:" in config

    assert (run_dir / "wandb_id").read_text().strip() == run_id
    files = sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert [f.name for f in files] == [f"run-{run_id}.wandb"] * 2  # two sessions, one wandb run
    history, runs = {}, []
    for f in files:
        for r in wandb_records(f):
            kind = r.WhichOneof("record_type")
            if kind == "history":
                items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
                history.setdefault(items["_step"], {}).update(items)
            elif kind == "run":
                runs.append((r.run.run_id, r.run.project, {u.key: u.value_json for u in r.run.config.update}))
    assert [(i, p) for i, p, _ in runs] == [(run_id, "tests")] * 2
    assert json.loads(runs[0][2]["model"])["d_model"] == 64 and "git" in json.loads(runs[0][2]["run_metadata"])
    losses = rows(run_dir, "loss")
    assert sorted(history) == list(range(1, 21))
    assert [history[s]["loss"] for s in range(1, 21)] == [losses[s] for s in range(1, 21)]
    assert history[20]["val/loss"] == rows(run_dir, "val/loss")[20]


def test_profile_writes_a_trace_of_the_chosen_steps(tmp_path, capsys):
    run_dir = tmp_path / "r"
    assert main(["train", *ARGS, f"run.dir={run_dir}", "train.steps=8", "train.profile=3:5"]) == 0
    assert f"profile of steps 3-5 -> {run_dir / 'profile'}" in capsys.readouterr().err
    (xplane,) = run_dir.glob("profile/plugins/profile/*/*.xplane.pb")
    assert xplane.stat().st_size > 10_000
    (perfetto,) = run_dir.glob("profile/plugins/profile/*/perfetto_trace.json.gz")
    events = json.loads(gzip.decompress(perfetto.read_bytes()))
    names = {e.get("name", "") for e in (events["traceEvents"] if isinstance(events, dict) else events)}
    assert any("train_step" in n or "jit" in n for n in names), sorted(names)[:20]


def test_bad_loggers_and_profile_ranges_are_one_line_errors(tmp_path, capsys, monkeypatch):
    def train(*items):
        capsys.readouterr()
        code = main(["train", *ARGS, f"run.dir={tmp_path / 'r'}", "train.steps=5", *items])
        return code, capsys.readouterr().err.strip().splitlines()

    assert train("train.loggers=[console,jsonl,mlflow]") == (2, [
        "spmdgpt: error: train.loggers: unknown logger 'mlflow'; choose among console, jsonl, tensorboard, wandb"])
    assert train("train.loggers=[console]") == (2, [
        "spmdgpt: error: train.loggers must include jsonl: run.dir/metrics.jsonl is the run's record, which "
        "resuming relies on"])
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if it were not installed
    assert train("train.loggers=[jsonl,wandb]") == (2, [
        "spmdgpt: error: train.loggers includes wandb, which needs the wandb package: pip install 'wandb==0.31.0' "
        "(or the spmdgpt[trackers] extra), or drop wandb from train.loggers"])
    for spec in ("4:9", "0:2", "3", "5:4"):
        assert train(f"train.profile='{spec}'") == (2, [
            f"spmdgpt: error: train.profile={spec} must be START:STOP with 1 <= START <= STOP <= train.steps (5), "
            "e.g. train.profile=10:15"])
    assert not (tmp_path / "r").exists()
