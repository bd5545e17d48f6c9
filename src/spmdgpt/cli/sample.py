"""`spmdgpt sample run.dir=<run> prompt="ROMEO:" ... [config overrides]`: text from a trained
run's newest checkpoint (or, with run.dir=hf:DIR, from a Hugging Face Llama / GPT-NeoX folder), on the run's own mesh and sharding rules (as recorded in its
config.yaml) or on the ones the overrides give (`mesh.data=1` samples on one device,
`sharding=tp mesh.data=1 mesh.model=2` on two, ...).
Rows are split over the mesh's batch axes like a training batch."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from spmdgpt.cli.args import EXIT_OK, parse
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


def check_args(args: SampleArgs) -> SampleArgs:
    errs = []
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


def run_model(run_dir: Path, overrides: List[str]):
    """(config, tokenizer) of a training run: its config.yaml with the overrides on top."""
    from spmdgpt.config import DistConfig, apply_overrides, load_run_config
    from spmdgpt.data import tokenizer_from_json

    if not run_dir.is_dir():
        raise ConfigError([f"run.dir={run_dir}: no such directory"])
    cfg = load_run_config(run_dir)
    cfg.dist = DistConfig()  # the training run's coordinator is long gone: dist.* only if given
    cfg = apply_overrides(cfg, overrides)
    tok_path = run_dir / "tokenizer.json"
    if not tok_path.is_file():
        raise ConfigError([f"run.dir={run_dir}: no tokenizer.json there"])
    return cfg, tokenizer_from_json(json.loads(tok_path.read_text()), cfg.data)


def hf_model(spec: str, overrides: List[str]):
    """(config, tokenizer) of a Hugging Face model folder (run.dir=hf:DIR): the default config
    with the overrides, the model fields from DIR's config.json (its context length included),
    DIR's tokenizer.json."""
    from spmdgpt.config import load_config
    from spmdgpt.data.tokenizers import HFTokenizer
    from spmdgpt.hf import hf_folder, read_hf_config, with_hf_model

    folder = hf_folder(spec)
    cfg = load_config([*overrides, f"checkpoint.init_from={spec}"])
    cfg, _ = with_hf_model(cfg)
    cfg.model.max_seq_len = int(read_hf_config(folder, f"run.dir={spec}").get("max_position_embeddings",
                                                                           cfg.model.max_seq_len))
    if not (folder / "tokenizer.json").is_file():
        raise ConfigError([f"run.dir={spec}: no tokenizer.json there (spmdgpt reads a fast tokenizer's "
                           "tokenizer.json)"])
    # (no end-of-text token: generation runs to max_new_tokens)
    return cfg, HFTokenizer.from_file(folder / "tokenizer.json", f"run.dir={spec}: tokenizer.json", eos_required=False)


def run(items: List[str]) -> int:
    args, overrides = parse(items, SampleArgs)
    args = check_args(args)
    prompts = read_prompts(args)
    from spmdgpt.config import validate
    from spmdgpt.distributed import initialize
    from spmdgpt.generate import context_error
    from spmdgpt.hf import hf_folder
    from spmdgpt.runtime import set_default_xla_flags

    folder = hf_folder(args.run_dir)
    cfg, tokenizer = (hf_model(args.run_dir, overrides) if folder is not None
                      else run_model(Path(args.run_dir), overrides))
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

    set_default_xla_flags(cfg.train.deterministic)  # before JAX creates its backend
    initialize(cfg.dist)
    import jax

    from spmdgpt.generate import Sampler, SamplingParams
    from spmdgpt.sharding import Rules, make_mesh
    from spmdgpt.state import load_params

    # A mesh smaller than the machine (mesh.data=1: one device) takes the first devices.
    devices = jax.devices()
    size = cfg.mesh.data * cfg.mesh.model if min(cfg.mesh.data, cfg.mesh.model) > 0 else len(devices)
    if jax.process_count() == 1 and size < len(devices):
        devices = devices[:size]
    # The training data section (batch size, ...) does not apply to sampling.
    errs = [e for e in validate(cfg, len(devices), training=False) if not e.startswith("data.")]
    if errs:
        raise ConfigError(errs)
    mesh = make_mesh(cfg.mesh, devices)
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding)
        if folder is not None:
            from spmdgpt.hf import load_params as load_hf_params

            step, params = None, load_hf_params(cfg.model, folder, rules, f"run.dir={args.run_dir}")
        else:
            step, params = load_params(Path(args.run_dir), cfg.model, rules,
                                       fix="sample with the run's model config")
        sampler = Sampler(cfg.model, rules, vocab_limit=tokenizer.vocab_size)
        batch = [ids for ids in encoded for _ in range(args.num_samples)]
        sp = SamplingParams(args.max_new_tokens, args.temperature, args.top_k, args.top_p, args.seed, tokenizer.eos_id)
        outs = sampler.generate(params, batch, sp)
    if jax.process_index() != 0:
        return EXIT_OK
    print(f"# {args.run_dir}{'' if step is None else f' step {step}'} | mesh {dict(mesh.shape)} sharding {cfg.sharding.name}",
          file=sys.stderr)
    for i, (ids, new) in enumerate(zip(batch, outs, strict=True)):
        if i:
            print("-" * 40)
        print(tokenizer.decode(list(ids) + list(new)))
    return EXIT_OK
