"""An OpenAI-compatible HTTP server for a trained run or a Hugging Face folder (`spmdgpt serve`).

    GET  /health                 {"status": "ok"}
    GET  /v1/models              the one model served (its name: the run directory's)
    POST /v1/completions         prompt: text, token ids, or a list of either; max_tokens, temperature,
                                 top_p, n, stop, seed, stream, echo, logprobs
    POST /v1/chat/completions    messages through the run's chat template; the same sampling fields

Requests run one at a time on a worker thread, in arrival order, through the KV-cache sampler
(`generate.Sampler`: a request's n samples are one batch, each with its own stream from `seed`);
prompt lengths are padded to multiples of 64 and max_tokens rounded up to a power of two, so that
few programs are compiled. At most `max_queue` requests wait: one more is answered 429 with
Retry-After. Errors are the OpenAI API's JSON (`{"error": {"message", "type", "param", "code"}}`):
400 naming the field (a prompt longer than the context, a value out of range), 404 for another
model's name. `stream=true` answers with server-sent events (chunks, then `data: [DONE]`); with
this sampler a completion is sent whole once it is sampled (token-by-token streaming and
continuous batching come with the inference engine). The server only reads the run directory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import queue
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np

PROMPT_BUCKET = 64  # prompt lengths padded to a multiple of this (fewer compiled programs)
LEAST_NEW = 16  # max_tokens rounded up to a power of two, at least this


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

    max_tokens: int
    temperature: float
    top_p: float
    n: int
    stop: List[str]
    seed: int
    stream: bool
    echo: bool = False
    logprobs: Optional[int] = None


def _number(body: dict, name: str, default, kind=float, low=None, high=None, low_open=False):
    value = body.get(name, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
        raise RequestError(400, f"{name}={value!r} must be {'an integer' if kind is int else 'a number'}", name)
    value = kind(value)
    if (low is not None and (value <= low if low_open else value < low)) or (high is not None and value > high):
        bounds = f"{'(' if low_open else '['}{low}, {high if high is not None else 'inf'}]"
        raise RequestError(400, f"{name}={value} must be in {bounds}", name)
    return value


def sampling_of(body: dict, default_max: int) -> Sampling:
    """The sampling fields of a request body, or RequestError naming the first bad one."""
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop) or len(stop) > 4:
        raise RequestError(400, "stop must be a string or a list of at most 4 non-empty strings", "stop")
    logprobs = body.get("logprobs")
    if logprobs is not None and not isinstance(logprobs, bool):
        logprobs = _number(body, "logprobs", None, int, 0, 20)
    elif isinstance(logprobs, bool):  # (the chat API's logprobs=true)
        logprobs = 1 if logprobs else None
    return Sampling(
        max_tokens=_number(body, "max_tokens", default_max, int, 0),
        temperature=_number(body, "temperature", 1.0, float, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, float, 0.0, 1.0, low_open=True),
        n=_number(body, "n", 1, int, 1, 16),
        stop=stop,
        seed=_number(body, "seed", 0, int, 0),
        stream=bool(body.get("stream", False)),
        echo=bool(body.get("echo", False)),
        logprobs=logprobs,
    )


class Backend:
    """The model behind the server: parameters on the run's mesh, the sampler, the tokenizer (and
    its chat template, if any), and one worker thread that runs the requests in turn."""

    def __init__(self, cfg, rules, mesh, params, tokenizer, name: str, max_queue: int = 16):
        import jax

        from spmdgpt.generate import Sampler
        from spmdgpt.model import forward

        self.cfg, self.rules, self.mesh, self.params, self.tok, self.name = cfg, rules, mesh, params, tokenizer, name
        self.sampler = Sampler(cfg.model, rules, vocab_limit=tokenizer.vocab_size)
        self.stop_id = getattr(tokenizer, "stop_id", None)
        self.stop_id = tokenizer.eos_id if self.stop_id is None else self.stop_id
        vocab = tokenizer.vocab_size

        def scores(params, tokens, k):  # (over the whole output: the model's own loss; the top k of real ids)
            logits = forward(cfg.model, rules, params, tokens)[0]  # (its rows repeat one: the first, gathered)
            row = jax.sharding.reshard(logits, rules.spec(None, None, None))[0]
            logp = jax.nn.log_softmax(row.astype(np.float32), axis=-1)
            return logp, jax.lax.top_k(logp[:, :vocab], k)

        self._scores = jax.jit(scores, static_argnums=2)
        self.jobs: queue.Queue = queue.Queue(maxsize=max_queue)
        self.served = 0
        threading.Thread(target=self._work, daemon=True, name="spmdgpt-serve").start()

    # ----------------------------------------------------------------------------- the worker

    def submit(self, fn, *args) -> concurrent.futures.Future:
        """fn(*args) on the worker thread; RequestError 429 when the queue is full."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            self.jobs.put_nowait((fn, args, future))
        except queue.Full:
            raise RequestError(429, f"{self.jobs.maxsize} requests are waiting; retry later", None,
                               "rate_limit_error") from None
        return future

    def _work(self) -> None:
        import jax

        while True:
            fn, args, future = self.jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                with jax.set_mesh(self.mesh):
                    future.set_result(fn(*args))
            except BaseException as e:  # (handed to the request, which answers for it)
                future.set_exception(e)

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

    def chat_prompt(self, body: dict) -> List[int]:
        if not hasattr(self.tok, "prompt"):
            raise RequestError(400, f"model {self.name} has no chat template (it did not train on chat data); use "
                               "/v1/completions", "messages")
        messages = body.get("messages")
        from spmdgpt.data.chat import ChatError, conversation

        try:
            return self.tok.prompt(conversation({"messages": messages}, reply=False))
        except (ChatError, ValueError, TypeError, KeyError) as e:
            raise RequestError(400, f"messages: {e}", "messages") from None

    def check_fits(self, ids: List[int], sp: Sampling) -> None:
        from spmdgpt.generate import context_error

        err = context_error(len(ids), sp.max_tokens, self.cfg.model.max_seq_len)
        if err:
            raise RequestError(400, err.replace("max_new_tokens", "max_tokens"), "prompt" if len(ids) >= sp.max_tokens
                               else "max_tokens")

    def complete(self, ids: List[int], sp: Sampling) -> List[dict]:
        """The n choices for one prompt: text, finish_reason, the new token ids (worker thread)."""
        from spmdgpt.generate import SamplingParams

        if sp.max_tokens == 0:
            return [{"text": "", "finish_reason": "length", "tokens": []} for _ in range(sp.n)]
        room = self.cfg.model.max_seq_len - len(ids)
        budget = min(max(LEAST_NEW, 1 << (sp.max_tokens - 1).bit_length()), room)  # (a power of two: few programs)
        params = SamplingParams(budget, sp.temperature, 0, sp.top_p, sp.seed, self.stop_id)
        rows = self.sampler.generate(self.params, [ids] * sp.n, params, pad_to=PROMPT_BUCKET)
        out = []
        for row in rows:
            row = row[:sp.max_tokens]
            stopped = self.stop_id is not None and self.stop_id in row
            if stopped:
                row = row[:row.index(self.stop_id)]
            text = self.tok.decode(row)
            cut = min((text.index(s) for s in sp.stop if s in text), default=None)
            if cut is not None:
                text, stopped = text[:cut], True
            out.append({"text": text, "finish_reason": "stop" if stopped else "length", "tokens": row})
        return out

    def logprobs(self, ids: List[int], k: int) -> dict:
        """OpenAI's logprobs object for the tokens `ids` (echoed prompt and completion): each
        token's log-probability given the ones before (the first: None) and the k most likely."""
        import jax

        n = len(ids)
        padded = -(-n // PROMPT_BUCKET) * PROMPT_BUCKET
        if padded > self.cfg.model.max_seq_len:
            padded = n
        # (one row, repeated over the ways the mesh splits a batch, as the sampler pads its rows)
        tokens = np.zeros((self.rules.batch_divisor(), padded), np.int32)
        tokens[:, :n] = ids
        logp, (top, which) = self._scores(self.params, jax.device_put(tokens, self.rules.batch_sharding()), max(k, 1))
        logp, top, which = np.asarray(logp), np.asarray(top), np.asarray(which)
        token_logprobs: List[Any] = [None] + [float(logp[i - 1, ids[i]]) for i in range(1, n)]
        top_logprobs: List[Any] = [None] + [{self.tok.decode([int(t)]): float(v) for t, v in
                                             zip(which[i - 1, :k], top[i - 1, :k], strict=True)} for i in range(1, n)]
        pieces = [self.tok.decode([t]) for t in ids]
        offsets = [0, *itertools.accumulate(len(p) for p in pieces)][:n]
        return {"tokens": pieces, "token_logprobs": token_logprobs, "top_logprobs": top_logprobs,
                "text_offset": offsets}

    def completion_job(self, prompts: List[List[int]], sp: Sampling) -> tuple:
        choices, used = [], 0
        for p, ids in enumerate(prompts):
            for c in self.complete(ids, sp):
                text = (self.tok.decode(ids) if sp.echo else "") + c["text"]
                choice = {"index": len(choices), "text": text, "finish_reason": c["finish_reason"], "logprobs": None}
                if sp.logprobs is not None:
                    scored = (ids if sp.echo else []) + c["tokens"]
                    lp = self.logprobs(ids + c["tokens"], sp.logprobs)
                    if not sp.echo:  # (the completion's tokens only)
                        lp = {key: v[len(ids):] for key, v in lp.items()}
                    choice["logprobs"] = lp if scored else None
                choices.append(choice)
                used += len(c["tokens"])
        return choices, used


class Server:
    """The Starlette app around a Backend (see the module docstring)."""

    def __init__(self, backend: Backend, default_max_tokens: int = 16, log=sys.stderr):
        from starlette.applications import Starlette
        from starlette.routing import Route

        self.backend, self.default_max, self.log = backend, default_max_tokens, log
        self.app = Starlette(routes=[
            Route("/health", self.health, methods=["GET"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
        ])

    async def health(self, request):
        from starlette.responses import JSONResponse

        return JSONResponse({"status": "ok"})

    async def models(self, request):
        from starlette.responses import JSONResponse

        return JSONResponse({"object": "list", "data": [{"id": self.backend.name, "object": "model", "created": 0,
                                                         "owned_by": "spmdgpt"}]})

    async def _body(self, request) -> dict:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            raise RequestError(400, "the request body is not JSON") from None
        if not isinstance(body, dict):
            raise RequestError(400, "the request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != self.backend.name:
            raise RequestError(404, f"the model {model!r} does not exist; this server serves {self.backend.name!r}",
                               "model", "not_found_error")
        return body

    async def _answer(self, request, chat: bool):
        from starlette.responses import JSONResponse

        started = time.perf_counter()
        try:
            body = await self._body(request)
            sp = sampling_of(body, self.default_max)
            if chat:
                if sp.echo:
                    raise RequestError(400, "echo is for /v1/completions", "echo")
                prompts = [self.backend.chat_prompt(body)]
            else:
                prompts = self.backend.prompts(body)
            if sp.echo and sp.stream:
                raise RequestError(400, "echo with stream is not supported", "echo")
            for ids in prompts:
                self.backend.check_fits(ids, sp)
            future = self.backend.submit(self.backend.completion_job, prompts, sp)
            choices, used = await asyncio.wrap_future(future)
        except RequestError as e:
            self._say(request, e.status, started)
            headers = {"Retry-After": "1"} if e.status == 429 else None
            return JSONResponse(e.body(), status_code=e.status, headers=headers)
        ident = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        usage = {"prompt_tokens": sum(len(p) for p in prompts) * sp.n, "completion_tokens": used,
                 "total_tokens": sum(len(p) for p in prompts) * sp.n + used}
        self._say(request, 200, started, f"{len(choices)} choice(s), {used} new tokens")
        created = int(time.time())
        if chat:
            choices = [{"index": c["index"], "message": {"role": "assistant", "content": c["text"]},
                        "finish_reason": c["finish_reason"], "logprobs": None} for c in choices]
        if sp.stream:
            return self._stream(ident, created, choices, chat)
        return JSONResponse({"id": ident, "object": "chat.completion" if chat else "text_completion",
                             "created": created, "model": self.backend.name, "choices": choices, "usage": usage})

    def _stream(self, ident: str, created: int, choices: list, chat: bool):
        from starlette.responses import StreamingResponse

        kind = "chat.completion.chunk" if chat else "text_completion"

        def chunk(choice: dict) -> str:
            return "data: " + json.dumps({"id": ident, "object": kind, "created": created, "model": self.backend.name,
                                          "choices": [choice]}) + "\n\n"

        def events():
            for c in choices:
                if chat:
                    yield chunk({"index": c["index"], "delta": {"role": "assistant", "content": ""},
                                 "finish_reason": None})
                    yield chunk({"index": c["index"], "delta": {"content": c["message"]["content"]},
                                 "finish_reason": None})
                    yield chunk({"index": c["index"], "delta": {}, "finish_reason": c["finish_reason"]})
                else:
                    yield chunk({"index": c["index"], "text": c["text"], "finish_reason": None, "logprobs": None})
                    yield chunk({"index": c["index"], "text": "", "finish_reason": c["finish_reason"],
                                 "logprobs": None})
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def completions(self, request):
        return await self._answer(request, chat=False)

    async def chat(self, request):
        return await self._answer(request, chat=True)

    def _say(self, request, status: int, started: float, what: str = "") -> None:
        print(f"{request.method} {request.url.path} {status} {time.perf_counter() - started:.2f} s"
              + (f" | {what}" if what else "") + f" | queue {self.backend.jobs.qsize()}", file=self.log, flush=True)


def routes_of(server: Server) -> Dict[str, str]:
    """{path: methods} of the server's routes (for its start-up line)."""
    return {r.path: ",".join(sorted(r.methods - {"HEAD"})) for r in server.app.routes}
