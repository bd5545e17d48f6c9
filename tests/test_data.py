"""Tokenizers, the token store (prepare, resume, damage), sources, and the deterministic loader."""

import gzip
import json

import jax
import numpy as np
import pytest

from spmdgpt.cli import main
from spmdgpt.config import ConfigError, DataConfig, TokenizerKind, load_config
from spmdgpt.data import Batcher, CharTokenizer, EvalBatcher, TokenStream, load_dataset
from spmdgpt.data.sources import find_data_root, staircase_tokens
from spmdgpt.data.store import StoreDamaged, default_cache_dir
from spmdgpt.mesh.sharding import Rules, make_mesh

# eight small documents with some non-ASCII text; the first one is empty-ish on purpose
DOCS = [f"Document {i}: " + "to be or not to be, that is the question. " * (i + 1) + "\u00e9\u4e2d"
        for i in range(8)]


def corpus_cfg(tmp_path, paths, **data):
    """A DataConfig with one dataset `d` over `paths` (everything trains unless split= is given)."""
    ds = {"paths": paths, "split": "none", **data.pop("ds", {})}
    return DataConfig(datasets={"d": ds}, tokenizer=data.pop("tokenizer", TokenizerKind.gpt2),
                      cache_dir=str(tmp_path / "cache"), **data)


def write_formats(tmp_path):
    """The same DOCS as txt files, jsonl, jsonl.gz, jsonl.zst and parquet; {format: path}."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    txt = tmp_path / "txt"
    txt.mkdir()
    for i, d in enumerate(DOCS):
        (txt / f"doc{i:02d}.txt").write_text(d, encoding="utf-8")
    lines = "".join(json.dumps({"text": d, "id": i}) + "\n" for i, d in enumerate(DOCS)).encode()
    (tmp_path / "c.jsonl").write_bytes(lines)
    (tmp_path / "c.jsonl.gz").write_bytes(gzip.compress(lines))
    (tmp_path / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    pq.write_table(pa.table({"text": DOCS}), tmp_path / "c.parquet", row_group_size=3)
    return {"txt": str(txt), "jsonl": str(tmp_path / "c.jsonl"), "gz": str(tmp_path / "c.jsonl.gz"),
            "zst": str(tmp_path / "c.jsonl.zst"), "parquet": str(tmp_path / "c.parquet")}


def test_staircase_sequence():
    toks = staircase_tokens(40)
    assert "".join(map(str, toks)) == "0123456789876543210123456789876543210123"


def test_char_tokenizer_round_trip_and_shakespeare_split():
    ds = load_dataset(DataConfig())
    tok = ds.tokenizer
    assert isinstance(tok, CharTokenizer) and tok.vocab_size == 66 and tok.eos_id == 65
    assert tok.chars[:3] == "\n !" and tok.chars[-1] == "z"
    text = "ROMEO:\nBut soft!"
    assert tok.decode(tok.encode(text)) == text
    # nanoGPT's split: the first 90% of the 1,115,394 characters train, the rest validate;
    # each part ends with the end-of-text id
    (train,), (val,) = ds.train.values(), ds.val.values()
    assert (len(train), len(val)) == (1_003_854 + 1, 111_540 + 1)
    assert tok.decode(train[:14]) == "First Citizen:"
    assert int(train[len(train) - 1 :][0]) == int(val[len(val) - 1 :][0]) == 65
    assert tok.decode([*tok.encode("ab"), 65]) == "ab"
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode("\u00e9")


def test_gpt2_and_hf_tokenizers_give_nanogpt_counts():
    ds = load_dataset(DataConfig(tokenizer=TokenizerKind.gpt2))
    (train,), (val,) = ds.train.values(), ds.val.values()
    # the counts the shared data README gives (tiktoken encode_ordinary, nanoGPT split) + 1 EOT
    assert (len(train), len(val)) == (301_966 + 1, 36_059 + 1)
    assert ds.tokenizer.vocab_size == 50257 and ds.tokenizer.eos_id == 50256
    assert ds.tokenizer.encode("Hello world") == [15496, 995]
    assert ds.tokenizer.decode(train[:3]) == "First Citizen:"
    assert train.dtype == np.uint16
    # the same tokens through `tokenizers` and the shared GPT-2 tokenizer.json
    hf = load_dataset(DataConfig(tokenizer=TokenizerKind.hf, tokenizer_file="gpt2-tokenizer/tokenizer.json"))
    (hf_train,) = hf.train.values()
    assert hf.tokenizer.eos_id == 50256 and hf.tokenizer.vocab_size == 50257
    np.testing.assert_array_equal(hf_train[:], train[:])


def test_formats_hold_the_same_tokens(tmp_path):
    """txt / jsonl / jsonl.gz / jsonl.zst / parquet and fsspec's memory filesystem, same documents:
    the same token stream and the same document ends."""
    import fsspec

    paths = write_formats(tmp_path)
    with fsspec.open("memory://corpus/c.jsonl", "wb") as f:
        f.write((tmp_path / "c.jsonl").read_bytes())
    paths["memory"] = "memory://corpus/c.jsonl"
    streams = {k: load_dataset(corpus_cfg(tmp_path, [p])).train["d"] for k, p in paths.items()}
    ref = streams.pop("txt")
    tok = load_dataset(corpus_cfg(tmp_path, [paths["txt"]])).tokenizer
    expect = [t for d in DOCS for t in (*tok.encode(d), tok.eos_id)]
    np.testing.assert_array_equal(ref[:], expect)
    np.testing.assert_array_equal(np.concatenate(ref.doc_ends), np.cumsum([len(tok.encode(d)) + 1 for d in DOCS]))
    for name, s in streams.items():
        np.testing.assert_array_equal(s[:], ref[:], err_msg=name)
        np.testing.assert_array_equal(np.concatenate(s.doc_ends), np.concatenate(ref.doc_ends), err_msg=name)


def test_store_is_prepared_once_and_never_reread(tmp_path, monkeypatch):
    paths = write_formats(tmp_path)
    cfg = corpus_cfg(tmp_path, [paths["jsonl"]], shard_mb=0.0005)  # 500 characters a shard
    first = load_dataset(cfg)
    (folder,) = first.folders.values()
    ledger = json.loads((folder / "ledger.json").read_text())
    assert ledger["complete"] and ledger["num_shards"] == len(ledger["shards"]) == 3
    assert sorted(p.name for p in folder.iterdir())[:3] == ["ledger.json", "train-00000.bin", "train-00000.docs"]
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp")]

    import spmdgpt.data.store as store

    monkeypatch.setattr(store, "records", lambda *a: pytest.fail("a prepared corpus was read again"))
    monkeypatch.setattr(store, "tokenize_shard", lambda *a: pytest.fail("a prepared corpus was tokenized again"))
    second = load_dataset(cfg)
    assert isinstance(second.train["d"].shards[0], np.memmap)
    np.testing.assert_array_equal(second.train["d"][:], first.train["d"][:])
    # keyed by the sources and tokenizer, not by seq_len / batch / seed
    load_dataset(corpus_cfg(tmp_path, [paths["jsonl"]], shard_mb=0.0005, seq_len=7, batch_size=3))


def test_interrupted_prepare_resumes_to_the_same_bytes(tmp_path):
    """A killed preparation (some shards in the ledger, one shard written but not yet listed, a
    partial temporary file) continues to a store byte-identical to an uninterrupted one, with
    another number of workers."""
    paths = write_formats(tmp_path)
    cfg = corpus_cfg(
        tmp_path, [paths["txt"]], shard_mb=0.0001, num_workers=2, ds={"split": "hash", "val_fraction": 0.3}
    )
    (whole,) = load_dataset(cfg).folders.values()
    reference = {p.name: p.read_bytes() for p in whole.iterdir()}
    assert len([n for n in reference if n.startswith("train")]) == 14  # 7 shards, both splits
    ledger = json.loads(reference["ledger.json"])
    # the state a kill -9 can leave: shards 0-1 listed, shard 2 renamed into place but not listed,
    # shard 3 half-written under its temporary name, the rest missing
    for key in list(ledger["shards"])[2:]:
        del ledger["shards"][key]
    ledger["complete"] = False
    (whole / "ledger.json").write_text(json.dumps(ledger))
    for p in whole.iterdir():
        if p.name.split("-")[-1].split(".")[0] not in ("00000", "00001", "00002") and p.name != "ledger.json":
            p.unlink()
    (whole / ".tmp-train-00003.bin-123").write_bytes(b"\x00" * 5)
    load_dataset(DataConfig(**{**cfg.__dict__, "num_workers": 1}))
    assert {p.name: p.read_bytes() for p in whole.iterdir()} == reference


def test_one_epoch_visits_every_window_once():
    stream = TokenStream([np.arange(1000, dtype=np.uint16), np.arange(1000, 2000, dtype=np.uint16)])
    mesh = make_mesh(load_config(["mesh.data=1"]).mesh, jax.devices()[:1])
    b = Batcher({"a": stream}, {"a": 1.0}, seq_len=16, batch_size=4, seed=1,
                sharding=Rules(mesh, load_config([]).sharding).batch_sharding())
    w = b.windows[0]
    assert w == (2000 - 16) // 16
    for epoch in (0, 1):
        rows = [b.locate(epoch * w + i) for i in range(w)]
        assert {e for _, e, _ in rows} == {epoch}
        starts = sorted(s for _, _, s in rows)
        offset = starts[0] % 16
        assert starts == [offset + 16 * k for k in range(w)]  # each window once, one grid
        assert starts[-1] + 17 <= 2000
    assert [b.locate(i)[2] for i in range(8)] != [b.locate(w + i)[2] for i in range(8)]  # reshuffled
    batch = b.train_batch(3)
    assert batch.segment_ids is None and batch.positions is None
    x, y = np.asarray(batch.inputs), np.asarray(batch.targets)
    np.testing.assert_array_equal(x[:, 1:] - x[:, :-1], 1)  # contiguous windows, across shards too
    np.testing.assert_array_equal(y, x + 1)
    assert b.epochs(w // 4) == {"a": pytest.approx(1.0, abs=0.01)}


def test_document_segments_and_positions(tmp_path):
    """data.document_mask: segment ids step up right after each end-of-text token of the
    inputs; data.reset_positions: positions restart there (and at each row's first token)."""
    paths = write_formats(tmp_path)
    corpus = load_dataset(corpus_cfg(tmp_path, [paths["jsonl"]], tokenizer=TokenizerKind.char, shard_mb=0.0005))
    eos = corpus.tokenizer.eos_id
    mesh = make_mesh(load_config(["mesh.data=4"]).mesh, jax.devices()[:4])
    b = Batcher(corpus.train, corpus.weights, seq_len=96, batch_size=8, seed=0,
                sharding=Rules(mesh, load_config(["mesh.data=4"]).sharding).batch_sharding(),
                document_mask=True, reset_positions=True)
    crossings = 0
    for step in range(4):
        x, _, seg, pos = (np.asarray(a) for a in b.train_batch(step))
        np.testing.assert_array_equal(seg[:, 0], 0)
        np.testing.assert_array_equal(np.diff(seg, axis=1), x[:, :-1] == eos)
        new_doc = np.concatenate([np.ones((8, 1), bool), np.diff(seg, axis=1) > 0], axis=1)
        np.testing.assert_array_equal(pos == 0, new_doc)
        np.testing.assert_array_equal(pos[:, 1:][~new_doc[:, 1:]], pos[:, :-1][~new_doc[:, 1:]] + 1)
        crossings += int((seg[:, -1] > 0).sum())
    assert crossings > 8  # many windows hold more than one document


def test_mixture_shares_follow_the_weights():
    streams = {n: TokenStream([np.full(5000, i, dtype=np.uint16)]) for i, n in enumerate("abc")}
    weights = {"a": 0.5, "b": 0.3, "c": 0.2}
    mesh = make_mesh(load_config(["mesh.data=1"]).mesh, jax.devices()[:1])
    b = Batcher(streams, weights, seq_len=8, batch_size=8, seed=0,
                sharding=Rules(mesh, load_config([]).sharding).batch_sharding())
    counts = np.bincount([b.locate(i)[0] for i in range(8 * 1000)], minlength=3) / 8000
    np.testing.assert_allclose(counts, [0.5, 0.3, 0.2], atol=0.002)
    per_batch = [np.bincount([b.locate(s * 8 + r)[0] for r in range(8)], minlength=3) for s in range(50)]
    assert all(abs(c[0] - 4) <= 1 and abs(c[1] - 2.4) < 1 and abs(c[2] - 1.6) < 1 for c in per_batch)
    x = b.train_batch(5).inputs
    assert np.array_equal(np.unique(np.asarray(x)), [0, 1, 2])


def _batchers(devices, mesh_overrides, tokens):
    cfg = load_config(["+experiment=staircase", *mesh_overrides])
    mesh = make_mesh(cfg.mesh, devices)
    sharding = Rules(mesh, cfg.sharding).batch_sharding()
    stream = TokenStream([tokens])
    return (Batcher({"s": stream}, {"s": 1.0}, 32, 16, seed=3, sharding=sharding),
            EvalBatcher(stream, 32, 16, 2, sharding))


def test_batches_are_deterministic_and_independent_of_the_device_count():
    tokens = np.arange(10_000, dtype=np.uint16)
    one, one_val = _batchers(jax.devices()[:1], ["mesh.data=1"], tokens)
    eight, eight_val = _batchers(jax.devices(), ["mesh.data=8"], tokens)
    x1, y1, *_ = one.train_batch(7)
    x8, y8, *_ = eight.train_batch(7)
    assert x8.sharding.spec[0] == ("data", "expert") and len(x8.addressable_shards) == 8
    np.testing.assert_array_equal(np.asarray(x1), np.asarray(x8))
    np.testing.assert_array_equal(np.asarray(y1), np.asarray(y8))
    x, y = np.asarray(x1), np.asarray(y1)
    np.testing.assert_array_equal(y[:, :-1], x[:, 1:])
    np.testing.assert_array_equal(x[:, 1:] - x[:, :-1], 1)
    assert not np.array_equal(np.asarray(one.train_batch(8)[0]), x)
    np.testing.assert_array_equal(np.asarray(one.train_batch(7)[0]), x)
    # validation batches: fixed windows spread evenly over the stream, the same on any layout
    v = np.asarray(one_val.batch(1)[0])
    np.testing.assert_array_equal(v, np.asarray(eight_val.batch(1)[0]))
    np.testing.assert_array_equal(v[:, 0], (np.arange(16, 32) * 312 // 32) * 32)
    for shard in x8.addressable_shards:  # each device holds its rows
        assert shard.data.shape == (2, 32)
        np.testing.assert_array_equal(np.asarray(shard.data), x[shard.index])


def test_cache_dir_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("SPMDGPT_CACHE", str(tmp_path / "env"))
    assert default_cache_dir(DataConfig()) == tmp_path / "env"
    assert default_cache_dir(DataConfig(cache_dir=str(tmp_path / "cfg"))) == tmp_path / "cfg"


def test_data_root_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("SPMDGPT_DATA", str(tmp_path))
    assert find_data_root() == tmp_path
    with pytest.raises(ConfigError, match="no such file"):
        load_dataset(DataConfig())


def test_damaged_shards_are_rebuilt_or_named(tmp_path, capsys):
    """A truncated shard is found when the store is opened (sizes) and rebuilt with the same
    bytes; a shard with the right size but other bytes stops the run at its first use, naming
    the file, and `prepare --verify` rebuilds it."""
    paths = write_formats(tmp_path)
    cfg = corpus_cfg(tmp_path, [paths["jsonl"]], shard_mb=0.0005)
    (folder,) = load_dataset(cfg).folders.values()
    shard = folder / "train-00001.bin"
    good = shard.read_bytes()
    shard.write_bytes(good[:-2])
    capsys.readouterr()
    load_dataset(cfg)
    assert "shard 00001: train-00001.bin has" in capsys.readouterr().err and shard.read_bytes() == good

    shard.write_bytes(bytes([good[0] ^ 1]) + good[1:])
    stream = load_dataset(cfg).train["d"]
    with pytest.raises(StoreDamaged, match="train-00001.bin does not match its checksum; run `spmdgpt prepare"):
        stream[:]
    overrides = [f"+data.datasets.d={{paths:[{paths['jsonl']}],split:none}}", "data.tokenizer=gpt2",
                 f"data.cache_dir={tmp_path / 'cache'}", "data.shard_mb=0.0005"]
    assert main(["prepare", *overrides, "--verify"]) == 0
    assert shard.read_bytes() == good and "checksums verified" in capsys.readouterr().out


BAD_INPUTS = [  # (files to write, dataset fields, data fields, the message)
    ({}, {"paths": ["nothing/*.txt"]}, {}, "data.datasets.d.paths=nothing/*.txt: no such file or no file matches"),
    ({"a.txt": b"caf\xe9 au lait"}, {}, {}, "a.txt: invalid utf-8 at byte 3; set data.encoding"),
    ({"a.jsonl": b'{"text": "ok"}\n{"text": bro\n'}, {}, {}, "a.jsonl:2: not JSON (Expecting value at column 10)"),
    ({"a.jsonl": b'{"text": "ok"}\n{"body": "x"}\n'}, {}, {}, "a.jsonl:2: no text field 'text'"),
    ({"a.txt": b""}, {}, {}, "dataset d has no training text"),
    (
        {"a.txt": b"short"},
        {"split": "tail"},
        {"seq_len": 64},
        "data.seq_len=64 is too long for the training split of dataset d",
    ),
    (
        {"a.txt": b"x" * 100, "tok.json": b"{not a tokenizer"},
        {},
        {"tokenizer": "hf", "tokenizer_file": "TMP/tok.json"},
        "tok.json: not a Hugging Face tokenizer.json",
    ),
    ({"a.dat": b"x" * 100}, {}, {}, "cannot tell the format of"),
]


@pytest.mark.parametrize("files,ds,data,message", BAD_INPUTS, ids=[str(m)[:40] for *_, m in BAD_INPUTS])
def test_bad_input_is_one_line_exit_2_and_no_store(tmp_path, capsys, files, ds, data, message):
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    paths = ds.get("paths", [str(tmp_path / n) for n in files if not n.endswith(".json")])
    d = {"paths": paths, "split": "none", **{k: v for k, v in ds.items() if k != "paths"}}
    items = [f"+data.datasets.d={json.dumps(d).replace(chr(34), '')}", f"data.cache_dir={tmp_path / 'cache'}",
             "train.steps=1", f"run.dir={tmp_path / 'run'}", "data.seq_len=8", "model.max_seq_len=64"]
    items += [f"data.{k}={str(v).replace('TMP', str(tmp_path)) if v is not None else 'null'}" for k, v in data.items()]
    code = main(["train", "+experiment=staircase", "data.source=text", "model.vocab_size=66", *items])
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("spmdgpt: error: ")]
    assert code == 2 and message in err and len(errors) == 1 and err.rstrip().endswith(errors[0]), err
    assert not (tmp_path / "run").exists()
    from spmdgpt.data.store import read_ledger, shard_problems

    for store in (tmp_path / "cache").glob("d-*/"):  # nothing half-written that a run could read
        assert not list(store.glob(".tmp-*"))
        ledger = read_ledger(store)
        if ledger and ledger["complete"]:
            assert not [p for k, e in ledger["shards"].items()
                        for p in shard_problems(store, int(k), e, np.dtype(ledger["dtype"]), True)]


def test_skip_bad_records_counts_them(tmp_path, capsys):
    (tmp_path / "a.jsonl").write_text('{"text": "one"}\nnot json\n{"other": 1}\n{"text": "two"}\n')
    cfg = corpus_cfg(tmp_path, [str(tmp_path / "a.jsonl")], skip_bad_records=True)
    corpus = load_dataset(cfg)
    assert corpus.tokenizer.decode(corpus.train["d"][:]) == "one<|endoftext|>two<|endoftext|>"
    assert "skipped 2 bad record(s) (the first: " in capsys.readouterr().err
    ledger = json.loads((corpus.folders["d"] / "ledger.json").read_text())
    assert ledger["bad_records"]["count"] == 2 and ledger["bad_records"]["first"].endswith("a.jsonl:2")


def test_hash_split_is_stable_when_data_is_added(tmp_path):
    from spmdgpt.data.sources import Source
    from spmdgpt.data.store import in_validation

    src = Source("d", (), "text", "utf-8", "strict", False, "hash", 0.25)
    docs = [f"document number {i}" for i in range(400)]
    held = [d for d in docs if in_validation(d, src)]
    assert 70 < len(held) < 130  # about a quarter
    more = docs + [f"new document {i}" for i in range(400)]
    assert [d for d in more if in_validation(d, src)][: len(held)] == held


def test_unwritable_cache_is_exit_4_naming_it(tmp_path, capsys):
    paths = write_formats(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    items = [f"+data.datasets.d={{paths:[{paths['jsonl']}],split:none}}", "data.tokenizer=gpt2",
             f"data.cache_dir={blocker / 'cache'}"]
    code = main(["prepare", *items])
    err = capsys.readouterr().err
    assert code == 4 and "spmdgpt: error: writing the token store" in err and str(blocker) in err, err


def test_token_dtype_must_hold_the_vocabulary():
    from spmdgpt.config import TokenDtype
    from spmdgpt.data.tokenizers import token_dtype

    assert token_dtype(DataConfig(), 65_536) == np.uint16 and token_dtype(DataConfig(), 65_537) == np.uint32
    with pytest.raises(ConfigError, match="data.token_dtype=uint16 cannot hold a vocabulary of 128256"):
        token_dtype(DataConfig(token_dtype=TokenDtype.uint16), 128_256)


BOOKS = ["+data.datasets.books={paths:[gutenberg-nltk/*.txt],split:hash,val_fraction:0.15}", "data.encoding=latin-1"]


def test_trained_tokenizer_is_reproducible_and_round_trips(tmp_path, capsys):
    from spmdgpt.data import load_tokenizer

    for name in ("a", "b"):
        assert (
            main(["tokenizer", "train", *BOOKS, "vocab_size=2000", "sample_mb=2", f"out={tmp_path / name}.json"]) == 0
        )
    out = capsys.readouterr().out
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()  # deterministic
    assert "2000 tokens (<|endoftext|> = 0)" in out and "bytes/token; GPT-2" in out
    tok = load_tokenizer(DataConfig(tokenizer=TokenizerKind.hf, tokenizer_file=str(tmp_path / "a.json")))
    assert tok.vocab_size == 2000 and tok.eos_id == 0
    held = "Mr. Knightley\u2019s caf\u00e9 \u2014 \u4e2d\u6587, tabs\tand\n\nnewlines  ok"
    assert tok.decode(tok.encode(held)) == held  # byte-level: any text round-trips exactly
    assert main(["tokenizer", "train", *BOOKS, "vocab_size=100", f"out={tmp_path / 'c.json'}"]) == 2
    assert "vocab_size=100" in capsys.readouterr().err and not (tmp_path / "c.json").exists()
    assert main(["tokenizer", "train", "+experiment=staircase", "vocab_size=300", f"out={tmp_path / 'c.json'}"]) == 2
    assert capsys.readouterr().err == (
        "spmdgpt: error: data.source=staircase is synthetic digits, no text to learn merges from; give a text "
        "corpus: +experiment=shakespeare_char, or data.source=text data.text_file=FILE\n")
    assert not (tmp_path / "c.json").exists()


def test_trained_tokenizer_at_gpt2_size_compresses_its_corpus_better(tmp_path):
    """At GPT-2's vocabulary size, a BPE trained on the Gutenberg books needs fewer tokens for
    them than GPT-2's (bytes per token higher)."""
    from spmdgpt.data.bpe import bytes_per_token, gpt2_encoder, train_bpe
    from spmdgpt.data.corpus import resolve_sources

    cfg = load_config(BOOKS).data
    sources = resolve_sources(cfg)
    tok = train_bpe(sources, 50257, 10**8, progress=False)
    from spmdgpt.data.bpe import _split_texts

    texts = list(_split_texts(sources, "train", 10**8))
    ours = bytes_per_token(lambda t: tok.encode(t, add_special_tokens=False).ids, texts)
    gpt2 = bytes_per_token(gpt2_encoder(cfg), texts)
    assert ours > gpt2 * 1.05 and gpt2 == pytest.approx(4.0, abs=0.6), (ours, gpt2)


def _children(pid: int) -> list:
    """The pids whose parent is `pid` (from /proc)."""
    import os

    out = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{d}/stat").read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(d))
    return out


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc")
def test_prepare_workers_end_with_their_parent_killed(tmp_path):
    """`spmdgpt prepare ... data.num_workers=2` killed by SIGKILL as soon as its tokenizer workers
    run, then (again) once it has written shards: every process it started is gone within
    seconds (they used to be re-parented to PID 1 and wait forever on a pipe they held
    themselves)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    rng = np.random.default_rng(0)
    words = np.array(["the", "king", "of", "a", "river", "and", "night", "spoke", "to", "her", "light"])
    (tmp_path / "corpus").mkdir()
    for i in range(40):  # 40 files of ~1 MB: a few seconds of tokenizing on 2 workers
        (tmp_path / "corpus" / f"{i:02d}.txt").write_text(" ".join(rng.choice(words, 200_000)))
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    cache = tmp_path / "cache"
    moments = {"workers started": lambda: True, "shards written": lambda: any(cache.rglob("*.bin"))}
    for moment, reached in moments.items():
        proc = subprocess.Popen(
            [sys.executable, "-m", "spmdgpt", "prepare", f"+data.datasets.d.paths=[{tmp_path}/corpus/*.txt]",
             "data.tokenizer=gpt2", "data.num_workers=2", f"data.cache_dir={cache}", "data.shard_mb=1"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = []
        try:
            deadline = time.time() + 120
            while not (len(started) >= 2 and reached()) and proc.poll() is None and time.time() < deadline:
                started = started if len(started) >= 2 else _children(proc.pid)
                time.sleep(0.02)
            assert len(started) >= 2 and reached() and proc.poll() is None, f"never got to: {moment}"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            deadline = time.time() + 20
            while any(os.path.exists(f"/proc/{pid}") for pid in started) and time.time() < deadline:
                time.sleep(0.05)
            assert [pid for pid in started if os.path.exists(f"/proc/{pid}")] == [], moment
        finally:
            if proc.poll() is None:
                proc.kill()
            for pid in started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def test_text_file_is_read_as_what_its_name_says(tmp_path):
    """data.text_file=x.jsonl / x.parquet: the documents' text field, one document each (it
    used to train on the raw JSON lines, and to call parquet's bytes invalid UTF-8)."""
    paths = write_formats(tmp_path)
    for fmt in ("jsonl", "parquet"):
        corpus = load_dataset(DataConfig(text_file=paths[fmt], tokenizer=TokenizerKind.char,
                                         cache_dir=str(tmp_path / "cache")))
        (folder,) = corpus.folders.values()
        ledger = json.loads((folder / "ledger.json").read_text())
        assert sum(e["documents"] for e in ledger["shards"].values()) == len(DOCS)
        assert sorted(corpus.tokenizer.chars) == sorted(set("".join(DOCS)))  # (no '{' nor '"': no JSON)
