"""The inference engine: continuous batching over a paged KV cache equals the model's full forward
pass, token for token, for every attention unit and on a data x model mesh; preemption and cancellation leak no
page; a seeded request samples the same tokens alone and among others; stops and refusals."""

import random
from dataclasses import replace

import jax
import numpy as np
import pytest
from conftest import full_forward_samples, missing
from test_generate import ATTENTION_UNITS, setup

from spmdgpt.engine import Engine, EngineConfig, Request, layouts, pool_bytes

PROMPTS = [[1, 2, 3], [5], [9, 8, 7, 6], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1]]
SMALL = EngineConfig(slots=2, page_size=4, chunk=8)  # fewer slots than prompts: admissions as slots free up


# (MHA is GQA's code with groups of one: its engine is the `model` fixture's below, GQA's here)
@pytest.mark.parametrize("unit", [u for u in ATTENTION_UNITS if u != "mha"])
def test_engine_equals_the_full_forward_pass_on_one_device_and_a_mesh(unit):
    """Greedy and seeded sampled tokens equal the model's full forward pass at every token (no
    cache; the same streams, `full_forward_samples`) on one device, with two slots for four
    prompts, a 20-token prompt read in three chunks, pages of 4 tokens; on data 2 x model 2 the
    engine gives the same tokens. One request alone gives its row's tokens, in an engine of as few
    slots as the mesh allows for MLA behind dense-then-MoE layers (1 on one device: it crashed at
    one row, the layer groups' reshape dropping the cache's batch spec over axes of size 1; the
    other units on the 2-slot engine), and a two-turn chat (`chat`'s Conversation, on that
    engine) answers the same on both. The mesh's engine sizes its page tables (`buckets`)."""
    from test_generate import DigitChat

    from spmdgpt.engine.generate import Conversation, SamplingParams

    replies, vocab = [], DigitChat.vocab_size  # (the chat's vocabulary: 10 digits and 3 marks)
    for devices, extra in ((jax.devices()[:1], []),
                           (jax.devices()[:4], ["sharding=fsdp_tp", "mesh.data=2", "mesh.model=2"])):
        cfg, mesh, rules, params = setup(*ATTENTION_UNITS[unit], *extra, devices=devices)
        with jax.set_mesh(mesh):
            if not extra:  # (the reference on one device; the mesh's engine must give the same tokens)
                old, old_sampled = full_forward_samples(cfg.model, rules, params, PROMPTS, 12, vocab_limit=vocab,
                                                        also=dict(temperature=1.0, top_k=5, seed=3))
            if extra:
                with pytest.raises(ValueError, match=r"slots=3 must be a multiple of the mesh's batch ways \(2\)"):
                    Engine(cfg.model, rules, params, vocab, EngineConfig(slots=3))
            # (on the mesh at buckets=2: its 2 rows, tables of 8 of the 16 pages, as wide as 32 tokens need)
            engine = Engine(cfg.model, rules, params, vocab, replace(SMALL, buckets=2) if extra else SMALL)
            greedy = engine.run([Request(p, 12, temperature=0.0) for p in PROMPTS])
            sampled = engine.run([Request(p, 12, temperature=1.0, top_k=5, seed=3, stream=r)
                                  for r, p in enumerate(PROMPTS)])
            # (on the mesh SMALL's 2 slots are its fewest; on one device 1 slot, the case that crashed: MLA behind
            # dense-then-MoE layers, the one unit whose engine is compiled again at 1 slot here)
            one_slot = not extra and unit == "mla-moe"
            alone = Engine(cfg.model, rules, params, vocab, EngineConfig(slots=1, page_size=4)) if one_slot else engine
            assert alone.run([Request(PROMPTS[0], 12, temperature=0.0)])[0].tokens == old[0]
            chat = Conversation(cfg.model, rules, params, DigitChat(), SamplingParams(6, temperature=0.0), alone)
            replies.append([chat.say("12"), chat.say("3")])
            assert chat.turns == 2 and all(set(r) <= set("0123456789ua") for r in replies[-1])
        assert [r.tokens for r in greedy] == old and [r.tokens for r in sampled] == old_sampled
        assert all(r.finish == "length" for r in greedy + sampled) and alone.pages_used() == 0
        assert all(lp <= 0 for r in sampled for lp in r.logprobs) and len(sampled[0].logprobs) == 12
        # (at temperature 1, and greedy, the log-probability at the request's temperature is the model's own)
        assert all(r.sampled_logprobs == r.logprobs for r in greedy + sampled)
        assert {w for *_, w in engine.step_sizes} == ({8} if extra else {16})
    assert replies[0] == replies[1]


def test_engines_alike_share_their_step_and_it_goes_with_their_rules():
    """Engines of one model on one rules object share the compiled step (`shared_step`) whatever
    their slots or pages; another page size is another step, a copy of the rules (another compute
    table, maybe) its own; once the rules are dropped the steps go too (a module-level cache keyed by
    the rules once kept every engine's programs loaded: a test worker grew past the kernel's 65,530
    memory maps and aborted)."""
    import copy
    import gc
    import weakref

    cfg, mesh, rules, params = setup(*ATTENTION_UNITS["gqa"])
    with jax.set_mesh(mesh):
        a, b = (Engine(cfg.model, rules, params, 10, replace(SMALL, slots=n)) for n in (2, 4))
        c = Engine(cfg.model, rules, params, 10, replace(SMALL, page_size=8))
        copied = Engine(cfg.model, copy.copy(rules), params, 10, SMALL)  # (a copy's compute table may differ)
    assert a.step_fn is b.step_fn and c.step_fn is not a.step_fn and copied.step_fn is not a.step_fn
    gone = [weakref.ref(a.step_fn), weakref.ref(c.step_fn), weakref.ref(rules)]
    del a, b, c, copied, rules, mesh, params, cfg
    gc.collect()
    assert [r() for r in gone] == [None, None, None]


def test_lora_adapters_by_name_each_row_its_own_on_a_mesh():
    """Two LoRA adapters stacked on a GQA + SwiGLU model (`lora.stack`: other targets, ranks and
    scales), on data 2 x model 2: requests for the base and each adapter, interleaved on two slots
    with one prompt (no page shared across adapters: each adapter's keys differ), give each the
    full forward pass's greedy tokens of its own merged model; the adapters change the tokens."""
    from spmdgpt.config import LoraConfig
    from spmdgpt.model import lora, param_info

    cfg, mesh, rules, params = setup("model.num_kv_heads=2", "model.mlp=swiglu", "sharding=fsdp_tp", "mesh.data=2",
                                     "mesh.model=2", devices=jax.devices()[:4])
    info = param_info(cfg.model)
    runs = []
    for k, lo in enumerate((LoraConfig(rank=4, alpha=8, targets=("q", "v", "down")),
                            LoraConfig(rank=2, alpha=2, targets=("all",)))):
        shapes = jax.tree.leaves(lora.adapter_info(info, lo), is_leaf=lambda x: hasattr(x, "logical"))
        keys = jax.random.split(jax.random.key(10 + k), len(shapes))
        values = [0.3 * np.asarray(jax.random.normal(key, i.shape)) for key, i in zip(keys, shapes, strict=True)]
        runs.append((lo, jax.tree.unflatten(jax.tree.structure(lora.adapter_info(info, lo), is_leaf=lambda x: hasattr(
            x, "logical")), values)))
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9]  # (two full pages of 4)
    with jax.set_mesh(mesh):
        stacked, names = lora.stack(info, params, runs)
        assert names == [("attn", "w_kv"), ("attn", "w_o"), ("attn", "w_q"), ("mlp", "w_down"), ("mlp", "w_gate"),
                         ("mlp", "w_up")]
        want = [full_forward_samples(cfg.model, rules, m, [prompt] * 2, 10, vocab_limit=10)[0]  # (2: the batch ways)
                for m in [params] + [lora.merge(info, lo, params, a) for lo, a in runs]]
        engine = Engine(cfg.model, rules, stacked, 10, EngineConfig(slots=2, page_size=4, chunk=8))
        assert engine.adapters == 2 and "holds 2 LoRA adapters" in engine.check(Request(prompt, 4, adapter=3))
        got = engine.run([Request(prompt, 10, temperature=0.0, adapter=k % 3) for k in range(6)])
    assert len({tuple(w) for w in want}) == 3
    assert [r.tokens for r in got] == [want[k % 3] for k in range(6)]


@pytest.fixture(scope="module")
def model():
    cfg, mesh, rules, params = setup("model.max_seq_len=48")
    with jax.set_mesh(mesh):
        yield cfg, rules, params


def test_random_arrivals_cancels_and_preemption_leak_no_page_and_keep_seeded_tokens(model):
    """Requests arrive at random steps, some are cancelled mid-way, and a pool of 11 pages for 4
    slots forces preemptions: at the end every page is free, and each finished request's tokens
    equal the same request run alone (greedy and seeded ones: its stream goes on after a
    preemption where it stopped), where the engine's steps ran at 2 sizes of rows and of page
    tables (`buckets`) and the one alone always at its whole size."""
    cfg, rules, params = model
    rng = random.Random(0)
    specs = [(rng.choices(range(10), k=rng.randint(1, 14)), rng.randint(4, 24), rng.choice([0.0, 1.0]), s)
             for s in range(14)]
    alone = Engine(cfg.model, rules, params, 10, EngineConfig(slots=2, page_size=4, chunk=8))
    expected = [alone.run([Request(p, n, temperature=t, seed=s)])[0].tokens for p, n, t, s in specs]

    engine = Engine(cfg.model, rules, params, 10, EngineConfig(slots=4, page_size=4, chunk=8, pages=12, buckets=2))
    assert (engine.row_sizes, engine.width_sizes) == ([2, 4], [6, 12])
    pending, live, cancelled = list(enumerate(specs)), [], set()
    while pending or engine.busy:
        if pending and rng.random() < 0.5:
            i, (p, n, t, s) = pending.pop(0)
            live.append((i, engine.add(Request(p, n, temperature=t, seed=s))))
        if live and rng.random() < 0.06:
            i, r = live[rng.randrange(len(live))]
            if not r.done:
                engine.cancel(r)
                cancelled.add(i)
        engine.step()
    assert engine.preemptions > 0 and 0 < len(cancelled) < len(specs)
    # (decode-only steps at their sizes: rows for the slots decoding, tables for their pages, several of each)
    decoding = {(r, w) for (g, r, w) in engine.step_sizes if g == (True, False)}
    assert decoding == {(2, 6), (2, 12), (4, 6), (4, 12)}
    assert {w for (g, _, w) in engine.step_sizes if g[1]} == {6}  # (reading prompts of <= 14 tokens: 4 pages at most)
    assert {(r, w) for _, r, w in alone.step_sizes} == {(2, 12)}
    assert engine.pages_used() == 0 and sorted(engine.pages.free + list(engine.pages.cached)) == list(range(1, 12))
    for i, r in live:
        assert r.finish == ("cancelled" if i in cancelled else "length")
        if i not in cancelled:
            assert r.tokens == expected[i], i


def test_shared_prefixes_read_a_group_once_and_change_no_token(model):
    """Four answers to one 13-token prompt (GRPO's group) and a conversation's second turn (its
    first turn's prompt and reply, then more): with prefix sharing the followers take the prompt's
    3 full pages instead of reading them, the second turn its first turn's pages, and every
    token equals the run without sharing (greedy and seeded)."""
    cfg, rules, params = model
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3]
    runs = []
    for sharing in (True, False):
        engine = Engine(cfg.model, rules, params, 10, EngineConfig(slots=4, page_size=4, chunk=8,
                                                                   prefix_sharing=sharing))
        group = engine.run([Request(prompt, 10, temperature=1.0, seed=2, stream=c) for c in range(4)])
        first = engine.run([Request(prompt, 6, temperature=0.0)])[0]
        second = engine.run([Request(prompt + first.tokens + [5, 5, 5], 6, temperature=0.0)])[0]
        runs.append(([r.tokens for r in group], first.tokens, second.tokens, engine.shared_tokens))
        assert engine.pages_used() == 0
    (group, first, second, shared), (group_off, first_off, second_off, shared_off) = runs
    assert (group, first, second) == (group_off, first_off, second_off) and len(set(map(tuple, group))) > 1
    # the group: 3 followers x 3 pages; the first turn: 3 (cached); the second turn: the 4 full pages the first
    # turn wrote (13 prompt tokens and 5 of its 6 sampled ones: the last is never read in)
    assert (shared, shared_off) == ((9 + 3 + 4) * 4, 0)


def test_stops_and_refusals(model):
    cfg, rules, params = model
    engine = Engine(cfg.model, rules, params, 10, SMALL)
    full = engine.run([Request([1, 2, 3], 20, temperature=0.0)])[0].tokens
    stop = full[5]
    at_id, by_fn = engine.run([Request([1, 2, 3], 20, temperature=0.0, stop_ids=[stop]),
                               Request([1, 2, 3], 20, temperature=0.0, stop=lambda r: len(r.tokens) == 3)])
    assert at_id.tokens == full[: full.index(stop) + 1] and at_id.finish == "stop"
    assert by_fn.tokens == full[:3] and by_fn.finish == "stop"
    seen = []
    engine.run([Request([1, 2, 3], 4, temperature=0.0, on_token=lambda r, t: seen.append(t))])
    assert seen == full[:4]
    # serve's: every program of the step compiled up front: decoding at 2 x 2 sizes (rows, pages), prefill and
    # both at 2 widths
    warm = Engine(cfg.model, rules, params, 10, replace(SMALL, buckets=2))
    whole = ((True, True), 2, 12), ((False, True), 2, 12)
    assert warm.warm() > 0 and sorted(warm.compiled) == sorted(
        [((True, False), r, w) for r in (1, 2) for w in (6, 12)] + [(g, 2, w) for g, _, _ in whole for w in (6, 12)])
    warm.step_fn = None  # (so a step that compiled on its own would fail)
    assert warm.run([Request([1, 2, 3], 20, temperature=0.0)])[0].tokens == full
    two = warm.run([Request([1, 2, 3], 30, temperature=0.0), Request([1, 2, 3], 8, temperature=0.0)])
    assert two[0].tokens[:20] == full and two[1].tokens == full[:8]
    # (23 tokens: 6 pages; 33: 9; 11: 3)
    assert {(r, w) for (g, r, w) in warm.step_sizes if g == (True, False)} == {(1, 6), (2, 6), (1, 12)}
    # serve's check of the compiled step before its port opens: a device that holds the parameters and the
    # pool (pool_refusal lets it through) but not the step's temporaries too is refused, naming the program
    import spmdgpt.plan.plan as plan
    from spmdgpt.mesh.sharding import shard_bytes

    resident = shard_bytes(params)
    steps = {k: plan._program(plan.step_program(warm, *k), c, resident, warm.shapes(*k[1:]))
             for k, c in warm.compiled.items()}
    assert sorted(q.name for q in steps.values()) == [
        "decode_step", "decode_step (1 row x 12 pages)", "decode_step (1 row x 6 pages)",
        "decode_step (2 rows x 6 pages)", "prefill_step", "prefill_step (6 pages)", "serving_step",
        "serving_step (6 pages)"]
    serving, largest = steps[whole[0]], max(steps.values(), key=lambda q: q.total_bytes)
    assert serving.temp_bytes > 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan, "local_capacity", lambda: (serving.total_bytes - 1, "test device"))
        assert plan.pool_refusal(cfg, rules, SMALL, resident) is None
        need, temp, held = (plan.size(n) for n in (serving.total_bytes, serving.temp_bytes, serving.total_bytes - 1))
        assert plan.step_refusal(warm, resident) == (f"the serving step needs {need} per device ({temp} of it "
                                                     f"temporaries) but a test device holds {held}; "
                                                     f"{plan.FIXES['serving_step']}")
        mp.setattr(plan, "local_capacity", lambda: (largest.total_bytes, "test device"))
        assert plan.step_refusal(warm, resident) is None
        # (a smaller decode step may hold more temporaries than the whole one: XLA's buffers at 1 row here)
        mp.setattr(plan, "local_capacity", lambda: (largest.total_bytes - 1, "test device"))
        refusal = plan.step_refusal(warm, resident)
        assert refusal == plan.too_large([largest], largest.total_bytes - 1, "test device")
    assert plan.too_large([steps[(True, False), 1, 12]], 0, "test device").startswith(
        "the decode step (1 row x 12 pages) needs ")
    with pytest.raises(ValueError, match="exceeds the model's context of 48 tokens"):
        engine.add(Request([1] * 40, 9))
    tiny = Engine(cfg.model, rules, params, 10, EngineConfig(slots=2, page_size=4, pages=5))
    with pytest.raises(ValueError, match="needs 5 pages of 4 tokens; the pool has 4"):
        tiny.add(Request([1] * 10, 9))


def test_injected_tokens_are_read_and_sampling_goes_on_after_them(model):
    """A request whose `inject` appends tokens after its 3rd and 7th sampled tokens (a tool's
    output in a rollout): each stretch sampled after an injection equals a fresh greedy request
    whose prompt is everything before it, log-probabilities too; `injected` names the appended
    tokens; the budget cuts an injection short; a pool too small for the appended tokens preempts the
    sequence (read again later from its start), and the tokens stay."""
    cfg, rules, params = model
    prompt = [1, 2, 3, 4, 5]
    extra = {3: [9, 8, 7, 6, 5, 4, 3, 2, 1], 7: [4, 4]}

    def tool(r):
        return extra.get(len(r.tokens) - len(r.injected))

    def run(engine, n=20, k=2):
        return engine.run([Request(prompt, n, temperature=0.0, inject=tool) for _ in range(k)])

    engine = Engine(cfg.model, rules, params, 10, EngineConfig(slots=2, page_size=4, chunk=8))
    r = run(engine)[0]
    assert r.injected == [*range(3, 12), 16, 17]
    assert [r.tokens[i] for i in r.injected] == [9, 8, 7, 6, 5, 4, 3, 2, 1, 4, 4]
    assert len(r.tokens) == 20 and r.finish == "length" and engine.pages_used() == 0
    for start, end in ((12, 16), (18, 20)):  # (the stretches sampled after each injection)
        fresh = engine.run([Request(prompt + r.tokens[:start], end - start, temperature=0.0)])[0]
        assert fresh.tokens == r.tokens[start:end]
        np.testing.assert_allclose(fresh.logprobs, r.logprobs[start:end], rtol=1e-5, atol=1e-5)
    assert r.tokens[:3] == engine.run([Request(prompt, 3, temperature=0.0)])[0].tokens
    cut = engine.run([Request(prompt, 5, temperature=0.0, inject=tool)])[0]  # (room for 2 of the 5)
    assert cut.tokens == r.tokens[:5] and cut.injected == [3, 4] and cut.finish == "length"
    small = Engine(cfg.model, rules, params, 10, EngineConfig(slots=2, page_size=4, chunk=8, pages=10))
    both = run(small)
    assert small.preemptions > 0 and [b.tokens for b in both] == [r.tokens] * 2 and small.pages_used() == 0
    small.drafts = 1  # (as an engine of a model with multi-token-prediction modules would be)
    with pytest.raises(ValueError, match="cannot be decoded speculatively"):
        small.add(Request(prompt, 4, inject=tool))


WIDE_GQA = ["model.d_model=512", "model.num_heads=4", "model.num_kv_heads=2"]  # (heads of 128: the TPU kernel's lanes)


def test_logit_bias_and_penalties_equal_the_full_forward_pass_with_them(model):
    """logit_bias, frequency_penalty and presence_penalty (OpenAI's rule: the bias, minus the
    frequency penalty x each token's count so far, minus the presence penalty once; the prompt not
    counted): greedy tokens equal a full forward pass with the same arithmetic at each step, two
    slots of different settings side by side and a plain request beside them unchanged; a request
    needing more adjustments than the engine takes is refused."""
    import collections

    from spmdgpt.model import forward

    cfg, rules, params = model
    logits_of = jax.jit(lambda p, t: forward(cfg.model, rules, p, t)[0])

    def reference(prompt, n, bias=(), fp=0.0, pp=0.0):
        tokens = list(prompt)
        for _ in range(n):
            padded = np.zeros((1, cfg.model.max_seq_len), np.int32)
            padded[0, :len(tokens)] = tokens
            row = np.asarray(logits_of(params, padded))[0, len(tokens) - 1, :10].astype(np.float64)
            for t, v in dict(bias).items():
                row[t] += v
            for t, c in collections.Counter(tokens[len(prompt):]).items():
                row[t] -= fp * c + pp
            tokens.append(int(np.argmax(row)))
        return tokens[len(prompt):]

    settings = [dict(logit_bias={3: 2.5, 7: -100.0}), dict(frequency_penalty=1.5, presence_penalty=0.5),
                dict(logit_bias={1: 1.0}, frequency_penalty=-0.5), {}]
    engine = Engine(cfg.model, rules, params, 10, EngineConfig(slots=2, page_size=4, chunk=8, adjustments=16))
    got = engine.run([Request([1, 2, 3], 12, temperature=0.0, **kw) for kw in settings])
    for r, kw in zip(got, settings, strict=True):
        want = reference([1, 2, 3], 12, kw.get("logit_bias", {}), kw.get("frequency_penalty", 0.0),
                         kw.get("presence_penalty", 0.0))
        assert r.tokens == want, kw
    assert 7 not in got[0].tokens and got[3].tokens == engine.run([Request([1, 2, 3], 12, temperature=0.0)])[0].tokens
    assert len(set(got[1].tokens)) > len(set(got[3].tokens))  # (penalised repeats: more distinct tokens)
    assert "need 18 adjustments a step and the engine takes 16" in engine.check(
        Request([1], 12, logit_bias={k: 1.0 for k in range(6)}, presence_penalty=0.1))


def test_paged_kernels_give_the_gathers_tokens(monkeypatch):
    """Decode rows attended by the platforms' paged-attention kernels (decode_attention=kernel) give
    the gather's greedy tokens on a data 2 x model 2 mesh of grouped-query attention
    (a key/value head a device): the GPU's (Triton) in Pallas' interpreter over head-first pages,
    and the TPU's pool of interleaved keys and values, read by its kernel's contract
    (`interleaved_reference`); log-probabilities within 1e-5. `auto` keeps the gather on a CPU."""
    import spmdgpt.engine.scheduler as scheduler

    cfg, mesh, rules, params = setup(*WIDE_GQA, "sharding=fsdp_tp", "mesh.data=2", "mesh.model=2",
                                     devices=jax.devices()[:4])
    config = EngineConfig(slots=2, page_size=4, chunk=8, pages=40)
    got = {}
    with jax.set_mesh(mesh):
        assert Engine(cfg.model, rules, params, 10, config).kernel is None  # (auto, on a CPU)
        for kernel, target in ((None, "cpu"), ("gpu", "cpu"), ("tpu", "tpu")):
            monkeypatch.setattr(scheduler, "platform", lambda t=target: t)
            engine = Engine(cfg.model, rules, params, 10,
                            replace(config, decode_attention="kernel" if kernel else "gather"))
            assert engine.kernel == kernel and engine.step_fn.interpret == (kernel is not None)
            assert {n: a.shape for n, a in engine.pool.items()} == {  # (layers, pages, page size, 2 heads of 128)
                None: {"k": (2, 40, 4, 2, 128), "v": (2, 40, 4, 2, 128)},
                "gpu": {"k": (2, 2, 40, 4, 128), "v": (2, 2, 40, 4, 128)},
                "tpu": {"kv": (2, 40, 4, 4, 128)}}[kernel]
            greedy = engine.run([Request(p, 8, temperature=0.0) for p in PROMPTS])
            got[kernel] = [r.tokens for r in greedy], np.concatenate([r.logprobs for r in greedy])
            assert engine.pages_used() == 0
    for kernel in ("gpu", "tpu"):
        assert got[kernel][0] == got[None][0]
        np.testing.assert_allclose(got[kernel][1], got[None][1], atol=1e-5)


def test_paged_kernels_refusals():
    """decode_attention=kernel where the kernels cannot attend is one line naming why; auto falls back."""
    from spmdgpt.config import load_config
    from spmdgpt.model.kernels import paged_kernel_error

    cfg, mesh, rules, params = setup()
    with jax.set_mesh(mesh):
        with pytest.raises(ValueError, match="engine decode_attention='fast': one of auto, gather, kernel"):
            Engine(cfg.model, rules, params, 10, EngineConfig(decode_attention="fast"))
        with pytest.raises(ValueError, match=r"decode_attention=kernel: the GPU kernel reads 6 tokens a step "
                                             r"\(page_size=3 x pages\), not a power of two"):
            Engine(cfg.model, rules, params, 10, EngineConfig(page_size=3, decode_attention="kernel"))
    why = {name: paged_kernel_error(load_config(["+experiment=staircase", *over]).model, rules, platform, 16, 4, 0)
           for name, over, platform in (("mla", ATTENTION_UNITS["mla-moe"], "gpu"),
                                        ("windows", ATTENTION_UNITS["windows-sinks"], "gpu"),
                                        ("tpu lanes", [], "tpu"), ("wide", WIDE_GQA, "tpu"))}
    assert why == {"mla": "MLA caches latents, and the kernels read key and value pages",
                   "windows": "the kernels have no sliding window or chunk (model.sliding_window, "
                              "model.attention_chunk)",
                   "tpu lanes": "the TPU kernel's head width must be a multiple of 128 (the model's: 16)",
                   "wide": None}


@pytest.mark.parametrize("topology,call", [("h100-1", "__gpu$xla.gpu.triton"), ("v5e-4", "tpu_custom_call")])
def test_paged_kernels_compile_for_their_targets(topology, call):
    """The engine's decode step with decode_attention=auto compiles, for an H100 and a TPU v5e,
    to a program that calls the platform's kernel (JAX's Triton paged attention; Mosaic's
    ragged paged attention)."""
    from spmdgpt.cli.plan import _compiling
    from spmdgpt.config import ConfigError, load_config
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.plan.plan import abstract_params, compile_options
    from spmdgpt.plan.topology import compile_only_devices

    try:
        devices = compile_only_devices(topology)[:1]
    except ConfigError as e:
        missing("SPMDGPT_REQUIRE_PLANS", str(e))
    cfg = load_config(["+experiment=staircase", *WIDE_GQA, "mesh.data=1", "mesh.model=1"])
    mesh = make_mesh(cfg.mesh, devices)
    with _compiling(mesh, True):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        engine = Engine(cfg.model, rules, None, 10, EngineConfig(slots=8))
        assert engine.kernel == topology[0:3].replace("h10", "gpu").replace("v5e", "tpu")
        lowered = engine.lower(abstract_params(cfg.model, rules), (True, False))
        text = lowered.compile(compiler_options=compile_options(devices[0])).as_text()
    assert f'custom_call_target="{call}"' in text


def test_pool_layout_per_unit():
    """The pool stores what each unit caches: k and v (kv heads x head_dim) a token, or MLA's latent
    and RoPE key, and a hybrid's states per slot; its bytes follow."""
    cfg = setup()[0]
    assert {n: (lay.seq_axis, lay.rest) for n, lay in layouts(cfg.model).items()} == {
        "k": (2, (4, 16)), "v": (2, (4, 16))}
    assert pool_bytes(cfg.model, 10, 4) == 2 * 10 * 4 * 2 * 64 * 4  # layers x pages x tokens x (k, v) x 64 x f32
    mla = setup(*ATTENTION_UNITS["mla-moe"])[0]
    assert {n: (lay.seq_axis, lay.rest) for n, lay in layouts(mla.model).items()} == {
        "latent": (1, (16,)), "k_rope": (1, (4,))}
    assert np.isclose(pool_bytes(mla.model, 10, 4), 3 * 10 * 4 * 20 * 4)
    # a hybrid (2 layers, the first Gated DeltaNet): pages for its softmax layer, and per slot (3 + the null one) a
    # float32 state of 4 value heads x 8 x 8 and the convolution's last 3 inputs of q, k (2 x 2 heads x 8) and v (4 x 8)
    hybrid = setup(*ATTENTION_UNITS["hybrid"])[0].model
    assert pool_bytes(hybrid, 10, 4, slots=3) == 1 * 10 * 4 * 2 * 64 * 4 + 1 * 4 * (4 * 8 * 8 + 3 * (32 + 32)) * 4
