"""`spmdgpt prepare [config overrides] [--verify]`: tokenize a config's corpus into its token
stores (data.num_workers processes), or continue an interrupted preparation. `--verify` also
checks every shard's SHA-256 and rebuilds the ones that do not match. Prints one line per
dataset: its store folder, shards, tokens and documents."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import List

from spmdgpt.cli.args import EXIT_OK, EXIT_WRITE_FAILED, parse


@dataclass
class PrepareArgs:
    verify: bool = False  # check every shard's checksum (rebuilding the damaged ones)


def run(items: List[str]) -> int:
    items = ["verify=true" if it == "--verify" else it for it in items]
    args, overrides = parse(items, PrepareArgs)
    from spmdgpt.config import ConfigError, freeze, load_config, validate
    from spmdgpt.data import load_dataset
    from spmdgpt.data.store import read_ledger
    from spmdgpt.run.files import WriteFailed

    cfg = load_config(overrides)
    errs = validate(cfg, 1, sections=("batch", "corpus"))
    if errs:
        raise ConfigError(errs)
    freeze(cfg)
    try:
        corpus = load_dataset(cfg.data, progress=True, verify=args.verify)
    except WriteFailed as e:
        print(f"spmdgpt: error: {e}", file=sys.stderr, flush=True)
        return EXIT_WRITE_FAILED
    tok = corpus.tokenizer
    print(f"tokenizer {tok.kind}: vocabulary {tok.vocab_size}, end-of-text id {tok.eos_id}")
    for name, folder in corpus.folders.items():
        ledger = read_ledger(folder)
        shards = ledger["shards"].values()
        tokens = {s: sum(e[s]["tokens"] for e in shards) for s in ("train", "val")}
        docs = sum(e["documents"] for e in shards)
        bad = ledger.get("bad_records", {}).get("count", 0)
        print(f"{name}: {folder} | {len(ledger['shards'])} shard(s), {docs:,} documents, "
              f"{tokens['train']:,} train + {tokens['val']:,} validation tokens ({ledger['dtype']})"
              + (f", {bad} bad record(s) skipped" if bad else "")
              + (" | checksums verified" if args.verify else ""))
    return EXIT_OK
