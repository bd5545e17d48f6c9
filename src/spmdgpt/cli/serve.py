"""`spmdgpt serve run.dir=<run> | hf:DIR [host=127.0.0.1] [port=8000] [max_queue=64] [step=N]
[max_tokens=16] [slots=8] [page_size=16] [pages=0] [chunk=64] [speculate=0] [decode_attention=auto]
[buckets=4] [adapters=NAME:RUN,...] [config overrides]`: the model (and LoRA runs of it, by name)
behind an OpenAI-compatible HTTP API (spmdgpt.engine.server: /v1/completions, /v1/chat/completions,
/v1/models, /health) on the inference engine (slots, pages, chunk size and drafts its arguments), on the
run's own mesh (or the one the overrides give), until SIGTERM or Ctrl-C (exit 0; 1 if the engine
had failed meanwhile). Reads the run directory, writes nothing."""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from spmdgpt.cli.args import EXIT_OK, parse
from spmdgpt.config import ConfigError

DECODE_ATTENTION = ("auto", "gather", "kernel")  # `engine.scheduler.decode_kernel`'s choices


@dataclass
class ServeArgs:
    run_dir: Optional[str] = None  # run.dir=...: the training run (or hf:DIR) to serve (required)
    host: str = "127.0.0.1"  # the address to listen on (0.0.0.0: every interface)
    port: int = 8000  # the TCP port
    max_queue: int = 64  # sequences that may wait for a slot of the engine; more are answered 429
    max_tokens: int = 16  # a completions request's max_tokens when it gives none (OpenAI's default; a chat
    # request's is what the context leaves, as the chat API's)
    step: Optional[int] = None  # the checkpoint's step (default: the newest that loads)
    slots: int = 8  # the engine's sequences at once (a multiple of the mesh's batch ways)
    page_size: int = 16  # tokens a KV page holds
    pages: int = 0  # pages in the pool (0: every slot at the model's full context)
    chunk: int = 64  # prompt tokens a prefill row reads a step
    speculate: int = 0  # tokens drafted a step by the model's multi-token-prediction modules (<= model.mtp_depth)
    decode_attention: str = "auto"  # auto | gather | kernel: decode rows by the platform's paged-attention kernel
    buckets: int = 4  # sizes of the engine's step: page tables only as wide as its rows need (the context's
    #   pages, 1/2, 1/4, 1/8 of them) and, decoding alone, only as many rows (slots, 1/2, ...); 1: always whole
    adapters: Optional[str] = None  # NAME:RUN,...: LoRA runs of run.dir served beside it, a request's `model` choosing


def check_args(args: ServeArgs) -> ServeArgs:
    errs = []
    if not args.run_dir:
        errs.append("run.dir is required: spmdgpt serve run.dir=<training run directory or hf:DIR>")
    if not 0 < args.port < 65536:
        errs.append(f"port={args.port} must be in [1, 65535]")
    if args.max_queue < 1:
        errs.append(f"max_queue={args.max_queue} must be >= 1")
    if args.max_tokens < 1:
        errs.append(f"max_tokens={args.max_tokens} must be >= 1")
    for name in ("slots", "page_size", "chunk", "buckets"):
        if getattr(args, name) < 1:
            errs.append(f"{name}={getattr(args, name)} must be >= 1")
    if args.pages < 0 or args.pages == 1:
        errs.append(f"pages={args.pages} must be 0 (enough for every slot) or >= 2 (page 0 is the null page)")
    if args.decode_attention not in DECODE_ATTENTION:
        errs.append(f"decode_attention={args.decode_attention}: one of {', '.join(DECODE_ATTENTION)}")
    if not errs:  # (the address checked before the model loads: a port in use is one line, not a traceback)
        import socket

        try:
            with socket.create_server((args.host, args.port)):
                pass
        except OSError as e:
            errs.append(f"host={args.host} port={args.port}: cannot listen there ({e.strerror or e}); choose another "
                        "port= (or host=)")
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        errs.append("spmdgpt serve needs starlette and uvicorn: pip install 'spmdgpt[serve]'")
    if errs:
        raise ConfigError(errs)
    return args


def grammar_masks(args) -> bool:
    """Whether the engine's step takes a token mask per row (structured outputs: `engine.grammar`):
    with llguidance installed (the serve extra) and no speculative decoding."""
    import importlib.util

    return args.speculate == 0 and importlib.util.find_spec("llguidance") is not None


def adjustments(args, model) -> int:
    """The logits a sequence may adjust a step (logit_bias, penalties: `EngineConfig.adjustments`):
    300 logit_bias entries and, with penalties, one per distinct token of a whole context (at most
    the vocabulary); none under speculative decoding."""
    return 0 if args.speculate else 300 + min(model.vocab_size, model.max_seq_len)


def engine_config(args, model):
    """The EngineConfig of serve's arguments (also what `plan ... serve=true` compiles)."""
    from spmdgpt.engine import EngineConfig

    return EngineConfig(slots=args.slots, page_size=args.page_size, pages=args.pages, chunk=args.chunk,
                        speculate=args.speculate, decode_attention=args.decode_attention, grammar=grammar_masks(args),
                        adjustments=adjustments(args, model), buckets=args.buckets)


def served_name(run_dir: str) -> str:
    """The name a request's `model` gives the served model: its run directory's (hf:DIR: the folder's, as given)."""
    from spmdgpt.hf import hf_folder

    folder = hf_folder(run_dir)
    return folder.name if folder is not None else Path(run_dir).resolve().name


# of the fields export leaves out (`hf.tables.TRAINING_ONLY`), those that change what an unexported model
# computes: μP's multipliers (export folds them into the weights) and the MTP modules
COMPUTED = ("parametrization", "base_width", "base_depth", "base_head_dim", "depth_alpha", "mtp_depth")


def model_changes(theirs, ours) -> list:
    """`model.<field>=<theirs> (<ours>)` for each field of a model config that changes what the model
    computes (all but how it is computed, stored or trained, and its context), where `theirs` and
    `ours` differ."""
    import dataclasses

    from spmdgpt.hf.tables import TRAINING_ONLY

    same = {f for f in TRAINING_ONLY if f not in COMPUTED} | {"max_seq_len"}

    def flat(m, prefix=""):
        out = {}
        for f in dataclasses.fields(m):
            v = getattr(m, f.name)
            out.update(flat(v, f"{prefix}{f.name}.") if dataclasses.is_dataclass(v) else {prefix + f.name: v})
        return out

    a, b = flat(theirs), flat(ours)
    return [f"model.{k}={getattr(a[k], 'value', a[k])} ({getattr(b[k], 'value', b[k])})" for k in a
            if k not in same and a[k] != b.get(k)]


def adapter_runs(args: ServeArgs, cfg) -> list:
    """[(name, LoRA run directory)] of adapters=NAME:RUN,...: each a LoRA run (lora.rank > 0) whose
    checkpoint.init_from is run.dir itself, names unique and not the base's; ConfigError lines
    otherwise."""
    if args.adapters is None:
        return []
    import re

    from spmdgpt.config import load_run_config
    from spmdgpt.hf import hf_folder
    from spmdgpt.model.lora import serving_error

    base = hf_folder(args.run_dir) or Path(args.run_dir)
    base_name = served_name(args.run_dir)
    out, errs = [], []
    for item in args.adapters.split(","):
        name, sep, where = item.partition(":")
        if not sep or not where or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            errs.append(f"adapters={args.adapters}: {item!r} is not NAME:RUN (a name of letters, digits, '.', '_', "
                        "'-', then a LoRA run's directory), e.g. adapters=poet:runs/lora-poet")
            continue
        if name == base_name or name in (n for n, _ in out):
            errs.append(f"adapters: the name {name!r} is taken (by {'the base' if name == base_name else 'another'}"
                        "); give each adapter its own name")
            continue
        run = Path(where)
        if not (run / "config.yaml").is_file():
            errs.append(f"adapters: {name}:{where} is not a training run (no config.yaml there)")
            continue
        try:
            saved = load_run_config(run)
        except ConfigError as e:
            errs.append(f"adapters: {name}:{where}: {e.messages[0] if e.messages else e}")
            continue
        src = saved.checkpoint.init_from or ""
        trained_on = hf_folder(src) or Path(src).expanduser()
        if saved.lora.rank <= 0:
            errs.append(f"adapters: {name}:{where} is not a LoRA run (lora.rank=0): serve it with run.dir={where}")
        elif not src or trained_on.resolve() != base.resolve():
            errs.append(f"adapters: {name}:{where} trained its adapters on checkpoint.init_from={src or '(none)'}, not "
                        f"on run.dir={args.run_dir}; serve it with run.dir={src or where}")
        else:
            changed = model_changes(saved.model, cfg.model)
            if changed:
                errs.append(f"adapters: {name}:{where} trained with {', '.join(changed[:3])} (run.dir's in parentheses)"
                            ": its adapters fit another model; serve it alone with run.dir=")
            else:
                out.append((name, run))
    if not errs and out:
        for bad, what in ((args.speculate > 0, f"speculate={args.speculate}"),
                          (cfg.mesh.stage > 1, f"mesh.stage={cfg.mesh.stage} (pipeline stages)")):
            if bad:
                errs.append(f"adapters= does not work with {what}; leave it out")
        err = serving_error(cfg.model)
        if err:
            errs.append(f"adapters: {err}")
    if errs:
        raise ConfigError(errs)
    return out


def adapter_tokenizer(args: ServeArgs, named: list, cfg, tokenizer):
    """The tokenizer of a server with adapters: run.dir's, which each adapter run's tokenizer.json
    must equal; or, where run.dir's has no chat template and the adapters share one file (LoRA
    fine-tunes of a base on chat data), theirs, for all. ConfigError otherwise."""
    from spmdgpt.cli.runs import run_tokenizer
    from spmdgpt.hf import hf_folder

    if not named or hf_folder(args.run_dir) is not None:
        return tokenizer
    read = lambda run: (run / "tokenizer.json").read_bytes() if (run / "tokenizer.json").is_file() else None  # noqa: E731
    base, theirs = read(Path(args.run_dir)), {name: read(run) for name, run in named}
    if all(t == base for t in theirs.values()):
        return tokenizer
    if len(set(theirs.values())) == 1 and None not in theirs.values() and not hasattr(tokenizer, "prompt"):
        return run_tokenizer(named[0][1], cfg)
    odd = next(name for name, t in theirs.items() if t != base)
    raise ConfigError([f"adapters: {odd}'s tokenizer.json differs from run.dir={args.run_dir}'s and from the other "
                       "adapters'; serve adapters of different tokenizers from separate servers"])


def with_adapters(params, named: list, cfg, rules, mesh):
    """params with the LoRA adapters of the runs `named` [(name, dir)] stacked in (`lora.stack`, each
    run's newest checkpoint; the adapters replicated on the mesh); params unchanged without any."""
    if not named:
        return params
    import dataclasses

    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    from spmdgpt.config import load_run_config
    from spmdgpt.model import lora, param_info
    from spmdgpt.training.state import load_params

    runs = []
    for name, run in named:
        try:
            _, adapters = load_params(run, cfg.model, rules, fix=f"adapters: {name} is a LoRA run of another model",
                                      adapters=True)
        except ConfigError as e:  # (its checkpoints missing or damaged: named as the adapter's)
            raise ConfigError([f"adapters: {name}: {m}" for m in e.messages]) from None
        runs.append((load_run_config(run).lora, jax.device_get(adapters)))
    stacked, _ = lora.stack(param_info(cfg.model), params, runs)
    replicated = NamedSharding(mesh, PartitionSpec())
    return jax.tree.map(lambda x: dataclasses.replace(x, a=jax.device_put(x.a, replicated),
                                                      b=jax.device_put(x.b, replicated))
                        if lora.is_stacked(x) else x, stacked, is_leaf=lora.is_stacked)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def run(items: List[str]) -> int:
    args, overrides = parse(items, ServeArgs)
    args = check_args(args)
    from spmdgpt.cli.chat import with_folder_template
    from spmdgpt.cli.runs import folder_stops, model_source, one_process_mesh, source_params

    cfg, tokenizer = model_source(args.run_dir, overrides)
    tokenizer = with_folder_template(args.run_dir, tokenizer)  # (hf:DIR: the folder's chat template, if any)
    from spmdgpt.engine.scheduler import page_size_error, speculate_error

    # (before the checkpoint loads)
    for err in (speculate_error(cfg.model, args.speculate), page_size_error(cfg.model, args.page_size)):
        if err:
            raise ConfigError([err])
    if args.max_tokens >= cfg.model.max_seq_len:
        raise ConfigError([f"max_tokens={args.max_tokens} (a request's length when it gives none) leaves no room for "
                           f"a prompt in the model's context of {cfg.model.max_seq_len} tokens; give less"])
    named = adapter_runs(args, cfg)  # (before the mesh and the checkpoint: a bad adapters= is one line)
    tokenizer = adapter_tokenizer(args, named, cfg, tokenizer)
    mesh = one_process_mesh(cfg, "spmdgpt serve runs in one process")
    import jax
    import uvicorn

    from spmdgpt.engine.server import Backend, Server, routes_of
    from spmdgpt.mesh.sharding import Rules

    name = served_name(args.run_dir)
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        step, params = source_params(args.run_dir, cfg, rules, args.step, fix="serve with the run's model config")
        params = with_adapters(params, named, cfg, rules, mesh)
    engine = engine_config(args, cfg.model)
    from spmdgpt.mesh.sharding import shard_bytes
    from spmdgpt.plan.plan import pool_refusal

    try:
        with jax.set_mesh(mesh):  # (the pool against the device before it is allocated)
            refusal = pool_refusal(cfg, rules, engine, shard_bytes(params))
    except ValueError as e:  # (slots the mesh's batch ways do not divide)
        raise ConfigError([str(e)]) from None
    except MemoryError:  # (the engine's host-side tables of that many slots and pages)
        raise ConfigError([f"slots={args.slots} pages={args.pages} chunk={args.chunk}: the engine's tables of that "
                           "many sequences do not fit this host's memory; give fewer slots= (or pages=)"]) from None
    if refusal:
        raise ConfigError([refusal])
    try:
        backend = Backend(cfg, rules, mesh, params, tokenizer, name, args.max_queue, engine, log=sys.stderr,
                          stops=folder_stops(args.run_dir),  # (hf:DIR: each eos id of its generation config)
                          adapters=[n for n, _ in named])
    except ValueError as e:  # (slots the mesh's batch ways do not divide)
        raise ConfigError([str(e)]) from None
    from spmdgpt.plan.plan import step_refusal

    e = backend.engine  # (seconds to minutes at a real shape: said first, so that a silent start is not a hang)
    print(f"compiling the engine's step ({_count(len(e.width_sizes), 'width')} x "
          f"{_count(len(e.row_sizes), 'row count')}) before opening port {args.port}...", file=sys.stderr, flush=True)
    with jax.set_mesh(mesh):  # (before the port opens: /health answers once the first request would not wait)
        warm = backend.engine.warm()
        refusal = step_refusal(backend.engine, shard_bytes(params))  # (now with the step's own temporaries)
    if refusal:
        raise ConfigError([refusal])
    server = Server(backend, args.max_tokens)
    chat = "with its chat template" if hasattr(tokenizer, "prompt") else "no chat template"
    adapters = f", LoRA adapters {', '.join(n for n, _ in named)}" if named else ""
    print(f"serving {name}{'' if step is None else f' step {step}'} ({chat}) on http://{args.host}:{args.port} | "
          f"mesh {dict(mesh.shape)} | engine {args.slots} slots, {backend.engine.num_pages - 1} pages of "
          f"{args.page_size} tokens ({backend.engine.pool_bytes / 2**20:.0f} MiB)"
          f"{f', {args.speculate} drafts a step' if args.speculate else ''}, decode rows by "
          f"{backend.engine.attention_name()}{adapters}, its step compiled in {warm:.1f} s "
          f"({len(backend.engine.compiled)} "
          f"programs: {_count(len(backend.engine.width_sizes), 'width')}, decoding at "
          f"{_count(len(backend.engine.row_sizes), 'row count')}) | "
          + " ".join(f"{m} {p}" for p, m in routes_of(server).items()),
          file=sys.stderr, flush=True)
    class Uvicorn(uvicorn.Server):  # (SIGTERM / Ctrl-C: stop admitting, finish what runs, exit 0; uvicorn
        # would raise the signal again once shut down, ending the process by it)
        def handle_exit(self, sig, frame):
            if not self.should_exit:
                print(f"stopping ({signal.Signals(sig).name}): no new requests; finishing the "
                      f"{backend.engine.running()} running", file=sys.stderr, flush=True)
            super().handle_exit(sig, frame)
            getattr(self, "_captured_signals", []).clear()

    config = uvicorn.Config(server.app, host=args.host, port=args.port, log_level="warning",
                            timeout_graceful_shutdown=30)
    Uvicorn(config).run()
    if backend.failed:  # (a supervisor should see that this server ended broken)
        print(f"stopped; the engine had failed: {backend.failed}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    print("stopped", file=sys.stderr, flush=True)
    return EXIT_OK


EXIT_FAILED = 1  # serve's exit status after an engine failure (SIGTERM or Ctrl-C then)
