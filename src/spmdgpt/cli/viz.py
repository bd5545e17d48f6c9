"""`spmdgpt viz run.dir=<run> text_file=F [out=page.html] [step=N] [top_k=5] [max_tokens=4096]`:
a self-contained HTML page of a text with every token coloured by its log-probability under
the model (white: likely, red: surprising), and on hover the model's top alternatives with
their probabilities.

Tokens are scored as `spmdgpt eval text_file=` scores them (windows of data.seq_len, every
token after the first exactly once), so the mean of the page's negative log-probabilities is
eval's loss on that text. The page needs no network and no script: the colours are inline
styles, the alternatives the tokens' `title` tooltips. Default out: run.dir/viz/step-<N>-<file
stem>.html.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from spmdgpt.cli.args import EXIT_OK, parse
from spmdgpt.cli.runs import file_error
from spmdgpt.config import ConfigError

FLOOR = -10.0  # log-probabilities at or below this get the strongest red


@dataclass
class VizArgs:
    run_dir: Optional[str] = None  # run.dir=...: the training run (or hf:DIR) (required)
    text_file: Optional[str] = None  # the text to show (required)
    step: Optional[int] = None  # the checkpoint's step (default: the newest)
    top_k: int = 5  # alternatives shown on hover
    max_tokens: int = 4096  # score at most this many tokens of the text (its beginning)
    out: Optional[str] = None  # the HTML file to write


def colour(logprob: float) -> str:
    """White (log-probability 0) to red (FLOOR and below), linear in the log-probability."""
    t = min(1.0, max(0.0, logprob / FLOOR))
    g = round(255 * (1 - 0.85 * t))
    return f"rgb(255, {g}, {g})"


def page(title: str, summary: str, pieces: list) -> str:
    """pieces: (token text, log-probability or None for the unscored first token, tooltip)."""
    spans = []
    for text, lp, tip in pieces:
        attrs = ' class="tok first"' if lp is None else (
            f' class="tok" data-lp="{lp:.6g}" style="background: {colour(lp)}" title="{html.escape(tip)}"')
        spans.append(f"<span{attrs}>{html.escape(text)}</span>")
    legend = "".join(
        f'<span class="key" style="background: {colour(v)}">{v:g}</span>' for v in (0, -2, -4, -6, -8, -10)
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 70em; }}
#text {{ font-family: ui-monospace, monospace; white-space: pre-wrap; line-height: 1.6; }}
.tok {{ border-radius: 2px; }} .tok:hover {{ outline: 1px solid #333; }}
.key {{ display: inline-block; padding: 0 0.6em; margin-right: 2px; font-size: 0.85em; }}
</style></head>
<body><h2>{html.escape(title)}</h2><p>{html.escape(summary)}</p>
<p>log-probability: {legend} (hover a token for the model's top alternatives)</p>
<div id="text">{''.join(spans)}</div></body></html>
"""


def run(items: List[str]) -> int:
    args, overrides = parse(items, VizArgs)
    errs = []
    if not args.run_dir:
        errs.append("run.dir is required: spmdgpt viz run.dir=<training run directory> text_file=...")
    if not args.text_file:
        errs.append("text_file is required: the text to colour by the model's log-probabilities")
    elif file_error("text_file", args.text_file):
        errs.append(file_error("text_file", args.text_file))
    if args.top_k < 1:
        errs.append(f"top_k={args.top_k} must be >= 1")
    if args.max_tokens < 2:
        errs.append(f"max_tokens={args.max_tokens} must be >= 2")
    if errs:
        raise ConfigError(errs)
    from spmdgpt.cli.runs import encode_text_file, first_tokens, model_source, source_params, start_mesh, write_output
    from spmdgpt.hf import hf_folder

    cfg, tokenizer = model_source(args.run_dir, overrides)
    d = cfg.data
    every = encode_text_file(args.text_file, tokenizer)
    tokens = first_tokens(args.text_file, every, d.seq_len, args.max_tokens)

    mesh = start_mesh(cfg)
    import jax
    import jax.numpy as jnp
    import numpy as np

    from spmdgpt.eval.evaluate import text_batcher
    from spmdgpt.mesh.sharding import Rules, to_host
    from spmdgpt.model import forward

    vocab = tokenizer.vocab_size
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        batcher, starts, first = text_batcher(tokens, d.seq_len, d.batch_size, rules.batch_sharding())
        n = len(starts) // d.batch_size
        step, params = source_params(args.run_dir, cfg, rules, args.step, fix="use the run's model config")

        @jax.jit
        def scores(params, inputs, targets):
            logp = jax.nn.log_softmax(forward(cfg.model, rules, params, inputs)[0], axis=-1)
            top_lp, top_id = jax.lax.top_k(logp[..., :vocab], args.top_k)  # never a padding id
            return jnp.take_along_axis(logp, targets[..., None], -1)[..., 0], top_lp, top_id

        logprob = np.full(len(tokens), np.nan)
        alternatives: list = [None] * len(tokens)
        for i in range(n):
            b = batcher.batch(i)
            lp, top_lp, top_id = (to_host(a) for a in scores(params, b.inputs, b.targets))
            for r in range(d.batch_size):
                row = i * d.batch_size + r
                for j in range(int(first[row]), d.seq_len):
                    pos = int(starts[row]) + j + 1  # the target's index in the text's tokens
                    logprob[pos] = lp[r, j]
                    alternatives[pos] = list(zip(top_id[r, j].tolist(), top_lp[r, j].tolist()))
    if jax.process_index() != 0:
        return EXIT_OK

    def shown(tok_id: int) -> str:
        return json.dumps(tokenizer.decode([tok_id]), ensure_ascii=False)

    pieces = [(tokenizer.decode([tokens[0]]), None, "")]
    for pos in range(1, len(tokens)):
        lp = float(logprob[pos])
        tip = f"{shown(tokens[pos])}: p={math.exp(lp):.3f} (log p {lp:.2f})\ntop {args.top_k}:\n" + "\n".join(
            f"  {shown(t)}  p={math.exp(v):.3f}" for t, v in alternatives[pos])
        pieces.append((tokenizer.decode([tokens[pos]]), lp, tip))
    loss = float(-np.mean(logprob[1:]))
    where = f"{args.run_dir}{'' if step is None else f' step {step}'}"
    cut = (f" (the text's first {len(tokens):,} of {len(every):,} tokens: max_tokens={args.max_tokens}; raise it, or "
           "use eval text_file=, to score all)") if len(tokens) < len(every) else ""
    summary = (f"{len(tokens) - 1:,} tokens scored in windows of {d.seq_len}{cut}: mean loss {loss:.4f} nats/token; "
               f"model {where}")
    out = Path(args.out) if args.out else None
    if out is None:
        if hf_folder(args.run_dir) is not None:
            raise ConfigError(["out= is required for a Hugging Face folder (run.dir=hf:...)"])
        out = Path(args.run_dir) / "viz" / f"step-{step}-{Path(args.text_file).stem}.html"
    code = write_output(out, page(f"{Path(args.text_file).name} under {where}", summary, pieces))
    if code != EXIT_OK:
        return code
    print(f"{out} | {summary}")
    return EXIT_OK
