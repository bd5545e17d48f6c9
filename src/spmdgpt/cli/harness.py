"""`spmdgpt lm-eval run.dir=<run>|hf:DIR tasks=A,B [include_path=DIR] [limit=N] [num_fewshot=K]
[batch_size=8] [step=N] [log_samples=true] [out=F.json] [overrides]`: EleutherAI's
lm-evaluation-harness on the model, through spmdgpt's own forward pass and sampler
(`spmdgpt.eval.harness.SpmdgptLM`), on any mesh of this process's devices.

Prints lm-eval's table and writes its results JSON (default run.dir/lm-eval/step-<N>.json; for
hf:DIR only with out=...), with log_samples=true every document's requests and answers beside it
(<out stem>.samples.jsonl). Tasks: lm-eval's registry (their data come from the Hugging Face
Hub: a network, or the datasets cache), the tasks shipped in spmdgpt/tasks (offline:
shakespeare_next_line, shakespeare_ppl, shakespeare_speaker, tag `shakespeare`), and the YAMLs
under include_path (a local task over local jsonl works offline)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from spmdgpt.cli.args import EXIT_OK, EXIT_WRITE_FAILED, parse
from spmdgpt.config import ConfigError

TASKS_DIR = Path(__file__).resolve().parent.parent / "tasks"  # the tasks shipped with spmdgpt


@dataclass
class LmEvalArgs:
    run_dir: Optional[str] = None  # run.dir=...: a training run, or hf:DIR (required)
    tasks: Optional[str] = None  # comma-separated task, group or tag names (required)
    include_path: Optional[str] = None  # a folder of task YAMLs of your own
    limit: Optional[float] = None  # documents per task: N, or a fraction below 1 (default: all)
    num_fewshot: Optional[int] = None  # examples in each prompt (default: the task's)
    batch_size: int = 8  # rows per forward pass (rounded up to a multiple of the data-parallel size)
    max_gen_toks: int = 256  # generated tokens at most, where a task does not say
    seed: int = 0  # lm-eval's random, numpy and few-shot seeds
    bootstrap_iters: int = 100000  # resamples for the standard errors of non-mean metrics (0 = none; lm-eval's default)
    step: Optional[int] = None  # the checkpoint's step (default: the newest that loads)
    log_samples: bool = False  # also write every document's requests and answers (.samples.jsonl)
    out: Optional[str] = None  # the results JSON (default: run.dir/lm-eval/step-<N>.json)


def check_args(args: LmEvalArgs) -> LmEvalArgs:
    from spmdgpt.hf import hf_folder

    errs = []
    if not args.run_dir:
        errs.append("run.dir is required: spmdgpt lm-eval run.dir=<run or hf:DIR> tasks=<names>")
    elif hf_folder(args.run_dir) is None and not Path(args.run_dir).is_dir():
        errs.append(f"run.dir={args.run_dir}: no such directory")
    if not args.tasks or not [t for t in args.tasks.split(",") if t.strip()]:
        errs.append("tasks is required: e.g. tasks=shakespeare (the tasks shipped with spmdgpt, offline) or "
                    "tasks=hellaswag,arc_easy (lm-eval's, data from the Hugging Face Hub)")
    if args.include_path and not Path(args.include_path).is_dir():
        errs.append(f"include_path={args.include_path}: no such folder")
    if args.limit is not None and not args.limit > 0:
        errs.append(f"limit={args.limit:g} must be > 0 (N documents per task, or a fraction below 1)")
    if args.num_fewshot is not None and args.num_fewshot < 0:
        errs.append(f"num_fewshot={args.num_fewshot} must be >= 0")
    if args.bootstrap_iters < 0:
        errs.append(f"bootstrap_iters={args.bootstrap_iters} must be >= 0 (0 = no standard errors)")
    for name in ("batch_size", "max_gen_toks"):
        if getattr(args, name) < 1:
            errs.append(f"{name}={getattr(args, name)} must be >= 1")
    if errs:
        raise ConfigError(errs)
    return args


def task_manager(include_path: Optional[str], names: List[str]):
    """lm-eval's TaskManager over spmdgpt's tasks and include_path, and over lm-eval's registry
    too unless they hold every name (indexing the registry's thousands of YAMLs takes seconds);
    ConfigError for a name none of them holds."""
    try:
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise ConfigError(["spmdgpt lm-eval needs lm-evaluation-harness: pip install 'spmdgpt[eval]' "
                           "(or pip install lm_eval==0.4.13)"]) from None
    paths = [str(TASKS_DIR)] + ([str(Path(include_path).resolve())] if include_path else [])
    manager = TaskManager(include_path=paths, include_defaults=False)
    if any(t not in manager.all_tasks for t in names):
        manager = TaskManager(include_path=paths)
    unknown = [t for t in names if t not in manager.all_tasks]
    if unknown:
        shipped = sorted(p.stem for p in TASKS_DIR.glob("*.yaml"))
        raise ConfigError([f"tasks: {', '.join(unknown)} not found in lm-eval's registry, spmdgpt's tasks "
                           f"({', '.join(shipped)}; tag shakespeare) or include_path; check the names "
                           "(lm-eval ls tasks lists the registry)"])
    return manager


def bos_id(spec: str, tokenizer) -> Optional[int]:
    """The beginning-of-text id lm-eval's Hugging Face backend prefixes an empty context with
    (and the first rolling window): hf:DIR's tokenizer_config.json bos_token, or the bos_token of
    a run's chat template (what its export writes); else None, the end-of-text id (an export's
    bos_token otherwise)."""
    from spmdgpt.hf import hf_folder

    folder = hf_folder(spec)
    if folder is None:
        bos = getattr(getattr(tokenizer, "template", None), "variables", {}).get("bos_token")
    else:
        try:
            bos = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("bos_token")
        except (OSError, ValueError):
            return None
    bos = bos.get("content") if isinstance(bos, dict) else bos
    ids = tokenizer.encode(bos) if isinstance(bos, str) else []
    return ids[0] if len(ids) == 1 else None


def run(items: List[str]) -> int:
    args, overrides = parse(items, LmEvalArgs)
    args = check_args(args)
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    manager = task_manager(args.include_path, names)
    from spmdgpt.cli.runs import model_source, one_process_mesh, source_params, write_output
    from spmdgpt.hf import hf_folder

    cfg, tokenizer = model_source(args.run_dir, overrides)
    if tokenizer.eos_id is None:
        raise ConfigError([f"run.dir={args.run_dir}: its tokenizer has no end-of-text token, which lm-eval "
                           "needs (an empty context's prefix, the end of a generation)"])
    mesh = one_process_mesh(cfg, "lm-eval runs in one process")
    import jax
    import lm_eval
    from lm_eval.utils import handle_non_serializable, make_table

    from spmdgpt.eval.harness import SpmdgptLM
    from spmdgpt.mesh.sharding import Rules

    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        step, params = source_params(args.run_dir, cfg, rules, args.step, fix="evaluate with the run's model config")
        lm = SpmdgptLM(cfg.model, rules, params, tokenizer, args.batch_size, bos_id(args.run_dir, tokenizer),
                       args.max_gen_toks)
        limit = int(args.limit) if args.limit is not None and args.limit >= 1 else args.limit
        results = lm_eval.simple_evaluate(
            model=lm, tasks=names, num_fewshot=args.num_fewshot, limit=limit, task_manager=manager,
            log_samples=args.log_samples, random_seed=args.seed, numpy_random_seed=args.seed,
            torch_random_seed=args.seed, fewshot_random_seed=args.seed, bootstrap_iters=args.bootstrap_iters)
    samples = results.pop("samples", None)
    print(f"# {args.run_dir}{'' if step is None else f' step {step}'} | mesh {dict(mesh.shape)} sharding "
          f"{cfg.sharding.name} | batch {lm.batch}", file=sys.stderr)
    print(make_table(results))
    if "groups" in results:
        print(make_table(results, "groups"))
    out = Path(args.out) if args.out else None
    if out is None and hf_folder(args.run_dir) is None:
        out = Path(args.run_dir) / "lm-eval" / f"step-{step}.json"
    if out is None:
        print("(give out=FILE.json to keep the results)", file=sys.stderr)
        return EXIT_OK
    results["spmdgpt"] = {"run_dir": args.run_dir, "step": step}
    if write_output(out, json.dumps(results, indent=2, default=handle_non_serializable) + "\n") != EXIT_OK:
        return EXIT_WRITE_FAILED
    print(f"-> {out}", file=sys.stderr)
    if samples is not None:
        lines = [json.dumps({"task": task, **doc}, default=handle_non_serializable)
                 for task, docs in samples.items() for doc in docs]
        sample_file = out.with_suffix(".samples.jsonl")
        if write_output(sample_file, "\n".join(lines) + "\n") != EXIT_OK:
            return EXIT_WRITE_FAILED
        print(f"-> {sample_file}", file=sys.stderr)
    return EXIT_OK
