"""Sampling: the cached forward pass equals the full one, the engine's sampling controls, sharded = single
device, `spmdgpt sample`, chat conversations."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import read_jsonl
from shared_runs import STAIRCASE_300

from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.engine import Engine, EngineConfig, Request
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import forward, init_cache, init_params


def setup(*overrides, devices=None):
    cfg = load_config(["+experiment=staircase", "model.init_std=0.2", *overrides])
    devices = devices or jax.devices()[:1]
    if len(devices) == 1:
        cfg.mesh.data = cfg.mesh.model = 1
    mesh = make_mesh(cfg.mesh, devices)
    rules = Rules(mesh, cfg.sharding)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
    return cfg, mesh, rules, params


@pytest.mark.parametrize("overrides", [[], ["model.tie_embeddings=false", "model.norm=rmsnorm",
                                            "model.mlp=swiglu", "model.bias=true"],
                                       ["model.num_kv_heads=2", "model.qk_norm=true", "model.bias=true"],
                                       ["model.moe.num_experts=4", "model.num_layers=3",
                                        "model.moe.first_dense_layers=1", "model.moe.interleave_step=2",
                                        "model.sliding_window=6", "model.window_pattern=LG"]],
                         ids=["gpt2", "llama-biased", "gqa-qknorm", "moe-dense-layers-windows"])
def test_cached_logits_equal_full_forward_at_every_position(overrides):
    cfg, mesh, rules, params = setup(*overrides)
    toks = np.random.default_rng(0).integers(0, 10, (2, 24)).astype(np.int32)
    fwd = jax.jit(lambda *a: forward(cfg.model, rules, params, *a))  # one compile per shape
    with jax.set_mesh(mesh):
        full = np.asarray(fwd(jnp.asarray(toks))[0])
        cache = init_cache(cfg.model, rules, 2, 32)
        pos = jnp.broadcast_to(jnp.arange(10), (2, 10))
        logits, cache = fwd(jnp.asarray(toks[:, :10]), pos, cache)
        assert int(cache.end) == 10
        got = [np.asarray(logits)]
        for i in range(10, 24):  # then one token at a time, through the same forward
            logits, cache = fwd(jnp.asarray(toks[:, i:i + 1]), jnp.full((2, 1), i, jnp.int32), cache)
            got.append(np.asarray(logits))
        assert int(cache.end) == 24
    # stated tolerance: float32 rounding of a different summation order, 1e-5 on logits of O(1)
    np.testing.assert_allclose(np.concatenate(got, axis=1), full, rtol=0, atol=1e-5)
    assert np.abs(full).max() > 0.5  # the logits are not all near zero


@pytest.mark.parametrize("backend,kv", [("xla", 4), ("cudnn", 4), ("splash", 4), ("cudnn", 1), ("splash", 2)])
def test_prefill_through_the_backend_equals_the_cached_path(backend, kv, monkeypatch):
    """A prefill (prefill=True: the prompt's causal attention by the model.attention backend, left
    padding kept apart as its own document) gives the logits and cache keys/values of the
    cached decode path (queries over the whole cache under the position mask) at every real
    position. cudnn: its glue ([b, t, n, h] layout, k/v transposed into the cache) with JAX's
    XLA kernel in place of cuDNN; splash: the Pallas kernels interpreted, t = 128. kv < 4:
    grouped-query attention (cudnn's glue passes K heads, splash repeats them)."""
    from spmdgpt.config import AttentionImpl
    from spmdgpt.model import attention

    t = 128 if backend == "splash" else 24
    cfg, mesh, rules, params = setup(f"model.max_seq_len={t + 8}", *(["model.num_layers=1"] if t > 24 else []),
                                     f"model.num_kv_heads={kv}")
    rng = np.random.default_rng(3)
    toks = jnp.asarray(rng.integers(0, 10, (2, t)), jnp.int32)
    lens = np.array([t, t - 9])  # row 1: 9 pad slots on the left
    pos = jnp.asarray(np.where(np.arange(t)[None] >= (t - lens)[:, None], np.arange(t)[None] - (t - lens)[:, None], -1),
                      jnp.int32)

    def run(prefill):
        with jax.set_mesh(mesh):
            cache = init_cache(cfg.model, rules, 2, t + 8)
            return jax.jit(lambda p, x, q, c: forward(cfg.model, rules, p, x, q, c, prefill=prefill))(
                params, toks, pos, cache
            )

    want_logits, want = run(False)
    calls = []
    monkeypatch.setattr(attention, "attention_backend", lambda cfg, platform=None: AttentionImpl(backend))
    if backend == "cudnn":
        kernel = attention.fused_causal_attention
        monkeypatch.setattr(attention, "fused_causal_attention",
                            lambda q, k, v, rules, impl, seg: calls.append(impl) or kernel(q, k, v, rules, "xla", seg))
    elif backend == "splash":
        kernel = attention.splash_causal_attention
        monkeypatch.setattr(attention, "splash_causal_attention", lambda *a: calls.append(1) or kernel(*a))
    got_logits, got = run(True)
    assert backend == "xla" or calls  # the backend's branch ran
    real = np.asarray(pos) >= 0
    assert int(got.end) == t and (np.asarray(got.pos)[:, :t] == np.asarray(pos)).all()
    np.testing.assert_allclose(np.asarray(got_logits)[real], np.asarray(want_logits)[real], rtol=0, atol=2e-5)
    for name in ("k", "v"):  # [layers, b, n, capacity, h]
        a, b = got.layers[name], want.layers[name]
        a, b = (np.moveaxis(np.asarray(c), 3, 2)[:, :, :t] for c in (a, b))
        np.testing.assert_allclose(a[:, real], b[:, real], rtol=0, atol=2e-5)
        assert np.abs(a[:, real]).max() > 0.1


@pytest.fixture
def staircase_run(staircase_300):
    """(run_dir, train's result) of the staircase's 300 steps on 8 devices, rollouts of 20 tokens at every
    evaluation, checkpoints at 150 and 300 (tests/shared_runs.py: STAIRCASE_300)."""
    return staircase_300.run_dir, staircase_300


def staircase_continuation(prompt: str, n: int) -> str:
    seq = "012345678987654321" * 20
    for start in range(18):
        if seq[start:].startswith(prompt) and seq[start + len(prompt) - 2:start + len(prompt)] == prompt[-2:]:
            return seq[start + len(prompt):start + len(prompt) + n]
    raise ValueError(prompt)


def test_greedy_continues_the_staircase_exactly(staircase_run, capsys):
    run_dir, _ = staircase_run
    for prompt in ("0123", "98765", "4567898"):
        code = main(["sample", f"run.dir={run_dir}", f"prompt={prompt}", "max_new_tokens=40",
                     "temperature=0"])
        out = capsys.readouterr().out.strip()
        assert code == 0
        assert out == prompt + staircase_continuation(prompt, 40)
    # deterministic: the same call gives the same text; without max_new_tokens, as many as the model's
    # context of 64 leaves (the default 200 would not fit)
    main(["sample", f"run.dir={run_dir}", "prompt=0123", "temperature=0"])
    assert capsys.readouterr().out.strip() == "0123" + staircase_continuation("0123", 60)


def test_sample_cli_on_the_runs_mesh_or_overridden_ones(staircase_run, capsys):
    """The run trained on 8 devices (dp); sampling uses that mesh by default (one prompt padded
    to 8 rows), or the mesh and rule table the overrides give (a mesh smaller than the machine
    takes its first devices): the same text every time."""
    run_dir, _ = staircase_run
    want = "0123" + staircase_continuation("0123", 30)
    # (other rule tables: test_sharded_sampling_equals_single_device)
    for extra, layout in (([], "mesh {'data': 8, 'stage': 1, 'expert': 1, 'context': 1, 'model': 1} sharding dp"),
                          (["sharding=fsdp_tp", "mesh.data=1", "mesh.model=2"],
                           "mesh {'data': 1, 'stage': 1, 'expert': 1, 'context': 1, 'model': 2} sharding fsdp_tp")):
        code = main(["sample", f"run.dir={run_dir}", "prompt=0123", "max_new_tokens=30", "temperature=0", *extra])
        out, err = capsys.readouterr()
        assert code == 0 and out.strip() == want
        assert err.endswith(f" step 300 | {layout}\n")
    code = main(["sample", f"run.dir={run_dir}", "prompt=0123", "max_new_tokens=8", "model.d_model=32"])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"spmdgpt: error: run.dir={run_dir}: the overrides change parameter shapes: "
                                 "model.d_model=32 (checkpoint: 64); sample with the run's model config\n")


def test_rollouts_during_training(staircase_run):
    run_dir, _ = staircase_run
    rows = read_jsonl(run_dir / "samples.jsonl")
    assert [r["step"] for r in rows] == [100, 100, 200, 200, 300, 300]  # 2 fixed prompts per eval
    assert rows[0]["prompt"] == rows[2]["prompt"] == rows[4]["prompt"]
    assert len(rows[-1]["prompt"]) == 8 and len(rows[-1]["completion"]) == 20
    last = rows[-1]
    assert last["completion"] == staircase_continuation(last["prompt"], 20)  # temperature 0.8, trained


def run_engine(cfg, rules, params, requests, slots=2, vocab_limit=10):
    return [r.tokens for r in Engine(cfg.model, rules, params, vocab_limit, EngineConfig(slots=slots, page_size=8))
            .run(requests)]


def test_top_k_never_leaves_the_top_k():
    cfg, mesh, rules, params = setup("model.init_std=0.5", "model.vocab_size=16")
    prompts = [[1, 2, 3], [7, 7]]
    with jax.set_mesh(mesh):  # (all 16 ids allowed)
        outs = run_engine(cfg, rules, params, [Request(p, 30, temperature=2.0, top_k=3, seed=3, stream=r)
                                               for r, p in enumerate(prompts)], vocab_limit=16)
        for p, o in zip(prompts, outs, strict=True):
            seq = jnp.asarray([p + o])
            logits = np.asarray(forward(cfg.model, rules, params, seq)[0])[0]
            for i, tok in enumerate(o):
                top3 = np.argsort(logits[len(p) + i - 1])[-3:]
                assert tok in top3
    # at temperature 2 the samples are not simply greedy
    assert len({t for o in outs for t in o}) > 3


def test_streams_seeds_top_p_and_stop_tokens():
    cfg, mesh, rules, params = setup()
    with jax.set_mesh(mesh):  # (one engine per slot count, each answering several runs in turn)
        four, two = (Engine(cfg.model, rules, params, 10, EngineConfig(slots=n, page_size=8)) for n in (4, 2))
        tokens = lambda engine, requests: [r.tokens for r in engine.run(requests)]  # noqa: E731
        draw = lambda seed, **kw: tokens(four, [Request([1, 2], 30, seed=seed, stream=r, **kw)  # noqa: E731
                                                for r in range(4)])
        a, b, c = draw(1), draw(1), draw(2)
        greedy = tokens(two, [Request([1, 2], 30, temperature=0.0)])
        nucleus = tokens(two, [Request([1, 2], 30, top_p=1e-6)])
        eos = greedy[0][3]
        stopped = tokens(two, [Request([1, 2], 30, temperature=0.0, stop_ids=(eos,))])
    assert len({tuple(r) for r in a}) == 4  # same prompt, independent streams
    assert a == b and a != c  # a seed fixes the samples
    assert nucleus == greedy  # top_p -> 0 keeps only the most likely token
    assert max(max(r) for r in a) < 10  # padded vocabulary ids are never sampled
    assert stopped[0] == greedy[0][: greedy[0].index(eos) + 1]


# (fsdp_tp's data x model mesh in `make test`; dp and tp, each one of its axes, in `make test-all`)
LAYOUTS = [pytest.param("dp", ["mesh.data=8"], id="dp", marks=pytest.mark.slow),
           pytest.param("tp", ["mesh.data=2", "mesh.model=4"], id="tp", marks=pytest.mark.slow),
           pytest.param("fsdp_tp", ["mesh.data=4", "mesh.model=2"], id="fsdp_tp")]


SHARDED_PROMPTS = [[1, 2, 3], [5], [9, 8, 7, 6], [0, 1], [4, 4, 4], [2], [3, 5], [6, 7, 8]]


def greedy_and_sampled(*overrides, devices=None):
    """The engine's greedy and seeded top-k tokens for SHARDED_PROMPTS (8 slots, one engine)."""
    cfg, mesh, rules, params = setup(*overrides, devices=devices)
    with jax.set_mesh(mesh):
        engine = Engine(cfg.model, rules, params, 10, EngineConfig(slots=8, page_size=8))
        greedy = [r.tokens for r in engine.run([Request(p, 20, temperature=0.0) for p in SHARDED_PROMPTS])]
        sampled = [r.tokens for r in engine.run([Request(p, 20, top_k=5, seed=7, stream=r)
                                                 for r, p in enumerate(SHARDED_PROMPTS)])]
    return greedy, sampled


@pytest.fixture(scope="module")
def single_device_samples():
    return greedy_and_sampled()


@pytest.mark.parametrize("table,mesh_args", LAYOUTS)
def test_sharded_sampling_equals_single_device(table, mesh_args, single_device_samples):
    greedy, sampled = greedy_and_sampled(f"sharding={table}", *mesh_args, devices=jax.devices())
    assert len({tuple(t) for t in greedy}) > 1 and len({tuple(t) for t in sampled}) > 1  # (8 different answers)
    assert (greedy, sampled) == single_device_samples


class DigitChat:
    """The least a Conversation needs of a tokenizer: digits, a user mark 'u', an assistant mark
    'a' and the end of a turn '|' (ids 0-12)."""
    chars, vocab_size, stop_id, stop_text = "0123456789ua|", 13, 12, "|"

    class template:  # noqa: N801 (the tokenizer's `template` attribute)
        @staticmethod
        def render(messages, add_generation_prompt):
            return "".join(m["role"][0] + m["content"] + "|" for m in messages) + ("a" if add_generation_prompt else "")

    def encode(self, text):
        return [self.chars.index(c) for c in text]

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)

    def prompt(self, messages):
        return self.encode(self.template.render(messages, add_generation_prompt=True))

    def reply_text(self, ids, final=True):
        return self.decode(ids)


MLA_MOE = ["model.mla.kv_rank=16", "model.mla.q_rank=12", "model.mla.rope_dim=4", "model.mla.v_dim=6",
           "model.moe.num_experts=4", "model.num_layers=3", "model.moe.first_dense_layers=1"]
ATTENTION_UNITS = {"mha": [], "gqa": ["model.num_kv_heads=2"], "mla-moe": MLA_MOE,
                   "windows-sinks": ["model.num_layers=2", "model.sliding_window=6", "model.window_pattern=LG",
                                     "model.attention_sinks=true"],  # (gpt-oss's attention)
                   "hybrid": ["model.deltanet.full_attention_interval=2", "model.deltanet.key_heads=2",
                              "model.deltanet.value_heads=4", "model.deltanet.key_dim=8", "model.deltanet.chunk=4",
                              "model.attention_gate=true", "model.rope_fraction=0.5"]}  # (Qwen3.5's softmax layers)


@pytest.mark.parametrize("args,expected", [
    (["prompt="], "an empty prompt"),
    (["prompt=" + "0" * 70], "prompt of 70 tokens fills the model's context of 64 tokens; shorten it"),
    (["prompt=" + "0" * 60, "max_new_tokens=5"], "prompt of 60 tokens + max_new_tokens=5 exceeds the model's "
                                                 "context of 64 tokens"),
    (["temperature=-0.5"], "temperature=-0.5 must be a number in [0, 2] (0 = greedy)"),
    # (one rule for every sampling value, as the server's: finite, in its range)
    (["temperature=nan"], "temperature=nan must be a number in [0, 2]"),
    (["temperature=inf"], "temperature=inf must be a number in [0, 2]"),
    (["temperature=2.5"], "temperature=2.5 must be a number in [0, 2]"),
    (["top_p=nan"], "top_p=nan must be in (0, 1]"),
    (["top_p=0"], "top_p=0.0 must be in (0, 1]"),
    (["prompt=x"], "character 'x' is not in the vocabulary"),
    (["colour=red"], "expected key=value with a key among run.dir, prompt"),
    (["speculate=1"], "speculate=1: the model has no multi-token-prediction modules to draft with "
                      "(model.mtp_depth=0); train one with model.mtp_depth=1 or more, or leave speculate=0"),
])
def test_sample_cli_errors(staircase_run, capsys, args, expected):
    run_dir, _ = staircase_run
    code = main(["sample", f"run.dir={run_dir}", *args])
    err = capsys.readouterr().err
    assert code == 2 and expected in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("spmdgpt: error: ")


def test_damaged_run_folders_give_one_line_or_the_older_checkpoint(staircase_run, tmp_path, capsys):
    """A damaged run folder, command by command: a truncated newest checkpoint is passed over for
    the older one with one warning (as train resumes), or, asked for by step=, refused in one
    line; a damaged tokenizer.json or config.yaml, a prompt_file that is not UTF-8, and prompt=
    with prompt_file= are one line, exit 2, nothing written. (And a finished run given to train
    again says so.)"""
    import json
    import shutil

    run_dir, _ = staircase_run
    done = tmp_path / "done"  # (first: a finished run trained again has nothing to do, and says so)
    shutil.copytree(run_dir, done)
    assert main(["train", *STAIRCASE_300, f"run.dir={done}"]) == 0
    assert "".join(capsys.readouterr()).strip().splitlines()[-1] == (
        f"done: {done} had already trained its 300 steps; nothing to do (spmdgpt eval run.dir={done} evaluates it)")
    damaged = tmp_path / "run"
    shutil.copytree(run_dir, damaged)
    for f in (damaged / "checkpoints" / "300" / "params").rglob("ocdbt.process_0/d/*"):
        with open(f, "r+b") as fh:
            fh.truncate(100)

    def call(*args):
        code = main([*args])
        out, err = capsys.readouterr()
        return code, out, err.strip().splitlines()

    code, out, err = call("sample", f"run.dir={damaged}", "prompt=0123", "max_new_tokens=6", "temperature=0")
    assert code == 0 and out.splitlines()[-1] == "0123" + staircase_continuation("0123", 6)
    assert len(err) == 2 and err[0].startswith(f"spmdgpt: warning: checkpoint {damaged}/checkpoints/300 cannot be "
                                               "loaded (OUT_OF_RANGE: Error reading")
    assert err[0].endswith("; trying an older one") and err[1].startswith(f"# {damaged} step 150")
    code, out, err = call("export", f"run.dir={damaged}", f"out={tmp_path / 'hf'}")
    assert code == 0 and f"exported {damaged} step 150" in out and len(err) == 1
    for command in (["sample", "prompt=1", "max_new_tokens=5"], ["eval"], ["export", f"out={tmp_path / 'hf300'}"]):
        code, _, err = call(command[0], f"run.dir={damaged}", "step=300", *command[1:])
        assert code == 2 and len(err) == 1, err
        assert err[0].startswith(f"spmdgpt: error: run.dir={damaged}: the checkpoint(s) cannot be loaded: 300 "
                                 "(OUT_OF_RANGE: Error reading") and err[0].endswith(
            "; give an older one with step=N, or train again")
    assert not (tmp_path / "hf300").exists()

    (damaged / "tokenizer.json").write_text('{"kind": "char", "ch')
    for command in (["sample"], ["eval"], ["export", f"out={tmp_path / 'x'}"]):
        assert call(command[0], f"run.dir={damaged}", *command[1:])[::2] == (2, [
            f"spmdgpt: error: {damaged}/tokenizer.json: not a tokenizer spmdgpt wrote "
            "(Unterminated string starting at: "
            "line 1 column 18 (char 17)); restore the run's own file"])
    saved = json.loads((run_dir / "tokenizer.json").read_text())
    assert {k: v for k, v in saved.items() if k != "sha256"} == {"kind": "digits", "chars": "0123456789",
                                                                 "vocab_size": 10} and len(saved["sha256"]) == 64
    (damaged / "tokenizer.json").write_text('{"kind": "char", "chars": "0123456", "vocab_size": 10}')  # edited
    assert call("sample", f"run.dir={damaged}")[::2] == (2, [
        f"spmdgpt: error: {damaged}/tokenizer.json: not a tokenizer spmdgpt wrote (it has 7 ids, the run trained "
        "with 10: it was edited); restore the run's own file"])
    # edited to the same size (the characters rotated): its digest tells
    (damaged / "tokenizer.json").write_text(json.dumps({**saved, "kind": "char", "chars": "1234567890", "eos": False}))
    assert call("sample", f"run.dir={damaged}")[::2] == (2, [
        f"spmdgpt: error: {damaged}/tokenizer.json: not a tokenizer spmdgpt wrote (its contents are not those the run "
        "saved (their sha256 differs): it was edited); restore the run's own file"])
    shutil.copy(run_dir / "tokenizer.json", damaged / "tokenizer.json")
    with open(damaged / "config.yaml", "a") as f:
        f.write("model: [d_model: 3\n")
    lines = len((run_dir / "config.yaml").read_text().splitlines())
    for command in (["sample"], ["eval"], ["export", f"out={tmp_path / 'x'}"]):
        assert call(command[0], f"run.dir={damaged}", *command[1:])[::2] == (2, [
            f"spmdgpt: error: {damaged}/config.yaml: not valid YAML (expected ',' or ']', but got '<stream end>' at "
            f"line {lines + 2}, column 1); restore the file the run wrote"])
    assert not (tmp_path / "x").exists()
    bad = tmp_path / "prompts.txt"
    bad.write_bytes(b"01\xff2\n")
    assert call("sample", f"run.dir={run_dir}", f"prompt_file={bad}")[::2] == (2, [
        f"spmdgpt: error: prompt_file={bad}: not UTF-8 text (byte 0xff at offset 2); save it as UTF-8"])
    assert call("sample", f"run.dir={run_dir}", f"prompt_file={tmp_path}")[::2] == (2, [
        f"spmdgpt: error: prompt_file={tmp_path} is a folder; give a file"])
    assert call("sample", f"run.dir={run_dir}", f"prompt_file={bad}", "prompt=0")[::2] == (2, [
        "spmdgpt: error: prompt= and prompt_file= both given: give one (prompt_file answers each of its lines)"])


def test_sample_cli_unknown_run_dir(tmp_path, capsys):
    assert main(["sample", f"run.dir={tmp_path / 'nope'}", "prompt=1"]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_sample_cli_prompt_file_and_num_samples(staircase_run, tmp_path, capsys):
    run_dir, _ = staircase_run
    pf = tmp_path / "prompts.txt"
    pf.write_text("0123\n876\n")
    code = main(["sample", f"run.dir={run_dir}", f"prompt_file={pf}", "num_samples=2",
                 "max_new_tokens=10", "temperature=0"])
    out = capsys.readouterr().out.strip().split("\n" + "-" * 40 + "\n")
    assert code == 0 and len(out) == 4
    assert out[0] == out[1] == "0123" + staircase_continuation("0123", 10)
    assert out[2] == "876" + staircase_continuation("876", 10)
