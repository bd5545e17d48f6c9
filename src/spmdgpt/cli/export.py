"""`spmdgpt export run.dir=<run> out=<folder> [format=hf|web] [step=N] [dtype=float32] [overwrite=true]
[hf_class=NAME]`:

- format=hf (the default): a training run's checkpoint as a Hugging Face `transformers` model
  folder (config.json, generation_config.json, model.safetensors or shards with an index, the
  tokenizer; and spmdgpt.json: the run, step and training window it came from), which
  `AutoModelForCausalLM.from_pretrained(out)` and
  `AutoTokenizer.from_pretrained(out)` load with no custom code. The mapping and its facts:
  `spmdgpt.hf`. Where two classes compute the same model (a Gated DeltaNet hybrid with experts:
  Qwen3.5-MoE, or Qwen3-Next), hf_class=NAME picks one.
- format=web: a static web page that runs the model in the browser with jax-js
  (`spmdgpt.web`); serve the folder with any static file server.

The folder is written beside `out` under a temporary name and renamed into place when complete,
so `out` is never half-written; an existing non-empty `out` is refused unless overwrite=true.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from spmdgpt.cli.args import EXIT_OK, EXIT_WRITE_FAILED, parse
from spmdgpt.config import ConfigError

FORMATS = ("hf", "web")
PROVENANCE = "spmdgpt.json"  # an exported folder's source run, step and training window (data.seq_len)


@dataclass
class ExportArgs:
    run_dir: Optional[str] = None  # run.dir=...: the training run to export (required)
    out: Optional[str] = None  # the folder to write (required)
    step: Optional[int] = None  # the checkpoint's step (default: the newest)
    format: str = "hf"  # hf: a transformers model folder; web: a static page running the model (jax-js)
    dtype: str = "float32"  # float32 | bfloat16 | float16 (web: float32 | float16): the weights' dtype
    overwrite: bool = False  # replace a non-empty `out`
    shard_mb: float = 5000.0  # largest safetensors file; larger models get several and an index
    hf_class: Optional[str] = None  # format=hf: the transformers class to write where several compute the model
    # (a hybrid with experts: Qwen3_5MoeForCausalLM unless this says Qwen3NextForCausalLM); unset: the tables' choice


def check_args(args: ExportArgs) -> ExportArgs:
    from spmdgpt import hf, web

    errs = []
    if not args.run_dir:
        errs.append("run.dir is required: spmdgpt export run.dir=<training run directory> out=<folder>")
    elif not Path(args.run_dir).is_dir():
        errs.append(f"run.dir={args.run_dir}: no such directory")
    if not args.out:
        errs.append("out is required: the folder to write the exported model into")
    if args.format not in FORMATS:
        errs.append(f"format={args.format}: choose one of {', '.join(FORMATS)}")
    dtypes = web.DTYPES if args.format == "web" else hf.DTYPES
    if args.dtype not in dtypes:
        errs.append(f"dtype={args.dtype}: choose one of {', '.join(dtypes)}"
                    + (" (jax-js has no bfloat16)" if args.format == "web" else ""))
    if args.shard_mb <= 0:
        errs.append(f"shard_mb={args.shard_mb} must be > 0")
    names = [a.name for a in hf.ARCHITECTURES]
    if args.hf_class is not None and (args.format != "hf" or args.hf_class not in names):
        errs.append(f"hf_class={args.hf_class}: " + (f"choose one of {', '.join(names)}" if args.format == "hf" else
                                                     "only with format=hf"))
    if args.out and not errs:
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            errs.append(f"out={out} is a file; give a folder")
        elif out.is_dir() and any(out.iterdir()) and not args.overwrite:
            errs.append(f"out={out} is not empty; choose another folder or pass overwrite=true to replace it")
    if errs:
        raise ConfigError(errs)
    return args


def run(items: List[str]) -> int:
    args, overrides = parse(items, ExportArgs)
    args = check_args(args)
    run_dir, out = Path(args.run_dir), Path(args.out)
    from spmdgpt.cli.runs import run_tokenizer
    from spmdgpt.config import DistConfig, apply_overrides, load_run_config, mesh_axes
    from spmdgpt.hf import architecture, cast, hf_config, to_hf, tokenizer_files, total_bytes, write_folder
    from spmdgpt.plan.plan import size
    from spmdgpt.run.files import WriteFailed, os_reason

    cfg = load_run_config(run_dir)
    cfg.dist = DistConfig()
    cfg = apply_overrides(cfg, overrides)
    cfg.mesh = type(cfg.mesh)(**{a: 1 for a in mesh_axes(cfg.mesh)})  # exported from one device, whatever the run used
    web = args.format == "web"
    arch = "a web page (jax-js)" if web else architecture(cfg.model, args.hf_class).name  # before anything is loaded
    if args.hf_class not in (None, arch):  # (a class asked for that cannot hold this model: why, in its words)
        from spmdgpt.hf.convert import _unfit
        from spmdgpt.hf.tables import ARCHITECTURES

        table = next(a for a in ARCHITECTURES if a.name == args.hf_class)
        why = _unfit(table, cfg.model) if (table.norm, table.mlp) == (cfg.model.norm, cfg.model.mlp) else [
            f"its norm and MLP are model.norm={table.norm.value}, model.mlp={table.mlp.value}"]
        raise ConfigError([f"hf_class={args.hf_class} cannot hold this model ({why[0]}); {arch} can: leave "
                           "hf_class unset"])
    tokenizer = run_tokenizer(run_dir, cfg)
    if web:  # a model or tokenizer the page cannot run: refused before anything is loaded
        from spmdgpt.web import check_supported, tokenizer_spec

        check_supported(cfg.model)
        tokenizer_spec(tokenizer)
    else:
        files = tokenizer_files(tokenizer, cfg.model.max_seq_len)
        config = hf_config(cfg.model, tokenizer.eos_id, name=args.hf_class)
        config["torch_dtype"] = config["dtype"] = args.dtype
        generation = {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}
        stop = getattr(tokenizer, "stop_id", tokenizer.eos_id)  # (a chat model's reply ends its turn there)
        if stop not in (None, tokenizer.eos_id):
            generation["eos_token_id"] = [i for i in (tokenizer.eos_id, stop) if i is not None]
        if cfg.model.vocab_size > tokenizer.vocab_size:  # the padding ids, never sampled (`spmdgpt sample` draws
            generation["suppress_tokens"] = list(range(tokenizer.vocab_size, cfg.model.vocab_size))  # from the rest)
        files = {"config.json": json.dumps(config, indent=2),
                 "generation_config.json": json.dumps(generation, indent=2), **files}

    import jax
    import numpy as np

    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.training.state import load_params

    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        step, params = load_params(run_dir, cfg.model, Rules(mesh, cfg.sharding, cfg.model), args.step,
                                   fix="export with the run's model config")
        params = jax.tree.map(np.asarray, jax.device_get(params))
    if web:
        from spmdgpt.web import web_tensors, write_web_folder

        tensors = web_tensors(cfg.model, params, args.dtype)
    else:
        tensors = cast(to_hf(cfg.model, params, args.hf_class), args.dtype)
        # what the folder does not say otherwise: the run's window (eval run.dir=hf:DIR scores with it)
        files[PROVENANCE] = json.dumps({"run_dir": str(run_dir), "step": step, "seq_len": cfg.data.seq_len}, indent=2)

    # Written beside `out` under a temporary name, then renamed: never a half-written `out`.
    out = out.resolve()
    tmp = out.parent / f".{out.name}.export-tmp-{os.getpid()}"
    old = out.parent / f".{out.name}.export-old-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        if web:
            write_web_folder(tmp, cfg.model, tensors, tokenizer, args.dtype)
        else:
            write_folder(tmp, tensors, files, int(args.shard_mb * 1e6))
        if out.exists():
            out.rename(old)
        tmp.rename(out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not out.exists():
            old.rename(out)  # the folder that was there stays as it was
        print(f"spmdgpt: error: {WriteFailed(f'writing {out} failed ({os_reason(e)})')}; nothing was "
              "written there; free space (or fix the filesystem) and run the export again", file=sys.stderr)
        return EXIT_WRITE_FAILED
    shutil.rmtree(old, ignore_errors=True)
    print(f"exported {run_dir} step {step} as {arch} ({args.dtype}, {size(total_bytes(tensors))}) -> {out}")
    return EXIT_OK
