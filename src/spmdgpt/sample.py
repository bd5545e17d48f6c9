"""`spmdgpt sample run.dir=<run> prompt="ROMEO:" ...`: text from a trained run's newest checkpoint."""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from spmdgpt.config import ConfigError


@dataclass
class SampleArgs:
    run_dir: Optional[str] = None  # run.dir=...: the training run to sample from (required)
    prompt: str = "\n"  # text to continue; "\n" in it means a newline
    prompt_file: Optional[str] = None  # one prompt per line (overrides prompt)
    num_samples: int = 1  # samples per prompt
    max_new_tokens: int = 200  # tokens to generate per sample
    temperature: float = 0.8  # 0 = greedy
    top_k: int = 0  # keep the k most likely tokens (0 = all)
    top_p: float = 1.0  # keep the most likely tokens up to this probability mass (1 = all)
    seed: int = 0  # sampling seed (each sample has its own stream)


def parse_args(items: List[str]) -> SampleArgs:
    """key=value items; values are taken literally (no YAML), so prompt="ROMEO:" stays text."""
    fields = {f.name: f for f in dataclasses.fields(SampleArgs)}
    values, errs = {}, []
    for item in items:
        key, sep, value = item.partition("=")
        key = "run_dir" if key == "run.dir" else key
        if not sep or key not in fields or key == "run_dir" and not value:
            known = ", ".join("run.dir" if k == "run_dir" else k for k in fields)
            errs.append(f"{item!r}: expected key=value with a key among {known}")
            continue
        kind = fields[key].type
        try:
            if kind in ("int",):
                values[key] = int(value)
            elif kind in ("float",):
                values[key] = float(value)
            else:
                values[key] = value
        except ValueError:
            errs.append(f"{key}={value} is not a valid {kind}")
    if errs:
        raise ConfigError(errs)
    args = SampleArgs(**values)
    args.prompt = args.prompt.replace("\\n", "\n")
    if not args.run_dir:
        errs.append("run.dir is required: spmdgpt sample run.dir=<training run directory> prompt=...")
    if args.temperature < 0:
        errs.append(f"temperature={args.temperature} must be >= 0 (0 = greedy)")
    if args.top_k < 0:
        errs.append(f"top_k={args.top_k} must be >= 0 (0 = no top-k filter)")
    if not 0 < args.top_p <= 1:
        errs.append(f"top_p={args.top_p} must be in (0, 1]")
    if args.max_new_tokens <= 0:
        errs.append(f"max_new_tokens={args.max_new_tokens} must be > 0")
    if args.num_samples <= 0:
        errs.append(f"num_samples={args.num_samples} must be > 0")
    if errs:
        raise ConfigError(errs)
    return args


def read_prompts(args: SampleArgs) -> List[str]:
    if args.prompt_file:
        path = Path(args.prompt_file)
        if not path.is_file():
            raise ConfigError([f"prompt_file={args.prompt_file}: no such file"])
        prompts = [line.replace("\\n", "\n") for line in path.read_text(encoding="utf-8").splitlines()]
        if not prompts:
            raise ConfigError([f"prompt_file={args.prompt_file} holds no prompt"])
    else:
        prompts = [args.prompt]
    if any(p == "" for p in prompts):
        raise ConfigError(["an empty prompt: give at least one character (e.g. prompt=\"\\n\")"])
    return prompts


def run_sample(items: List[str]) -> None:
    args = parse_args(items)
    prompts = read_prompts(args)
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise ConfigError([f"run.dir={run_dir}: no such directory"])
    from spmdgpt.config import load_run_config

    cfg = load_run_config(run_dir)
    tok_path = run_dir / "tokenizer.json"
    if not tok_path.is_file():
        raise ConfigError([f"run.dir={run_dir}: no tokenizer.json there"])
    from spmdgpt.data.tokenizers import tokenizer_from_json
    from spmdgpt.generate import context_error

    tokenizer = tokenizer_from_json(json.loads(tok_path.read_text()), cfg.data)
    encoded = []
    for p in prompts:
        try:
            ids = tokenizer.encode(p)
        except ValueError as e:
            raise ConfigError([f"prompt {p!r}: {e}"]) from None
        err = context_error(len(ids), args.max_new_tokens, cfg.model.max_seq_len)
        if err:  # checked here, before the checkpoint is loaded
            raise ConfigError([err])
        encoded.append(ids)

    import jax

    from spmdgpt.checkpoint import CheckpointManager
    from spmdgpt.generate import Sampler, SamplingParams
    from spmdgpt.model import init_params
    from spmdgpt.sharding import Rules, make_mesh

    cfg.mesh.data, cfg.mesh.model = 1, 1
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding)
        target = init_params(cfg.model, jax.random.key(0), rules)
        mngr = CheckpointManager.reader(run_dir)
        steps = mngr.steps()
        if not steps:
            raise ConfigError([f"run.dir={run_dir} has no checkpoint to sample from"])
        params, _, _ = mngr.restore(steps[-1], target)
        sampler = Sampler(cfg.model, rules, vocab_limit=tokenizer.vocab_size)
        batch = [ids for ids in encoded for _ in range(args.num_samples)]
        sp = SamplingParams(args.max_new_tokens, args.temperature, args.top_k, args.top_p, args.seed, tokenizer.eos_id)
        outs = sampler.generate(params, batch, sp)
    print(f"# {run_dir} step {steps[-1]}", file=sys.stderr)
    for i, (ids, new) in enumerate(zip(batch, outs, strict=True)):
        if i:
            print("-" * 40)
        print(tokenizer.decode(list(ids) + list(new)))
