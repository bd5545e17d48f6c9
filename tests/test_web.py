"""spmdgpt export format=web: the page's model (web/src, run from the shipped bundle under
Node.js on jax-js's WebAssembly backend) computes JAX's logits and spmdgpt sample's greedy
text for a trained char model and a GPT-2 BPE model; its tokenizers equal spmdgpt's; the
shipped bundle is a fresh build of web/src; bad input is refused."""

import contextlib
import dataclasses
import io
import json
import shutil
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import WEBGPU_ON_CPU, chromium_tab, missing, needs_chromium, required

from spmdgpt import train
from spmdgpt.cli import main
from spmdgpt.config import ConfigError, load_config, load_run_config
from spmdgpt.data import tokenizer_from_json
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import forward
from spmdgpt.training.state import load_params
from spmdgpt.web import static_server

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None and not required("SPMDGPT_REQUIRE_NPM"),
                                reason="Node.js is not installed (the bundle runs under Node here)")
TINY = [
    "model.num_layers=2",
    "model.d_model=32",
    "model.num_heads=2",
    "data.batch_size=8",
    "data.seq_len=32",
    "model.max_seq_len=128",
    "train.steps=30",
    "optimizer.warmup_steps=5",
    "model.init_std=0.1",
    "train.eval_every=0",
    "train.rollout_tokens=0",
    "train.progress=false",
    "train.time_budget=null",
]
RUNS = {"char": ["+experiment=shakespeare_char", *TINY],  # Muon + QK-norm: the make-train recipe
        "gpt2": ["+experiment=shakespeare_gpt2", *TINY, "model.mlp=swiglu", "model.norm=rmsnorm",
                 "model.tie_embeddings=false", "model.logit_softcap=30", "train.steps=8", "data.seq_len=16"]}
# (its 50257-way softmax makes a step of 8 x 32 tokens ~1.5 s on a slow 2-core CPU: 8 steps of 8 x 16
# train its logits past the checks' 1.0)
HELD_OUT = "KING HENRY:\nWhat say'st thou, my good lord? Speak, and be brief;\n"  # (not in the corpus)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{kind: (run_dir, out)}: a run trained 30 steps and exported with format=web, on first use."""
    made = {}

    def get(kind):
        if kind not in made:
            run_dir = tmp_path_factory.mktemp("web") / kind
            train(load_config([*RUNS[kind], f"run.dir={run_dir}"]), argv=["pytest"])
            out = run_dir.parent / "page"
            assert main(["export", f"run.dir={run_dir}", f"out={out}", "format=web"]) == 0
            modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}  # (all readable as the others:
            assert len(set(modes.values())) == 1, modes  # a web server running as another user reads them)
            made[kind] = run_dir, out
        return made[kind]

    return get


def run_page_model(out: Path, prompt: list, new_tokens: int, sequence: list, prefill: int, text: str) -> dict:
    request = json.dumps({"prompt": prompt, "new_tokens": new_tokens, "sequence": sequence, "prefill": prefill,
                          "text": text})
    r = subprocess.run([NODE, str(ROOT / "tests" / "web_parity.mjs"), str(out), request], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


PROMPT = "ROMEO:\nI"
GREEDY = 32  # greedy tokens compared token for token (each a decode step in JAX, Node and Chromium)


@pytest.fixture(scope="module")
def reference(exported):
    """{kind: dict}: what JAX and spmdgpt compute for the exported run: the tokenizer, the
    prompt's ids and logits (and `logits16`, with the parameters rounded to float16),
    `sequence` (40 held-out tokens) and its logits, and the greedy text of `spmdgpt sample
    temperature=0 max_new_tokens=GREEDY`."""
    made = {}

    def get(kind):
        if kind in made:
            return made[kind]
        run_dir, out = exported(kind)
        cfg = load_run_config(run_dir)
        cfg.mesh.data = cfg.mesh.model = 1
        tok = tokenizer_from_json(json.loads((run_dir / "tokenizer.json").read_text()), cfg.data)
        prompt = [int(i) for i in tok.encode(PROMPT)]
        sequence = [int(i) for i in tok.encode(HELD_OUT)][:40]
        mesh = make_mesh(cfg.mesh, jax.devices()[:1])
        with jax.set_mesh(mesh):
            rules = Rules(mesh, cfg.sharding)
            _, params = load_params(run_dir, cfg.model, rules)
            fwd = jax.jit(lambda p, ids: forward(cfg.model, rules, p, ids)[0][0])
            logits, whole = (np.asarray(fwd(params, jnp.array([ids], jnp.int32))) for ids in (prompt, sequence))
            rounded = jax.tree.map(lambda a: a.astype(jnp.float16).astype(jnp.float32), params)  # dtype=float16
            logits16 = np.asarray(fwd(rounded, jnp.array([prompt], jnp.int32)))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main(["sample", f"run.dir={run_dir}", f"prompt={PROMPT}", f"max_new_tokens={GREEDY}",
                         "temperature=0", "mesh.data=1"]) == 0
        made[kind] = dict(out=out, tok=tok, prompt=prompt, logits=logits, sequence=sequence, whole=whole,
                          logits16=logits16, sampled=printed.getvalue().removesuffix("\n"))
        return made[kind]

    return get


@needs_node
@pytest.mark.parametrize("kind", ["char", "gpt2"])
def test_page_model_computes_jax_logits_and_greedy_text(kind, reference):
    ref = reference(kind)
    out, tok = ref["out"], ref["tok"]
    files = ["config.json", "index.html", "model.safetensors", "spmdgpt-web.js", "tokenizer.json"]
    assert sorted(p.name for p in out.iterdir()) == sorted(files + (["gpt2.tiktoken"] if kind == "gpt2" else []))
    # the sequence goes through the KV cache: 8 tokens at once, then one by one
    got = run_page_model(out, ref["prompt"], GREEDY, ref["sequence"], 8, HELD_OUT)
    assert got["backend"] == "wasm"
    theirs = np.array(got["logits"], np.float32).reshape(ref["logits"].shape)
    assert np.abs(ref["logits"] - theirs).max() <= 1e-3
    assert np.abs(ref["logits"]).max() > 1.0  # trained logits, not near zero
    cached = np.array(got["cached"], np.float32).reshape(ref["whole"].shape)
    assert np.abs(ref["whole"] - cached).max() <= 1e-3
    # greedy: GREEDY tokens equal to spmdgpt sample temperature=0, token for token
    assert len(got["greedy"]) == GREEDY
    assert PROMPT + tok.decode(got["greedy"]) == ref["sampled"]
    assert got["decoded"] == tok.decode(got["greedy"])
    # the page's tokenizer is spmdgpt's; the model's arrays are all still held once (no
    # parameter consumed or leaked by GREEDY decode steps)
    assert got["encoded"] == [int(i) for i in tok.encode(HELD_OUT)]
    assert set(got["refCounts"]) == {1}


@needs_chromium
@pytest.mark.parametrize("kind,backend", [("char", "wasm"), ("gpt2", "wasm"), ("char", "webgpu")])
def test_page_in_headless_chromium(kind, backend, reference, tmp_path):
    """The page served by a static server: no console errors; its model's logits and greedy
    text equal JAX's and spmdgpt sample's; the Generate button streams text and shows tokens/s.
    WebGPU runs on SwiftShader's CPU Vulkan here (no GPU): the same kernels a GPU would run."""
    ref = reference(kind)
    args = WEBGPU_ON_CPU if backend == "webgpu" else ()
    with static_server(ref["out"]) as url, chromium_tab(url, args) as (tab, errors):
        tab.wait_for_function("document.getElementById('status').textContent !== 'starting...' && "
                              "!document.getElementById('status').textContent.startsWith('loading')",
                              timeout=120_000)
        assert tab.text_content("#status") == "ready", errors
        used = tab.evaluate("window.spmdgpt.backend")
        logits = np.array(tab.evaluate("ids => window.spmdgpt.logits(ids)", ref["prompt"]), np.float32)
        greedy = tab.evaluate(f"ids => window.spmdgpt.greedy(ids, {GREEDY})", ref["prompt"])
        tab.fill("#prompt", PROMPT)
        tab.fill("#max_new_tokens", "10")
        tab.click("#generate")
        tab.wait_for_function("document.getElementById('status').textContent === 'done'", timeout=120_000)
        streamed, speed = tab.text_content("#output"), tab.text_content("#speed")
        tab.screenshot(path=str(tmp_path / f"page-{kind}.png"), full_page=True)
    assert errors == []
    assert used == backend
    assert np.abs(ref["logits"] - logits.reshape(ref["logits"].shape)).max() <= 1e-3
    assert PROMPT + ref["tok"].decode(greedy["ids"]) == ref["sampled"]
    assert len(streamed) > 0 and speed.startswith("10 tokens, ") and speed.endswith(" tokens/s")


@needs_chromium
def test_float16_export_in_chromium(exported, reference, tmp_path):
    """dtype=float16 halves the weights' bytes; the page (float32 compute on the float16
    weights) gives JAX's logits for the same float16-rounded parameters within 1e-3."""
    run_dir, out32 = exported("char")
    ref = reference("char")
    out = tmp_path / "page16"
    assert main(["export", f"run.dir={run_dir}", f"out={out}", "format=web", "dtype=float16"]) == 0
    assert json.loads((out / "config.json").read_text())["dtype"] == "float16"
    size16, size32 = ((d / "model.safetensors").stat().st_size for d in (out, out32))
    assert size16 < 0.55 * size32
    with static_server(out) as url, chromium_tab(url) as (tab, errors):
        tab.wait_for_function("window.spmdgpt !== undefined", timeout=120_000)
        logits = np.array(tab.evaluate("ids => window.spmdgpt.logits(ids)", ref["prompt"]), np.float32)
    assert errors == []
    assert np.abs(ref["logits16"] - logits.reshape(ref["logits16"].shape)).max() <= 1e-3
    assert np.abs(ref["logits16"] - ref["logits"]).max() > 1e-4  # the rounding shows: the test can tell


def test_export_web_refuses_bad_input(exported, tmp_path, capsys):
    run_dir, page = exported("char")

    def export(*items):
        capsys.readouterr()
        code = main(["export", f"run.dir={run_dir}", *items])
        return code, (capsys.readouterr().err.strip().splitlines() or [""])[-1]

    out = tmp_path / "page"
    assert export(f"out={out}", "format=web", "dtype=bfloat16") == (
        2, "spmdgpt: error: dtype=bfloat16: choose one of float32, float16 (jax-js has no bfloat16)")
    assert export(f"out={out}", "format=onnx") == (2, "spmdgpt: error: format=onnx: choose one of hf, web")
    assert export(f"out={page}", "format=web")[0] == 2  # not empty: refused (overwrite=true replaces it)
    assert not out.exists()
    # every model option is either computed by the page or training-only; a new one is refused
    from spmdgpt.config import ModelConfig, MoeConfig
    from spmdgpt.hf.convert import field_names
    from spmdgpt.hf.tables import TRAINING_ONLY
    from spmdgpt.web import TABLE, check_supported

    mapped, refused = set(TABLE.fields), set(TABLE.refused)
    assert set(field_names(ModelConfig)) == mapped | refused | set(TRAINING_ONLY)
    assert not (mapped & refused) and not (mapped & set(TRAINING_ONLY)) and not (refused & set(TRAINING_ONLY))
    with pytest.raises(ConfigError, match=r"does not implement model.num_kv_heads, model.qk_norm_scale; export"):
        check_supported(ModelConfig(num_kv_heads=2, qk_norm=True, qk_norm_scale=True))
    check_supported(ModelConfig(num_kv_heads=4, head_dim=32))  # (num_kv_heads = num_heads: multi-head attention)
    with pytest.raises(ConfigError, match=r"does not implement model.moe.num_experts; export format=hf instead"):
        check_supported(ModelConfig(moe=MoeConfig(num_experts=4, dispatch="capacity", capacity_factor=1.0)))
    NewOption = dataclasses.make_dataclass("NewOption", [("gqa_groups", int, 2)], bases=(ModelConfig,))
    with pytest.raises(ConfigError, match=r"does not implement model.gqa_groups; export format=hf instead"):
        check_supported(NewOption())
    spec = json.loads((page / "tokenizer.json").read_text())
    assert (spec["kind"], len(spec["chars"]), spec["eos_id"]) == ("char", 65, 65)
    config = json.loads((page / "config.json").read_text())
    assert (config["vocab_size"], config["vocab_limit"], config["dtype"], config["qk_norm"]) == (
        66,
        66,
        "float32",
        True,
    )


@needs_node
def test_shipped_bundle_is_a_fresh_build_of_web_src():
    if not (ROOT / "web" / "node_modules").is_dir():
        missing("SPMDGPT_REQUIRE_NPM", "web/node_modules is missing: run `cd web && npm ci` (.ci/run does) to check "
                "the bundle")
    r = subprocess.run([NODE, str(ROOT / "web" / "build.mjs"), "--check"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "matches a fresh build" in r.stdout
