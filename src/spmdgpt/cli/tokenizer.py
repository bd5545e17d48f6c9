"""`spmdgpt tokenizer train [data overrides] vocab_size=N out=FILE [sample_mb=M]`: train a
byte-level BPE on a corpus (spmdgpt.data.bpe) and write its tokenizer.json; prints the
compression (bytes per token) on held-out text beside GPT-2's. Use the file with
`data.tokenizer=hf data.tokenizer_file=FILE`."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List

from spmdgpt.cli.args import EXIT_OK, EXIT_WRITE_FAILED, parse


@dataclass
class TokenizerArgs:
    out: str = ""  # where the tokenizer.json goes
    vocab_size: int = 0  # vocabulary entries, <|endoftext|> included
    sample_mb: float = 100.0  # MB of training text to learn the merges from
    heldout_mb: float = 5.0  # MB of validation text to measure compression on


def run(items: List[str]) -> int:
    from spmdgpt.config import ConfigError

    if not items or items[0] != "train":
        raise ConfigError(["usage: spmdgpt tokenizer train [data overrides] vocab_size=N out=FILE [sample_mb=100]"])
    args, overrides = parse(items[1:], TokenizerArgs)
    errs = []
    if not args.out:
        errs.append("out=FILE is required: where to write the tokenizer.json")
    if args.vocab_size < 257:
        errs.append(f"vocab_size={args.vocab_size}: give vocab_size=N with N >= 257 (256 bytes + <|endoftext|>)")
    if not args.sample_mb > 0 or not args.heldout_mb >= 0:
        errs.append("sample_mb must be > 0 and heldout_mb >= 0")
    if errs:
        raise ConfigError(errs)
    from spmdgpt.config import load_config
    from spmdgpt.data.bpe import bytes_per_token, gpt2_encoder, held_out, train_bpe
    from spmdgpt.data.corpus import resolve_sources
    from spmdgpt.run.files import write_atomic

    cfg = load_config(overrides)
    if cfg.data.source.value == "staircase":
        raise ConfigError(["data.source=staircase is synthetic digits, no text to learn merges from; give a text "
                           "corpus: +experiment=shakespeare_char, or data.source=text data.text_file=FILE"])
    sources = resolve_sources(cfg.data)
    tok = train_bpe(sources, args.vocab_size, int(args.sample_mb * 1e6), progress=sys.stderr.isatty())
    out = Path(args.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, tok.to_str(pretty=True).encode())
    except OSError as e:
        from spmdgpt.run.files import os_reason

        print(f"spmdgpt: error: writing {out} failed ({os_reason(e)})", file=sys.stderr)
        return EXIT_WRITE_FAILED
    print(f"wrote {out}: byte-level BPE, {tok.get_vocab_size()} tokens (<|endoftext|> = "
          f"{tok.token_to_id('<|endoftext|>')}); use data.tokenizer=hf data.tokenizer_file={out}")
    texts = held_out(sources, int(args.heldout_mb * 1e6))
    if not texts:
        print("no held-out text to measure compression on (the datasets have no validation split)")
        return EXIT_OK
    ours = bytes_per_token(lambda t: tok.encode(t, add_special_tokens=False).ids, texts)
    gpt2 = gpt2_encoder(cfg.data)
    line = f"held-out text ({sum(len(t) for t in texts) / 1e6:.2f} M characters): {ours:.3f} bytes/token"
    if gpt2 is not None:
        theirs = bytes_per_token(gpt2, texts)
        line += f"; GPT-2 {theirs:.3f} bytes/token (ours {100 * (ours / theirs - 1):+.1f}%)"
    print(line)
    return EXIT_OK
