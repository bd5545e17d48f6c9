"""`spmdgpt eval run.dir=<run> [step=N] [text_file=F] [full=true] [out=F.json] [overrides]`:
loss, perplexity and bits per byte of a run's checkpoint (or of a Hugging Face folder,
run.dir=hf:DIR), on the run's validation sets (the same fixed batches its training loop
evaluates, so the loss equals the run's val/loss at that step; full=true: every target of each
set once, the tail that fills no whole batch included) or on
any UTF-8 text file (every token after the first scored exactly once). Batches are sharded over
the mesh like training batches; the result is deterministic. Printed as a table and written as
JSON (default: run.dir/eval/step-<N>[-<file stem>].json).

Bits per byte = the summed loss in bits / the UTF-8 bytes of the scored tokens: it does not
depend on the tokenizer, so char-level and BPE runs compare.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from spmdgpt.cli.args import EXIT_OK, EXIT_WRITE_FAILED, parse
from spmdgpt.cli.runs import file_error
from spmdgpt.config import ConfigError, document_batches, override_value


@dataclass
class EvalArgs:
    run_dir: Optional[str] = None  # run.dir=...: the training run (or hf:DIR) to evaluate (required)
    step: Optional[int] = None  # the checkpoint's step (default: the newest)
    text_file: Optional[str] = None  # score this text file instead of the validation sets
    full: bool = False  # every target of each validation set once (default: train.eval_batches batches)
    out: Optional[str] = None  # the JSON file to write


def check_args(args: EvalArgs) -> EvalArgs:
    from spmdgpt.hf import hf_folder

    errs = []
    if not args.run_dir:
        errs.append("run.dir is required: spmdgpt eval run.dir=<training run directory> [text_file=...]")
    elif hf_folder(args.run_dir) is None and not Path(args.run_dir).is_dir():
        errs.append(f"run.dir={args.run_dir}: no such directory")
    elif hf_folder(args.run_dir) is not None and not args.text_file:
        errs.append(
            f"run.dir={args.run_dir} is a Hugging Face folder, which has no validation sets: give text_file=..."
        )
    if args.text_file and file_error("text_file", args.text_file):
        errs.append(file_error("text_file", args.text_file))
    if errs:
        raise ConfigError(errs)
    return args


def table(results: dict) -> str:
    rows = [f"{'set':<24} {'tokens':>12} {'loss':>8} {'perplexity':>11} {'bits/byte':>10}"]
    for name, r in results.items():
        rows.append(f"{name:<24} {r['tokens']:>12,} {r['loss']:>8.4f} {r['perplexity']:>11.3f} "
                    f"{r['bits_per_byte']:>10.4f}")
    return "\n".join(rows)


def run(items: List[str]) -> int:
    args, overrides = parse(items, EvalArgs)
    args = check_args(args)
    from spmdgpt.cli.runs import (
        exported_window,
        model_source,
        source_params,
        start_mesh,
        text_file_tokens,
        write_output,
    )
    from spmdgpt.data import EvalBatcher
    from spmdgpt.hf import hf_folder

    cfg, tokenizer = model_source(args.run_dir, overrides)
    d = cfg.data
    text_tokens = text_file_tokens(args.text_file, tokenizer, d.seq_len) if args.text_file else None

    mesh = start_mesh(cfg)
    import jax

    from spmdgpt.eval.evaluate import Scorer, text_batcher, text_windows, token_byte_lengths
    from spmdgpt.mesh.sharding import Rules

    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        sharding = rules.batch_sharding()
        sets = {}  # name -> (EvalBatcher, number of batches, first counted target per row or None)
        if text_tokens is not None:
            batcher, starts, first = text_batcher(text_tokens, d.seq_len, d.batch_size, sharding)
            n = len(starts) // d.batch_size
            sets[Path(args.text_file).name] = (batcher, n, first.reshape(n, -1))
        else:
            from spmdgpt.data import load_dataset

            data = load_dataset(d)
            docs = document_batches(d)
            for name, stream in data.val.items():
                if stream.masks is not None and args.full:
                    raise ConfigError([f"full=true scores every window of text; the validation set {name} is "
                                       "chat data, scored as packed conversations: leave full out"])
                if stream.masks is None and len(stream) < (d.seq_len + 1) * (1 if args.full else d.batch_size):
                    raise ConfigError([f"the validation set {name} holds fewer than data.batch_size windows; "
                                       "lower data.batch_size or data.seq_len"])
                if args.full:  # every target once, the tail included (`text_windows`)
                    starts, first = text_windows(len(stream), d.seq_len, d.batch_size)
                    n, first = len(starts) // d.batch_size, first.reshape(-1, d.batch_size)
                else:
                    starts, n, first = None, cfg.train.eval_batches, None
                sets[name] = (EvalBatcher(stream, d.seq_len, d.batch_size, n, sharding, name, *docs, starts=starts,
                                          pad_id=data.tokenizer.eos_id or 0), n, first)
        step, params = source_params(args.run_dir, cfg, rules, args.step, fix="evaluate with the run's model config")
        # (in the run's train.microbatches, or the largest divisor of it that splits this batch evenly)
        parts = math.gcd(cfg.train.microbatches, d.batch_size // rules.batch_divisor())
        scorer = Scorer(cfg.model, rules, token_byte_lengths(tokenizer, cfg.model.vocab_size), parts)
        results = {name: scorer(params, (b.batch(i) for i in range(n)), first)
                   for name, (b, n, first) in sets.items()}
    if jax.process_index() != 0:
        return EXIT_OK
    report = {"run_dir": args.run_dir, "step": step, "text_file": args.text_file,
              "windows": "all" if args.full or args.text_file else f"train.eval_batches={cfg.train.eval_batches}",
              "seq_len": d.seq_len, "results": results}
    window = f"window {d.seq_len} tokens"
    folder = hf_folder(args.run_dir)
    if folder is not None and exported_window(folder) is None and override_value(overrides, "data.seq_len") is None:
        window += " (the folder records no training window; set data.seq_len=N)"
    print(f"# {args.run_dir}{'' if step is None else f' step {step}'} | {window} | mesh {dict(mesh.shape)} "
          f"sharding {cfg.sharding.name}", file=sys.stderr)
    print(table(results))
    out = Path(args.out) if args.out else None
    if out is None and hf_folder(args.run_dir) is None:
        suffix = f"-{Path(args.text_file).stem}" if args.text_file else ("-full" if args.full else "")
        out = Path(args.run_dir) / "eval" / f"step-{step}{suffix}.json"
    if out is not None:
        if write_output(out, json.dumps(report, indent=2) + "\n") != EXIT_OK:
            return EXIT_WRITE_FAILED
        print(f"-> {out}", file=sys.stderr)
    return EXIT_OK
