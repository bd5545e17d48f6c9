"""What `sample`, `eval` and `viz` share: the model they read (a training run's directory, its
config.yaml, tokenizer.json and checkpoints, or, given as `hf:DIR`, a Hugging Face Llama /
GPT-NeoX folder), JAX's start, the text files they score and the files they write."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import List, Optional

from spmdgpt.cli.args import EXIT_OK, EXIT_WRITE_FAILED
from spmdgpt.config import ConfigError, mesh_sizes


def model_source(spec: str, overrides: List[str]):
    """(config, tokenizer) of run.dir=spec: a run directory or hf:DIR."""
    from spmdgpt.hf import hf_folder

    return hf_model(spec, overrides) if hf_folder(spec) is not None else run_model(Path(spec), overrides)


def start_mesh(cfg, data_errors: bool = True):
    """Start JAX for a reader of a model (sample, eval, viz): XLA flags, jax.distributed when
    the config asks, the config's model and layout checked for these devices (its data.* too
    when `data_errors`); returns the mesh cfg.mesh asks for."""
    from spmdgpt.config import freeze, validate
    from spmdgpt.mesh.distributed import initialize
    from spmdgpt.mesh.runtime import set_default_xla_flags

    set_default_xla_flags(cfg.train.deterministic)  # before JAX creates its backend
    initialize(cfg.dist)
    from spmdgpt.mesh.sharding import make_mesh

    devices = mesh_devices(cfg)
    sections = ("model", "layout") + (("batch", "corpus") if data_errors else ())
    errs = validate(cfg, len(devices), training=False, sections=sections)
    if errs:
        raise ConfigError(errs)
    freeze(cfg)
    return make_mesh(cfg.mesh, devices)


def one_process_mesh(cfg, why: str):
    """start_mesh (data errors aside) for a command that runs in one process (chat, lm-eval):
    ConfigError `why` under a launcher."""
    mesh = start_mesh(cfg, data_errors=False)
    import jax

    if jax.process_count() > 1:
        raise ConfigError([f"{why}; run it without a launcher (any mesh of this process's devices works)"])
    return mesh


def mesh_devices(cfg) -> list:
    """The devices of the mesh cfg.mesh asks for: a mesh smaller than the machine (mesh.data=1:
    one device) takes the first devices."""
    import jax

    devices, sizes = jax.devices(), mesh_sizes(cfg.mesh).values()
    size = math.prod(sizes) if min(sizes) > 0 else len(devices)
    if jax.process_count() == 1 and size < len(devices):
        devices = devices[:size]
    return devices


def source_params(spec: str, cfg, rules, step: Optional[int] = None, fix: str = "use the run's model config"):
    """(step or None, parameters in `rules`' layout) of run.dir=spec (call inside the mesh)."""
    from spmdgpt.hf import hf_folder
    from spmdgpt.hf import load_params as load_hf_params
    from spmdgpt.training.state import load_params

    folder = hf_folder(spec)
    if folder is None:
        return load_params(Path(spec), cfg.model, rules, step, fix=fix)
    if step is not None:
        raise ConfigError([f"step={step}: run.dir={spec} is a Hugging Face folder, which holds one set of weights"])
    return None, load_hf_params(cfg.model, folder, rules, f"run.dir={spec}")


def run_model(run_dir: Path, overrides: List[str]):
    """(config, tokenizer) of a training run: its config.yaml with the overrides on top."""
    from spmdgpt.config import DistConfig, apply_overrides, load_run_config

    if not run_dir.is_dir():
        raise ConfigError([f"run.dir={run_dir}: no such directory"])
    cfg = load_run_config(run_dir)
    cfg.dist = DistConfig()  # the training run's coordinator is long gone: dist.* only if given
    cfg = apply_overrides(cfg, overrides)
    return cfg, run_tokenizer(run_dir, cfg)


def run_tokenizer(run_dir: Path, cfg):
    """The tokenizer a training run saved (run.dir/tokenizer.json), or one ConfigError line for a
    missing or damaged file."""
    from spmdgpt.data import tokenizer_from_json

    path = run_dir / "tokenizer.json"
    if not path.is_file():
        raise ConfigError([f"run.dir={run_dir}: no tokenizer.json there"])
    try:
        return tokenizer_from_json(json.loads(path.read_text(encoding="utf-8")), cfg.data)
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # (JSONDecodeError, UnicodeDecodeError too)
        reason = f"{type(e).__name__}: {e}" if isinstance(e, KeyError) else str(e).splitlines()[0]
        raise ConfigError([f"{path}: not a tokenizer spmdgpt wrote ({reason}); restore the run's own file"]) from None


def hf_model(spec: str, overrides: List[str]):
    """(config, tokenizer) of a Hugging Face model folder (run.dir=hf:DIR): the default config
    with the overrides, the model fields from DIR's config.json (its context length included),
    DIR's tokenizer.json."""
    from spmdgpt.config import load_config, override_value
    from spmdgpt.data.tokenizers import HFTokenizer
    from spmdgpt.hf import hf_folder, read_hf_config, with_hf_model

    folder = hf_folder(spec)
    hf = read_hf_config(folder, f"run.dir={spec}")  # (first: a missing folder is named as the field given)
    cfg = load_config([*overrides, f"checkpoint.init_from={spec}"])
    try:
        cfg, _ = with_hf_model(cfg)
    except ConfigError as e:  # (its errors name the field the user gave: run.dir, not checkpoint.init_from)
        raise ConfigError([m.replace(f"checkpoint.init_from={spec}", f"run.dir={spec}") for m in e.messages]) from None
    cfg.model.max_seq_len = int(hf.get("max_position_embeddings", cfg.model.max_seq_len))
    if override_value(overrides, "data.seq_len") is None:  # eval's window: the one the exported
        # run trained with, else the default one if the model's context holds it
        cfg.data.seq_len = exported_window(folder) or min(cfg.data.seq_len, cfg.model.max_seq_len)
    if not (folder / "tokenizer.json").is_file():
        raise ConfigError([f"run.dir={spec}: no tokenizer.json there (spmdgpt reads a fast tokenizer's "
                           "tokenizer.json)"])
    # (no end-of-text token: generation runs to max_new_tokens)
    tokenizer = HFTokenizer.from_file(folder / "tokenizer.json", f"run.dir={spec}: tokenizer.json", eos_required=False)
    if tokenizer.vocab_size > cfg.model.vocab_size:  # (train refuses it too: `state.check_vocab`)
        raise ConfigError([f"run.dir={spec}: tokenizer.json has {tokenizer.vocab_size} ids and config.json's "
                           f"vocab_size is {cfg.model.vocab_size}: the model has no row for the ids past it (the "
                           "tokenizer of another model?)"])
    return cfg, tokenizer


def exported_window(folder: Path) -> Optional[int]:
    """The training window (data.seq_len) `spmdgpt export` recorded in folder/spmdgpt.json, or
    None for a folder from elsewhere (or a damaged record)."""
    try:
        seq_len = json.loads((folder / "spmdgpt.json").read_text(encoding="utf-8"))["seq_len"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return seq_len if isinstance(seq_len, int) and seq_len > 0 else None


def file_error(field: str, value: str) -> Optional[str]:
    """Why `field=value` is not a file to read ("no such file", a folder), or None."""
    path = Path(value)
    if path.is_dir():
        return f"{field}={value} is a folder; give a file"
    return None if path.is_file() else f"{field}={value}: no such file"


def read_text(path: str, field: str = "text_file") -> str:
    """A UTF-8 text file a command was given as `field`=path; ConfigError when it is not."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError([f"{field}={path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
                           "save it as UTF-8"]) from None
    except OSError as e:
        raise ConfigError([f"{field}={path}: cannot read it ({e.strerror})"]) from None


def text_file_tokens(path: str, tokenizer, seq_len: int, max_tokens: Optional[int] = None) -> list:
    """The tokens of text_file=path (its first max_tokens, when given); ConfigError when it
    cannot be read or encoded, or holds fewer than seq_len + 1 tokens (one window)."""
    return first_tokens(path, encode_text_file(path, tokenizer), seq_len, max_tokens)


def encode_text_file(path: str, tokenizer) -> list:
    """All the tokens of text_file=path; ConfigError when it cannot be read or encoded."""
    text = read_text(path)
    try:
        return tokenizer.encode(text)
    except ValueError as e:
        raise ConfigError([f"text_file={path}: {e}"]) from None


def first_tokens(path: str, tokens: list, seq_len: int, max_tokens: Optional[int] = None) -> list:
    """text_file=path's tokens, its first max_tokens when given; ConfigError when they are fewer
    than seq_len + 1 (one window)."""
    limit = ""
    if max_tokens is not None:
        tokens, limit = tokens[:max_tokens], f" (of at most max_tokens={max_tokens})"
    if len(tokens) < seq_len + 1:
        raise ConfigError([f"text_file={path} holds {len(tokens)} tokens{limit}, fewer than data.seq_len + 1 = "
                           f"{seq_len + 1}; give a longer text or lower data.seq_len"])
    return tokens


def write_output(path: Path, text: str) -> int:
    """Write a command's result file (its folder made, never half-written): EXIT_OK, or, when the
    write fails, the one-line error and EXIT_WRITE_FAILED."""
    from spmdgpt.run.files import os_reason, write_text_atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    except OSError as e:
        print(f"spmdgpt: error: writing {path} failed ({os_reason(e)})", file=sys.stderr)
        return EXIT_WRITE_FAILED
    return EXIT_OK


def folder_stops(spec: str) -> tuple:
    """hf:DIR's generation_config.json eos_token_id (an id or a list): the ids that end an answer
    there (serve, sample, chat), as transformers' `generate` stops at each (an exported chat run's:
    its end of turn too); () for a run or a folder without one."""
    from spmdgpt.hf import hf_folder

    folder = hf_folder(spec)
    path = None if folder is None else folder / "generation_config.json"
    if path is None or not path.is_file():
        return ()
    try:
        ids = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
    except (OSError, ValueError, AttributeError) as e:
        raise ConfigError([f"{path}: cannot read its eos_token_id ({e}); fix or remove the file"]) from None
    ids = [ids] if isinstance(ids, int) else ids if isinstance(ids, list) else []
    return tuple(i for i in ids if isinstance(i, int) and not isinstance(i, bool))
