"""`spmdgpt <command> [hydra overrides]`: the command-line entry point."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

USAGE = """spmdgpt <command> [key=value ...]

commands:
  train   train a model: spmdgpt train +experiment=shakespeare_char train.steps=200 run.dir=runs/r1
  launch  local multi-process run: spmdgpt launch --nproc 2 --devices-per-proc 2 -- train ...
  sample  text from a run: spmdgpt sample run.dir=runs/r1 prompt="ROMEO:" max_new_tokens=200
          temperature=0.8 top_k=50 top_p=1.0 seed=1 num_samples=2 (or prompt_file=prompts.txt)

Overrides use Hydra syntax: `model.d_model=384`, `sharding=fsdp`, `+experiment=staircase`.
Packaged experiments: {experiments}. Sharding tables: {tables}.
"""


def _usage() -> str:
    from spmdgpt.config import packaged_names

    return USAGE.format(
        experiments=", ".join(packaged_names("experiment")),
        tables=", ".join(packaged_names("sharding")),
    )


def entry() -> None:
    """The process entry point (console script `spmdgpt`, `python -m spmdgpt`): restart with the
    glibc malloc settings first (spmdgpt.runtime.use_retaining_malloc), then run main."""
    from spmdgpt.runtime import use_retaining_malloc

    use_retaining_malloc()
    sys.exit(main())


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["launch"]:
        from spmdgpt.launch import main as launch_main

        return launch_main(argv[1:])
    parser = argparse.ArgumentParser(prog="spmdgpt", usage=_usage(), add_help=True)
    parser.add_argument("command", choices=["train", "sample"])
    parser.add_argument("overrides", nargs="*")
    if not argv:
        parser.print_usage(sys.stderr)
        return 2
    args = parser.parse_args(argv)

    from spmdgpt.config import ConfigError, load_config
    from spmdgpt.runtime import set_default_xla_flags

    try:
        if args.command == "sample":
            set_default_xla_flags()
            from spmdgpt.sample import run_sample

            run_sample(args.overrides)
            return 0
        cfg = load_config(args.overrides)
        set_default_xla_flags(cfg.train.deterministic)  # before JAX creates its backend
        from spmdgpt.distributed import initialize

        initialize(cfg.dist)  # jax.distributed, when the run is multi-process
        if args.command == "train":
            from spmdgpt.train import train

            result = train(cfg, argv=["spmdgpt", *argv])
            if result.preempted:
                print(
                    f"spmdgpt: stopped by signal after step {result.step}; checkpoint written. "
                    "Rerun the same command to resume.",
                    file=sys.stderr,
                )
    except ConfigError as e:
        for msg in e.messages:
            print(f"spmdgpt: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("spmdgpt: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    entry()
