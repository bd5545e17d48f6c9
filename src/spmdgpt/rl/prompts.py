"""Prompts with answers (`format: prompts`): one jsonl record a line,

    {"prompt": "Q: 47+385= A:", "answer": "432"}
    {"prompt": [{"role": "user", "content": "What is 47+385?"}], "answer": 432, "level": 2}

`prompt` is a list of chat messages or a text, rendered by the run's chat template when it has
one (a text as one user message, as DPO reads it), ending with the assistant's turn opened as
`spmdgpt chat` does; without a chat template a text is tokenized as it is (a base model's
continuation); `answer` is any
JSON the reward reads (`rl.reward`), and the record's other fields reach a reward of one's own
as well. Records are split into training and validation prompts as other datasets' documents
are (the dataset's `split`: hash by default, on the line's text; val; none).
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Tuple

from spmdgpt.config import Config, ConfigError, DataConfig, dataset_configs
from spmdgpt.data.sources import BadRecords, bad_record, json_line, records, resolve_source
from spmdgpt.data.store import whole_split


class Prompt(NamedTuple):
    tokens: Tuple[int, ...]  # the prompt's token ids (a chat prompt: rendered, the assistant's turn opened)
    prompt: Any  # the record's prompt as given (text or messages): what a reward sees
    record: dict  # the whole record (its answer, and any other field)
    where: str  # FILE:LINE


def prompt_of(obj, tokenizer, where: str) -> Prompt:
    """A Prompt from one parsed record; ValueError naming what is wrong with it."""
    if not isinstance(obj, dict) or "prompt" not in obj or "answer" not in obj:
        raise ValueError('a prompts record is {"prompt": text or messages, "answer": ...}; this one has '
                         f"{sorted(obj) if isinstance(obj, dict) else type(obj).__name__}")
    prompt = obj["prompt"]
    if isinstance(prompt, str) and not hasattr(tokenizer, "prompt"):  # (no chat template: a continuation)
        tokens = tokenizer.encode(prompt)
    elif isinstance(prompt, str) or (isinstance(prompt, list) and prompt and all(isinstance(m, dict) for m in prompt)):
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        if not hasattr(tokenizer, "prompt"):
            raise ValueError("a prompt of chat messages needs a chat template (data.chat_template, or the "
                             "tokenizer's own)")
        from spmdgpt.data.chat import ChatError, conversation

        try:
            tokens = tokenizer.prompt(conversation({"messages": messages}, reply=False))
        except ChatError as e:
            raise ValueError(str(e)) from None
    else:
        raise ValueError(f'"prompt" must be a text or a list of chat messages, not {type(prompt).__name__}')
    if not tokens:
        raise ValueError('"prompt" is empty')
    return Prompt(tuple(int(t) for t in tokens), prompt, obj, where)


def read_records(data: DataConfig) -> Tuple[list, object]:
    """([(parsed record, the line's text, FILE:LINE)] of the run's one prompts dataset in file
    order, its resolved Source). A line that is not JSON is a ConfigError naming FILE:LINE (or
    skipped and counted under data.skip_bad_records)."""
    (name, ds), = dataset_configs(data).items()
    src = resolve_source(name, ds, data)
    bad = BadRecords()
    out = []
    for rec in records(src, bad):
        parsed = json_line(rec, src, bad)
        if parsed is not None:
            out.append((parsed[0], parsed[1], rec.where))
    return out, src


def characters(recs: list) -> str:
    """The sorted characters of the records' prompts (texts, or the messages' contents) and
    answers: a char tokenizer's vocabulary for prompts data without a model to start from."""
    chars: set = set()
    for obj, _, _ in recs:
        if isinstance(obj, dict):
            for value in (obj.get("prompt"), obj.get("answer")):
                if isinstance(value, list):
                    chars.update(*(str(m.get("content", "")) for m in value if isinstance(m, dict)))
                elif value is not None:
                    chars.update(str(value))
    return "".join(sorted(chars))


def split_prompts(recs: list, src, tokenizer, room: int) -> Tuple[List[Prompt], List[Prompt]]:
    """(training prompts, validation prompts) of `read_records`' records, in file order, split as
    the dataset's `split` says. room: the most tokens a prompt may have (what the context leaves
    after rl.max_new_tokens). A bad record is a ConfigError naming FILE:LINE (or skipped and
    counted under data.skip_bad_records)."""
    bad = BadRecords()
    train: List[Prompt] = []
    val: List[Prompt] = []
    for obj, line, where in recs:
        try:
            p = prompt_of(obj, tokenizer, where)
            if len(p.tokens) > room:
                raise ValueError(f"the prompt has {len(p.tokens)} tokens, more than the {room} that data.seq_len "
                                 "leaves after rl.max_new_tokens; raise data.seq_len or shorten it")
        except ValueError as e:
            bad_record(src, bad, where, str(e))
            continue
        (val if whole_split(line, src) == "val" else train).append(p)
    if not train:
        why = (f"all {bad.count} records were bad and skipped (data.skip_bad_records=true; the first at {bad.first}: "
               "run without it to see why)" if bad.count else "its files are empty, or all of them went to validation")
        raise ConfigError([f"data.datasets.{src.name}: no training prompts ({why})"])
    return train, val


def read_prompts(data: DataConfig, tokenizer, room: int) -> Tuple[List[Prompt], List[Prompt]]:
    """`split_prompts` of the run's one prompts dataset."""
    recs, src = read_records(data)
    return split_prompts(recs, src, tokenizer, room)


def prompt_room(cfg: Config) -> int:
    """The most tokens a prompt may have: what the context leaves after rl.max_new_tokens (a
    ConfigError when nothing is left)."""
    context = min(cfg.data.seq_len + 1, cfg.model.max_seq_len)
    room = context - cfg.rl.max_new_tokens
    if room < 1:
        raise ConfigError([f"rl.max_new_tokens={cfg.rl.max_new_tokens} leaves no room for a prompt in a context of "
                           f"{context} tokens (data.seq_len={cfg.data.seq_len} + 1, model.max_seq_len="
                           f"{cfg.model.max_seq_len}); lower rl.max_new_tokens or raise data.seq_len"])
    return room
