"""The engine's host side: requests, slots, the page allocator and the scheduler (`Engine`).

Each call of `Engine.step` makes one step of the compiled program (`paged.Step`):

1. admit waiting requests, first come first served, while a slot is free and the free pages
   hold the request's prompt (all of it, so that an admitted prompt is never stopped for pages);
   one whose prompt begins with a shared page still being written (`pages`) waits a step while
   the others go ahead;
2. fill the prefill rows with the next chunk of the prompts being read, oldest first;
3. give each sequence that is decoding one decode row, with a new page when its last one is
   full; when no page is free, the youngest running sequence is preempted: its pages are freed
   and it goes back to the front of the queue, to be read again later as prompt + what it had
   sampled (its PRNG stream goes on where it stopped, so a seeded request's tokens do not
   depend on preemption);
4. run the step, and hand each row's sampled token to its request: a row whose chunk ends its
   prompt samples the first new token, a decode row the next one. A sequence ends at one of its
   stop tokens, at max_new_tokens, at the model's context, when its `stop` callable says so (stop
   strings), or when it is cancelled; its pages go back to the pool. A request with an `inject`
   callable (a tool in an RL rollout: spmdgpt.rl.tools) may append tokens it did not sample
   after any token: the sequence goes back to reading, from its last sampled token through the
   appended ones (pages for them taken now; when none are free it is preempted, and read again
   from the start later), then samples on after them, all within its max_new_tokens.

The decode rows are packed (row j: the j-th decoding slot). With `EngineConfig.buckets` > 1 a
step's page tables are the narrowest of a few widths that hold the pages its rows attend over, and
a step that reads no prompt has the fewest decode rows of a few sizes that hold the decoding
sequences (`Engine.size`): at low load it computes 1 or 2 rows over a short table instead of every
slot over the whole context. Each size is a program of its own (`programs`).
"""

from __future__ import annotations

import collections
import itertools
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

import jax
import numpy as np

from spmdgpt.config import ModelConfig, compress_kinds, linear_layers
from spmdgpt.engine.paged import Draw, Rows, init_pool, pool_bytes, shared_step
from spmdgpt.engine.pages import Pages, chain
from spmdgpt.mesh.sharding import Rules, platform
from spmdgpt.model import lora
from spmdgpt.model.kernels import PAGED_KERNEL_PLATFORMS, paged_kernel_error


@dataclass(frozen=True)
class EngineConfig:
    slots: int = 8  # sequences decoding at once (a multiple of the mesh's batch ways)
    page_size: int = 16  # tokens a page holds
    pages: int = 0  # pages in the pool (0: enough for every slot at the model's full context)
    chunk: int = 64  # prompt tokens a prefill row reads in one step
    prefills: int = 0  # prefill rows a step (0: the mesh's batch ways)
    prefix_sharing: bool = True  # full pages shared between sequences that begin with the same tokens
    speculate: int = 0  # tokens drafted a step by the model's multi-token-prediction modules (<= model.mtp_depth)
    context: int = 0  # the longest prompt + new tokens a sequence may hold (0: the model's context): the page
    #   tables' width, so what each step gathers and attends over
    decode_attention: str = "auto"  # auto | gather | kernel: how decode rows attend over their pages (`decode_kernel`)
    grammar: bool = False  # each row's token mask in the step (`Draw.allowed`): requests may carry a `constraint`
    adjustments: int = 0  # logits a row may adjust a step (`Draw.adjust`): a request's logit_bias entries, and
    #   with penalties one per distinct token it generated; 0: none in the program
    buckets: int = 1  # sizes of the step (`Engine.size`): 1, every step computes all slots over page tables of
    #   the whole context; N, also 1/2, 1/4, ... of the tables' width and of a decode-only step's rows (N of
    #   each), the smallest that holds the step's rows taken: less work at low load, <= N x N + 2N programs


def compress_rates(cfg: ModelConfig) -> dict:
    """{field: tokens per compressed entry} of DeepSeek-V4's compressed layers that the model has
    ("sparse_rate" for C layers, "heavy_rate" for H, in that order); {} without them."""
    kinds = set(compress_kinds(cfg))
    return {f: getattr(cfg.csa, f) for k, f in (("C", "sparse_rate"), ("H", "heavy_rate")) if k in kinds}


def fitting_page_size(cfg: ModelConfig, page_size: int = 16) -> int:
    """The least multiple of `page_size` that is a multiple of every compress rate (`compress_rates`):
    the page size of the engines whose caller names none (sample, chat, evaluation)."""
    return math.lcm(page_size, *compress_rates(cfg).values())


def page_size_error(cfg: ModelConfig, page_size: int) -> Optional[str]:
    """Why the engine cannot hold this model's pages of `page_size` tokens, or None: DeepSeek-V4's
    compressed layers keep page_size / m entries a page (`engine.paged`), so m divides it."""
    rates, least = compress_rates(cfg), fitting_page_size(cfg, 1)
    if page_size < 1 or page_size % least == 0:
        return None
    return (f"engine page_size={page_size} must be a multiple of every compress rate of model.csa.pattern="
            f"{cfg.csa.pattern!r} ({', '.join(f'model.csa.{f}={r}' for f, r in rates.items())}): a page holds "
            f"page_size / rate compressed entries; set page_size={least} or a multiple of it (the nearest above: "
            f"{least * -(-page_size // least)})")


def speculate_error(cfg: ModelConfig, speculate: int) -> Optional[str]:
    """Why the model cannot draft `speculate` tokens a step, or None."""
    if 0 <= speculate <= cfg.mtp_depth:
        return None
    if cfg.deltanet.full_attention_interval:
        return (f"speculate={speculate}: the drafts come from multi-token-prediction modules, which hybrids with "
                "Gated DeltaNet layers (model.deltanet) cannot have yet; leave speculate=0")
    if not cfg.mtp_depth:
        return (f"speculate={speculate}: the model has no multi-token-prediction modules to draft with "
                "(model.mtp_depth=0); train one with model.mtp_depth=1 or more, or leave speculate=0")
    return (f"speculate={speculate}: the drafts come from the model's multi-token-prediction modules and it has "
            f"model.mtp_depth={cfg.mtp_depth}; set speculate between 0 and {cfg.mtp_depth}")


def decode_kernel(choice: str, cfg: ModelConfig, rules: Rules, page_size: int, pages_per_seq: int,
                  drafts: int) -> Optional[str]:
    """The platform whose paged-attention kernel the decode rows use ('gpu', 'tpu'), or None (the
    gather): `decode_attention` auto takes the kernel of this mesh's platform where JAX ships one
    and the model and mesh allow it (`kernels.paged_kernel_error`), gather never, kernel always
    (an error where it cannot; on a CPU the GPU kernel in Pallas' interpreter: the tests')."""
    if choice not in ("auto", "gather", "kernel"):
        raise ValueError(f"engine decode_attention={choice!r}: one of auto, gather, kernel")
    if choice == "gather":
        return None
    here = platform()
    kernel = here if here in PAGED_KERNEL_PLATFORMS else "gpu"
    why = paged_kernel_error(cfg, rules, kernel, page_size, pages_per_seq, drafts)
    if choice == "auto":
        return kernel if here == kernel and why is None else None
    if why:
        raise ValueError(f"engine decode_attention=kernel: {why}; use decode_attention=auto or gather")
    return kernel


def batch_engine(rows: int, prompt_tokens: int, new_tokens: int, page_size: int = 16) -> EngineConfig:
    """An engine for batches of `rows` sequences (a multiple of the mesh's batch ways) of prompts up
    to `prompt_tokens` and `new_tokens` more: a slot for each row, every prompt read in one step,
    pages for every row's prompt and continuation (nothing is ever preempted), page tables only as
    wide as such a sequence needs."""
    per_row = -(-(prompt_tokens + new_tokens) // page_size)
    return EngineConfig(slots=rows, page_size=page_size, pages=rows * per_row + 1,
                        chunk=-(-prompt_tokens // page_size) * page_size, prefills=rows,
                        context=prompt_tokens + new_tokens)


@dataclass(eq=False)
class Request:
    """One sequence to continue. `tokens` collects what it samples; `logprobs` their log-probabilities.
    Requests compare by identity (`request in engine.waiting` is this request, and costs no
    comparison of prompts)."""

    prompt: List[int]
    max_new_tokens: int
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    stream: int = 0  # the request's stream of seed (n samples of one prompt: 0..n-1)
    stop_ids: Sequence[int] = ()
    stop: Optional[Callable[["Request"], bool]] = None  # True: stop now (e.g. a stop string was sampled)
    on_token: Optional[Callable[["Request", int], None]] = None  # called with each new token, `finish` set on the last
    inject: Optional[Callable[["Request"], Optional[List[int]]]] = None  # after each sampled token: tokens to append
    #   that the model reads but did not sample (a tool's output), or None
    constraint: Any = None  # a structured output's grammar (`grammar.Constraint`): the ids each next token may be;
    #   the sequence ends ("stop") when the grammar is complete. Needs an engine with EngineConfig.grammar
    logit_bias: Dict[int, float] = field(default_factory=dict)  # added to those ids' logits (OpenAI's logit_bias)
    frequency_penalty: float = 0.0  # minus this x how often a token was generated so far, from its logit
    presence_penalty: float = 0.0  # minus this from the logit of a token generated so far (OpenAI's rules)
    adapter: int = 0  # the LoRA adapter that continues it (k: the k-th stacked in the engine's parameters; 0: the base)
    ident: int = field(default_factory=itertools.count().__next__)
    tokens: List[int] = field(default_factory=list)
    logprobs: List[float] = field(default_factory=list)
    # (each token's log-probability at the request's temperature, 1 when greedy: of the distribution it was
    # drawn from before top-k, top-p, penalties and masks; what GRPO's rollout-trainer mismatch compares)
    sampled_logprobs: List[float] = field(default_factory=list)
    finish: Optional[str] = None  # "stop" | "length" | "cancelled" once it ended
    preemptions: int = 0
    injected: List[int] = field(default_factory=list)  # indices into `tokens` of the ones `inject` appended

    @property
    def done(self) -> bool:
        return self.finish is not None


@dataclass
class _Slot:
    request: Request
    feed: List[int]  # the tokens to read into the pool: the prompt (+ what was sampled before a preemption)
    admitted: int  # admission order (the youngest is preempted first)
    read: int = 0  # tokens of `feed` read into the pool
    length: int = 0  # tokens in the pool (read, then one more a decode step)
    pages: List[int] = field(default_factory=list)
    keys: List[bytes] = field(default_factory=list)  # the prefix keys of its first full pages (`pages.chain`)
    marked: int = 0  # its first pages known to be written
    drafts: List[int] = field(default_factory=list)  # the drafter's next tokens (speculative decoding)


class Engine:
    """Continuous batching over a paged KV cache for one model (see the module docstring)."""

    def __init__(self, cfg: ModelConfig, rules: Rules, params, vocab_limit: Optional[int] = None,
                 config: EngineConfig = EngineConfig()):
        d = rules.batch_divisor()
        if err := page_size_error(cfg, config.page_size):
            raise ValueError(err)
        if config.slots % d:
            raise ValueError(f"engine slots={config.slots} must be a multiple of the mesh's batch ways ({d})")
        self.cfg, self.rules, self.params = cfg, rules, params
        self.page_size = config.page_size
        self.context = config.context or cfg.max_seq_len
        if not 0 < self.context <= cfg.max_seq_len:
            raise ValueError(f"engine context={config.context} must be in [1, model.max_seq_len={cfg.max_seq_len}] "
                             "(0: the model's context)")
        self.pages_per_seq = -(-self.context // self.page_size)
        self.slots_n, self.chunk = config.slots, config.chunk
        self.prefills = config.prefills or d
        if self.prefills % d:
            raise ValueError(f"engine prefills={self.prefills} must be a multiple of the mesh's batch ways ({d})")
        self.num_pages = config.pages or config.slots * self.pages_per_seq + 1
        self.words = -(-cfg.vocab_size // 32) if config.grammar else 0  # (each row's token mask, uint32 words)
        self.adjustments = config.adjustments
        self.drafts = config.speculate
        err = speculate_error(cfg, self.drafts)
        if err:
            raise ValueError(f"engine {err}")
        if self.num_pages < 2:
            raise ValueError(f"engine pages={self.num_pages}: the pool needs page 0 (the null page) and at least one "
                             "more")
        self.pool_bytes = pool_bytes(cfg, self.num_pages, self.page_size, self.drafts, self.slots_n)
        self.kernel = decode_kernel(config.decode_attention, cfg, rules, self.page_size, self.pages_per_seq,
                                    self.drafts)
        self.adapters = lora.adapter_count(params)  # (LoRA adapters by name: a request's `adapter` picks one)
        self.step_fn = shared_step(cfg, rules, self.page_size, vocab_limit or cfg.vocab_size, self.drafts, self.kernel,
                                  self.adapters)
        if config.buckets < 1:
            raise ValueError(f"engine buckets={config.buckets} must be >= 1 (1: one size of step)")
        self.row_sizes = _halvings(self.slots_n, d, config.buckets)
        # (a paged kernel reads each page where it lies: a narrower table saves it nothing)
        self.width_sizes = _halvings(self.pages_per_seq, 1, 1 if self.kernel else config.buckets)
        self._pool = None  # (made at the first step: `lower` needs none)
        self.compiled: dict = {}  # {(groups, rows, width): an executable of the step compiled ahead of time (`use`)}
        # (a hybrid's Gated DeltaNet state is not in pages: a sequence cannot start after shared ones; with 2
        # or more drafts, the drafter's entries at the last places a step or a prefill chunk writes read
        # drafts not yet checked: they depend on how the sequence was read, so no page is another's to take; a
        # compressed layer's window state is not in pages either: a C layer's next entry reads the window before)
        self.pages = Pages(self.num_pages, self.page_size, config.prefix_sharing and not any(linear_layers(cfg))
                           and self.drafts < 2 and not compress_rates(cfg))
        self.slots: List[Optional[_Slot]] = [None] * self.slots_n
        self.waiting: deque = deque()
        self._admitted = itertools.count()
        self.steps = 0
        self.preemptions = 0
        self.drafted = self.accepted = 0  # speculative decoding: drafts checked and accepted, so far
        self.step_sizes: collections.Counter = collections.Counter()  # {(groups, rows, width): steps so far}

    def attention_name(self) -> str:
        """How the decode rows attend, in words (the serve and plan lines)."""
        if self.kernel is None:
            return "the gather of their pages"
        interpreted = " (interpreted)" if self.step_fn.interpret else ""
        return f"the {self.kernel.upper()} paged-attention kernel{interpreted}"

    # ----------------------------------------------------------------------------- requests

    def pages_for(self, tokens: int) -> int:
        return -(-tokens // self.page_size)

    def check(self, request: Request) -> Optional[str]:
        """Why the engine cannot take `request`, or None."""
        if not request.prompt:
            return "the prompt is empty: give at least one token"
        if request.max_new_tokens < 1:
            return f"max_new_tokens={request.max_new_tokens} must be >= 1"
        total = len(request.prompt) + request.max_new_tokens
        if total > self.context:
            whose = "model's" if self.context == self.cfg.max_seq_len else "engine's"
            return (f"prompt of {len(request.prompt)} tokens + max_new_tokens={request.max_new_tokens} exceeds the "
                    f"{whose} context of {self.context} tokens; shorten the prompt or lower max_new_tokens")
        if not 0 <= request.adapter <= self.adapters:
            return f"adapter={request.adapter}: the engine holds {self.adapters} LoRA adapters (0: the base)"
        if request.inject is not None and self.drafts:
            return "a request that takes injected tokens (a tool) cannot be decoded speculatively; use speculate=0"
        if request.constraint is not None and (self.drafts or not self.words):
            return ("a structured output needs an engine with token masks (EngineConfig.grammar) and no speculative "
                    "decoding (speculate=0)")
        if request.logit_bias or request.frequency_penalty or request.presence_penalty:
            entries = len(request.logit_bias) + (min(request.max_new_tokens, self.cfg.vocab_size)
                                                 if request.frequency_penalty or request.presence_penalty else 0)
            if self.drafts:
                return "logit_bias and penalties cannot be decoded speculatively; use speculate=0"
            if entries > self.adjustments:
                return (f"logit_bias ({len(request.logit_bias)} ids) and penalties (up to max_new_tokens="
                        f"{request.max_new_tokens} ids) need {entries} adjustments a step and the engine takes "
                        f"{self.adjustments} (EngineConfig.adjustments); ask for fewer")
        if self.pages_for(total) > self.num_pages - 1:
            return (f"prompt of {len(request.prompt)} tokens + max_new_tokens={request.max_new_tokens} needs "
                    f"{self.pages_for(total)} pages of {self.page_size} tokens; the pool has {self.num_pages - 1}")
        return None

    def add(self, request: Request) -> Request:
        """Queue `request` (ValueError when it cannot fit: `check`)."""
        err = self.check(request)
        if err:
            raise ValueError(err)
        self.waiting.append(request)
        return request

    def cancel(self, request: Request) -> None:
        """End `request` now (finish "cancelled"); its pages go back to the pool."""
        if request.done:
            return
        if request in self.waiting:
            self.waiting.remove(request)
        for i, s in enumerate(self.slots):
            if s is not None and s.request is request:
                self._release(i)
        request.finish = "cancelled"

    @property
    def busy(self) -> bool:
        return bool(self.waiting) or any(s is not None for s in self.slots)

    def running(self) -> int:
        return sum(s is not None for s in self.slots)

    def pages_used(self) -> int:
        """Pages held by sequences."""
        return self.pages.held()

    def pages_cached(self) -> int:
        """Pages no sequence holds whose tokens are kept for a later sequence that begins with them."""
        return len(self.pages.cached)

    @property
    def acceptance(self) -> float:
        """The fraction of the drafts checked so far that the model accepted (speculative decoding)."""
        return self.accepted / max(self.drafted, 1)

    @property
    def shared_tokens(self) -> int:
        """Prompt tokens taken from shared pages instead of read again, so far."""
        return self.pages.hits * self.page_size

    # ----------------------------------------------------------------------------- scheduling

    def _release(self, i: int) -> None:
        self.pages.drop(self.slots[i].pages)
        self.slots[i] = None

    def _admit(self) -> None:
        """Admit waiting requests in order while slots and pages last; one whose prompt begins with
        a page still being written waits for the next step, and those after it go on."""
        later = []
        while self.waiting and None in self.slots:
            r = self.waiting[0]
            feed = list(r.prompt) + r.tokens  # (after a preemption: read again what it had sampled)
            found = self.pages.prefix(feed, _root(r))
            if found is None:  # (a page it would share is being written: it waits a step)
                later.append(self.waiting.popleft())
                continue
            shared, keys = found
            if self.drafts and shared:  # (the drafter's entry at a page's last place read the token after
                shared, keys = shared[:-1], keys[:-1]  # it: the last shared page's, another sequence's; read again)
            if self.pages_for(len(feed) + 1) - len(shared) > self.pages.spare(shared):
                break
            self.waiting.popleft()
            self.pages.share(shared)
            done = len(shared) * self.page_size
            slot = _Slot(r, feed, next(self._admitted), read=done, length=done, keys=keys, marked=len(shared))
            slot.pages = shared + [self.pages.take() for _ in range(self.pages_for(len(feed)) - len(shared))]
            self._key(slot, feed)  # (the prompt's other full pages, pending until written)
            self.slots[self.slots.index(None)] = slot
        self.waiting.extendleft(reversed(later))

    def _key(self, slot: _Slot, tokens: Sequence[int]) -> None:
        """Key the slot's full pages of `tokens` not keyed yet."""
        ps = self.page_size
        for j in range(len(slot.keys), min(len(tokens) // ps, len(slot.pages))):
            slot.keys.append(chain(slot.keys[-1] if slot.keys else _root(slot.request), tokens[j * ps:(j + 1) * ps]))
            self.pages.key(slot.pages[j], slot.keys[-1])

    def _mark(self, slot: _Slot, accepted: Sequence[int] = ()) -> None:
        """After a step: the slot's pages filled so far are written (and keyed, for decoded ones;
        `accepted`: drafts read into the pool this step, not yet the request's tokens)."""
        full = slot.length // self.page_size
        if full > slot.marked:
            self._key(slot, (list(slot.request.prompt) + slot.request.tokens + list(accepted))[:slot.length])
            for j in range(slot.marked, full):
                self.pages.written(slot.pages[j])
            slot.marked = full

    def _preempt(self, i: Optional[int] = None) -> None:
        """Send slot i's sequence (default: the youngest running one) back to the front of the queue,
        its pages freed: it is read again, prompt and tokens, when it is admitted again."""
        if i is None:
            i = max((i for i, s in enumerate(self.slots) if s is not None), key=lambda i: self.slots[i].admitted)
        r = self.slots[i].request
        self._release(i)
        r.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(r)

    def _wanted(self, s: _Slot) -> int:
        """The pages a decoding slot needs this step: for its token and its drafts, up to what its
        request can keep (a draft past it is written to the null page and never kept)."""
        r = s.request
        return min(self.pages_for(s.length + 1 + self.drafts), self.pages_for(len(r.prompt) + r.max_new_tokens),
                   self.pages_per_seq)

    def _decoding(self) -> List[int]:
        """The slots that decode this step, each with pages for its next token (and drafts),
        preempting the youngest sequences while pages run out."""
        while True:
            ready = [i for i, s in enumerate(self.slots) if s is not None and s.read == len(s.feed)]
            short = {i: self._wanted(self.slots[i]) - len(self.slots[i].pages) for i in ready}
            if sum(max(n, 0) for n in short.values()) <= self.pages.available():
                for i, n in short.items():
                    self.slots[i].pages.extend(self.pages.take() for _ in range(n))
                return ready
            self._preempt()

    def step(self) -> List[Request]:
        """One step of the engine; returns the requests that received a token."""
        self._admit()
        decoding = self._decoding()
        reading = sorted((i for i, s in enumerate(self.slots) if s is not None and s.read < len(s.feed)),
                         key=lambda i: self.slots[i].admitted)[: self.prefills]
        if not decoding and not reading:
            return []
        S, F, Q, D = self.slots_n, self.prefills, self.chunk, self.drafts
        b, m = self.size(decoding, reading)
        dec = _rows(b, 1 + D, m, S)  # (row j: slot decoding[j])
        pre = _rows(F, Q, m, S)
        draws = [_draws(b, self.words, self.adjustments), _draws(F, self.words, self.adjustments)]
        for j, i in enumerate(decoding):
            s = self.slots[i]
            dec.tokens[j] = [s.request.tokens[-1]] + s.drafts
            place = np.arange(s.length, s.length + 1 + D)
            dec.positions[j] = np.where(place < self.cfg.max_seq_len, place, -1)  # (drafts past the context: none)
            dec.cached[j] = s.length
            dec.slot[j] = i
            dec.table[j, :len(s.pages)] = s.pages
            _fill(draws[0], j, s.request)
        chunks = []
        for j, i in enumerate(reading):
            s = self.slots[i]
            part = s.feed[s.read: s.read + Q]
            pre.tokens[j, :len(part)] = part
            pre.positions[j, :len(part)] = np.arange(s.read, s.read + len(part))
            pre.cached[j] = s.read
            pre.slot[j] = i
            pre.last[j] = len(part) - 1
            pre.ahead[j] = s.feed[s.read + len(part)] if s.read + len(part) < len(s.feed) else -1
            pre.table[j, :min(len(s.pages), m)] = s.pages[:m]  # (its pages up to the chunk's at least)
            _fill(draws[1], j, s.request)
            chunks.append((i, len(part)))
        _fill_masks(draws[0], [(j, self.slots[i].request) for j, i in enumerate(decoding)])
        _fill_masks(draws[1], [(j, self.slots[i].request) for j, i in enumerate(reading)])
        groups = (bool(decoding), bool(reading))
        key = (groups, b, m)
        self.step_sizes[key] += 1
        args = (self.params, self.pool, Rows(*dec), Rows(*pre), Draw(*draws[0]), Draw(*draws[1]))
        if key in self.compiled:
            self._pool, out = self.compiled[key](*args)
        else:
            self._pool, out = self.step_fn.run(*args, groups=groups)
        out = [tuple(np.asarray(a) for a in o) for o in out]
        tok_d, n_d, lp_d, lpt_d, drafts_d = out.pop(0) if groups[0] else (None,) * 5
        tok_p, _, lp_p, lpt_p, drafts_p = out.pop(0) if groups[1] else (None,) * 5
        self.steps += 1
        got = []
        for j, i in enumerate(decoding):  # its last token and the drafts accepted are in the pool now
            s = self.slots[i]
            n = int(n_d[j])
            s.length += n
            self._mark(s, tok_d[j, :n - 1])
            s.drafts = [int(d) for d in drafts_d[j]]
            self.drafted += D
            self.accepted += n - 1
        for i, n in chunks:
            s = self.slots[i]
            s.read += n
            s.length += n
            self._mark(s)
        for j, i in enumerate(decoding):
            for k in range(int(n_d[j])):
                r = self._take(i, int(tok_d[j, k]), float(lp_d[j, k]), float(lpt_d[j, k]))
                if r.done:
                    break
            got.append(r)
        for j, (i, n) in enumerate(chunks):
            s = self.slots[i]
            if s.read == len(s.feed):
                s.drafts = [int(d) for d in drafts_p[j]]
                got.append(self._take(i, int(tok_p[j, 0]), float(lp_p[j, 0]), float(lpt_p[j, 0])))
        return got

    def _take(self, i: int, token: int, logprob: float, sampled_logprob: float) -> Request:
        s = self.slots[i]
        r = s.request
        r.tokens.append(token)
        r.logprobs.append(logprob)
        r.sampled_logprobs.append(sampled_logprob)
        complete = r.constraint is not None and token not in r.stop_ids and (
            not r.constraint.consume(token) or r.constraint.finished)  # (the grammar is done: nothing more to say)
        if r.constraint is not None and token in r.stop_ids:
            r.constraint.end()
        if token in r.stop_ids or (r.stop is not None and r.stop(r)) or complete:
            r.finish = "stop"
        elif len(r.tokens) >= r.max_new_tokens or len(r.prompt) + len(r.tokens) >= self.cfg.max_seq_len:
            r.finish = "length"
        if r.done:
            self._release(i)
        elif r.inject is not None:
            self._inject(i, r.inject(r) or [])
        if r.on_token is not None:  # (after the finish is known: a caller can see that this token was the last)
            r.on_token(r, token)
        return r

    def _inject(self, i: int, extra: List[int]) -> None:
        """Append `extra` (what the request's `inject` gave, cut to its budget) to slot i's request:
        the slot reads again from its last sampled token (the pool holds everything before it),
        through the appended tokens, and then samples on; unless the request's `stop` rule now
        says it is done (an environment that ended its episode with what it appended)."""
        s, r = self.slots[i], self.slots[i].request
        extra = [int(t) for t in extra][: r.max_new_tokens - len(r.tokens)]
        r.injected.extend(range(len(r.tokens), len(r.tokens) + len(extra)))
        r.tokens.extend(extra)
        r.logprobs.extend([0.0] * len(extra))
        r.sampled_logprobs.extend([0.0] * len(extra))
        if r.stop is not None and r.stop(r):  # (the hook ended it: an environment's episode, after its observation)
            r.finish = "stop"
        elif extra and (len(r.tokens) >= r.max_new_tokens or len(r.prompt) + len(r.tokens) >= self.cfg.max_seq_len):
            r.finish = "length"
        if r.done:
            self._release(i)
            return
        if not extra:
            return
        s.feed = list(r.prompt) + r.tokens
        s.read = s.length
        more = self.pages_for(len(s.feed)) - len(s.pages)
        if more > self.pages.available():  # (read it all again later, when pages are free)
            self._preempt(i)
            return
        s.pages.extend(self.pages.take() for _ in range(max(more, 0)))

    @property
    def pool(self) -> dict:
        """The pages' contents on the devices ({name: [layers, pages, page_size, ...]}; with a paged
        kernel, keys and values [heads, layers, pages, page_size, head_dim])."""
        if self._pool is None:
            cfg, rules = self.cfg, self.rules
            self._pool = jax.jit(lambda: init_pool(cfg, rules, self.num_pages, self.page_size, self.drafts,
                                                   self.slots_n, self.kernel))()
        return self._pool

    def size(self, decoding: Sequence[int], reading: Sequence[int]) -> tuple:
        """(decode rows, page tables' width in pages) of a step with slots `decoding` decoding and
        `reading` reading a chunk of their prompts: every slot and the context's pages, or in an
        engine with `buckets` the smallest of `width_sizes` that holds the pages the step's rows
        attend over (a decoding slot's, a reading one's up to its chunk), and in a decode-only step
        the smallest of `row_sizes` that holds the decoding slots."""
        Q = self.chunk
        need = max([len(self.slots[i].pages) for i in decoding]
                   + [self.pages_for(min(self.slots[i].read + Q, len(self.slots[i].feed))) for i in reading])
        width = next(w for w in self.width_sizes if w >= need)
        if reading or not decoding:
            return self.slots_n, width
        return next(r for r in self.row_sizes if r >= len(decoding)), width

    def programs(self) -> list:
        """[(groups, decode rows, width)] of every program the step may run, largest first: decode
        rows alone at each size (`size`), prefill rows alone and both at each width."""
        widths = list(reversed(self.width_sizes))
        return ([((True, False), r, w) for r in reversed(self.row_sizes) for w in widths]
                + [(groups, self.slots_n, w) for groups in ((False, True), (True, True)) for w in widths])

    def shapes(self, rows: Optional[int] = None, width: Optional[int] = None) -> tuple:
        """The step's inputs but the parameters, as ShapeDtypeStructs: (pool, decode Rows, prefill
        Rows, decode Draw, prefill Draw); `rows` decode rows, page tables `width` pages wide
        (default: the slots, the context's pages)."""
        cfg, rules, m = self.cfg, self.rules, self.pages_per_seq
        b, w = rows or self.slots_n, width or m
        pool = jax.eval_shape(lambda: init_pool(cfg, rules, self.num_pages, self.page_size, self.drafts, self.slots_n,
                                                self.kernel))
        spec = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=rules.sharding(*([None] * a.ndim)))
        host = lambda arrays: tuple(spec(a) for a in arrays)
        return (pool, Rows(*host(_rows(b, 1 + self.drafts, w, self.slots_n))),
                Rows(*host(_rows(self.prefills, self.chunk, w, self.slots_n))),
                Draw(*host(_draws(b, self.words, self.adjustments))),
                Draw(*host(_draws(self.prefills, self.words, self.adjustments))))

    def lower(self, params, groups: tuple = (True, True), rows: Optional[int] = None, width: Optional[int] = None):
        """The step for `params` (arrays or ShapeDtypeStructs) with these row groups (decode,
        prefill) and decode sizes (`shapes`), lowered: compile it and give it to `use` (`programs`
        lists them; the largest has both groups)."""
        return self.step_fn.run.lower(params, *self.shapes(rows, width), groups=groups)

    def use(self, compiled, groups: tuple = (True, True), rows: Optional[int] = None,
            width: Optional[int] = None) -> None:
        """Steps of these row groups and sizes run `compiled` (`lower`'s program compiled ahead of time)."""
        self.compiled[(groups, rows or self.slots_n, width or self.pages_per_seq)] = compiled

    def warm(self) -> float:
        """Compile every program of the step now (`programs`: decode rows, prefill rows, both, at
        each size), not when a step first needs each (a server's first requests would wait for
        them); the seconds it took."""
        t = time.perf_counter()
        for key in self.programs():
            if key not in self.compiled:
                self.use(self.lower(self.params, *key).compile(), *key)
        return time.perf_counter() - t

    def run(self, requests: Iterable[Request], params=None) -> List[Request]:
        """Add `requests` and step until every request the engine holds has ended (with `params`
        from now on, when given: a policy that trains between calls)."""
        if params is not None:
            self.params = params
        requests = [self.add(r) for r in requests]
        while self.busy:
            self.step()
        return requests


class _Arrays:
    def __init__(self, **arrays):
        self.__dict__.update(arrays)
        self._names = list(arrays)

    def __iter__(self):
        return iter(self.__dict__[n] for n in self._names)


def _halvings(n: int, unit: int, count: int) -> List[int]:
    """Up to `count` sizes n, n / 2, n / 4, ... (rounded up to a multiple of `unit`, n's divisor),
    ascending, without repeats."""
    return sorted({unit * -(-n // (unit << k)) for k in range(min(count, n.bit_length() + 1))})


def _rows(b: int, t: int, m: int, null: int) -> _Arrays:
    """Rows of padding (positions -1; no token ahead; the null slot)."""
    z = lambda *shape: np.zeros(shape, np.int32)
    return _Arrays(tokens=z(b, t), positions=z(b, t) - 1, table=z(b, m), cached=z(b), last=z(b), ahead=z(b) - 1,
                   slot=z(b) + null)


def _draws(b: int, words: int, adjustments: int) -> _Arrays:
    return _Arrays(temperature=np.zeros(b, np.float32), top_k=np.zeros(b, np.int32), top_p=np.ones(b, np.float32),
                   seed=np.zeros(b, np.uint32), stream=np.zeros(b, np.uint32), index=np.zeros(b, np.uint32),
                   seed_high=np.zeros(b, np.uint32), allowed=np.full((b, words), 2**32 - 1, np.uint32),
                   adjust_ids=np.zeros((b, adjustments), np.int32), adjust=np.zeros((b, adjustments), np.float32),
                   adapter=np.zeros(b, np.int32))


def _root(r: Request) -> bytes:
    """Where the prefix keys of r's pages start: its adapter's own (another adapter's keys and values
    of the same tokens differ: never shared)."""
    return b"" if r.adapter == 0 else b"adapter %d" % r.adapter


def _fill(d: _Arrays, row: int, r: Request) -> None:
    d.temperature[row], d.top_k[row], d.top_p[row] = r.temperature, r.top_k, r.top_p
    d.seed[row], d.stream[row], d.index[row] = r.seed % 2**32, r.stream, len(r.tokens)
    d.seed_high[row] = (r.seed >> 32) % 2**32  # (a 64-bit seed's high half; a negative one's two's complement)
    d.adapter[row] = r.adapter
    adjust = _adjustments(r)
    if adjust:
        d.adjust_ids[row, :len(adjust)], d.adjust[row, :len(adjust)] = list(adjust), list(adjust.values())


def _adjustments(r: Request) -> dict:
    """{id: what is added to its logit} for r's next token: its logit_bias, minus frequency_penalty x
    the times each token was generated so far and presence_penalty once for each (the OpenAI API's
    rule; the prompt's tokens and a tool's injected ones do not count)."""
    out = dict(r.logit_bias)
    if r.frequency_penalty or r.presence_penalty:
        injected = set(r.injected)
        counts = collections.Counter(t for k, t in enumerate(r.tokens) if k not in injected)
        for t, n in counts.items():
            out[t] = out.get(t, 0.0) - r.frequency_penalty * n - r.presence_penalty
    return out


def _fill_masks(d: _Arrays, rows: list) -> None:
    """The token masks of the rows [(row, request)] whose requests hold a structured output's grammar."""
    constrained = [(r.constraint, row) for row, r in rows if r.constraint is not None]
    if constrained:
        type(constrained[0][0]).fill_rows(constrained, d.allowed)
