"""Tokenizers, the on-disk token cache, and the deterministic loader."""

import json

import jax
import numpy as np
import pytest

from spmdgpt.config import ConfigError, DataConfig, TokenizerKind, load_config
from spmdgpt.data import Batcher, CharTokenizer, load_dataset
from spmdgpt.data.cache import default_cache_dir
from spmdgpt.data.sources import find_data_root, staircase_tokens
from spmdgpt.sharding import Rules, make_mesh


def test_staircase_sequence():
    toks = staircase_tokens(40)
    assert "".join(map(str, toks)) == "0123456789876543210123456789876543210123"


def test_char_tokenizer_round_trip_and_shakespeare_split():
    ds = load_dataset(DataConfig())
    tok = ds.tokenizer
    assert isinstance(tok, CharTokenizer) and tok.vocab_size == 65
    assert tok.chars[:3] == "\n !" and tok.chars[-1] == "z"
    text = "ROMEO:\nBut soft!"
    assert tok.decode(tok.encode(text)) == text
    # nanoGPT's split: the first 90% of the 1,115,394 characters train, the rest validate
    assert (len(ds.train), len(ds.val)) == (1_003_854, 111_540)
    assert tok.decode(ds.train[:14]) == "First Citizen:"
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode("\u00e9")


def test_gpt2_tokenizer_offline_counts():
    ds = load_dataset(DataConfig(tokenizer=TokenizerKind.gpt2))
    # the counts the shared data README gives (tiktoken encode_ordinary, nanoGPT split)
    assert (len(ds.train), len(ds.val)) == (301_966, 36_059)
    assert ds.tokenizer.vocab_size == 50257
    assert ds.tokenizer.encode("Hello world") == [15496, 995]
    assert ds.tokenizer.decode(ds.train[:3]) == "First Citizen:"
    assert ds.train.dtype == np.uint16


def test_token_cache_is_written_once_and_memory_mapped(tmp_path, monkeypatch):
    monkeypatch.setenv("SPMDGPT_CACHE", str(tmp_path))
    cfg = DataConfig()
    first = load_dataset(cfg)
    entries = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1 and sorted(p.name for p in entries[0].iterdir()) == [
        "meta.json", "train.npy", "val.npy"]
    meta = json.loads((entries[0] / "meta.json").read_text())
    assert meta["train_tokens"] == 1_003_854 and meta["tokenizer"]["kind"] == "char"
    second = load_dataset(cfg)
    assert isinstance(second.train, np.memmap)
    np.testing.assert_array_equal(first.train, second.train)
    assert second.tokenizer.chars == first.tokenizer.chars
    assert not any(p.name.startswith(".tmp") for p in tmp_path.iterdir())  # no partial entry


def test_cache_dir_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("SPMDGPT_CACHE", str(tmp_path / "env"))
    assert default_cache_dir(DataConfig()) == tmp_path / "env"
    assert default_cache_dir(DataConfig(cache_dir=str(tmp_path / "cfg"))) == tmp_path / "cfg"


def test_data_root_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("SPMDGPT_DATA", str(tmp_path))
    assert find_data_root() == tmp_path
    with pytest.raises(ConfigError, match="no such file"):
        load_dataset(DataConfig())


def _batcher(devices, mesh_overrides, tokens):
    cfg = load_config(["+experiment=staircase", *mesh_overrides])
    mesh = make_mesh(cfg.mesh, devices)
    return Batcher(tokens, 32, 16, seed=3, sharding=Rules(mesh, cfg.sharding).batch_sharding())


def test_batches_are_deterministic_and_independent_of_the_device_count():
    tokens = np.arange(10_000, dtype=np.uint16)
    one = _batcher(jax.devices()[:1], ["mesh.data=1"], tokens)
    eight = _batcher(jax.devices(), ["mesh.data=8"], tokens)
    x1, y1 = one.train_batch(7)
    x8, y8 = eight.train_batch(7)
    assert x8.sharding.spec[0] == "data" and len(x8.addressable_shards) == 8
    np.testing.assert_array_equal(np.asarray(x1), np.asarray(x8))
    np.testing.assert_array_equal(np.asarray(y1), np.asarray(y8))
    # windows are contiguous and the targets are the inputs shifted by one
    x, y = np.asarray(x1), np.asarray(y1)
    np.testing.assert_array_equal(y[:, :-1], x[:, 1:])
    np.testing.assert_array_equal(x[:, 1:] - x[:, :-1], 1)
    # step-dependent, but the same step always gives the same batch
    assert not np.array_equal(np.asarray(one.train_batch(8)[0]), x)
    np.testing.assert_array_equal(np.asarray(one.train_batch(7)[0]), x)
    # validation batches are fixed and differ from training batches
    np.testing.assert_array_equal(np.asarray(one.eval_batch(0)[0]), np.asarray(eight.eval_batch(0)[0]))
    assert not np.array_equal(np.asarray(one.eval_batch(0)[0]), np.asarray(one.train_batch(0)[0]))


def test_each_device_holds_its_rows():
    tokens = np.arange(10_000, dtype=np.uint16)
    eight = _batcher(jax.devices(), ["mesh.data=8"], tokens)
    x, _ = eight.train_batch(0)
    full = np.asarray(x)
    for shard in x.addressable_shards:
        assert shard.data.shape == (2, 32)
        np.testing.assert_array_equal(np.asarray(shard.data), full[shard.index])


def test_truncated_token_cache_is_set_aside_and_rebuilt(tmp_path, monkeypatch, capsys):
    """A cache file cut short (a crash of an older version, a full disk, a bad copy) is not a
    traceback: the entry is moved aside with a warning and rebuilt, with the same tokens."""
    monkeypatch.setenv("SPMDGPT_CACHE", str(tmp_path))
    text = tmp_path / "tiny.txt"
    text.write_text("to be or not to be, that is the question\n" * 200)
    cfg = DataConfig(text_file=str(text))
    first = load_dataset(cfg)
    (entry,) = [p for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    data = (entry / "train.npy").read_bytes()
    (entry / "train.npy").write_bytes(data[: len(data) // 2])
    capsys.readouterr()
    second = load_dataset(cfg)
    err = capsys.readouterr().err
    assert err.startswith(f"spmdgpt: warning: the token cache {entry} is damaged (") and "rebuilding it" in err
    np.testing.assert_array_equal(np.asarray(first.train), np.asarray(second.train))
    assert (entry / "train.npy").read_bytes() == data  # rebuilt in place
    assert len(list(tmp_path.glob(f"{entry.name}.damaged-*"))) == 1  # kept for inspection
    assert isinstance(load_dataset(cfg).train, np.memmap)  # and used again from then on
