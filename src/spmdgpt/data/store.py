"""The token store: a dataset tokenized once into shards on disk, memory-mapped by every run.

Layout of one store, `<cache_dir>/<dataset>-<tokenizer>-<key>/`:

    ledger.json              what is complete: per shard, for each split (train / val), the
                             token count, document count and SHA-256 of both files; the source
                             listing, tokenizer and settings the key was computed from
    train-00000.bin          tokens, uint16 (vocabulary <= 65,536) or uint32, little-endian
    train-00000.docs         int64 end offset of each document in that file (each document's
                             last token is the tokenizer's end-of-text id)
    train-00000.mask         (chat datasets) uint8 per token: 1 where it is the assistant's, a
                             token to learn (data/chat.py)
    val-00000.bin / .docs    the documents (or document tails) held out for validation

The key hashes the dataset's file listing (paths, sizes, modification times), reading and split
settings, tokenizer, token dtype and data.shard_mb; not seq_len, batch or seed, so every run and
config over the same data reuses the store, and opening one reads only its ledger and the file
sizes (never the corpus).

Preparation reads the documents in a fixed order (the main process only reads: txt files and
jsonl lines stay bytes) and cuts them into chunks of about data.shard_mb MB; chunk i becomes
shard i, decoded, parsed and tokenized by a pool of worker processes.
A shard's bytes depend only on its documents, and each is written to a temporary name and
renamed into place before the ledger (rewritten atomically) lists it, so an interrupted
preparation continues from its completed shards and ends byte-identical to an uninterrupted
one, with any number of workers.

(Measured on a 2-core box before choosing this layout: reading 8 windows of 257 tokens from a
memory-mapped shard takes 0.05 ms; the same from a tensorstore zarr3 array with 1M-token chunks
3.7 ms. The index arithmetic on top, shuffles and mixtures, is Grain's; see loader.py.)

Runs read a store through `stream.py` (`open_store`: one split as a TokenStream).
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from spmdgpt.config import ConfigError, DataConfig
from spmdgpt.data.sources import (
    COMPRESSIONS,
    BadRecords,
    Record,
    Source,
    bad_record,
    parse,
    parse_chat,
    records,
)
from spmdgpt.data.tokenizers import Tokenizer
from spmdgpt.mesh.runtime import cache_root
from spmdgpt.run.files import WriteFailed, os_reason, write_atomic

STORE_VERSION = 1
SPLITS = ("train", "val")


class StoreDamaged(ConfigError):
    """A shard whose size or checksum does not match the ledger."""


def default_cache_dir(cfg: DataConfig) -> Path:
    return Path(cfg.cache_dir).expanduser() if cfg.cache_dir else cache_root()


def tokenizer_identity(tok: Tokenizer) -> dict:
    spec = json.dumps(tok.to_json(), sort_keys=True, ensure_ascii=False)
    return {"kind": tok.kind, "vocab_size": tok.vocab_size, "eos_id": tok.eos_id,
            "sha256": hashlib.sha256(spec.encode()).hexdigest()}


def store_dir(cfg: DataConfig, src: Source, tok: Tokenizer, dtype: np.dtype) -> Path:
    ident = [STORE_VERSION, src.identity(), tokenizer_identity(tok), dtype.name, cfg.shard_mb]
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    return default_cache_dir(cfg) / f"{src.name}-{tok.kind}-{key}"


def shard_name(split: str, index: int) -> str:
    return f"{split}-{index:05d}"


# ----------------------------------------------------------------------------- documents -> shards


def in_validation(text: str, src: Source) -> bool:
    """split=hash: a stable 64-bit hash of the document's text, below val_fraction * 2**64.
    Depends on the document alone, so adding data never moves one between the splits."""
    h = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(h, "little") < src.val_fraction * 2.0**64


def whole_split(text: str, src: Source) -> str:
    """The split a whole document (or a chat record, by its line) goes to under split val, none
    or hash."""
    if src.split == "val":
        return "val"
    if src.split == "none":
        return "train"
    return "val" if in_validation(text, src) else "train"


def split_document(text: str, src: Source) -> List[Tuple[str, str]]:
    """[(split, text)] for one document (none for an empty one)."""
    if not text:
        return []
    if src.split == "tail":  # nanoGPT's convention: the last val_fraction of the text validates
        cut = int(len(text) * (1.0 - src.val_fraction))
        return [(s, t) for s, t in (("train", text[:cut]), ("val", text[cut:])) if t]
    return [(whole_split(text, src), text)]


_WORKER_TOKENIZER: Optional[Tokenizer] = None


def _init_worker(tok: Tokenizer, parent: int) -> None:
    global _WORKER_TOKENIZER
    _WORKER_TOKENIZER = tok
    _die_with(parent)


def _die_with(parent: int) -> None:
    """End this worker when `parent` (the preparing process) ends, however it ends: Linux's
    parent-death signal. Without it, a parent killed by SIGKILL leaves its workers (and so
    multiprocessing's resource tracker, which waits on a pipe they hold) running forever."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # (the parent died before the signal was set)
        os._exit(1)


def tokenize_shard(folder: Path, index: int, docs: List[Record], src: Source, dtype: str,
                   tok: Optional[Tokenizer] = None) -> dict:
    """Decode, parse and tokenize one chunk of records into shard `index` (both splits); its
    ledger entry. ConfigError for invalid text or a bad record (unless they are skipped)."""
    tok = tok or _WORKER_TOKENIZER
    assert tok is not None and tok.eos_id is not None
    parts: Dict[str, List[np.ndarray]] = {s: [] for s in SPLITS}
    masks: Dict[str, List[np.ndarray]] = {s: [] for s in SPLITS}  # (chat)
    encode = getattr(tok, "encode_array", None) or tok.encode
    eos, unlearned = np.asarray([tok.eos_id], dtype=dtype), np.zeros(1, np.uint8)
    bad = BadRecords()
    n = 0
    for rec in docs:
        if src.chat:
            chat = _conversation_tokens(rec, src, bad, tok)
            if chat is None:
                continue
            n += 1
            split, encoded = chat
            for ids, mask in encoded:  # (a preference pair: chosen, then rejected)
                parts[split] += [ids.astype(dtype), eos]
                masks[split] += [mask, unlearned]
            continue
        text = parse(rec, src, bad)
        if text is None:
            continue
        n += 1
        for split, piece in split_document(text, src):
            parts[split] += [np.asarray(encode(piece), dtype=dtype), eos]
    entry = {"documents": n, "bad_records": bad.count, "first_bad": bad.first}
    for split in SPLITS:
        arrs = parts[split]  # document, end-of-text, document, end-of-text, ...
        tokens = np.concatenate(arrs) if arrs else np.zeros(0, dtype)
        ends = np.cumsum([len(a) for a in arrs], dtype=np.int64)[1::2]
        tb, db = tokens.astype(np.dtype(dtype).newbyteorder("<")).tobytes(), ends.astype("<i8").tobytes()
        write_atomic(folder / f"{shard_name(split, index)}.bin", tb)
        write_atomic(folder / f"{shard_name(split, index)}.docs", db)
        entry[split] = {"tokens": int(len(tokens)), "docs": int(len(ends)),
                        "sha256": hashlib.sha256(tb).hexdigest(),
                        "docs_sha256": hashlib.sha256(db).hexdigest()}
        if src.chat:
            mb = (np.concatenate(masks[split]) if masks[split] else np.zeros(0, np.uint8)).tobytes()
            write_atomic(folder / f"{shard_name(split, index)}.mask", mb)
            entry[split]["mask_sha256"] = hashlib.sha256(mb).hexdigest()
    return entry


def _conversation_tokens(rec: Record, src: Source, bad: BadRecords, tok):
    """(split, [(token ids, loss mask)] of its conversations) of one chat or preference record;
    None for a skipped one. A record goes to validation whole (split hash: by its line's text)."""
    from spmdgpt.data.chat import ChatError

    chat = parse_chat(rec, src, bad)
    if chat is None:
        return None
    conversations, line = chat
    try:
        encoded = [tok.encode_chat(messages) for messages in conversations]
    except ChatError as e:
        bad_record(src, bad, rec.where, str(e))
        return None
    return whole_split(line, src), encoded


def _chunks(src: Source, shard_bytes: int, bad: BadRecords) -> Iterator[Tuple[int, List[Record], int]]:
    """(index, records, bytes read) of each chunk of about shard_bytes bytes of records."""
    docs: List[Record] = []
    nbytes = index = 0
    for rec in records(src, bad):
        docs.append(rec)
        nbytes += rec.nbytes
        if nbytes >= shard_bytes:
            yield index, docs, nbytes
            docs, nbytes, index = [], 0, index + 1
    if docs or index == 0:
        yield index, docs, nbytes


# ----------------------------------------------------------------------------- ledger


def read_ledger(folder: Path) -> Optional[dict]:
    try:
        return json.loads((folder / "ledger.json").read_text())
    except (OSError, ValueError):
        return None


def _write_ledger(folder: Path, ledger: dict) -> None:
    write_atomic(folder / "ledger.json",
                  json.dumps(ledger, indent=1, sort_keys=True, ensure_ascii=False).encode())


def shard_problems(folder: Path, index: int, entry: dict, dtype: np.dtype,
                   checksums: bool = False) -> List[str]:
    """What is wrong with one shard's files (sizes; SHA-256 too with `checksums`)."""
    out = []
    for split in SPLITS:
        e = entry[split]
        files = [(".bin", e["tokens"] * dtype.itemsize, "sha256"), (".docs", e["docs"] * 8, "docs_sha256")]
        if "mask_sha256" in e:
            files.append((".mask", e["tokens"], "mask_sha256"))
        for ext, nbytes, key in files:
            path = folder / f"{shard_name(split, index)}{ext}"
            try:
                size = path.stat().st_size
            except OSError:
                out.append(f"{path.name} is missing")
                continue
            if size != nbytes:
                out.append(f"{path.name} has {size} bytes where the ledger says {nbytes}")
            elif checksums and file_sha256(path) != e[key]:
                out.append(f"{path.name} does not match its checksum")
    return out


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@contextmanager
def _locked(folder: Path):
    """One preparer per store (processes of one job, or two jobs on a shared cache)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(folder.name + ".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ----------------------------------------------------------------------------- prepare


def _mp_context():
    """fork (instant workers that share the tokenizer already built) unless JAX is loaded:
    forking a process that runs JAX's threads can deadlock, so `train` spawns them instead."""
    import multiprocessing as mp

    return mp.get_context("spawn" if "jax" in sys.modules else "fork")


def _workers(cfg: DataConfig) -> int:
    return cfg.num_workers or len(os.sched_getaffinity(0))


class _Progress:
    """A progress bar on a terminal (documents, MB/s read, tokens/s, and an ETA for
    uncompressed text sources); elsewhere one summary line at the end."""

    def __init__(self, src: Source, enabled: bool):
        from tqdm import tqdm

        plain = all(f.format != "parquet" and not f.url.endswith(COMPRESSIONS) for f in src.files)
        self.enabled, self.name = enabled, src.name
        self.bar = tqdm(total=src.nbytes if plain else None, unit="B", unit_scale=True,
                        desc=f"prepare {src.name}", disable=not (enabled and sys.stderr.isatty()),
                        file=sys.stderr, dynamic_ncols=True, leave=True)
        self.t0 = time.perf_counter()
        self.docs = self.tokens = self.nbytes = self.new_tokens = 0

    def update(self, entry: dict, nbytes: int, new: bool = True) -> None:
        self.docs += entry["documents"]
        tokens = sum(entry[s]["tokens"] for s in SPLITS)
        self.tokens += tokens
        self.new_tokens += tokens if new else 0
        self.nbytes += nbytes
        dt = max(time.perf_counter() - self.t0, 1e-9)
        self.bar.set_postfix_str(f"{self.docs:,} docs, {self.new_tokens / dt / 1e6:.2f}M tok/s",
                                 refresh=False)
        self.bar.update(nbytes)

    def close(self) -> None:
        self.bar.close()
        dt = time.perf_counter() - self.t0
        if self.enabled and self.bar.disable and self.new_tokens:
            print(f"prepared {self.name}: {self.docs:,} documents, {self.nbytes / 1e6:,.1f} MB, "
                  f"{self.tokens:,} tokens in {dt:.1f} s ({self.nbytes / 1e6 / dt:.1f} MB/s, "
                  f"{self.new_tokens / dt / 1e6:.2f}M tokens/s)", file=sys.stderr, flush=True)


def prepare(cfg: DataConfig, src: Source, tok: Tokenizer, dtype: np.dtype, *,
            progress: bool = True, verify: bool = False) -> Path:
    """Make the store of one dataset complete (tokenizing only what is missing); its folder.

    Shards already listed in the ledger whose files have the right sizes (and checksums, with
    `verify`) are kept; the others are (re)built. Raises ConfigError for bad input and
    files.WriteFailed when the store cannot be written (completed shards stay)."""
    folder = store_dir(cfg, src, tok, dtype)
    try:
        with _locked(folder):
            ledger = _usable_ledger(folder, src, tok, dtype, cfg)
            if not _drop_damaged(folder, ledger, dtype, verify) and ledger.get("complete"):
                return folder
            folder.mkdir(parents=True, exist_ok=True)
            for stale in folder.glob(".tmp-*"):  # left by a killed preparer
                stale.unlink(missing_ok=True)
            _tokenize_missing(cfg, folder, src, tok, dtype, ledger, progress)
    except BrokenProcessPool:
        raise WriteFailed(
            f"a tokenizer process preparing {folder} died (killed, or out of memory?); the "
            "completed shards are kept: rerun to continue, with a smaller data.num_workers or "
            "data.shard_mb if memory is short") from None
    except OSError as e:  # (unreadable sources are ConfigErrors, raised where they are read)
        raise WriteFailed(
            f"writing the token store {folder} failed ({os_reason(e)}); the completed shards "
            "are kept: free space (or set data.cache_dir) and run it again") from None
    return folder


def _usable_ledger(folder: Path, src: Source, tok: Tokenizer, dtype: np.dtype, cfg: DataConfig) -> dict:
    ledger = read_ledger(folder)
    if ledger and ledger.get("version") == STORE_VERSION:
        return ledger
    return {"version": STORE_VERSION, "source": src.identity(), "tokenizer": tokenizer_identity(tok),
            "dtype": dtype.name, "shard_mb": cfg.shard_mb, "shards": {}, "complete": False}


def _drop_damaged(folder: Path, ledger: dict, dtype: np.dtype, checksums: bool) -> bool:
    """Remove shards with bad files from the ledger (with a warning); whether any was."""
    dropped = False
    for key, entry in sorted(ledger["shards"].items()):
        problems = shard_problems(folder, int(key), entry, dtype, checksums)
        if problems:
            print(f"spmdgpt: warning: token store {folder.name}: shard {key}: {'; '.join(problems)}; "
                  "rebuilding it", file=sys.stderr, flush=True)
            del ledger["shards"][key]
            dropped = True
    if dropped:
        ledger["complete"] = False
    return dropped


def _tokenize_missing(cfg: DataConfig, folder: Path, src: Source, tok: Tokenizer, dtype: np.dtype,
                      ledger: dict, progress: bool) -> None:
    bad = BadRecords()
    bar = _Progress(src, progress)
    shard_bytes = max(1, int(cfg.shard_mb * 1e6))
    workers = _workers(cfg)
    pool = None
    pending: Dict = {}

    def finish(done) -> None:
        for fut in done:
            index, nbytes = pending.pop(fut)
            ledger["shards"][f"{index:05d}"] = fut.result()
            _write_ledger(folder, ledger)
            bar.update(ledger["shards"][f"{index:05d}"], nbytes)

    chunks = _chunks(src, shard_bytes, bad)
    first = next(chunks)
    second = next(chunks, None)
    if second is None:  # a one-shard dataset: no worker processes to start
        workers = 1
    try:
        n = 0
        for index, docs, nbytes in itertools.chain([first], [second] if second else [], chunks):
            n = index + 1
            if f"{index:05d}" in ledger["shards"]:
                bar.update(ledger["shards"][f"{index:05d}"], nbytes, new=False)
                continue
            if workers == 1:
                ledger["shards"][f"{index:05d}"] = tokenize_shard(folder, index, docs, src, dtype.name, tok)
                _write_ledger(folder, ledger)
                bar.update(ledger["shards"][f"{index:05d}"], nbytes)
                continue
            if pool is None:
                pool = ProcessPoolExecutor(workers, _mp_context(), _init_worker, (tok, os.getpid()))
            pending[pool.submit(tokenize_shard, folder, index, docs, src, dtype.name)] = (index, nbytes)
            del docs
            while len(pending) > workers:  # bounded memory: at most workers + 1 chunks in flight
                finish(wait(pending, return_when=FIRST_COMPLETED)[0])
        while pending:
            finish(wait(pending, return_when=FIRST_COMPLETED)[0])
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    shards = [ledger["shards"][k] for k in sorted(ledger["shards"])]
    bad.count += sum(e.get("bad_records", 0) for e in shards)  # (parquet's are counted here)
    bad.first = bad.first or next((e["first_bad"] for e in shards if e.get("first_bad")), "")
    ledger["num_shards"] = n
    ledger["bad_records"] = {"count": bad.count, "first": bad.first}
    ledger["complete"] = True
    _write_ledger(folder, ledger)
    if bad.count:
        print(f"spmdgpt: {src.name}: skipped {bad.count} bad record(s) (the first: {bad.first})",
              file=sys.stderr, flush=True)
