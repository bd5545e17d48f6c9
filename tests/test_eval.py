"""spmdgpt eval: the training loop's own val/loss on the same batches, every token of a text
scored once (against a direct computation), the same numbers on 1 and 8 devices, bad input."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.eval.evaluate import text_windows


@pytest.fixture
def run(staircase_30):
    """(cfg, run_dir): the staircase's 30 steps from init_std 0.2, evaluated at step 30, its only
    checkpoint (tests/shared_runs.py: STAIRCASE_30)."""
    return staircase_30


def evaluate(capsys, *items):
    capsys.readouterr()
    code = main(["eval", *items])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_eval_equals_the_runs_val_loss_on_1_and_8_devices(run, capsys):
    cfg, run_dir = run
    val = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if "val/loss" in x][-1]
    assert val["step"] == 30
    for mesh in (["mesh.data=1"], []):  # one device, then the run's 8
        code, out, _ = evaluate(capsys, f"run.dir={run_dir}", *mesh)
        assert code == 0
        report = json.loads((run_dir / "eval" / "step-30.json").read_text())
        r = report["results"]["staircase"]
        # (one device sums in another order than the run's 8: 1.02e-6 apart on an AVX2-only EPYC)
        assert r["loss"] == pytest.approx(val["val/loss"], rel=3e-6, abs=0)
        assert r["tokens"] == cfg.train.eval_batches * cfg.data.batch_size * cfg.data.seq_len == 4096
        assert r["perplexity"] == pytest.approx(math.exp(r["loss"]), rel=1e-12)
        # every digit is one byte: bits per byte = loss in bits
        assert r["bytes"] == 4096 and r["bits_per_byte"] == pytest.approx(r["loss"] / math.log(2), rel=1e-12)
        assert out.splitlines()[1].split()[:3] == ["staircase", "4,096", f"{r['loss']:.4f}"]


def test_full_eval_scores_every_validation_target_once(run, capsys):
    """full=true: every target of the validation set once, the tail that fills no whole batch
    included (it used to stop at the last whole batch while the JSON said "all")."""
    from spmdgpt.data import load_dataset

    cfg, run_dir = run
    code, _, _ = evaluate(capsys, f"run.dir={run_dir}", "full=true", "mesh.data=1")
    r = json.loads((run_dir / "eval" / "step-30-full.json").read_text())["results"]["staircase"]
    (stream,) = load_dataset(cfg.data).val.values()
    assert code == 0 and r["tokens"] == r["bytes"] == len(stream) - 1 == 19_999
    assert (len(stream) - 1) % (cfg.data.batch_size * cfg.data.seq_len) != 0  # (the case: a partial last batch)


def test_text_windows_score_every_token_once():
    starts, first = text_windows(40, 16, 4)
    assert starts.tolist() == [0, 16, 23, 0] and first.tolist() == [0, 0, 9, 16]
    # scored targets: tokens 1..16, 17..32, then 33..39 (the end-aligned window's last 7), none of the pad
    scored = sorted(s + j + 1 for s, f in zip(starts, first) for j in range(f, 16))
    assert scored == list(range(1, 40))
    starts, first = text_windows(33, 16, 2)  # an exact fit: no tail window
    assert starts.tolist() == [0, 16] and first.tolist() == [0, 0]


def test_eval_of_a_text_file_matches_a_direct_computation(run, capsys, tmp_path):
    """text_file: windows of seq_len (here 16), the tail window end-aligned; the summed loss
    equals log-softmax of the model's logits over exactly those windows, computed here."""
    cfg, run_dir = run
    digits = "0123456789876543210" * 3 + "12"  # 59 tokens: windows at 0, 16, 32, 42 (last: 10 new targets)
    text = tmp_path / "t.txt"
    text.write_text(digits)
    code, _, _ = evaluate(capsys, f"run.dir={run_dir}", f"text_file={text}", "data.seq_len=16", "data.batch_size=8",
                          f"out={tmp_path / 'r.json'}")
    assert code == 0
    r = json.loads((tmp_path / "r.json").read_text())["results"]["t.txt"]
    assert r["tokens"] == r["bytes"] == 58

    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.model import forward
    from spmdgpt.training.state import load_params

    toks = np.array([int(c) for c in digits], np.int32)
    mesh = make_mesh(load_config(["+experiment=staircase", "mesh.data=1"]).mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding)
        _, params = load_params(run_dir, cfg.model, rules)
        windows = np.stack([toks[s:s + 17] for s in (0, 16, 32, 42)])
        logits = np.asarray(forward(cfg.model, rules, params, jnp.asarray(windows[:, :-1]))[0], np.float64)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, windows[:, 1:, None], -1)[..., 0]
    expected = nll[:3].sum() + nll[3, 6:].sum()  # window 42..58 adds targets 49..58 (10 new)
    assert r["loss"] * 58 == pytest.approx(expected, rel=1e-5)


def test_eval_refuses_bad_input(run, capsys, tmp_path):
    _, run_dir = run
    (tmp_path / "empty").mkdir()  # a run's files but no checkpoint
    for name in ("config.yaml", "tokenizer.json"):
        (tmp_path / "empty" / name).write_text((run_dir / name).read_text())
    short = tmp_path / "short.txt"
    short.write_text("0123")
    cases = [
        ([f"run.dir={tmp_path / 'empty'}"], f"spmdgpt: error: run.dir={tmp_path / 'empty'} has no checkpoint"),
        ([f"run.dir={tmp_path / 'nope'}"], f"spmdgpt: error: run.dir={tmp_path / 'nope'}: no such directory"),
        ([f"run.dir={run_dir}", f"text_file={short}"],
         f"spmdgpt: error: text_file={short} holds 4 tokens, fewer than data.seq_len + 1 = 65; give a longer text "
         "or lower data.seq_len"),
        ([f"run.dir={run_dir}", "step=7"], f"spmdgpt: error: step=7: run.dir={run_dir} has checkpoints at steps 30"),
        ([f"run.dir=hf:{tmp_path}"], f"spmdgpt: error: run.dir=hf:{tmp_path} is a Hugging Face folder, which has no "
                                     "validation sets: give text_file=..."),
        ([f"run.dir=hf:{tmp_path / 'nope'}", f"text_file={short}"],  # (the field given is named, not init_from)
         f"spmdgpt: error: run.dir=hf:{tmp_path / 'nope'}: no such directory"),
    ]
    for items, message in cases:
        code, _, err = evaluate(capsys, *items)
        assert (code, err.strip().splitlines()[-1]) == (2, message)


def test_eval_of_an_exported_folder_scores_with_the_runs_window(run, capsys, tmp_path):
    """export records the run's training window in spmdgpt.json; eval run.dir=hf:DIR scores with it
    (it used the config's default window, 256, whatever the run trained with: another number), and
    says which window a folder from elsewhere gets (the default, within the model's context)."""
    cfg, run_dir = run
    hf = tmp_path / "hf"
    assert main(["export", f"run.dir={run_dir}", f"out={hf}"]) == 0
    assert json.loads((hf / "spmdgpt.json").read_text()) == {"run_dir": str(run_dir), "step": 30, "seq_len": 64}
    text = tmp_path / "t.txt"
    text.write_text("0123456789876543210" * 20)  # 380 tokens
    reports = []
    for source in (run_dir, f"hf:{hf}"):
        code, _, err = evaluate(capsys, f"run.dir={source}", f"text_file={text}", "mesh.data=1",
                                f"out={tmp_path / 'r.json'}")
        assert code == 0 and "| window 64 tokens | mesh" in err
        reports.append(json.loads((tmp_path / "r.json").read_text()))
    assert reports[0]["seq_len"] == reports[1]["seq_len"] == 64
    ours, theirs = (r["results"]["t.txt"] for r in reports)
    assert theirs["tokens"] == ours["tokens"] == 379 and theirs["loss"] == pytest.approx(ours["loss"], rel=1e-5)
    (hf / "spmdgpt.json").unlink()  # a folder from elsewhere: the default window, said so
    code, _, err = evaluate(
        capsys, f"run.dir=hf:{hf}", f"text_file={text}", "mesh.data=1", f"out={tmp_path / 'r.json'}"
    )
    assert code == 0 and json.loads((tmp_path / "r.json").read_text())["seq_len"] == 64  # (the model's context)
    assert "| window 64 tokens (the folder records no training window; set data.seq_len=N) |" in err
    code, _, err = evaluate(capsys, f"run.dir=hf:{hf}", f"text_file={text}", "mesh.data=1", "data.seq_len=32",
                            f"out={tmp_path / 'r.json'}")
    assert (
        code == 0 and json.loads((tmp_path / "r.json").read_text())["seq_len"] == 32 and "| window 32 tokens |" in err
    )
