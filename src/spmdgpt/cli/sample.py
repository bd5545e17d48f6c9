"""`spmdgpt sample run.dir=<run> prompt="ROMEO:" ... [step=N] [config overrides]`: text from a
trained run's newest checkpoint that loads, or step N's (or, with run.dir=hf:DIR, from a Hugging Face
folder spmdgpt imports), on the inference engine (speculate=K: K tokens drafted a step by the
model's multi-token-prediction modules),
on the run's own mesh and sharding rules (as recorded in its config.yaml) or on the ones the
overrides give (`mesh.data=1` samples on one device,
`sharding=tp mesh.data=1 mesh.model=2` on two, ...).
Rows are split over the mesh's batch axes like a training batch."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import List, Optional

from spmdgpt.cli.args import EXIT_OK, parse
from spmdgpt.cli.runs import file_error, folder_stops
from spmdgpt.config import ConfigError

DEFAULT_NEW_TOKENS = 200  # sample's max_new_tokens where it is not given (within the model's context)


@dataclass
class SampleArgs:
    run_dir: Optional[str] = None  # run.dir=...: the training run to sample from (required)
    prompt: Optional[str] = None  # text to continue; "\n" in it means a newline (default: a newline)
    prompt_file: Optional[str] = None  # one prompt per line (instead of prompt)
    num_samples: int = 1  # samples per prompt
    max_new_tokens: Optional[int] = None  # tokens to generate per sample (default: 200, or fewer where the
    # model's context leaves less room after the prompt)
    temperature: float = 0.8  # 0 = greedy
    top_k: int = 0  # keep the k most likely tokens (0 = all)
    top_p: float = 1.0  # keep the most likely tokens up to this probability mass (1 = all)
    seed: int = 0  # sampling seed (each sample has its own stream)
    step: Optional[int] = None  # the checkpoint's step (default: the newest that loads)
    speculate: int = 0  # tokens drafted a step by the model's multi-token-prediction modules (<= model.mtp_depth)


def sampling_errors(args) -> List[str]:
    """What is wrong with args' temperature, top_k, top_p and max_new_tokens (sample, chat)."""
    from spmdgpt.config.validate import sampling_errors as rule  # (one rule for every sampler)

    errs = rule(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p)
    if args.max_new_tokens is not None and args.max_new_tokens <= 0:
        errs.append(f"max_new_tokens={args.max_new_tokens} must be > 0")
    return errs


def check_args(args: SampleArgs) -> SampleArgs:
    errs = []
    if args.prompt is not None and args.prompt_file:
        errs.append("prompt= and prompt_file= both given: give one (prompt_file answers each of its lines)")
    args.prompt = "\n" if args.prompt is None else args.prompt.replace("\\n", "\n")
    if not args.run_dir:
        errs.append("run.dir is required: spmdgpt sample run.dir=<training run directory> prompt=...")
    errs += sampling_errors(args)
    if args.num_samples <= 0:
        errs.append(f"num_samples={args.num_samples} must be > 0")
    if errs:
        raise ConfigError(errs)
    return args


def read_prompts(args: SampleArgs) -> List[str]:
    if args.prompt_file:
        if file_error("prompt_file", args.prompt_file):
            raise ConfigError([file_error("prompt_file", args.prompt_file)])
        from spmdgpt.cli.runs import read_text

        prompts = [line.replace("\\n", "\n") for line in read_text(args.prompt_file, "prompt_file").splitlines()]
        if not prompts:
            raise ConfigError([f"prompt_file={args.prompt_file} holds no prompt"])
    else:
        prompts = [args.prompt]
    if any(p == "" for p in prompts):
        raise ConfigError(["an empty prompt: give at least one character (e.g. prompt=\"\\n\")"])
    return prompts


def run(items: List[str]) -> int:
    args, overrides = parse(items, SampleArgs)
    args = check_args(args)
    prompts = read_prompts(args)
    from spmdgpt.cli.runs import model_source, source_params, start_mesh
    from spmdgpt.engine.generate import context_error

    cfg, tokenizer = model_source(args.run_dir, overrides)
    from spmdgpt.engine.scheduler import speculate_error

    encoded = []
    if err := speculate_error(cfg.model, args.speculate):
        raise ConfigError([err])
    for p in prompts:
        try:
            ids = tokenizer.encode(p)
        except ValueError as e:
            raise ConfigError([f"prompt {p!r}: {e}"]) from None
        room = cfg.model.max_seq_len - len(ids)  # (unset max_new_tokens: the default, within the context)
        if args.max_new_tokens is None and room < 1:
            raise ConfigError([f"prompt of {len(ids)} tokens fills the model's context of {cfg.model.max_seq_len} "
                               "tokens; shorten it"])
        n = min(DEFAULT_NEW_TOKENS, room) if args.max_new_tokens is None else args.max_new_tokens
        err = context_error(len(ids), n, cfg.model.max_seq_len)
        if err:  # checked here, before the checkpoint is loaded
            raise ConfigError([err])
        encoded.append((ids, n))

    # (the training data section, batch size and all, does not apply to sampling)
    mesh = start_mesh(cfg, data_errors=False)
    import jax

    from spmdgpt.engine import Engine, EngineConfig, Request
    from spmdgpt.engine.scheduler import fitting_page_size
    from spmdgpt.mesh.sharding import Rules

    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        step, params = source_params(args.run_dir, cfg, rules, args.step, fix="sample with the run's model config")
        rows = [row for row in encoded for _ in range(args.num_samples)]  # ((ids, max_new_tokens) per sample)
        batch = [ids for ids, _ in rows]
        stop = getattr(tokenizer, "stop_id", tokenizer.eos_id)  # (a chat model's reply ends its turn; hf:DIR:
        stops = tuple(dict.fromkeys([*([] if stop is None else [stop]), *folder_stops(args.run_dir)]))  # its eos ids)
        d = rules.batch_divisor()
        slots = min(-(-len(batch) // d) * d, max(64, d))
        config = EngineConfig(slots=slots, page_size=fitting_page_size(cfg.model), speculate=args.speculate)
        engine = Engine(cfg.model, rules, params, tokenizer.vocab_size, config)
        # (sample i: stream i of the seed)
        requests = [Request(list(ids), n, args.temperature, args.top_k, args.top_p, args.seed, i,
                            stop_ids=stops) for i, (ids, n) in enumerate(rows)]
        outs = [r.tokens for r in engine.run(requests)]
    if jax.process_index() != 0:
        return EXIT_OK
    print(f"# {args.run_dir}{'' if step is None else f' step {step}'} | mesh {dict(mesh.shape)} "
          f"sharding {cfg.sharding.name}", file=sys.stderr)
    for i, (ids, new) in enumerate(zip(batch, outs, strict=True)):
        if i:
            print("-" * 40)
        print(tokenizer.decode(list(ids) + list(new)))
    return EXIT_OK
