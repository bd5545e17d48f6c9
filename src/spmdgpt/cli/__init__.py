"""`spmdgpt <command> [key=value ...]`: the command line, one package.

Each subcommand is a module here with `run(items) -> exit code`; all of them read their
arguments through `cli.args.parse` (the command's own keys, the rest Hydra overrides of the
config) and share one error format and one exit-code convention:

    0    done
    2    bad arguments, config, data or run directory: one line each, `spmdgpt: error: ...`,
         and nothing written
    3    train: the run diverged (non-finite loss or gradients); nothing saved after it
    4    writing failed (disk full, I/O error): train keeps its complete checkpoints, prepare
         its complete shards, export leaves `out` as it was
    130  interrupted (a second Ctrl-C; the first one checkpoints and exits 0)
    N    launch: the first failing process's code
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import List, Optional

from spmdgpt.cli.args import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, EXIT_WRITE_FAILED

COMMANDS = {  # name -> module under spmdgpt.cli, one usage line
    "train": "train a model: spmdgpt train +experiment=shakespeare_char train.steps=200 run.dir=runs/r1\n"
    "          a grid: spmdgpt train -m [--parallel 2] optimizer.lr=1e-3,3e-3 optimizer.name=adamw,muon",
    "sample": "text from a run (or run.dir=hf:DIR, a Hugging Face folder spmdgpt imports), on the engine:\n"
    '          spmdgpt sample run.dir=runs/r1 prompt="ROMEO:" max_new_tokens=200\n'
    "          temperature=0.8 top_k=50 top_p=1.0 seed=1 num_samples=2 [step=N] (or prompt_file=prompts.txt)\n"
    "          [speculate=1: drafts from the model's MTP modules] [config overrides, e.g. mesh.data=2 sharding=tp]",
    "chat": "talk with a chat model (a run fine-tuned on chat data, or run.dir=hf:DIR with a chat template):\n"
    '          spmdgpt chat run.dir=runs/sft [temperature=0.7 max_new_tokens=256 system="..."]\n'
    "          (/reset, Ctrl-D to quit; prompt_file=F answers each line as a one-turn conversation)",
    "lm-eval": "EleutherAI's lm-evaluation-harness on a run (or run.dir=hf:DIR), spmdgpt's forward and sampler:\n"
    "          spmdgpt lm-eval run.dir=runs/r1 tasks=shakespeare [limit=N num_fewshot=K include_path=DIR]\n"
    "          [batch_size=8 log_samples=true out=F.json step=N]",
    "prepare": "tokenize a corpus into its token store (train does it when missing):\n"
    "          spmdgpt prepare +experiment=gutenberg_gpt2 data.num_workers=2 [--verify]",
    "tokenizer": "train a byte-level BPE on a corpus: spmdgpt tokenizer train +experiment=gutenberg_gpt2\n"
    "          vocab_size=8192 out=my_tokenizer.json [sample_mb=100]",
    "eval": "loss, perplexity, bits per byte of a checkpoint on the run's validation sets or a text:\n"
    "          spmdgpt eval run.dir=runs/r1 [step=N text_file=F full=true out=F.json]",
    "viz": "a text coloured by the model's log-probabilities, alternatives on hover (HTML):\n"
    "          spmdgpt viz run.dir=runs/r1 text_file=held_out.txt [out=page.html top_k=5]",
    "plot": "PNGs of runs' losses, learning rate, gradient norm and MFU, overlaid:\n"
    "          spmdgpt plot runs/a runs/b [out=DIR names=adamw,muon] (default: RUN/plots, or runs/plots)",
    "export": "a run as a Hugging Face transformers model folder (safetensors, config, tokenizer), or\n"
    "          as a static web page that runs it in the browser (format=web):\n"
    "          spmdgpt export run.dir=runs/r1 out=exported [format=web step=N dtype=bfloat16 overwrite=true\n"
    "                                                       hf_class=Qwen3NextForCausalLM]",
    "launch": "local multi-process run: spmdgpt launch nproc=2 devices_per_proc=2 -- train ...",
    "serve": "an OpenAI-compatible HTTP server for a run (or hf:DIR): /v1/completions, /v1/chat/completions:\n"
    "          spmdgpt serve run.dir=runs/r1 [host=127.0.0.1 port=8000 max_queue=64 step=N max_tokens=16\n"
    "          slots=8 page_size=16 pages=0 chunk=64 speculate=0 decode_attention=auto buckets=4\n"
    "          adapters=NAME:RUN,... (LoRA runs of run.dir, a request's model choosing)]",
    "ladder": "a scaling ladder: every model.size at every compute budget, trained, then the scaling law,\n"
    "          its compute-optimal rule and a forecast (ladder.json, PNGs); lr: the best learning rate by width:\n"
    "          spmdgpt ladder +experiment=ladder_tiny out=runs/ladder [--parallel 2 ladder.check=true]\n"
    "          spmdgpt ladder lr +experiment=... ladder.widths=[64,128,256] ladder.lrs=[1e-3,3e-3,1e-2] out=DIR",
    "config": "the resolved config, or a section's fields with their values and meanings:\n"
    "          spmdgpt config [SECTION, e.g. rl or model.moe] [+experiment=NAME and other overrides]",
    "plan": "memory, FLOPs and collectives of a training step, compiled ahead of time (no data, no\n"
    "          weights): spmdgpt plan +experiment=llama2_7b devices=8 [memory_gb=80]\n"
    "          for a TPU slice or GPUs, and the best layout: ... topology=v5p-64 [search=true]\n"
    "          serving: ... serve=true [slots=8 pages=0 speculate=0]: the engine's step, the pages that fit",
}

MODULES = {"lm-eval": "harness"}  # commands whose module under spmdgpt.cli has another name

USAGE = """spmdgpt <command> [key=value ...]

commands:
{commands}

Overrides use Hydra syntax: `model.d_model=384`, `sharding=fsdp`, `+experiment=staircase`.
Packaged experiments: {experiments}. Sharding tables: {tables}.
"""


def usage() -> str:
    from spmdgpt.config import packaged_names

    return USAGE.format(
        commands="\n".join(f"  {name:<9} {line}" for name, line in COMMANDS.items()),
        experiments=", ".join(packaged_names("experiment")),
        tables=", ".join(packaged_names("sharding")),
    )


def entry() -> None:
    """The process entry point (console script `spmdgpt`, `python -m spmdgpt`): restart with the
    glibc malloc settings first (spmdgpt.mesh.runtime.use_retaining_malloc), then run main."""
    from spmdgpt.mesh.runtime import use_retaining_malloc

    use_retaining_malloc()
    try:
        code = main()
    except BrokenPipeError:  # (`spmdgpt config model | head`: the reader had enough; no traceback)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_OK
    if code == EXIT_WRITE_FAILED:
        # orbax's writer threads may still be failing (and printing) in the background: end the
        # process now, so that the error line is the last one (files are closed, the lock is
        # released by the kernel, every complete checkpoint is already on disk).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def error(messages: List[str]) -> int:
    for msg in messages:
        print(f"spmdgpt: error: {msg}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return EXIT_OK if argv else EXIT_USAGE
    command, items = argv[0], argv[1:]
    if command not in COMMANDS:
        return error([f"unknown command {command!r}; commands: {', '.join(COMMANDS)} (spmdgpt --help)"])
    own = items[:items.index("--")] if "--" in items else items  # (launch: what follows -- is the launched command's)
    if any(item in ("-h", "--help") for item in own):  # (before the items reach Hydra's parser)
        print(f"spmdgpt {command}: {COMMANDS[command]}\n\nConfig overrides use Hydra syntax: model.d_model=384, "
              "sharding=fsdp, +experiment=staircase (spmdgpt --help lists the experiments and tables).")
        return EXIT_OK
    if any(item == "-c" or item.startswith("--cfg") for item in own):  # (Hydra's flag: its lexer's error otherwise)
        return error(["--cfg is Hydra's flag, which spmdgpt's commands do not take; spmdgpt config [SECTION] "
                      "[overrides] prints the resolved config or a section's fields"])
    from spmdgpt.config import ConfigError
    from spmdgpt.mesh.runtime import choose_platforms, use_compilation_cache

    choose_platforms()  # (only the backends of this machine's devices start: no plugin tracebacks)
    use_compilation_cache()  # (a run started again loads its executables instead of compiling them)
    try:
        return importlib.import_module(f"spmdgpt.cli.{MODULES.get(command, command)}").run(items)
    except ConfigError as e:
        return error(e.messages)
    except KeyboardInterrupt:
        print("spmdgpt: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    entry()
