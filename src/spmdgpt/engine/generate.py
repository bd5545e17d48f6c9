"""What the sampling commands share: `SamplingParams`, the context check, and `Conversation`
(`spmdgpt chat`'s turns). Every sequence is sampled by the inference engine (`spmdgpt.engine`:
continuous batching over a paged KV cache, per-request sampling and PRNG streams)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from spmdgpt.config import ModelConfig
from spmdgpt.mesh.sharding import Rules
from spmdgpt.model import Params


def context_error(prompt_tokens: int, max_new_tokens: int, max_seq_len: int) -> Optional[str]:
    """Why a prompt of this length cannot be continued by max_new_tokens, or None if it fits."""
    if prompt_tokens + max_new_tokens <= max_seq_len:
        return None
    return (
        f"prompt of {prompt_tokens} tokens + max_new_tokens={max_new_tokens} exceeds the model's "
        f"context of {max_seq_len} tokens; shorten the prompt or lower max_new_tokens"
    )


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 200
    temperature: float = 1.0  # 0 = greedy
    top_k: int = 0  # 0 = no top-k filter
    top_p: float = 1.0  # 1 = no top-p filter
    seed: int = 0
    eos_id: Optional[int] = None  # stop a row when it emits this token


class Conversation:
    """A multi-turn conversation with a chat model (`spmdgpt chat`) through the inference engine
    (`spmdgpt.engine`): each turn renders the whole conversation with the chat template and asks
    for its continuation; the engine's shared prefixes take the pages the conversation so far
    already wrote (full pages of the same tokens), so a turn reads only the template's new text
    and the partly filled last page. The reply is sampled one token at a time (each passed to
    `on_token` with the reply's text so far) up to the tokenizer's end-of-turn token. Turn t
    samples stream t of the seed. `fed` counts the prompt tokens the engine read (not taken from
    shared pages), over the conversation. `engine`: one to share (its programs compiled already,
    its vocabulary limit the tokenizer's); default a new one of as few slots as the mesh allows."""

    def __init__(self, cfg: ModelConfig, rules: Rules, params: Params, tokenizer, sp: SamplingParams, engine=None,
                 stops: tuple = ()):
        from spmdgpt.engine import Engine, EngineConfig
        from spmdgpt.engine.scheduler import fitting_page_size

        self.cfg, self.rules, self.params, self.tok, self.sp = cfg, rules, params, tokenizer, sp
        self.engine = engine or Engine(cfg, rules, params, tokenizer.vocab_size,
                                       EngineConfig(slots=rules.batch_divisor(), page_size=fitting_page_size(cfg)))
        self.fed = 0
        self.stops = tuple(dict.fromkeys(t for t in (tokenizer.stop_id, *stops) if t is not None))  # (the end of
        # turn; hf:DIR's eos ids too)
        self.reset()

    def reset(self) -> None:
        """Forget the conversation (`/reset`)."""
        self.messages: list = []
        self.turns = 0

    def say(self, content: str, on_token=None) -> str:
        """The model's reply to the user's `content`, at most max_new_tokens and what the model's
        context has left (ValueError when it has none)."""
        from spmdgpt.engine import Request

        messages = self.messages + [{"role": "user", "content": content}]
        ids = self.tok.prompt(messages)
        budget = min(self.sp.max_new_tokens, self.cfg.max_seq_len - len(ids))
        if budget < 1:
            raise ValueError(f"the conversation has reached the model's context of {self.cfg.max_seq_len} tokens; "
                             "/reset to start a new one")
        stops = self.stops
        reply = self.tok.reply_text
        shown = (lambda r, t: t not in stops and on_token(reply([x for x in r.tokens if x not in stops], False), t)) \
            if on_token is not None else None
        sp, before = self.sp, self.engine.shared_tokens
        r = self.engine.run([Request(ids, budget, sp.temperature, sp.top_k, sp.top_p, sp.seed, self.turns,
                                     stop_ids=stops, on_token=shown)])[0]
        self.fed += len(ids) - (self.engine.shared_tokens - before)
        self.last = r  # (the turn's engine request: its tokens, stop token included)
        text = reply([t for t in r.tokens if t not in stops])
        self.messages = messages + [{"role": "assistant", "content": text}]
        self.turns += 1
        return text
