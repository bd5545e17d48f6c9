"""The data path's targets, each measured against its baseline in the same run.

    python benchmarks/data.py tokenize [--mb 100]       # prepare (2 workers) vs one-process tiktoken,
                                                        # and vs 2 independent processes (the ceiling)
    python benchmarks/data.py memory [--gb 0.2 2.0]     # peak RSS of prepare at two corpus sizes
    python benchmarks/data.py loader [--steps 30]       # batch build time vs a B2 training step
    python benchmarks/data.py resume [--mb 50 --kills 3] # kill -9 prepare, rerun: same bytes?

Corpora are synthetic: the 13 Gutenberg books of ../shared/data, cut into documents of 2-20
KB and repeated (with the repetition number in each document, so no two are equal) until the
asked size, written as jsonl under --work (default /tmp/spmdgpt-data-bench); nothing is
committed. Peak RSS is the largest sum of resident memory over `prepare`'s whole process tree
(the main process and its tokenizer workers), sampled every 50 ms from /proc.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPMDGPT = [sys.executable, "-m", "spmdgpt"]


def gutenberg_documents():
    from spmdgpt.data.sources import find_data_root

    root = find_data_root() / "gutenberg-nltk"
    rng_sizes = [2_000, 5_000, 11_000, 20_000, 7_000, 3_000]
    for path in sorted(root.glob("*.txt")):
        text = path.read_text(encoding="latin-1")
        i = k = 0
        while i < len(text):
            n = rng_sizes[k % len(rng_sizes)]
            yield text[i : i + n]
            i, k = i + n, k + 1


def make_corpus(work: Path, mb: float) -> Path:
    """A jsonl corpus of about `mb` MB (cached under work/)."""
    path = work / f"corpus-{mb:g}MB.jsonl"
    if path.is_file():
        return path
    work.mkdir(parents=True, exist_ok=True)
    docs = list(gutenberg_documents())
    target, size, rep = mb * 1e6, 0, 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        while size < target:
            for d in docs:
                line = json.dumps({"text": f"[{rep}] {d}"}) + "\n"
                f.write(line)
                size += len(line)
                if size >= target:
                    break
            rep += 1
    tmp.rename(path)
    return path


def prepare_cmd(corpus: Path, cache: Path, workers: int) -> list:
    return [*SPMDGPT, "prepare", "data.tokenizer=gpt2", f"data.cache_dir={cache}",
            f"data.num_workers={workers}", f"+data.datasets.c={{paths:[{corpus}],split:hash,val_fraction:0.01}}"]


def tree_rss(pid: int) -> int:
    """Resident bytes of pid and all its descendants (from /proc)."""
    children: dict = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    total, todo = 0, [pid]
    page = os.sysconf("SC_PAGE_SIZE")
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * page
        except OSError:
            pass
        todo += children.get(p, [])
    return total


def run_measured(cmd: list) -> tuple[float, int]:
    """(seconds, peak RSS bytes of the process tree) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = [0]

    def sample():
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss(proc.pid))
            time.sleep(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, _ = proc.communicate()
    th.join()
    dt = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{out}")
    return dt, peak[0]


_ENCODING: list = []  # tiktoken's GPT-2 encoding, set by `tokenize` before it forks


def _encode_lines(corpus: Path, part: int = 0, parts: int = 1) -> int:
    """The baseline's work on every `parts`-th line of corpus starting at `part`: read, parse,
    encode with tiktoken (GPT-2, loaded before any fork). Returns the tokens (+1 per document)."""
    enc = _ENCODING[0]
    n = 0
    with open(corpus, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i % parts == part:
                n += len(enc.encode_ordinary(json.loads(line)["text"])) + 1
    return n


def tokenize(args) -> None:
    import multiprocessing

    import tiktoken

    from spmdgpt.config import DataConfig, load_config
    from spmdgpt.data import load_dataset
    from spmdgpt.data.tokenizers import gpt2_cache_dir

    corpus = make_corpus(args.work, args.mb)
    nbytes = corpus.stat().st_size
    os.environ["TIKTOKEN_CACHE_DIR"] = str(gpt2_cache_dir(DataConfig()))
    _ENCODING[:] = [tiktoken.get_encoding("gpt2")]
    rows = []
    for rep in range(args.repeats):
        t0 = time.perf_counter()
        n = _encode_lines(corpus)  # the baseline: read, parse, encode, one process
        single = time.perf_counter() - t0
        # the box's ceiling: the same work split over `workers` independent forked processes
        # (every one reads the file and takes every workers-th line; no coordination, no output)
        t0 = time.perf_counter()
        with multiprocessing.get_context("fork").Pool(args.workers) as pool:
            assert sum(pool.starmap(_encode_lines, [(corpus, k, args.workers) for k in range(args.workers)])) == n
        ceiling = time.perf_counter() - t0
        cache = args.work / "cache-tokenize"
        shutil.rmtree(cache, ignore_errors=True)
        cfg = load_config(prepare_cmd(corpus, cache, args.workers)[4:]).data
        t0 = time.perf_counter()
        load_dataset(cfg)  # the same work as `spmdgpt prepare`, without the CLI's start-up (~1.5 s)
        multi = time.perf_counter() - t0
        rows.append((single, ceiling, multi))
        print(f"repeat {rep}: one-process tiktoken {nbytes / 1e6 / single:.1f} MB/s ({n:,} tokens, "
              f"{single:.1f} s) | {args.workers} independent processes {single / ceiling:.2f}x | prepare with "
              f"{args.workers} workers {nbytes / 1e6 / multi:.1f} MB/s ({multi:.1f} s, worker start-up included) | "
              f"speed-up {single / multi:.2f}x, {ceiling / multi:.2f} of the independent processes'", flush=True)
    speedup = sorted(s / m for s, _, m in rows)
    print(json.dumps({"corpus_mb": nbytes / 1e6, "workers": args.workers,
                      "speedup": [round(s / m, 3) for s, _, m in rows],
                      "independent": [round(s / c, 3) for s, c, _ in rows],
                      "of_independent": [round(c / m, 3) for _, c, m in rows],
                      "median": round(speedup[len(speedup) // 2], 3), "best": round(speedup[-1], 3)}))


def memory(args) -> None:
    peaks = {}
    for gb in args.gb:
        corpus = make_corpus(args.work, gb * 1000)
        cache = args.work / f"cache-mem-{gb:g}"
        shutil.rmtree(cache, ignore_errors=True)
        dt, peak = run_measured(prepare_cmd(corpus, cache, args.workers))
        peaks[gb] = peak
        mb = corpus.stat().st_size / 1e6
        print(f"{gb:g} GB corpus: {dt:.0f} s ({mb / dt:.1f} MB/s), peak RSS of prepare's process "
              f"tree {peak / 2**20:,.0f} MiB", flush=True)
        shutil.rmtree(cache, ignore_errors=True)
    lo, hi = min(args.gb), max(args.gb)
    print(json.dumps({"peak_mib": {str(k): round(v / 2**20) for k, v in peaks.items()},
                      "ratio": round(peaks[hi] / peaks[lo], 3)}))


def loader(args) -> None:
    from spmdgpt.mesh.runtime import set_default_xla_flags

    set_default_xla_flags()
    import jax

    from spmdgpt.config import load_config
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.training.step import training_parts

    cfg = load_config(["+experiment=shakespeare_gpt2", "model.vocab_size=50304", "model.num_layers=4",
                       "model.d_model=256", "data.seq_len=256", "data.batch_size=8", "mesh.data=1",
                       f"data.document_mask={args.document_mask}"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    with jax.set_mesh(mesh):
        state, step, batcher, _ = training_parts(cfg, rules)
        for i in range(3):
            state, m = step(state, *batcher.train_batch(i))
        jax.block_until_ready(m)
        build, steps = [], []
        for i in range(3, 3 + args.steps):
            t0 = time.perf_counter()
            batch = batcher.train_batch(i)
            jax.block_until_ready(batch)
            t1 = time.perf_counter()
            state, m = step(state, *batch)
            jax.block_until_ready(m)
            build.append(t1 - t0)
            steps.append(time.perf_counter() - t1)
    import statistics

    b, s = statistics.median(build), statistics.median(steps)
    print(f"B2 (vocab 50304, 4 x 256, seq 256, batch 8, document_mask={args.document_mask}): "
          f"batch build {b * 1e3:.2f} ms, train step {s * 1e3:.0f} ms (medians of {args.steps}): "
          f"{100 * b / s:.2f}% of a step")
    print(json.dumps({"build_ms": round(b * 1e3, 3), "step_ms": round(s * 1e3, 1), "percent": round(100 * b / s, 3)}))


def resume(args) -> None:
    """Prepare once uninterrupted; then again, killed with SIGKILL each time a few more shards
    are listed, and rerun until complete: the two stores must be byte-identical."""
    import hashlib
    import signal

    corpus = make_corpus(args.work, args.mb)
    ref_cache, cache = args.work / "cache-resume-ref", args.work / "cache-resume"
    for c in (ref_cache, cache):
        shutil.rmtree(c, ignore_errors=True)
    extra = ["data.shard_mb=2"]
    run_measured(prepare_cmd(corpus, ref_cache, args.workers) + extra)
    kills = 0
    while True:
        proc = subprocess.Popen(prepare_cmd(corpus, cache, args.workers) + extra, cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        listed = lambda: sum(len(json.loads(p.read_text())["shards"]) for p in cache.glob("*/ledger.json"))  # noqa: E731
        start = listed() if cache.exists() else 0
        while proc.poll() is None and kills < args.kills:
            try:
                if listed() >= start + 3:
                    os.killpg(proc.pid, signal.SIGKILL)  # the preparer and its workers
                    proc.wait()
                    kills += 1
                    print(f"kill -9 #{kills} with {listed()} shards listed", flush=True)
                    break
            except (OSError, ValueError):
                pass  # a ledger being replaced
            time.sleep(0.02)
        if proc.wait() == 0:
            break

    def digest(root):
        return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(root.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}

    a, b = digest(ref_cache), digest(cache)
    same = a == b
    print(f"{kills} kills; {len(a)} files; byte-identical to the uninterrupted store: {same}")
    print(json.dumps({"kills": kills, "files": len(a), "identical": same}))
    if not same:
        sys.exit(1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["tokenize", "memory", "loader", "resume"])
    p.add_argument("--work", type=Path, default=Path("/tmp/spmdgpt-data-bench"))
    p.add_argument("--mb", type=float, default=100.0)
    p.add_argument("--gb", type=float, nargs="+", default=[0.2, 2.0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--document-mask", default="false")
    p.add_argument("--kills", type=int, default=3)
    args = p.parse_args()
    {"tokenize": tokenize, "memory": memory, "loader": loader, "resume": resume}[args.what](args)


if __name__ == "__main__":
    main()
