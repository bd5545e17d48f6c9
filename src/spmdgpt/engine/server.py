"""An OpenAI-compatible HTTP server for a trained run or a Hugging Face folder (`spmdgpt serve`).

    GET  /health                 {"status": "ok"} and the engine's state (waiting, running, pages_used, pages)
    GET  /v1/models              the one model served (its name: the run directory's)
    POST /v1/completions         prompt: text, token ids, or a list of either; max_tokens, temperature,
                                 top_p, top_k, n, stop, seed, stream, stream_options, echo, logprobs
    POST /v1/chat/completions    messages through the run's chat template; the same sampling fields,
                                 max_completion_tokens, logprobs + top_logprobs, response_format,
                                 tools + tool_choice (HONOURED, ACCEPTED, REFUSED: every field of the
                                 API's references; any other is a 400)
    POST /tokenize, /detokenize  text <-> token ids ({"prompt"} -> {"tokens", "count", "max_model_len"};
    GET  /tokenizer_info         {"tokens"} -> {"prompt"}) and the end-of-text token's name: vLLM's
                                 endpoints, which lm-eval's `local-completions` tokenizes with
                                 (tokenizer_backend=remote)

Every sequence runs in the inference engine (`spmdgpt.engine`: continuous batching over a paged
KV cache), owned by one worker thread: a request's n choices are n sequences (choice c samples
stream c of `seed`, so a seeded answer does not depend on what else runs), admitted as slots and
pages free up, each ending at the end-of-text token, a stop string, max_tokens or the context.
At most `max_queue` sequences wait for a slot: more are answered 429 with Retry-After. Errors are
the OpenAI API's JSON (`{"error": {"message", "type", "param", "code"}}`): 400 naming the field (a
prompt longer than the context or the page pool, a value out of range), 404 for another model's
name; 500 when the engine failed (an error in its step: every sequence it held ends with that
error, and the server answers 500 from then on, /health 503, until it is restarted).
`stream=true` answers with server-sent events, a chunk as each token is sampled (text that
may begin a stop string held back), then `data: [DONE]`; a client that goes away mid-answer ends
its sequences and frees their pages. A console line per request, and every 10 s while busy one
with the queue, running sequences, pages in use and tokens/s. The server only reads the run
directory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import math
import queue
import secrets
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from spmdgpt.config.validate import MAX_TEMPERATURE

PROMPT_BUCKET = 64  # prompt lengths padded to a multiple of this (fewer compiled programs)
MAX_LOGPROBS = 20  # the alternatives a token's logprobs may list (the OpenAI API's limit)


DISCONNECT_POLL_S = 0.5  # how often a non-streaming request checks that its client is still there


def api_messages(messages):
    """The Chat Completions API's messages as the chat template takes them: role "developer" (the
    API's name for the system message since o1) as "system", and content given as a list of text
    parts ([{"type": "text", "text": ...}], as current clients send it) joined into one text.
    RequestError 400 for parts that are not text (images, audio); anything else is left for the
    template's own checks."""
    if not isinstance(messages, list):
        return messages
    out = []
    for k, m in enumerate(messages):
        if isinstance(m, dict):
            m = dict(m)
            if m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
                raise RequestError(400, f"messages: message {k} has role {m.get('role')!r}; the roles are system, "
                                   "developer (read as system), user, assistant, tool", "messages")
            if m.get("role") == "developer":
                m["role"] = "system"
            if isinstance(m.get("content"), list):
                parts = m["content"]
                if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                           for p in parts):
                    raise RequestError(400, f"messages: message {k}'s content parts must be text parts "
                                       '({"type": "text", "text": ...}); this model reads text only', "messages")
                m["content"] = "".join(p["text"] for p in parts)
        out.append(m)
    return out


class RequestError(Exception):
    """A bad request: (HTTP status, message, the field it names)."""

    def __init__(self, status: int, message: str, param: Optional[str] = None, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.kind = status, message, param, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": None}}


@dataclass
class Sampling:
    """One request's sampling fields, checked."""

    max_tokens: Optional[int]  # (None: what the context leaves after the prompt, a chat request's default)
    temperature: float
    top_p: float
    n: int
    stop: List[str]
    seed: int  # (a request without one draws its own: unseeded answers differ, as the OpenAI API's do)
    stream: bool
    top_k: int = 0  # (vLLM's extension; 0: off)
    usage: bool = False  # (stream_options.include_usage: a last chunk with the usage)
    echo: bool = False
    logprobs: Optional[int] = None  # (alternatives per token: completions' logprobs, chat's top_logprobs)
    response_format: Optional[dict] = None  # (chat: a structured output's format, `grammar.Grammars.compile`)
    logit_bias: Dict[int, float] = field(default_factory=dict)  # ({token id: -100..100} added to its logit)
    frequency_penalty: float = 0.0  # (-2..2, OpenAI's: `engine.Request`)
    presence_penalty: float = 0.0
    chat: bool = False  # a chat request: its text is the reply as the tokenizer reads it (harmony: the final channel)
    tools: Any = None  # (chat: the functions offered, `tools.ToolUse`; set with the prompt, `Backend.chat_prompt`)
    model: Optional[str] = None  # the model the request named (a LoRA adapter's name, or the base's); None: the base
    adapter: int = 0  # (its LoRA adapter among the engine's: 0 the base)


def _number(body: dict, name: str, default, kind=float, low=None, high=None, low_open=False):
    value = body.get(name, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(400, f"{name}={value!r} must be {'an integer' if kind is int else 'a number'}", name)
    if isinstance(value, float) and not math.isfinite(value):  # (JSON's NaN and Infinity, which Python reads)
        raise RequestError(400, f"{name}={value} must be a finite number", name)
    if kind is int and isinstance(value, float) and value != int(value):
        raise RequestError(400, f"{name}={value!r} must be an integer", name)
    try:
        value = kind(value)
    except OverflowError:  # (an integer of hundreds of digits where a number is asked for)
        raise RequestError(400, f"{name} is too large", name) from None
    if (low is not None and (value <= low if low_open else value < low)) or (high is not None and value > high):
        if high is None:
            raise RequestError(400, f"{name}={value} must be {'>' if low_open else '>='} {low}", name)
        raise RequestError(400, f"{name}={value} must be in {'(' if low_open else '['}{low}, {high}]", name)
    return value


def _flag(body: dict, name: str) -> bool:
    """A boolean field: JSON's true or false (absent or null: false); RequestError 400 for
    anything else ("yes", 1), as the API reference types it."""
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RequestError(400, f"{name}={value!r} must be true or false", name)
    return value


# Every field of the OpenAI API's Completions and Chat Completions references, and what this server
# does with it (docs/serving.md's table): HONOURED ones shape the answer; ACCEPTED ones cannot change
# it here (who asks, what to store, a latency hint) and are read no further; REFUSED ones would change
# it and are not implemented: 400 naming the field unless it is absent or at one of its no-op
# values. Any other field is a 400 too, as the OpenAI API answers "unrecognized request argument".
# top_k is vLLM's extension (-1 or 0: off).
HONOURED = {
    "completions": {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "n", "stop", "seed", "stream",
                    "stream_options", "echo", "logprobs", "logit_bias", "frequency_penalty", "presence_penalty"},
    "chat": {"model", "messages", "max_completion_tokens", "max_tokens", "temperature", "top_p", "top_k", "n", "stop",
             "seed", "stream", "stream_options", "logprobs", "top_logprobs", "response_format", "logit_bias",
             "frequency_penalty", "presence_penalty", "tools", "tool_choice"},
}
ACCEPTED = {  # field: its type in the reference (checked; the value is read no further)
    "completions": {"user": str},
    "chat": {"user": str, "metadata": dict, "store": bool, "service_tier": str, "prompt_cache_key": str,
             "safety_identifier": str, "parallel_tool_calls": bool, "prediction": dict},
}
TYPE_NAMES = {str: "a string", dict: "an object", bool: "true or false"}
REFUSED = {  # field: its no-op values
    "completions": {"best_of": (1,), "suffix": ("",)},
    "chat": {"functions": ([],), "function_call": ("none",),
             "modalities": (["text"],), "audio": (), "reasoning_effort": (),
             "verbosity": (), "web_search_options": ()},
}
SEED_RANGE = (-2**63, 2**64 - 1)  # (any 64-bit integer, signed or not: `paged.row_keys`)


def _fields(body: dict, chat: bool) -> None:
    """RequestError 400 for the first field this server does not take, or takes only at its no-op value."""
    api = "chat" if chat else "completions"
    for name, value in body.items():
        if name in ACCEPTED[api]:
            kind = ACCEPTED[api][name]
            if value is not None and not isinstance(value, kind):
                raise RequestError(400, f"{name}={value!r} must be {TYPE_NAMES[kind]}", name)
            continue
        if name in HONOURED[api]:
            continue
        if name in REFUSED[api]:
            if value is not None and value not in REFUSED[api][name]:
                raise RequestError(400, f"{name} is not supported by this server; leave it out", name)
            continue
        other = "/v1/completions" if chat else "/v1/chat/completions"
        where = f" (a field of {other})" if name in HONOURED["completions" if chat else "chat"] else ""
        raise RequestError(400, f"unrecognized request argument: {name}{where}", name)


def _stream_usage(body: dict, stream: bool) -> bool:
    """stream_options.include_usage (a last chunk with the usage), checked as the API types it."""
    options = body.get("stream_options")
    if options is None:
        return False
    if not stream:
        raise RequestError(400, "stream_options is only allowed with stream=true", "stream_options")
    if not isinstance(options, dict) or set(options) - {"include_usage", "include_obfuscation"}:
        raise RequestError(400, "stream_options must be an object of include_usage (and include_obfuscation)",
                           "stream_options")
    try:
        return _flag(options, "include_usage")
    except RequestError as e:
        raise RequestError(400, f"stream_options.{e.message}", "stream_options.include_usage") from None


def sampling_of(body: dict, default_max: int, chat: bool = False) -> Sampling:
    """The sampling fields of a request body, or RequestError naming the first bad one."""
    _fields(body, chat)
    stop = body.get("stop")
    stop = [] if stop is None else [stop] if isinstance(stop, str) else stop  # ("": refused as [""] is)
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop) or len(stop) > 4:
        raise RequestError(400, "stop must be a string or a list of at most 4 non-empty strings", "stop")
    logprobs = body.get("logprobs")
    if chat:  # (the chat API's logprobs: a boolean, and top_logprobs alternatives, 0-20)
        top = _number(body, "top_logprobs", 0, int, 0, MAX_LOGPROBS)
        if body.get("top_logprobs") is not None and not _flag(body, "logprobs"):
            raise RequestError(400, "top_logprobs needs logprobs=true", "top_logprobs")
        logprobs = top if _flag(body, "logprobs") else None
    elif logprobs is not None:  # (the completions API's: how many alternatives, 0-20)
        logprobs = _number(body, "logprobs", None, int, 0, MAX_LOGPROBS)
    # (the chat API's current name for the length, over its older max_tokens)
    length = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    stream = _flag(body, "stream")
    return Sampling(
        # (chat without a length: what the context leaves, as the chat API's; completions: serve's max_tokens=)
        max_tokens=None if chat and body.get(length) is None else _number(body, length, default_max, int, 0),
        temperature=_number(body, "temperature", 1.0, float, 0.0, MAX_TEMPERATURE),  # (every sampler's range)
        top_p=_number(body, "top_p", 1.0, float, 0.0, 1.0, low_open=True),
        top_k=max(_number(body, "top_k", 0, int, -1), 0),
        n=_number(body, "n", 1, int, 1, 16),
        stop=stop,
        seed=_number(body, "seed", None, int, *SEED_RANGE) if body.get("seed") is not None else secrets.randbits(63),
        stream=stream,
        usage=_stream_usage(body, stream),
        echo=_flag(body, "echo"),
        logprobs=logprobs,
        chat=chat,
        response_format=body.get("response_format"),
        logit_bias=_logit_bias(body),
        frequency_penalty=_number(body, "frequency_penalty", 0.0, float, -2.0, 2.0),
        presence_penalty=_number(body, "presence_penalty", 0.0, float, -2.0, 2.0),
    )


def _logit_bias(body: dict) -> Dict[int, float]:
    """logit_bias as the API types it: {"token id": a number in [-100, 100]} (ids checked against the
    vocabulary with the prompt)."""
    bias = body.get("logit_bias")
    if bias is None:
        return {}
    if not isinstance(bias, dict):
        raise RequestError(400, "logit_bias must be an object of token ids to numbers in [-100, 100]", "logit_bias")
    out = {}
    for key, value in bias.items():
        if not (isinstance(key, str) and key.isdigit()):
            raise RequestError(400, f"logit_bias: {key!r} is not a token id", "logit_bias")
        try:
            out[int(key)] = _number(bias, key, None, float, -100.0, 100.0)
        except RequestError as e:
            raise RequestError(400, f"logit_bias: {e.message}", "logit_bias") from None
    return out


def scorer(cfg, rules, vocab: int):
    """The jitted scorer of prompts for logprobs: (params, tokens [batch ways, T], k) -> (the
    log-softmax [T, vocab of the model] of the first row, the k most likely of the tokenizer's
    `vocab` ids after each token): the model's own loss's. T is a multiple of PROMPT_BUCKET or the
    context (`Backend._scored`)."""
    import jax

    from spmdgpt.model import forward, lora

    def scores(params, tokens, k, adapter):  # (over the whole output: the model's own loss; the top k of real ids)
        params = lora.bind_layers(params, adapter, tokens.size)  # (LoRA adapters by name: the request's)
        logits = forward(cfg.model, rules, params, tokens)[0]  # (its rows repeat one: the first, gathered)
        row = jax.sharding.reshard(logits, rules.spec(None, None, None))[0]
        logp = jax.nn.log_softmax(row.astype(np.float32), axis=-1)
        return logp, jax.lax.top_k(logp[:, :vocab], k)

    return jax.jit(scores, static_argnums=2)


def unwritable(requests: list, sp: Optional[Sampling] = None) -> Optional[RequestError]:
    """The 400 for a structured output (or a forced tool call: its field named) that ended before
    its grammar was complete (the model's vocabulary cannot write what the grammar asks for next: a
    key with a character it lacks), or None."""
    stuck = [r for r in requests if r.constraint is not None and r.constraint.unfinished]
    if not stuck:
        return None
    name = "tool_choice" if sp is not None and sp.tools is not None and sp.tools.forced else "response_format"
    return RequestError(400, f"{name}: the answer ended after {len(stuck[0].tokens)} token(s), before the "
                        "grammar was complete: the model's vocabulary cannot write what it asks for next (a key, "
                        "value or pattern of characters it lacks)", name)


class Backend:
    """The model behind the server: parameters on the run's mesh, the engine (`spmdgpt.engine`),
    the tokenizer (and its chat template, if any), and one worker thread that owns the engine: it
    takes new sequences, cancellations and other jobs (scoring for logprobs) from a queue between
    the engine's steps, and steps while any sequence runs."""

    def __init__(self, cfg, rules, mesh, params, tokenizer, name: str, max_queue: int = 16,
                 engine: Optional[Any] = None, log=None, stops: tuple = (), adapters: Sequence[str] = ()):
        """stops: more ids that end an answer beside the tokenizer's end of turn (a Hugging Face
        folder's generation_config.json eos_token_id list). adapters: the names of the LoRA adapters
        stacked in params (`lora.stack`), in order: a request's `model` picks one (or the base, `name`)."""
        import jax

        from spmdgpt.engine import Engine, EngineConfig

        self.cfg, self.rules, self.mesh, self.params, self.tok, self.name = cfg, rules, mesh, params, tokenizer, name
        self.max_queue, self.log = max_queue, log
        self.models = {name: 0, **{a: k + 1 for k, a in enumerate(adapters)}}  # {a request's model: its adapter}
        with jax.set_mesh(mesh):
            self.engine = Engine(cfg.model, rules, params, tokenizer.vocab_size, engine or EngineConfig())
        stop = getattr(tokenizer, "stop_id", None)  # (the end of turn, else the end of text)
        stop = tokenizer.eos_id if stop is None else stop
        self.stop_ids = tuple(dict.fromkeys(([] if stop is None else [stop])
                                            + [t for t in stops if 0 <= t < tokenizer.vocab_size]))
        self._grammars = None  # (llguidance's view of the vocabulary, made at the first structured output)
        vocab = tokenizer.vocab_size

        self._scores = scorer(cfg, rules, vocab)
        self.commands: queue.Queue = queue.Queue()
        self.failed: Optional[str] = None  # the engine's error, once a step failed
        self.served = 0
        # sequences waiting for a slot (the engine's queue and the adds not yet taken): raised by `start`,
        # recomputed by the worker after each drain of commands and each step, both under _lock
        self.waiting = 0
        self._lock = threading.Lock()
        self._tokens, self._since = 0, time.perf_counter()
        threading.Thread(target=self._work, daemon=True, name="spmdgpt-serve").start()

    # ----------------------------------------------------------------------------- the worker

    def model_names(self) -> str:
        """The names a request's `model` may take, in words."""
        return ", ".join(repr(n) for n in self.models)

    def submit(self, fn, *args) -> concurrent.futures.Future:
        """fn(*args) on the worker thread, between two steps of the engine."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.commands.put(("call", (fn, args, future)))
        return future

    def start(self, requests: list) -> None:
        """Queue engine Requests (RequestError 429 when more than max_queue sequences would wait; 400
        when the request alone is more than max_queue sequences: waiting would never help)."""
        if self.failed:
            raise self.failure()
        if len(requests) > self.max_queue:
            raise RequestError(400, f"the request is {len(requests)} sequences (prompts x n) and the server queues at "
                               f"most max_queue={self.max_queue}; lower n or send fewer prompts at once", "n")
        with self._lock:
            if self.waiting + len(requests) > self.max_queue:
                raise RequestError(429, f"{self.waiting} sequences are waiting (max_queue={self.max_queue}); retry "
                                   "later", None, "rate_limit_error")
            self.waiting += len(requests)
            self.commands.put(("add", requests))

    def cancel(self, requests: list) -> None:
        """End these requests (a client that went away); their pages go back to the pool."""
        self.commands.put(("cancel", requests))

    def _work(self) -> None:
        import jax

        engine, last_line = self.engine, time.perf_counter()
        while True:
            try:
                kind, what = self.commands.get(block=not engine.busy)
            except queue.Empty:
                kind = None
            while kind is not None:
                with jax.set_mesh(self.mesh):
                    self._command(kind, what)
                try:
                    kind, what = self.commands.get_nowait()
                except queue.Empty:
                    kind = None
            self._count_waiting()  # (cancellations may have emptied the engine: no step would recount)
            if engine.busy and not self.failed:
                try:
                    with jax.set_mesh(self.mesh):
                        self._tokens += len(engine.step())
                except Exception as e:  # (every sequence held ends with the error, none waits forever)
                    self._fail(e)
                self._count_waiting()
            if self.log is not None and time.perf_counter() - last_line >= 10 and (engine.busy or self._tokens):
                last_line = time.perf_counter()
                print(self.status(), file=self.log, flush=True)

    def _count_waiting(self) -> None:
        with self._lock:  # (start() adds and queues under it: no add is counted twice or missed)
            self.waiting = len(self.engine.waiting) + sum(len(w) for k, w in list(self.commands.queue) if k == "add")

    def failure(self) -> "RequestError":
        return RequestError(500, f"the engine failed: {self.failed}; restart the server", None, "server_error")

    def _fail(self, e: Exception) -> None:
        """A step raised: end every sequence the engine holds (finish "error", its client woken),
        and refuse new ones from now on."""
        self.failed = (f"{type(e).__name__}: " + (str(e).strip().splitlines() or [""])[0])[:300]
        if self.log is not None:
            print(f"engine | failed: {self.failed}", file=self.log, flush=True)
        engine = self.engine
        held = list(engine.waiting) + [s.request for s in engine.slots if s is not None]
        engine.waiting.clear()
        engine.slots = [None] * len(engine.slots)
        for r in held:
            self._ended_by_failure(r)

    @staticmethod
    def _ended_by_failure(r) -> None:
        """`r` ends with the engine's error (finish "error"); its client is woken."""
        r.finish = "error"
        if r.on_token is not None:
            r.on_token(r, None)

    def _command(self, kind: str, what) -> None:
        if kind == "add":
            for r in what:
                if self.failed:
                    self._ended_by_failure(r)
                else:
                    self.engine.add(r)
        elif kind == "cancel":
            for r in what:
                self.engine.cancel(r)
        else:
            fn, args, future = what
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args))
            except BaseException as e:  # (handed to the request, which answers for it)
                future.set_exception(e)

    def status(self) -> str:
        """The periodic console line: queue, running sequences, pages in use, tokens/s since the last."""
        e, now = self.engine, time.perf_counter()
        rate = self._tokens / max(now - self._since, 1e-9)
        self._tokens, self._since = 0, now
        return (f"engine | queue {self.waiting} | running {e.running()} | pages {e.pages_used()}/{e.num_pages - 1} | "
                f"{rate:.1f} tokens/s | preemptions {e.preemptions}"
                + (f" | drafts accepted {e.acceptance:.0%}" if e.drafts else ""))

    # ----------------------------------------------------------------------------- requests

    def encode(self, prompt, field: str = "prompt") -> List[int]:
        if isinstance(prompt, str):
            try:
                ids = self.tok.encode(prompt)
            except ValueError as e:
                raise RequestError(400, f"{field}: {e}", field) from None
        elif isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            ids = list(prompt)
            if any(t < 0 or t >= self.tok.vocab_size for t in ids):
                raise RequestError(400, f"{field}: token ids must be in [0, {self.tok.vocab_size})", field)
        else:
            raise RequestError(400, f"{field} must be a text, a list of token ids, or a list of either", field)
        if not ids:
            raise RequestError(400, f"{field} is empty: give at least one token", field)
        return ids

    def prompts(self, body: dict) -> List[List[int]]:
        """The completion request's prompts as token ids (a text, ids, or a list of either)."""
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
            return [self.encode(p) for p in prompt]
        return [self.encode(prompt)]

    def chat_prompt(self, body: dict) -> tuple:
        """(the ids of a chat request's messages rendered by the template, with the functions it
        offers; those functions, `tools.ToolUse`, or None), or RequestError naming the field."""
        if not hasattr(self.tok, "prompt"):
            raise RequestError(400, f"model {self.name} has no chat template (it did not train on chat data); use "
                               "/v1/completions", "messages")
        messages = api_messages(body.get("messages"))
        from spmdgpt.data.chat import ChatError, conversation
        from spmdgpt.engine.tools import ToolError, tool_use

        try:
            use = tool_use(body, getattr(self.tok, "template", None), getattr(self.tok, "kind", "chat"))
        except ToolError as e:
            raise RequestError(400, str(e), e.param) from None
        try:
            messages = conversation({"messages": messages}, reply=False)
            if hasattr(self.tok, "template"):  # (calls in the history that the template would drop: refused)
                self.tok.template.check_calls(messages, list(use.tools) if use else None)
            return (self.tok.prompt(messages, tools=list(use.tools)) if use else self.tok.prompt(messages)), use
        except (ChatError, ValueError, TypeError, KeyError) as e:
            raise RequestError(400, f"messages: {e}", "messages") from None

    def grammar(self, response_format, tools=None) -> Optional[str]:
        """The grammar of a request's response_format, or of the one call a forced tool_choice asks
        for (`tools.forced_grammar`); None: free text. RequestError 400 naming the field."""
        from spmdgpt.engine.grammar import GrammarError, Grammars
        from spmdgpt.engine.tools import ToolError, forced_grammar

        if tools is not None and tools.forced:
            if response_format not in (None, {"type": "text"}):
                raise RequestError(400, "response_format and a tool_choice that forces a call cannot both hold the "
                                   "answer; give one", "response_format")
            try:
                response_format, field_ = {"type": "grammar", "grammar": forced_grammar(tools)}, "tools"
            except ToolError as e:
                raise RequestError(400, str(e), e.param) from None
        else:
            field_ = "response_format"
        if response_format is None or response_format == {"type": "text"}:
            return None
        if not self.engine.words:
            raise RequestError(400, f"{field_} needs token masks, which this server runs without (speculate= "
                               "> 0, or no llguidance: the serve extra)", field_)
        if getattr(self.tok, "kind", None) == "harmony":
            raise RequestError(400, "response_format is not supported for harmony chats yet", "response_format")
        try:
            if self._grammars is None:
                self._grammars = Grammars(self.tok, list(self.stop_ids),
                                          self.cfg.model.vocab_size)
            return self._grammars.compile(response_format)
        except GrammarError as e:
            message = str(e).splitlines()[0]  # (a forced call's: the function's parameters schema, in tools)
            raise RequestError(400, message.replace("response_format: ", "tools: a forced call's arguments: ")
                               if field_ == "tools" else message, field_) from None

    def requests(self, ids: List[int], sp: Sampling, on_token=None) -> list:
        """The engine Requests of one prompt's n choices (choice c: stream c of sp.seed), checked
        against the context and the page pool (RequestError 400 naming the field); with
        response_format, each its own matcher of the grammar (`grammar.Constraint`)."""
        from spmdgpt.engine import Request
        from spmdgpt.engine.generate import context_error

        stops = sp.stop
        # (checked at every token, so a new match ends in the newest token: only the tail is decoded, as
        # many tokens as the longest stop has bytes, and 4 more, not the whole completion each time)
        tail = 4 + max((len(s.encode()) for s in stops), default=0)
        stop = (lambda r: any(s in self.tok.decode(r.tokens[-tail:]) for s in stops)) if stops else None
        grammar, out = self.grammar(sp.response_format, sp.tools), []
        past = [t for t in sp.logit_bias if t >= self.tok.vocab_size]
        if past:
            raise RequestError(400, f"logit_bias: token {past[0]} is past the vocabulary ({self.tok.vocab_size} ids)",
                               "logit_bias")
        limit = sp.max_tokens
        if limit is None:  # (a chat request without a length: what the context leaves, as the chat API's)
            limit = max(self.cfg.model.max_seq_len - len(ids), 1)
        if sp.tools is not None and sp.tools.forced:  # (the grammar ends a forced call: no stop string cuts it)
            stop = None
        for c in range(sp.n):
            r = Request(list(ids), max(limit, 1), sp.temperature, sp.top_k, sp.top_p, sp.seed, c,
                        stop_ids=self.stop_ids, stop=stop, on_token=on_token,
                        constraint=None if grammar is None else self._grammars.constraint(grammar),
                        logit_bias=sp.logit_bias, frequency_penalty=sp.frequency_penalty,
                        presence_penalty=sp.presence_penalty, adapter=sp.adapter)
            err = self.engine.check(r) if limit else context_error(len(ids), 0, self.cfg.model.max_seq_len)
            if err:
                field_ = ("logit_bias" if "logit_bias" in err else ("messages" if sp.chat else "prompt")
                          if len(ids) >= limit else "max_tokens")
                raise RequestError(400, err.replace("max_new_tokens", "max_tokens"), field_)
            out.append(r)
        return out

    EOS_NAME = "<|endoftext|>"  # the end-of-text token's text where the tokenizer names none

    def eos_name(self) -> Optional[str]:
        """The text /tokenize reads as the end-of-text token (the tokenizer's own name for it)."""
        if self.tok.eos_id is None:
            return None
        name = getattr(self.tok, "token_text", lambda i: None)(self.tok.eos_id)
        return name or self.EOS_NAME

    def tokenize(self, text: str) -> List[int]:
        """Token ids of `text`, the end-of-text token's name read as that token (as a Hugging Face
        tokenizer reads its special tokens)."""
        name, ids = self.eos_name(), []
        for i, part in enumerate(text.split(name) if name else [text]):
            if i:
                ids.append(self.tok.eos_id)
            if part:
                try:
                    ids += self.tok.encode(part)
                except ValueError as e:
                    raise RequestError(400, f"prompt: {e}", "prompt") from None
        return ids

    def detokenize(self, ids: List[int]) -> str:
        """The text of token ids, the end-of-text token as its name: `tokenize`'s inverse."""
        name, eos = self.eos_name(), self.tok.eos_id
        parts, run = [], []
        for t in ids:
            if t == eos:
                parts += [self.tok.decode(run), name]
                run = []
            else:
                run.append(t)
        return "".join(parts) + self.tok.decode(run)

    def text(self, tokens: List[int], stops: List[str], final: bool, chat: bool = False) -> tuple:
        """(the text of a choice's tokens, cut at its first stop string; whether one was found). Not
        final (streaming): what may be sent so far, holding back a possible stop string's start and
        an unfinished character. chat: the reply as the chat tokenizer reads it (`reply_text`:
        harmony's final channel)."""
        if tokens and tokens[-1] in self.stop_ids:
            tokens = tokens[:-1]
        text = self.tok.reply_text(tokens, final) if chat else self.tok.decode(tokens)
        cut = min((text.index(s) for s in stops if s in text), default=None)
        if cut is not None:
            return text[:cut], True
        if not final:
            hold = max((len(s) - 1 for s in stops), default=0)
            text = text[:len(text) - hold] if hold else text
            text = text.rstrip("\ufffd")
        return text, False

    def choice(self, r, sp: Sampling) -> dict:
        """A finished request's choice: text, finish_reason, its new tokens (without the stop token)."""
        stops = [] if sp.tools is not None and sp.tools.forced else sp.stop
        text, cut = self.text(r.tokens, stops, final=True, chat=sp.chat)
        tokens = r.tokens[:-1] if r.tokens and r.tokens[-1] in self.stop_ids and r.finish == "stop" else r.tokens
        if sp.max_tokens == 0:
            text, tokens = "", []
        return {"text": text, "finish_reason": "stop" if (cut or r.finish == "stop") and sp.max_tokens != 0
                else "length", "tokens": tokens}

    def _scored(self, ids: List[int], k: int, sampled: bool = False, adapter: int = 0) -> tuple:
        """(each token's log-probability given the ones before (the first: None), the k most likely
        ids after each token but the last, their log-probabilities): the model's own (its loss's
        log-softmax, over every row of the embedding), or with `sampled` the distribution the engine
        samples from (over the tokenizer's ids: a padded vocabulary's extra rows left out, as the
        engine's own log-probabilities are). Run on the worker thread."""
        import jax

        n = len(ids)
        padded = -(-n // PROMPT_BUCKET) * PROMPT_BUCKET
        if padded > self.cfg.model.max_seq_len:
            padded = self.cfg.model.max_seq_len  # (one program for every length past the last bucket)
        # (one row, repeated over the ways the mesh splits a batch)
        tokens = np.zeros((self.rules.batch_divisor(), padded), np.int32)
        tokens[:, :n] = ids
        k = min(k, self.tok.vocab_size)  # (logprobs up to 20; a vocabulary may hold fewer ids)
        logp, (top, which) = self._scores(self.params, jax.device_put(tokens, self.rules.batch_sharding()), max(k, 1),
                                          np.int32(adapter))
        logp, top, which = np.asarray(logp), np.asarray(top)[:, :k], np.asarray(which)[:, :k]
        if sampled:  # (renormalised over the tokenizer's ids)
            real = logp[:, :self.tok.vocab_size]
            lse = np.log(np.sum(np.exp(real - real.max(-1, keepdims=True)), -1, keepdims=True)) + real.max(-1,
                                                                                                    keepdims=True)
            logp, top = logp - lse, top - lse
        return [None] + [float(logp[i - 1, ids[i]]) for i in range(1, n)], which[:n - 1], top[:n - 1]

    def logprobs(self, ids: List[int], k: int, adapter: int = 0) -> dict:
        """The completions API's logprobs object for the tokens `ids` (echoed prompt and completion):
        each token's log-probability given the ones before (the first: None) and the k most likely
        (of LoRA adapter `adapter`'s model; 0 the base)."""
        token_logprobs, which, top = self._scored(ids, k, adapter=adapter)
        top_logprobs: List[Any] = [None] + [{self.tok.decode([int(t)]): float(v) for t, v in zip(w, p, strict=True)}
                                            for w, p in zip(which, top, strict=True)]
        pieces = [self.tok.decode([t]) for t in ids]
        offsets = [0, *itertools.accumulate(len(p) for p in pieces)][:len(ids)]
        return {"tokens": pieces, "token_logprobs": token_logprobs, "top_logprobs": top_logprobs,
                "text_offset": offsets}

    def token_entry(self, t: int, logprob: float) -> dict:
        """The chat API's entry of one token: its text, log-probability and bytes."""
        bytes_of = getattr(self.tok, "token_bytes", None) or getattr(getattr(self.tok, "base", None), "token_bytes",
                                                                     None)
        try:
            raw = bytes_of(t) if bytes_of else None
        except Exception:  # (a chat template's own special tokens: past the base tokenizer's ids)
            raw = None
        text = self.tok.decode([t])
        return {"token": text, "logprob": logprob, "bytes": list(text.encode() if raw is None else raw)}

    def chat_logprobs(self, prompt: List[int], tokens: List[int], k: int, adapter: int = 0) -> dict:
        """The chat API's logprobs object of a reply's `tokens` after `prompt`: `content`, per token its
        text, log-probability, bytes and the k most likely alternatives (`top_logprobs`), of the
        model's own distribution over the tokenizer's ids (`_scored`'s `sampled`: temperature 1,
        before top-p, top-k, penalties and biases, as vLLM's logprobs are by default; streamed
        answers carry the engine's own, the same)."""
        token_logprobs, which, top = self._scored(prompt + tokens, k, sampled=True, adapter=adapter)
        content = []
        for i, t in enumerate(tokens, start=len(prompt)):
            entry = self.token_entry(t, token_logprobs[i])
            entry["top_logprobs"] = [self.token_entry(int(w), float(v)) for w, v in zip(which[i - 1], top[i - 1],
                                                                                    strict=True)]
            content.append(entry)
        return {"content": content, "refusal": None}

    @staticmethod
    def calls(text: str, tools) -> dict:
        """{"text": the reply's text outside its calls, "tool_calls", "finish_reason": "tool_calls"} of
        a reply that calls functions (`tools.parse`); {} for one that calls none."""
        from spmdgpt.engine.tools import api_calls, parse

        content, calls = parse(text, tools.format)
        if not calls:
            return {}
        return {"text": content, "tool_calls": api_calls(calls, lambda: f"call_{uuid.uuid4().hex[:24]}"),
                "finish_reason": "tool_calls"}

    def finish_choices(self, prompts: List[List[int]], requests: list, sp: Sampling) -> tuple:
        """(the choices of finished requests, n per prompt in order, with text, finish_reason and
        logprobs as asked; the new tokens used). Scoring runs on the worker thread (`logprobs`)."""
        choices, used = [], 0
        for i, r in enumerate(requests):
            ids = prompts[i // sp.n]
            c = self.choice(r, sp)
            choice = {"index": i, "text": (self.tok.decode(ids) if sp.echo else "") + c["text"],
                      "finish_reason": c["finish_reason"], "logprobs": None}
            if sp.tools is not None and sp.tools.parsed:  # (the reply's calls, as the API's tool_calls)
                choice.update(self.calls(choice["text"], sp.tools))
            if sp.logprobs is not None and sp.chat:
                choice["logprobs"] = self.chat_logprobs(ids, c["tokens"], sp.logprobs, sp.adapter)
            elif sp.logprobs is not None:
                scored = (ids if sp.echo else []) + c["tokens"]
                lp = self.logprobs(ids + c["tokens"], sp.logprobs, sp.adapter)
                if not sp.echo:  # (the completion's tokens only)
                    lp = {key: v[len(ids):] for key, v in lp.items()}
                choice["logprobs"] = lp if scored else None
            choices.append(choice)
            used += len(c["tokens"])
        return choices, used

    def complete(self, prompts: List[List[int]], sp: Sampling, timeout: float = 600) -> tuple:
        """The whole answer, from a thread other than the worker's (tests, scripts): (choices, new
        tokens used), as `finish_choices` gives them."""
        done = threading.Semaphore(0)
        requests = [r for ids in prompts
                    for r in self.requests(ids, sp, lambda r, t: r.done and done.release())]
        self.start(requests)
        for _ in requests:
            if not done.acquire(timeout=timeout):
                raise TimeoutError(f"no answer in {timeout} s")
        if any(r.finish == "error" for r in requests):
            raise RuntimeError(self.failure().message)
        return self.submit(self.finish_choices, prompts, requests, sp).result(timeout)


class Server:
    """The Starlette app around a Backend (see the module docstring)."""

    def __init__(self, backend: Backend, default_max_tokens: int = 16, log=sys.stderr):
        self.started = int(time.time())  # (/v1/models' `created`)
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def http_error(request, exc):  # (an unknown path or method: the API's JSON error, not plain text)
            what = "no such route" if exc.status_code == 404 else exc.detail
            return JSONResponse(RequestError(exc.status_code, f"{request.method} {request.url.path}: {what}").body(),
                                status_code=exc.status_code, headers=getattr(exc, "headers", None))

        self.backend, self.default_max, self.log = backend, default_max_tokens, log
        self.app = Starlette(exception_handlers={HTTPException: http_error}, routes=[
            Route("/health", self.health, methods=["GET"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/models/{model:path}", self.model, methods=["GET"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/tokenize", self.tokenize, methods=["POST"]),
            Route("/detokenize", self.detokenize, methods=["POST"]),
            Route("/tokenizer_info", self.tokenizer_info, methods=["GET"]),
        ])

    async def health(self, request):
        from starlette.responses import JSONResponse

        e = self.backend.engine
        if self.backend.failed:
            return JSONResponse({"status": "error", "error": self.backend.failure().message}, status_code=503)
        return JSONResponse({"status": "ok", "waiting": self.backend.waiting, "running": e.running(),
                             "pages_used": e.pages_used(), "pages": e.num_pages - 1})

    async def models(self, request):
        from starlette.responses import JSONResponse

        return JSONResponse({"object": "list", "data": [self._model(name) for name in self.backend.models]})

    def _unknown(self, name: str) -> RequestError:
        """The API's 404 for a model this server does not serve."""
        return RequestError(404, f"the model {name!r} does not exist; this server serves {self.backend.model_names()}",
                            "model", "not_found_error")

    def _model(self, name: str) -> dict:
        """The API's model object (a LoRA adapter's names its base in `parent`, as vLLM's does)."""
        parent = {"parent": self.backend.name} if name != self.backend.name else {}
        return {"id": name, "object": "model", "created": self.started, "owned_by": "spmdgpt", **parent}

    async def model(self, request):
        """GET /v1/models/{id}: the served model, or 404 (the OpenAI API's retrieve)."""
        from starlette.responses import JSONResponse

        name = request.path_params["model"]
        if name not in self.backend.models:
            return JSONResponse(self._unknown(name).body(), status_code=404)
        return JSONResponse(self._model(name))

    async def tokenize(self, request):
        from starlette.responses import JSONResponse

        try:
            body = await self._body(request)
            text = body.get("prompt")
            if not isinstance(text, str):
                raise RequestError(400, "prompt must be a text", "prompt")
            ids = self.backend.tokenize(text)
        except RequestError as e:
            return JSONResponse(e.body(), status_code=e.status)
        return JSONResponse({"tokens": ids, "count": len(ids), "max_model_len": self.backend.cfg.model.max_seq_len})

    async def detokenize(self, request):
        from starlette.responses import JSONResponse

        try:
            body = await self._body(request)
            tokens = body.get("tokens")
            if not isinstance(tokens, list):
                raise RequestError(400, "tokens must be a list of token ids", "tokens")
            ids = self.backend.encode(tokens, "tokens") if tokens else []
        except RequestError as e:
            return JSONResponse(e.body(), status_code=e.status)
        return JSONResponse({"prompt": self.backend.detokenize(ids)})

    async def tokenizer_info(self, request):
        from starlette.responses import JSONResponse

        return JSONResponse({"eos_token": self.backend.eos_name(), "bos_token": None, "pad_token": None,
                             "model_max_length": self.backend.cfg.model.max_seq_len,
                             "tokenizer_class": type(self.backend.tok).__name__})

    async def _body(self, request) -> dict:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            raise RequestError(400, "the request body is not JSON") from None
        except RecursionError:  # (arrays or objects nested thousands deep)
            raise RequestError(400, "the request body is nested too deep to read") from None
        if not isinstance(body, dict):
            raise RequestError(400, "the request body must be a JSON object")
        model = body.get("model")
        if model is not None and not isinstance(model, str):
            raise RequestError(400, f"model={json.dumps(model)} must be a string: a served model's name", "model")
        if model is not None and model not in self.backend.models:
            raise self._unknown(model)
        return body

    async def _answer(self, request, chat: bool):
        from starlette.responses import JSONResponse

        started, loop, backend = time.perf_counter(), asyncio.get_running_loop(), self.backend
        events: asyncio.Queue = asyncio.Queue()  # (request, its tokens so far, whether it ended), a token each
        try:
            body = await self._body(request)
            sp = sampling_of(body, self.default_max, chat)
            sp.model = body.get("model") or backend.name
            sp.adapter = backend.models[sp.model]
            if chat:
                if sp.echo:
                    raise RequestError(400, "echo is for /v1/completions", "echo")
                ids, sp.tools = backend.chat_prompt(body)
                prompts = [ids]
            else:
                prompts = backend.prompts(body)
            if sp.echo and sp.stream:
                raise RequestError(400, "echo with stream is not supported", "echo")
            if sp.logprobs is not None and sp.stream and not (chat and sp.logprobs == 0):
                raise RequestError(400, "logprobs with stream is not supported here (chat: logprobs without "
                                   "top_logprobs is); ask without stream", "top_logprobs" if chat else "logprobs")
            requests = [r for ids in prompts
                        for r in backend.requests(ids, sp, lambda r, t: loop.call_soon_threadsafe(
                            events.put_nowait, (r, len(r.tokens), r.done)))]
            if sp.max_tokens == 0:  # (nothing to sample: the prompt's log-probabilities at most)
                for r in requests:
                    r.finish = "length"
            else:
                backend.start(requests)
        except RequestError as e:
            self._say(request, e.status, started, e.message)
            headers = {"Retry-After": "1"} if e.status == 429 else None
            return JSONResponse(e.body(), status_code=e.status, headers=headers)
        except Exception as e:  # (a fault of ours preparing it: the API's JSON error, not a plain-text 500)
            failed = RequestError(500, f"the request could not be prepared: {type(e).__name__}: "
                                  f"{(str(e).strip().splitlines() or [''])[0][:200]}", None, "server_error")
            self._say(request, 500, started, failed.message)
            return JSONResponse(failed.body(), status_code=500)
        ident = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        if sp.stream:
            return self._stream(request, started, ident, created, requests, events, sp, chat,
                                sum(len(p) for p in prompts))
        try:
            checked = time.perf_counter()
            while not all(r.done for r in requests):
                try:
                    await asyncio.wait_for(events.get(), DISCONNECT_POLL_S)
                except asyncio.TimeoutError:
                    pass
                if time.perf_counter() - checked >= DISCONNECT_POLL_S:  # (a client that went away)
                    checked = time.perf_counter()
                    if await request.is_disconnected():
                        self._say(request, 499, started, "the client went away; its sequences ended")
                        return JSONResponse({}, status_code=499)
        finally:  # (a client that went away, or a task cancelled: its sequences end, their pages go back)
            if not all(r.done for r in requests):
                backend.cancel(requests)
        if any(r.finish == "error" for r in requests):
            e = backend.failure()
            self._say(request, e.status, started, backend.failed)
            return JSONResponse(e.body(), status_code=e.status)
        unfinished = unwritable(requests, sp)
        if unfinished:
            self._say(request, 400, started, unfinished.message)
            return JSONResponse(unfinished.body(), status_code=400)
        try:
            choices, used = await asyncio.wrap_future(backend.submit(backend.finish_choices, prompts, requests, sp))
        except Exception as e:  # (scoring for logprobs failed: the API's JSON error, not a plain-text 500)
            failed = RequestError(500, f"the answer could not be scored: {type(e).__name__}: "
                                  f"{(str(e).strip().splitlines() or [''])[0][:200]}", None, "server_error")
            self._say(request, 500, started, failed.message)
            return JSONResponse(failed.body(), status_code=500)
        prompt_tokens = sum(len(p) for p in prompts)  # (each prompt once, as the OpenAI API counts: n shares it)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": used, "total_tokens": prompt_tokens + used}
        self._say(request, 200, started, f"{len(choices)} choice(s), {used} new tokens")
        if chat:  # (tool_calls only where the reply calls functions, as the API's)
            calls = lambda c: {"tool_calls": c["tool_calls"]} if "tool_calls" in c else {}  # noqa: E731
            choices = [{"index": c["index"], "message": {"role": "assistant", "content": c["text"], **calls(c)},
                        "finish_reason": c["finish_reason"], "logprobs": c["logprobs"]} for c in choices]
        return JSONResponse({"id": ident, "object": "chat.completion" if chat else "text_completion",
                             "created": created, "model": sp.model, "choices": choices, "usage": usage})

    def _stream(self, request, started: float, ident: str, created: int, requests: list, events: asyncio.Queue,
                sp: Sampling, chat: bool, prompt_tokens: int):
        """Server-sent events: each choice's new text as its tokens are sampled (held back where a
        stop string may begin), then its finish_reason, then (stream_options.include_usage) a chunk
        of no choices with the usage, then `data: [DONE]`."""
        from starlette.responses import StreamingResponse

        from spmdgpt.engine.tools import sendable

        backend = self.backend
        kind = "chat.completion.chunk" if chat else "text_completion"
        index = {r.ident: i for i, r in enumerate(requests)}

        def event(choices: list, usage: Optional[dict] = None) -> str:
            body = {"id": ident, "object": kind, "created": created, "model": sp.model, "choices": choices}
            if sp.usage:  # (the API's: null in every chunk but the last)
                body["usage"] = usage
            return "data: " + json.dumps(body) + "\n\n"

        def chunk(i: int, text: Optional[str], finish: Optional[str] = None, role: bool = False,
                  scored: Optional[list] = None, calls: Optional[list] = None) -> str:
            if chat:
                delta = {} if text is None else {"content": text}
                if calls:  # (each call whole in one delta, its index among the choice's calls)
                    delta = {"tool_calls": [{"index": k, **c} for k, c in enumerate(calls)]}
                choice = {"index": i, "delta": {"role": "assistant", **delta} if role else delta,
                          "finish_reason": finish, "logprobs": {"content": scored, "refusal": None} if scored else None}
            else:
                choice = {"index": i, "text": text or "", "finish_reason": finish, "logprobs": None}
            return event([choice])

        # (with functions offered, text that may begin a call is held back until the reply ends: then its
        # calls are sent, or the text if it holds none)
        tooled = sp.tools is not None and sp.tools.parsed
        # (chat logprobs: each token's log-probability as the engine sampled it, sent with the chunk that
        # carries its text, or with a later one where text was held back)
        scored_up_to = [0] * len(requests)

        def scored(i: int, r, upto: int) -> Optional[list]:
            if sp.logprobs is None:
                return None
            ids = [(t, lp) for t, lp in zip(r.tokens[scored_up_to[i]:upto], r.logprobs[scored_up_to[i]:upto],
                                            strict=True) if t not in backend.stop_ids]
            scored_up_to[i] = upto
            return [{**backend.token_entry(t, lp), "top_logprobs": []} for t, lp in ids]

        async def stream():
            sent, ended, used = [""] * len(requests), [False] * len(requests), 0
            try:
                if chat:
                    for i in range(len(requests)):
                        yield chunk(i, "", role=True)
                if sp.max_tokens == 0:  # (nothing sampled)
                    ended = [True] * len(requests)
                    for i in range(len(requests)):
                        yield chunk(i, None if chat else "", "length")
                while not all(ended):
                    r, n, done = await events.get()  # (the request after its n-th token)
                    i = index[r.ident]
                    if ended[i]:
                        continue
                    text, _ = backend.text(r.tokens[:n], [] if tooled and sp.tools.forced else sp.stop, final=done,
                                           chat=sp.chat)
                    found = {}
                    if tooled and done and r.finish != "error":
                        found = backend.calls(text, sp.tools)
                        text = (found["text"] or "") if found else text
                    elif tooled:
                        text = text[:sendable(text, sp.tools.format)]
                    if len(text) > len(sent[i]) and text.startswith(sent[i]):
                        yield chunk(i, text[len(sent[i]):], scored=scored(i, r, n))
                        sent[i] = text
                    if done and r.finish == "error":  # (the engine failed: the API's error object, then the end)
                        yield "data: " + json.dumps(backend.failure().body()) + "\n\n"
                        break
                    if done and unwritable([r], sp):
                        yield "data: " + json.dumps(unwritable([r], sp).body()) + "\n\n"
                        break
                    if done:
                        ended[i] = True
                        used += len(backend.choice(r, sp)["tokens"])
                        if found:
                            yield chunk(i, None, calls=found["tool_calls"])
                        yield chunk(i, None if chat else "", found.get("finish_reason")
                                    or backend.choice(r, sp)["finish_reason"], scored=scored(i, r, n))
                if sp.usage and all(ended):
                    yield event([], {"prompt_tokens": prompt_tokens, "completion_tokens": used,
                                     "total_tokens": prompt_tokens + used})
                yield "data: [DONE]\n\n"
                self._say(request, 200, started, f"{len(requests)} choice(s) streamed, {used} new tokens")
            finally:  # (the client went away mid-stream: its sequences end, their pages go back)
                if not all(r.done for r in requests):
                    backend.cancel(requests)
                    self._say(request, 499, started, "the client went away: its sequences cancelled")

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def completions(self, request):
        return await self._answer(request, chat=False)

    async def chat(self, request):
        return await self._answer(request, chat=True)

    def _say(self, request, status: int, started: float, what: str = "") -> None:
        print(f"{request.method} {request.url.path} {status} {time.perf_counter() - started:.2f} s"
              + (f" | {what}" if what else "") + f" | queue {self.backend.waiting}", file=self.log, flush=True)


def routes_of(server: Server) -> Dict[str, str]:
    """{path: methods} of the server's routes (for its start-up line)."""
    return {r.path: ",".join(sorted(r.methods - {"HEAD"})) for r in server.app.routes}
