"""`spmdgpt chat run.dir=<run>|hf:DIR [system=...] [temperature=... max_new_tokens=...]`: a
conversation with a chat model in the terminal, through its chat template (the run's, or DIR's
tokenizer_config.json), each reply printed as it is decoded, the KV cache kept across turns
(`generate.Conversation`). `/reset` starts over, Ctrl-D (or /quit) ends it. With
prompt_file=F, each line of F is answered as a one-turn conversation and the command exits
(for scripts)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import List, Optional

from spmdgpt.cli.args import EXIT_OK, parse
from spmdgpt.cli.runs import file_error, folder_stops
from spmdgpt.cli.sample import sampling_errors
from spmdgpt.config import ConfigError


@dataclass
class ChatArgs:
    run_dir: Optional[str] = None  # run.dir=...: a run fine-tuned on chat data, or hf:DIR (required)
    system: Optional[str] = None  # a system message that starts every conversation
    prompt_file: Optional[str] = None  # answer each line as a one-turn conversation, then exit
    max_new_tokens: int = 256  # tokens per reply at most
    temperature: float = 0.7  # 0 = greedy
    top_k: int = 0  # keep the k most likely tokens (0 = all)
    top_p: float = 1.0  # keep the most likely tokens up to this probability mass (1 = all)
    seed: int = 0  # sampling seed
    step: Optional[int] = None  # the checkpoint's step (default: the newest that loads)


def check_args(args: ChatArgs) -> ChatArgs:
    errs = []
    if not args.run_dir:
        errs.append("run.dir is required: spmdgpt chat run.dir=<run fine-tuned on chat data, or hf:DIR>")
    errs += sampling_errors(args)
    if args.prompt_file and file_error("prompt_file", args.prompt_file):
        errs.append(file_error("prompt_file", args.prompt_file))
    if errs:
        raise ConfigError(errs)
    return args


def with_folder_template(spec: str, tok):
    """hf:DIR's tokenizer with the folder's chat template (chat_template.jinja or tokenizer_config.json's
    chat_template) when it has one; else, and for a run (whose tokenizer holds its own), `tok`."""
    from spmdgpt.hf import hf_folder

    if hf_folder(spec) is None:
        return tok
    from spmdgpt.data.chat import ChatTokenizer, hf_chat_template

    template = hf_chat_template(hf_folder(spec) / "tokenizer.json")
    return tok if template is None else ChatTokenizer(tok, template)


def chat_model(spec: str, overrides: List[str]):
    """(config, chat tokenizer) of a run trained on chat data or of hf:DIR with a chat template."""
    from spmdgpt.cli.runs import model_source
    from spmdgpt.hf import hf_folder

    cfg, tok = model_source(spec, overrides)
    if hf_folder(spec) is not None:
        tok = with_folder_template(spec, tok)
        if not hasattr(tok, "prompt"):
            raise ConfigError(
                [
                    f"run.dir={spec}: no chat template there (chat_template.jinja or tokenizer_config.json's "
                    "chat_template); chat needs an instruction-tuned model's folder"
                ]
            )
    elif tok.kind not in ("chat", "harmony"):
        raise ConfigError([f"run.dir={spec} did not train on chat data (its tokenizer has no chat template); "
                           "fine-tune it on a format: chat dataset first (docs/post-training.md)"])
    return cfg, tok


def run(items: List[str]) -> int:
    args, overrides = parse(items, ChatArgs)
    args = check_args(args)
    cfg, tok = chat_model(args.run_dir, overrides)
    from spmdgpt.cli.runs import one_process_mesh, read_text, source_params

    lines = None
    if args.prompt_file:
        lines = [ln for ln in read_text(args.prompt_file, "prompt_file").splitlines() if ln.strip()]
        if not lines:
            raise ConfigError([f"prompt_file={args.prompt_file} holds no prompt"])
    mesh = one_process_mesh(cfg, "chat reads the terminal in one process")
    import jax

    from spmdgpt.engine.generate import Conversation, SamplingParams
    from spmdgpt.mesh.sharding import Rules

    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        _, params = source_params(args.run_dir, cfg, rules, args.step, fix="chat with the run's model config")
        sp = SamplingParams(args.max_new_tokens, args.temperature, args.top_k, args.top_p, args.seed, tok.stop_id)
        talk = Conversation(cfg.model, rules, params, tok, sp, stops=folder_stops(args.run_dir))
        if lines is not None:
            for line in lines:
                start(talk, args.system)
                print(say(talk, line.replace("\\n", "\n"), stream=False), flush=True)
            return EXIT_OK
        return interactive(talk, args.system)


def start(talk, system: Optional[str]) -> None:
    """A new conversation (with the system message, fed with the first user message)."""
    talk.reset()
    if system:
        talk.messages = [{"role": "system", "content": system}]


def say(talk, content: str, stream: bool) -> str:
    printed = [0]

    def show(text, _):
        sys.stdout.write(text[printed[0]:])
        sys.stdout.flush()
        printed[0] = len(text)

    try:
        return talk.say(content, on_token=show if stream else None)
    except ValueError as e:  # (the context is full)
        raise ConfigError([str(e)]) from None


def interactive(talk, system: Optional[str]) -> int:
    start(talk, system)
    print("(/reset starts over, Ctrl-D ends)", file=sys.stderr)
    while True:
        try:
            line = input("> ")
        except EOFError:
            print(file=sys.stderr)
            return EXIT_OK
        if line.strip() in ("/quit", "/exit"):
            return EXIT_OK
        if line.strip() == "/reset":
            start(talk, system)
            print("(a new conversation)", file=sys.stderr)
            continue
        if not line.strip():
            continue
        try:
            say(talk, line, stream=True)
        except ConfigError as e:
            print(f"({e.messages[0]})", file=sys.stderr)
            continue
        print(flush=True)
