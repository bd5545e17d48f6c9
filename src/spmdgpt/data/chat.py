"""Conversations for supervised fine-tuning: a jsonl line of {"messages": [{"role", "content"},
...]} rendered by a chat template into tokens and a loss mask (1 on the assistant's tokens).

The template is the tokenizer's own (a Hugging Face `tokenizer_config.json` "chat_template", or
a `chat_template.jinja`, beside data.tokenizer_file), data.chat_template, or DEFAULT_TEMPLATE:
each message as <|role|>content<|end|>, whose four SPECIAL_TOKENS are added to the vocabulary
of a tokenizer that has no template of its own (char, gpt2, a BPE trained by `spmdgpt
tokenizer`). Templates run in jinja2's sandbox with the settings and helpers transformers gives
them (trim_blocks, lstrip_blocks, loop controls; raise_exception, strftime_now, tojson), so a
model's template renders here as in `tokenizer.apply_chat_template`.

The assistant's share of the text is found by rendering prefixes: assistant message i spans
from the end of render(messages[:i], add_generation_prompt=True) to the end of
render(messages[:i + 1]) (its content and the template's end-of-turn marks), and the full
rendering must start with both (a template that rewrites earlier turns is refused). Each span
and the text between them are tokenized separately, so every token is wholly trained or not.

An assistant message's content may also be a list of parts, {"type": "text", "text": ...} and
{"type": "tool_output", "text": ...} (a demonstration that calls a tool: "<<47*38>>", then the
tool's "1786"): the parts are joined into the content the template renders, and a tool output's
characters are tokenized on their own and never trained (loss mask 0), as a rollout's tool
outputs are read but not trained (`rl.tool`; nanochat masks them alike).

Function calls as the OpenAI API and Hugging Face templates write them are messages too: an
assistant message may hold `tool_calls` ([{"type": "function", "function": {"name", "arguments"}}],
arguments a JSON object or its text; content may then be empty), answered by `tool` messages
(content: the function's result), and a conversation may be rendered with the functions offered
(`render(..., tools=[...])`, the template's `tools` variable, as transformers passes it; in training
data, a line's "tools" beside its messages, as Hugging Face's function-calling sets hold them).
DEFAULT_TEMPLATE writes them as Hermes-style templates (Qwen's) do, with no token of their own: the
offered functions in a system turn, a call as <tool_call>{"name": ..., "arguments": {...}}</tool_call>
after the assistant's text, a result as a user turn <tool_response>...</tool_response>. A call is
the assistant's (trained); a result is not.
"""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

from spmdgpt.config import ConfigError

ROLES = ("system", "user", "assistant", "tool")
SPECIAL_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>")
# (a conversation without functions renders as <|role|>content<|end|>... whatever the template's age: the
# function parts only add text where a conversation has them)
DEFAULT_TEMPLATE = (
    "{% if tools %}<|system|>You may call these functions, one call as <tool_call>{\"name\": <function name>, "
    "\"arguments\": <arguments object>}</tool_call>:{% for t in tools %}{{ '\\n' }}{{ t | tojson }}{% endfor %}"
    "<|end|>{% endif %}"
    "{% for m in messages %}"
    "{% if m['role'] == 'tool' %}<|user|><tool_response>{{ m['content'] }}</tool_response><|end|>"
    "{% else %}<|{{ m['role'] }}|>{{ m['content'] or '' }}"
    "{% for c in m.tool_calls or [] %}<tool_call>{\"name\": {{ c.function.name | tojson }}, "
    "\"arguments\": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}<|end|>{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
# strftime_now() renders this day, not today's, so a token store built on any day holds the same
# tokens (Llama 3.1's template uses the same date when it is given none)
TEMPLATE_DATE = date(2024, 7, 26)


PART_TYPES = ("text", "tool_output")  # an assistant content part's kinds (the module docstring)
FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # (the OpenAI API's function names)


class ChatError(ValueError):
    """A conversation the template or the tokenizer cannot take (the caller names file:line)."""


class ToolText(str):
    """An assistant message's content joined from parts: the text, with `tool_spans`, the
    [start, end) character ranges of its tool outputs (a template renders it as the text)."""

    def __new__(cls, text: str, tool_spans: Sequence[Tuple[int, int]]):
        out = super().__new__(cls, text)
        out.tool_spans = tuple(tool_spans)
        return out

    def __reduce__(self):  # (to tokenizer worker processes)
        return (ToolText, (str(self), self.tool_spans))


def _parts(content, k: int) -> ToolText:
    """The content parts of assistant message k joined (`ToolText`), or ChatError."""
    text, spans = "", []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in PART_TYPES or not isinstance(part.get("text"), str):
            raise ChatError(f"message {k} (assistant): content part {j} is not "
                            '{"type": "text" or "tool_output", "text": "..."}')
        if kind == "tool_output" and part["text"]:
            spans.append((len(text), len(text) + len(part["text"])))
        text += part["text"]
    return ToolText(text, spans)


def _tool_calls(m: dict, k: int) -> list:
    """Message k's tool_calls, checked, each call's arguments as an object (the API sends their JSON
    text; templates write them with `tojson`, as vLLM hands them over): ChatError saying what is wrong."""
    calls = m["tool_calls"]
    if m["role"] != "assistant":
        raise ChatError(f"message {k} ({m['role']}) has tool_calls; only an assistant's message calls functions")
    if not isinstance(calls, list):
        raise ChatError(f"message {k} (assistant): tool_calls must be a list of calls")
    out = []
    for j, c in enumerate(calls):
        f = c.get("function") if isinstance(c, dict) else None
        if (not isinstance(f, dict) or not isinstance(f.get("name"), str) or not f["name"]
                or c.get("type", "function") != "function"):
            raise ChatError(f"message {k} (assistant): tool call {j} is not "
                            '{"type": "function", "function": {"name": ..., "arguments": ...}}')
        if not FUNCTION_NAME.fullmatch(f["name"]):
            raise ChatError(f"message {k} (assistant): tool call {j}'s function name must be 1-64 letters, digits, _ "
                            f"or - (got {f['name']!r})")
        arguments = f.get("arguments", {})
        if isinstance(arguments, str):
            arguments = json_object(arguments)
        elif isinstance(arguments, dict):  # (an object the request's JSON gave: NaN and Infinity are not JSON)
            try:
                json.dumps(arguments, allow_nan=False)
            except (ValueError, RecursionError):
                arguments = None
        if not isinstance(arguments, dict):
            raise ChatError(f"message {k} (assistant): tool call {j}'s arguments are not a JSON object")
        out.append({**c, "type": "function", "function": {**f, "arguments": arguments}})
    return out


class Conversation(list):
    """A conversation's messages, with `tools`: the functions its line offers (None: none)."""

    tools = None


def reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def json_object(text: str, exact: bool = False):
    """The value of a JSON text, strictly (NaN, Infinity: not JSON), or None when it is not one
    (or nests too deep to read); `exact`: its numbers with a fraction or exponent as Decimal (as
    written: 1e400 is not Python's inf)."""
    from decimal import Decimal

    try:
        return json.loads(text, parse_constant=reject_constant, **({"parse_float": Decimal} if exact else {}))
    except (ValueError, RecursionError):
        return None


def conversation(obj, field: str = "messages", reply: bool = True) -> list:
    """The messages of one parsed jsonl line, checked (a `Conversation`, with the line's "tools"):
    ChatError saying what is wrong. reply: it must hold an assistant message (what training
    learns); else (a prompt to sample a reply to) it must not end with one."""
    messages = obj.get(field) if isinstance(obj, dict) else None
    if not isinstance(messages, list):
        raise ChatError(f'no {field!r} list (each line must be {{"{field}": [{{"role": ..., "content": ...}}, ...]}})')
    if not messages:
        raise ChatError("an empty conversation")
    messages = list(messages)  # (content parts are joined in this copy)
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m:
            raise ChatError(f"message {k} has no 'role'")
        if m["role"] not in ROLES:
            raise ChatError(f"message {k} has role {m['role']!r}; the roles are {', '.join(ROLES)}")
        if m["role"] == "assistant" and isinstance(m.get("content"), list) and reply:
            messages[k] = m = {**m, "content": _parts(m["content"], k)}
        if m["role"] == "tool" and m.get("tool_call_id") is not None and not isinstance(m["tool_call_id"], str):
            raise ChatError(f"message {k} (tool): tool_call_id must be a string (the id of the call it answers)")
        if m.get("tool_calls") is not None:
            messages[k] = m = {**m, "tool_calls": _tool_calls(m, k)}
            if m.get("content") is None:  # (a message of calls only: the API's content null)
                messages[k] = m = {**m, "content": ""}
        if not isinstance(m.get("content"), str):
            raise ChatError(f"message {k} ({m['role']}) has no text 'content'" + (
                " (content parts: an assistant's, in training data)" if isinstance(m.get("content"), list) else ""))
    if reply and not any(m["role"] == "assistant" for m in messages):
        raise ChatError("no assistant message (nothing to train on)")
    if not reply and messages[-1]["role"] == "assistant":
        raise ChatError("the prompt ends with an assistant message (its reply is what is sampled)")
    out = Conversation(messages)
    tools = obj.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise ChatError('"tools" must be a list of functions ({"type": "function", "function": {...}})')
        for j, t in enumerate(tools):
            name = t.get("function", {}).get("name") if isinstance(t.get("function"), dict) else None
            if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
                raise ChatError(f"tools[{j}]: a function needs a name of 1-64 letters, digits, _ or - "
                                '({"type": "function", "function": {"name": ...}})')
        out.tools = tools
    return out


def preference_pair(obj) -> Tuple[list, list]:
    """(chosen conversation, rejected conversation) of one preference line {"prompt": text or
    [messages], "chosen": text or [messages], "rejected": likewise} (TRL's layout): the prompt's
    messages (a text: one user message) followed by each answer's (a text: one assistant
    message); ChatError saying what is wrong."""
    if not isinstance(obj, dict):
        raise ChatError('not an object (each line must be {"prompt": ..., "chosen": ..., "rejected": ...})')

    def messages(key, role):
        value = obj.get(key)
        if isinstance(value, str):
            return [{"role": role, "content": value}]
        if not isinstance(value, list) or not value:
            raise ChatError(f"no {key!r} (a text or a list of messages)")
        return value

    prompt = messages("prompt", "user")
    answers = {key: messages(key, "assistant") for key in ("chosen", "rejected")}
    pair = []
    for key in ("chosen", "rejected"):
        try:
            pair.append(conversation({"messages": prompt + answers[key]}))
        except ChatError as e:
            raise ChatError(f"{key}: {e}") from None
        if pair[-1][-1]["role"] != "assistant":
            raise ChatError(f"{key}: its last message is not the assistant's")
    return pair[0], pair[1]


class ChatTemplate:
    """A jinja2 chat template and the special-token variables it is rendered with."""

    def __init__(self, source: str, variables: Optional[dict] = None, where: str = "data.chat_template"):
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        self.source, self.variables = source, dict(variables or {})
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=["jinja2.ext.loopcontrols"])
        env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(
            x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = TEMPLATE_DATE.strftime
        try:
            self._template = env.from_string(source)
        except jinja2.TemplateSyntaxError as e:
            raise ConfigError([f"{where}: not a jinja2 template ({e.message}, line {e.lineno})"]) from None

    def render(self, messages: Sequence[dict], add_generation_prompt: bool = False,
               tools: Optional[Sequence[dict]] = None) -> str:
        """The conversation's text; `tools`: the functions offered ([{"type": "function", "function":
        {...}}], the template's `tools` variable, left undefined when None as transformers does)."""
        extra = {} if tools is None else {"tools": list(tools)}
        try:
            return self._template.render(messages=list(messages), add_generation_prompt=add_generation_prompt,
                                         **self.variables, **extra)
        except ChatError:
            raise
        except Exception as e:  # (jinja2 raises many kinds; each is the template refusing this input)
            raise ChatError(f"the chat template failed on it ({type(e).__name__}: {e})") from None

    def pieces(self, messages: Sequence[dict]) -> List[Tuple[str, bool]]:
        """The rendered conversation as [(text, is the assistant's)], in order (see the module
        docstring); ChatError when the template does not render it prefix by prefix."""
        tools = getattr(messages, "tools", None)
        full = self.render(messages, tools=tools)
        self.check_calls(messages, tools, full)
        out, pos = [], 0
        for i, m in enumerate(messages):
            if m["role"] != "assistant":
                continue
            start, through = self.render(messages[:i], True, tools), self.render(messages[: i + 1], tools=tools)
            if not (full.startswith(through) and through.startswith(start) and len(start) >= pos):
                raise ChatError(f"the chat template does not render message {i} as a continuation of "
                                "the messages before it, so the assistant's tokens cannot be told apart")
            out += [(full[pos : len(start)], False), *_reply_pieces(full[len(start) : len(through)], m["content"], i)]
            pos = len(through)
        out.append((full[pos:], False))
        return [(text, trained) for text, trained in out if text]

    def check_calls(self, messages: Sequence[dict], tools=None, full: Optional[str] = None) -> None:
        """ChatError when the conversation's functions (`tools`) or calls (an assistant's
        tool_calls) are something this template drops: it renders the same without them (a
        template written before function calls, which would train on or prompt with the rest)."""
        if not tools and not any(m.get("tool_calls") for m in messages):
            return
        full = self.render(messages, tools=tools) if full is None else full
        if tools and self.render(messages) == full:
            raise ChatError("the chat template does not render the functions offered (tools): it was written "
                            "without them; give a template that takes `tools`")
        bare = [{k: v for k, v in m.items() if k != "tool_calls"} for m in messages]
        if any(m.get("tool_calls") for m in messages) and self.render(bare, tools=tools) == full:
            raise ChatError("the chat template does not render an assistant's tool_calls: it was written without "
                            "them; give a template that writes calls")

    def to_json(self) -> dict:
        return {"template": self.source, "variables": self.variables}

    def __reduce__(self):  # (to tokenizer worker processes: compiled again there; jinja2's isn't picklable)
        return (ChatTemplate, (self.source, self.variables))


def _reply_pieces(text: str, content: str, i: int) -> List[Tuple[str, bool]]:
    """Assistant message i's rendered span as [(text, trained)]: whole, or split around the tool
    outputs of its content (`ToolText`), which are not trained."""
    spans = getattr(content, "tool_spans", ())
    if not spans:
        return [(text, True)]
    at = text.find(content)
    if at < 0:
        raise ChatError(f"the chat template changes the text of message {i}, so its tool outputs cannot be found in it")
    out, pos = [], 0
    for start, end in spans:
        out += [(text[pos : at + start], True), (text[at + start : at + end], False)]
        pos = at + end
    return out + [(text[pos:], True)]


def _raise(message):
    raise ChatError(f"the chat template refused it: {message}")


class ChatTokenizer:
    """A tokenizer with a chat template: `encode_chat` turns a conversation into (ids, loss
    mask); `specials` (the default template's tokens, for a tokenizer without a template of its
    own) take the ids after the base vocabulary and are cut out of any text before the base
    tokenizer sees it."""

    kind = "chat"

    def __init__(self, base, template: ChatTemplate, specials: Sequence[str] = ()):
        self.base, self.template, self.specials = base, template, tuple(specials)
        self.eos_id = base.eos_id
        self.vocab_size = base.vocab_size + len(self.specials)
        self._ids = {s: base.vocab_size + i for i, s in enumerate(self.specials)}
        self._split = re.compile("(" + "|".join(map(re.escape, self.specials)) + ")") if self.specials else None

    @property
    def stop_id(self) -> Optional[int]:
        """The token that ends the assistant's turn, where sampling a reply stops: <|end|> under
        the default template, else the template's eos_token when it is one token (<|im_end|>,
        <|eot_id|>, ...), else the end-of-text id."""
        if self.specials:
            return self._ids["<|end|>"]
        end = self.template.variables.get("eos_token")
        ids = self.encode(end) if end else []
        return ids[0] if len(ids) == 1 else self.eos_id

    @property
    def stop_text(self) -> str:
        """stop_id's text as the template writes it."""
        if self.specials:
            return "<|end|>"
        end = self.template.variables.get("eos_token")
        return end if end and self.encode(end) == [self.stop_id] else self.decode([self.stop_id])

    def encode(self, text: str) -> List[int]:
        if self._split is None:
            return list(self.base.encode(text))
        out: List[int] = []
        for part in self._split.split(text):
            if part in self._ids:
                out.append(self._ids[part])
            elif part:
                out += list(self.base.encode(part))
        return out

    def decode(self, ids: Sequence[int]) -> str:
        out, run = [], []
        for i in map(int, ids):
            if i >= self.base.vocab_size and i - self.base.vocab_size < len(self.specials):
                out += [self.base.decode(run), self.specials[i - self.base.vocab_size]]
                run = []
            else:
                run.append(i)
        return "".join(out) + self.base.decode(run)

    def encode_chat(self, messages: Sequence[dict]) -> Tuple[np.ndarray, np.ndarray]:
        """(token ids int64, loss mask uint8: 1 on the assistant's tokens) of one conversation."""
        ids, mask = [], []
        for text, trained in self.template.pieces(messages):
            try:
                part = self.encode(text)
            except ValueError as e:  # (the char tokenizer: a character outside the vocabulary)
                raise ChatError(str(e)) from None
            ids += part
            mask += [int(trained)] * len(part)
        return np.asarray(ids, np.int64), np.asarray(mask, np.uint8)

    def prompt(self, messages: Sequence[dict], tools: Optional[Sequence[dict]] = None) -> List[int]:
        """The ids of a conversation followed by the start of the assistant's turn (to sample);
        `tools`: the functions offered (`ChatTemplate.render`)."""
        return self.encode(self.template.render(messages, add_generation_prompt=True, tools=tools))

    def reply_text(self, ids: Sequence[int], final: bool = True) -> str:
        """A sampled reply's text (a template's reply is its tokens' text; harmony reads its final
        channel, `data.harmony`)."""
        return self.decode(ids)

    def to_json(self) -> dict:
        return {"kind": "chat", "base": {**self.base.to_json(), "vocab_size": self.base.vocab_size},
                "specials": list(self.specials), **self.template.to_json()}

    def __reduce__(self):  # (to tokenizer worker processes: the template is rebuilt from its text)
        return (ChatTokenizer, (self.base, self.template, self.specials))


# ----------------------------------------------------------------------------- finding the template


def _token_text(value) -> Optional[str]:
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _hf_config(tokenizer_file: Path) -> dict:
    """tokenizer_config.json beside a Hugging Face tokenizer.json ({} when there is none)."""
    where = tokenizer_file.parent / "tokenizer_config.json"
    if not where.is_file():
        return {}
    try:
        return json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError([f"{where}: cannot read it as JSON ({e})"]) from None


def hf_chat_template(tokenizer_file: Path, source: Optional[str] = None, where: str = "") -> Optional[ChatTemplate]:
    """The chat template beside a Hugging Face tokenizer.json (or `source`, when given):
    chat_template.jinja, else tokenizer_config.json's "chat_template" (a string, or a list of
    named ones: "default"), with that config's special tokens (bos_token, eos_token, ...) as
    variables; None when there is none."""
    config = _hf_config(tokenizer_file)
    variables = {k: _token_text(v) for k, v in config.items() if k.endswith("_token") and _token_text(v) is not None}
    jinja = tokenizer_file.parent / "chat_template.jinja"
    if source is None and jinja.is_file():
        source, where = jinja.read_text(encoding="utf-8"), str(jinja)
    if source is None:
        source, where = config.get("chat_template"), f"{tokenizer_file.parent / 'tokenizer_config.json'} chat_template"
        if isinstance(source, list):
            source = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}.get("default")
    return ChatTemplate(source, variables, where) if isinstance(source, str) else None


def chat_tokenizer(base, template_file: Optional[Path] = None, tokenizer_file: Optional[Path] = None) -> ChatTokenizer:
    """`base` with a chat template: the one in `template_file` (data.chat_template), else the
    Hugging Face one beside `tokenizer_file` (with its special tokens as variables), else
    DEFAULT_TEMPLATE. SPECIAL_TOKENS are added unless the tokenizer is a Hugging Face one with a
    template (its own, or data.chat_template over its own special tokens)."""
    source = where = None
    if template_file is not None:
        where = f"data.chat_template={template_file}"
        try:
            source = template_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError([f"{where}: cannot read it ({e})"]) from None
    if tokenizer_file is not None:
        own = hf_chat_template(tokenizer_file, source, where or "")
        if own is not None:
            return ChatTokenizer(base, own)
    template = ChatTemplate(source, {}, where) if source is not None else ChatTemplate(DEFAULT_TEMPLATE)
    return ChatTokenizer(base, template, SPECIAL_TOKENS)


def template_text(template: ChatTemplate, messages: Sequence[dict], specials: Sequence[str] = SPECIAL_TOKENS) -> str:
    """The rendered conversation without the special tokens (the characters a char vocabulary needs)."""
    text = template.render(messages, tools=getattr(messages, "tools", None))
    for s in specials:
        text = text.replace(s, "")
    return text
