"""gpt-oss's harmony chat format through OpenAI's `openai-harmony` (`data.tokenizer=harmony`): the
o200k_harmony vocabulary (o200k_base's text tokens and harmony's special tokens: 201,088 ids, as
gpt-oss's embedding) and conversations rendered by the package itself, never by a hand-written
template.

A conversation of spmdgpt's roles becomes harmony messages: a system message of harmony's own
(`SystemContent.new()`: the model identity, knowledge cutoff, reasoning effort and channels; no
date, so a token store is the same on any day) first, a "system" message as the developer's
instructions (harmony's place for a user's system prompt), user messages as they are, and
assistant messages on the `final` channel. Training renders it with
`render_conversation_for_training` (the last reply ends with <|return|>, earlier ones with
<|end|>), and the loss mask covers each reply from its channel header to its end mark: what the
model writes after the `<|start|>assistant` that `render_conversation_for_completion` gives as the
prompt. A reply's tokens read back as its final channel's text (`reply_text`); sampling stops at
<|return|> (`stop_id`).

The vocabulary file: openai-harmony fetches o200k_base.tiktoken from the network at first use;
here it comes from the pinned `bpe-openai` wheel, which ships the same file (gzipped; its sha256
is checked against tiktoken's published one), unpacked once into a cache folder that
TIKTOKEN_ENCODINGS_BASE then names. Both packages are the `harmony` extra (in `dev` too).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

from spmdgpt.config import ConfigError
from spmdgpt.data.chat import ChatError

VOCAB_SIZE = 201_088  # gpt-oss's embedding rows: o200k_harmony's ids below its last reserved token
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # tiktoken's expected hash
INSTALL = "pip install 'spmdgpt[harmony]' (openai-harmony and bpe-openai, pinned)"


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spmdgpt" / "tiktoken"


def vocabulary_dir() -> Path:
    """A folder holding o200k_base.tiktoken (the bpe-openai wheel's copy, checked), for
    TIKTOKEN_ENCODINGS_BASE."""
    folder = _cache_dir()
    target = folder / "o200k_base.tiktoken"
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256:
        return folder
    try:
        from importlib import resources

        packed = resources.files("bpe_openai") / "data" / "o200k_base.tiktoken.gz"
        data = gzip.decompress(packed.read_bytes())
    except (ImportError, FileNotFoundError, OSError) as e:
        raise ConfigError([f"data.tokenizer=harmony: the o200k vocabulary comes from the bpe-openai package ({e}); "
                           f"{INSTALL}"]) from None
    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        raise ConfigError(["data.tokenizer=harmony: bpe-openai's o200k_base.tiktoken is not tiktoken's (sha256 "
                           f"differs from {O200K_SHA256[:12]}...); reinstall the pinned version: {INSTALL}"])
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".o200k_base.tiktoken.{os.getpid()}"
    tmp.write_bytes(data)
    os.replace(tmp, target)  # (whole or absent: another process may read it meanwhile)
    return folder


def _encoding():
    try:
        import openai_harmony as h
    except ImportError:
        raise ConfigError([f"data.tokenizer=harmony needs the openai-harmony package: {INSTALL}"]) from None
    if not os.environ.get("TIKTOKEN_ENCODINGS_BASE"):
        os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(vocabulary_dir())
    try:
        return h, h.load_harmony_encoding(h.HarmonyEncodingName.HARMONY_GPT_OSS)
    except Exception as e:  # (the package raises its own HarmonyError, or a plain one from Rust)
        raise ConfigError([f"data.tokenizer=harmony: openai-harmony could not load o200k_harmony ({e}); with "
                           f"TIKTOKEN_ENCODINGS_BASE={os.environ['TIKTOKEN_ENCODINGS_BASE']}"]) from None


class HarmonyTokenizer:
    """o200k_harmony with harmony's chat format (the module docstring): a chat tokenizer, as
    `data.chat.ChatTokenizer` is (`encode_chat`, `prompt`, `stop_id`, `reply_text`)."""

    kind = "harmony"

    def __init__(self):
        self._h, self._enc = _encoding()
        self.vocab_size = VOCAB_SIZE
        self.eos_id: Optional[int] = self._enc.encode("<|endoftext|>", allowed_special="all")[0]
        self.stop_id: int = self._enc.encode("<|return|>", allowed_special="all")[0]
        self.stop_text = "<|return|>"
        specials = sorted(self._enc.special_tokens_set, key=len, reverse=True)
        self._specials = re.compile("|".join(map(re.escape, specials)))  # (their text is never a reply's)

    def __reduce__(self):  # (to tokenizer worker processes: rebuilt there)
        return (HarmonyTokenizer, ())

    def encode(self, text: str) -> List[int]:
        """Text as tokens, a special token's text (<|start|>, <|message|>, ...) as that token, as
        a Hugging Face tokenizer reads its added tokens: a hand-rendered harmony prompt is its
        tokens."""
        return list(self._enc.encode(text, allowed_special="all"))

    def decode(self, ids: Sequence[int]) -> str:
        return self._enc.decode([int(i) for i in ids if 0 <= int(i) < self.vocab_size])

    def _messages(self, messages: Sequence[dict]) -> list:
        h = self._h
        if getattr(messages, "tools", None) or any(m["role"] == "tool" or m.get("tool_calls") for m in messages):
            raise ChatError("function calls (tools, tool_calls, tool messages) are not read for harmony chats yet")
        out = [h.Message.from_role_and_content(h.Role.SYSTEM, h.SystemContent.new())]
        for m in messages:
            if m["role"] == "system":
                out.append(h.Message.from_role_and_content(
                    h.Role.DEVELOPER, h.DeveloperContent.new().with_instructions(m["content"])))
            elif m["role"] == "user":
                out.append(h.Message.from_role_and_content(h.Role.USER, m["content"]))
            else:
                out.append(h.Message.from_role_and_content(h.Role.ASSISTANT, m["content"]).with_channel("final"))
        return out

    def _render(self, messages: Sequence[dict], how: str) -> List[int]:
        h = self._h
        conv = h.Conversation.from_messages(self._messages(messages))
        try:
            if how == "training":
                return list(self._enc.render_conversation_for_training(conv))
            if how == "prompt":
                return list(self._enc.render_conversation_for_completion(conv, h.Role.ASSISTANT))
            return list(self._enc.render_conversation(conv))
        except Exception as e:
            raise ChatError(f"harmony could not render it ({e})") from None

    def encode_chat(self, messages: Sequence[dict]) -> Tuple[np.ndarray, np.ndarray]:
        """(token ids int64, loss mask uint8: 1 on each reply from its channel header to its end
        mark) of one conversation."""
        if any(getattr(m["content"], "tool_spans", ()) for m in messages):
            raise ChatError("tool_output content parts need a chat template (data.harmony's tool calls are "
                            "harmony's own messages, not read here)")
        full = self._render(messages, "training")
        mask = np.zeros(len(full), np.uint8)
        replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        for i in replies:
            start = self._render(messages[:i], "prompt")
            through = full if i == len(messages) - 1 else self._render(messages[:i + 1], "conversation")
            if full[:len(start)] != start or full[:len(through)] != through:
                raise ChatError(f"harmony does not render message {i} as a continuation of the messages before it")
            mask[len(start):len(through)] = 1
        return np.asarray(full, np.int64), mask

    def prompt(self, messages: Sequence[dict]) -> List[int]:
        """A conversation, then <|start|>assistant: what the reply continues."""
        return self._render(messages, "prompt")

    def reply_text(self, ids: Sequence[int], final: bool = True) -> str:
        """A sampled reply's text: its final channel's content (the reasoning channels left out),
        or, when the tokens are not harmony messages, their ordinary tokens' text (not final, while
        streaming: "" until a message's header is whole)."""
        ids = [int(i) for i in ids if 0 <= int(i) < self.vocab_size]
        if ids and ids[-1] == self.stop_id:
            ids = ids[:-1]
        try:
            messages = self._enc.parse_messages_from_completion_tokens(ids, self._h.Role.ASSISTANT)
        except Exception:  # (not a complete header: a model that has not learnt the format, or not yet)
            return self.decode([i for i in ids if not self._enc.is_special_token(i)]) if final else ""
        finals = [m for m in messages if m.channel in ("final", None)]
        text = "".join(c.text for m in (finals or messages[-1:]) for c in m.content if hasattr(c, "text"))
        return self._specials.sub("", text)

    def to_json(self) -> dict:
        return {"kind": "harmony"}
