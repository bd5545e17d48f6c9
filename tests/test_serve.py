"""`spmdgpt serve`: a real server process on a free local port, driven by the official `openai`
client and by plain HTTP: completions equal `spmdgpt sample`'s (greedy), streaming equals the
whole answer, echoed log-probabilities equal the model's own, chat through the run's template,
the errors the OpenAI API gives, and SIGTERM ends it with exit 0."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import jax
import numpy as np
import pytest
from conftest import full_forward_samples, train_chat_run, wait_until

from spmdgpt.cli import main
from spmdgpt.cli.launch import free_port

openai = pytest.importorskip("openai")

ENV1 = {**os.environ, "XLA_FLAGS": "", "PYTHONUNBUFFERED": "1"}  # one CPU device
STAIR = ["+experiment=staircase", "train.steps=20", "train.progress=false", "train.eval_every=0"]  # (8 devices)


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None, None


def _post(url: str, body: dict):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


class Served:
    """`spmdgpt serve run.dir=... port=<free>` in its own process, ended by PID (one size of decode
    step, buckets=1, unless `extra` gives buckets=: fewer programs to compile before the port opens)."""

    def __init__(self, run_dir, *extra):
        extra = extra + (() if any(e.startswith("buckets=") for e in extra) else ("buckets=1",))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "spmdgpt", "serve", f"run.dir={run_dir}",
                                      f"port={self.port}", "mesh.data=1", *extra], env=ENV1,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: _get(self.url + "/health")[0] == 200, self.proc, "the server's /health", poll=0.2)
        except BaseException:
            self.close()
            raise
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key="none")

    def close(self) -> tuple:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                out, err = self.proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, err = self.proc.communicate()
            return self.proc.returncode, err
        return self.proc.returncode, self.proc.stderr.read()


@pytest.fixture(scope="module")
def stair_run(tmp_path_factory):
    """20 staircase steps from the default init: a model whose samples still vary from seed to seed
    (tests/shared_runs.py's 30 steps from init_std 0.2 have learnt too much for that)."""
    run = tmp_path_factory.mktemp("serve") / "stair"
    assert main(["train", *STAIR, f"run.dir={run}"]) == 0
    return run


def test_completions_through_the_openai_client(stair_run, capsys):
    """Greedy completions equal `spmdgpt sample temperature=0`'s; n seeded samples repeat with
    their seed; stop strings cut; streaming gives the same text; echo + logprobs are the model's
    log-probabilities of the prompt (lm-eval's local-completions asks for these); bad requests get
    the OpenAI API's status and body. On the same server of two slots (one start for all of it):
    five seeded requests at once from threads each equal the same request sent alone (continuous
    batching changes no token); unseeded ones differ; a stream arrives a token a chunk; a client
    that closes its stream after the first chunk ends its sequence (console 499) and /health
    shows every page back. SIGTERM ends the server with exit 0 and nothing written."""
    import socket
    import threading
    import time

    from spmdgpt.cli.runs import model_source, source_params
    from spmdgpt.model.loss import token_losses

    before = sorted(p.name for p in stair_run.iterdir())
    assert main(["sample", f"run.dir={stair_run}", "prompt=0123", "max_new_tokens=8", "temperature=0",
                 "mesh.data=1"]) == 0
    sampled = capsys.readouterr().out.strip()
    server = Served(stair_run, "slots=2", "page_size=4", "buckets=2")
    try:
        c = server.client.completions.create(model="stair", prompt="0123", max_tokens=8, temperature=0)
        assert c.object == "text_completion" and c.model == "stair"
        assert "0123" + c.choices[0].text == sampled and c.choices[0].finish_reason == "length"
        assert (c.usage.prompt_tokens, c.usage.completion_tokens) == (4, 8)
        assert [m.id for m in server.client.models.list().data] == ["stair"]
        assert time.time() - 600 < server.client.models.list().data[0].created <= time.time()  # (the server's start)
        seeded = [server.client.completions.create(model="stair", prompt=[0, 1, 2], max_tokens=6, n=3, seed=5,
                                                   temperature=1.0) for _ in range(2)]
        texts = [[ch.text for ch in s.choices] for s in seeded]
        assert texts[0] == texts[1] and len(texts[0]) == 3 and len(set(texts[0])) > 1  # (each its own stream)
        assert (seeded[0].usage.prompt_tokens, seeded[0].usage.completion_tokens) == (3, 18)  # (the prompt once)
        stopped = server.client.completions.create(model="stair", prompt="0123", max_tokens=8, temperature=0,
                                                   stop=[c.choices[0].text[3]])
        assert stopped.choices[0].text == c.choices[0].text[:3] and stopped.choices[0].finish_reason == "stop"
        stream = list(server.client.completions.create(model="stair", prompt="0123", max_tokens=8, temperature=0,
                                                       stream=True, stream_options={"include_usage": True}))
        assert "".join(chunk.choices[0].text for chunk in stream[:-1]) == c.choices[0].text
        assert all(chunk.usage is None for chunk in stream[:-1]) and stream[-1].choices == []
        assert (stream[-1].usage.prompt_tokens, stream[-1].usage.completion_tokens) == (4, 8)
        # the same as the raw server-sent events: the usage chunk, then [DONE]
        with urllib.request.urlopen(urllib.request.Request(server.url + "/v1/completions", json.dumps(
                {"prompt": "0123", "max_tokens": 2, "temperature": 0, "stream": True,
                 "stream_options": {"include_usage": True}}).encode(), {"Content-Type": "application/json"})) as r:
            lines = r.read().decode().split("\n\n")
        assert lines[-2:] == ["data: [DONE]", ""] and json.loads(lines[-3][6:])["usage"] == {
            "prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
        # seed: any 64-bit integer (2**32 + 5 is not 5; -1 is 2**64 - 1, its two's complement); top_k
        # (vLLM's) at 1 is greedy; user is accepted
        texts = {seed: server.client.completions.create(model="stair", prompt="0123", max_tokens=12, seed=seed,
                                                        temperature=1.0).choices[0].text
                 for seed in (5, 2**32 + 5, 2**64 - 1, -1)}
        assert len({texts[5], texts[2**32 + 5], texts[-1]}) == 3 and texts[-1] == texts[2**64 - 1]
        top1 = server.client.completions.create(model="stair", prompt="0123", max_tokens=8, temperature=1.0, seed=3,
                                                extra_body={"top_k": 1}, user="someone")
        assert top1.choices[0].text == c.choices[0].text
        # logit_bias and penalties, per request in the engine's sampler (their arithmetic: test_engine)
        biased = server.client.completions.create(model="stair", prompt="0123", max_tokens=8, temperature=1.0,
                                                  logit_bias={"3": 100})
        assert biased.choices[0].text == "3" * 8
        penalised = server.client.completions.create(model="stair", prompt="0123", max_tokens=8, temperature=0,
                                                     frequency_penalty=2.0, presence_penalty=1.0)
        assert len(set(penalised.choices[0].text)) > len(set(c.choices[0].text))
        # echo + logprobs: each prompt token's log-probability given the ones before
        status, _, body = _post(server.url + "/v1/completions", {"prompt": "03579", "max_tokens": 0, "echo": True,
                                                                  "logprobs": 1})
        assert status == 200
        lp = body["choices"][0]["logprobs"]
        assert body["choices"][0]["text"] == "03579" and lp["tokens"] == list("03579")
        assert lp["token_logprobs"][0] is None

        cfg, tok = model_source(str(stair_run), ["mesh.data=1"])
        from spmdgpt.mesh.sharding import Rules, make_mesh

        mesh = make_mesh(cfg.mesh, jax.devices()[:1])
        with jax.set_mesh(mesh):
            rules = Rules(mesh, cfg.sharding, cfg.model)
            _, params = source_params(str(stair_run), cfg, rules)
            ids = np.asarray([tok.encode("03579")], np.int32)
            want = -np.asarray(token_losses(cfg.model, rules, params, ids[:, :-1], ids[:, 1:]))[0]
        np.testing.assert_allclose(lp["token_logprobs"][1:], want, atol=2e-5)
        assert all(max(top.values()) >= got for top, got in zip(lp["top_logprobs"][1:], lp["token_logprobs"][1:],
                                                                 strict=True))
        # the OpenAI API's errors: the status, the field named
        for request, status, param in (({"prompt": "0123", "max_tokens": 100}, 400, "max_tokens"),
                                       ({"prompt": "0" * 70, "max_tokens": 1}, 400, "prompt"),
                                       ({"prompt": "0a"}, 400, "prompt"),
                                       ({"prompt": "01", "temperature": -1}, 400, "temperature"),
                                       ({"prompt": "01", "temperature": float("nan")}, 400, "temperature"),
                                       ({"prompt": "01", "top_p": float("nan")}, 400, "top_p"),
                                       ({"prompt": "01", "max_tokens": float("nan")}, 400, "max_tokens"),
                                       ({"prompt": "01", "seed": float("inf")}, 400, "seed"),
                                       ({"prompt": "01", "temperature": 10 ** 400}, 400, "temperature"),
                                       # (types as the API reference gives them: booleans are true or false)
                                       ({"prompt": "01", "echo": "yes"}, 400, "echo"),
                                       ({"prompt": "01", "stop": ""}, 400, "stop"),  # (as [""] is)
                                       ({"prompt": "01", "stream": 1}, 400, "stream"),
                                       ({"prompt": "01", "logprobs": True}, 400, "logprobs"),
                                       ({"prompt": "01", "n": 0}, 400, "n"),
                                       # (more sequences than max_queue=64 at once: 400, retrying never helps)
                                       ({"prompt": ["01"] * 5, "n": 16}, 400, "n"),
                                       ({"prompt": "01", "stream": True, "logprobs": 1}, 400, "logprobs"),
                                       ({"prompt": "01", "best_of": 2}, 400, "best_of"),
                                       ({"prompt": "01", "frequency_penalty": 2.5}, 400, "frequency_penalty"),
                                       ({"prompt": "01", "logit_bias": {"x": 1}}, 400, "logit_bias"),
                                       ({"prompt": "01", "logit_bias": {"3": 101}}, 400, "logit_bias"),
                                       ({"prompt": "01", "logit_bias": {"10": 1}}, 400, "logit_bias"),
                                       ({"prompt": "01", "seed": 2**64}, 400, "seed"),
                                       ({"prompt": "01", "foo": 1}, 400, "foo"),  # (as the API: unrecognized)
                                       ({"prompt": "01", "user": 5}, 400, "user"),  # (accepted fields: typed)
                                       ({"prompt": "01", "messages": []}, 400, "messages"),
                                       ({"prompt": "01", "stream_options": {"include_usage": True}}, 400,
                                        "stream_options"),  # (without stream)
                                       ({"prompt": "01", "stream": True, "stream_options": {"include_usage": 1}},
                                        400, "stream_options.include_usage"),
                                       ({"prompt": "01", "model": "gpt-4"}, 404, "model")):
            got, _, body = _post(server.url + "/v1/completions", request)
            assert (got, body["error"]["param"]) == (status, param), (request, body)
            assert body["error"]["message"] and body["error"]["type"].endswith("_error")
        for path, status, message in (("/v1/nothing", 404, "POST /v1/nothing: no such route"),
                                      ("/health", 405, "POST /health: Method Not Allowed")):  # (JSON, as the API's)
            got, _, body = _post(server.url + path, {})
            assert (got, body["error"]["message"]) == (status, message)
        with pytest.raises(openai.BadRequestError, match="has no chat template"):
            server.client.chat.completions.create(model="stair", messages=[{"role": "user", "content": "1"}])

        # two slots: concurrent requests, a stream token by token, a client that leaves
        ask = lambda seed: server.client.completions.create(model="stair", prompt="0123", max_tokens=24, seed=seed,
                                                            temperature=1.0).choices[0].text
        together = [None] * 5
        threads = [threading.Thread(target=lambda i=i: together.__setitem__(i, ask(i))) for i in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert together == [ask(i) for i in range(5)] and len(set(together)) > 1
        unseeded = {server.client.completions.create(model="stair", prompt="0123", max_tokens=24,
                                                      temperature=1.0).choices[0].text for _ in range(3)}
        assert len(unseeded) > 1  # (no seed: each request draws its own, as the OpenAI API's)
        chunks = [c.choices[0].text for c in server.client.completions.create(
            model="stair", prompt="0123", max_tokens=8, temperature=0, stream=True)]
        assert sum(bool(c) for c in chunks) == 8  # (one character a token, each in its own chunk)

        body = json.dumps({"prompt": "0", "max_tokens": 63, "stream": True, "temperature": 1.0}).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            got = b""
            while b"data: " not in got:  # (the headers, then the first chunk: the sequence runs)
                got += sock.recv(4096)
        wait_until(lambda: _get(server.url + "/health")[1]["running"] == 0, server.proc, "the engine to drain")
        health = _get(server.url + "/health")[1]
        assert (health["pages_used"], health["waiting"], health["pages"]) == (0, 0, 32)
    finally:
        code, err = server.close()
    assert code == 0, err
    assert "serving stair step 20 (no chat template) on http://127.0.0.1:" in err and "its step compiled in" in err
    assert "s (8 programs: 2 widths, decoding at 2 row counts) |" in err  # (buckets=2: 2 x 2 decoding, 2 x 2 more)
    assert f"compiling the engine's step (2 widths x 2 row counts) before opening port {server.port}...\n" in err
    assert "engine 2 slots, 32 pages of 4 tokens" in err and "POST /v1/completions 499 " in err
    assert "POST /v1/completions 200 " in err and "POST /v1/completions 404 " in err
    assert "| temperature=-1.0 must be in [0.0, 2.0]" in err  # (a refused request's line says why)
    assert "stopping (SIGTERM): no new requests; finishing the 0 running" in err and err.rstrip().endswith("stopped")
    assert sorted(p.name for p in stair_run.iterdir()) == before  # (the server only reads the run)


def test_lora_adapters_by_name_interleaved_equal_each_runs_own_sample(stair_run, tmp_path, capsys):
    """`adapters=NAME:RUN,...`: two LoRA runs of the served run (other targets and ranks), their
    requests interleaved with the base's on one engine of two slots (one compiled step for every
    mix): each greedy completion equals `spmdgpt sample` of its own run (the base's of the base),
    and each adapter's differs from the base's; the models list names them (with their parent); an
    unknown name is 404. Bad adapters= values are one line each, exit 2."""
    import concurrent.futures

    runs = {}
    for name, extra in (("qv", ["lora.rank=4", "lora.alpha=8", "lora.targets=[q,v]"]),
                        ("all", ["lora.rank=2", "lora.alpha=4", "lora.targets=[all]"])):
        runs[name] = tmp_path / name
        assert main(["train", *STAIR, "train.steps=3", f"checkpoint.init_from={stair_run}", "optimizer.lr=0.3",
                     "optimizer.warmup_steps=0", f"run.dir={runs[name]}", *extra]) == 0
    want = {}
    for name, run in {"stair": stair_run, **runs}.items():
        assert main(["sample", f"run.dir={run}", "prompt=0123", "max_new_tokens=10", "temperature=0",
                     "mesh.data=1"]) == 0
        want[name] = capsys.readouterr().out.strip()
    assert want["qv"] != want["stair"] != want["all"] != want["qv"]  # (the adapters change the answer)
    server = Served(stair_run, "slots=2", "page_size=4", f"adapters=qv:{runs['qv']},all:{runs['all']}")
    try:
        assert [(m.id, getattr(m, "parent", None)) for m in server.client.models.list().data] == [
            ("stair", None), ("qv", "stair"), ("all", "stair")]
        asks = ["qv", "stair", "all"] * 2  # (interleaved, 6 requests on 2 slots)
        with concurrent.futures.ThreadPoolExecutor(len(asks)) as pool:
            done = list(pool.map(lambda name: server.client.completions.create(
                model=name, prompt="0123", max_tokens=10, temperature=0), asks))
        for name, c in zip(asks, done, strict=True):
            assert c.model == name and "0123" + c.choices[0].text == want[name], name
        # logprobs score with the request's adapter: its most likely next token is its own greedy one
        for name in ("qv", "all"):
            lp = server.client.completions.create(model=name, prompt="0123", max_tokens=1, temperature=0,
                                                  logprobs=1).choices[0].logprobs
            assert list(lp.top_logprobs[0]) == [want[name][4]] and lp.tokens == [want[name][4]]
        status, _, body = _post(server.url + "/v1/completions", {"model": "nope", "prompt": "0"})
        assert status == 404 and "'stair', 'qv', 'all'" in body["error"]["message"]
        status, _, body = _post(server.url + "/v1/completions", {"model": ["qv"], "prompt": "0"})
        assert status == 400 and body["error"]["message"] == 'model=["qv"] must be a string: a served model\'s name'
    finally:
        code, err = server.close()
    assert code == 0 and "LoRA adapters qv, all" in err
    port = free_port()
    theta = tmp_path / "theta"  # (the qv run, as if trained with another RoPE base: same shapes, another model)
    shutil.copytree(runs["qv"], theta)
    (theta / "config.yaml").write_text((theta / "config.yaml").read_text().replace("rope_theta: 10000.0",
                                                                                   "rope_theta: 500.0"))
    for bad, message in ((f"adapters=qv{runs['qv']}", "is not NAME:RUN"),
                         (f"adapters=stair:{runs['qv']}", "the name 'stair' is taken (by the base)"),
                         (f"adapters=a:{runs['qv']},a:{runs['all']}", "the name 'a' is taken (by another)"),
                         (f"adapters=a:{tmp_path / 'none'}", "is not a training run (no config.yaml there)"),
                         (f"adapters=a:{stair_run}", "is not a LoRA run (lora.rank=0)"),
                         (f"adapters=a:{theta}", "trained with model.rope_theta=500.0 (10000.0) (run.dir's in")):
        assert main(["serve", f"run.dir={stair_run}", f"port={port}", *bad.split()]) == 2, bad
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (bad, err)
    shutil.copytree(stair_run, tmp_path / "base2")  # (a LoRA run of another base)
    assert main(["serve", f"run.dir={tmp_path / 'base2'}", f"port={port}", f"adapters=a:{runs['qv']}"]) == 2
    assert f"trained its adapters on checkpoint.init_from={stair_run}, not on run.dir=" in capsys.readouterr().err


def test_bad_serve_arguments_are_one_line(tmp_path, capsys, stair_run):
    """Bad arguments are one line, exit 2, before anything starts; a page pool larger than a
    device holds is refused before it is allocated, naming the pages that fit."""
    import socket

    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    for args, message in ((["port=70000", f"run.dir={tmp_path}"], "port=70000 must be in [1, 65535]"),
                          ([f"port={port}", f"run.dir={tmp_path}"], f"host=127.0.0.1 port={port}: cannot listen there"),
                          (["max_queue=0", f"run.dir={tmp_path}"], "max_queue=0 must be >= 1"),
                          ([], "run.dir is required: spmdgpt serve run.dir="),
                          ([f"run.dir={stair_run}", "max_tokens=64"], "max_tokens=64 (a request's length when it "
                                                                       "gives none) leaves no room for a prompt in "
                                                                       "the model's context of 64 tokens"),
                          ([f"run.dir={stair_run}", "pages=500000000"], "pages=500000000: the page pool needs ")):
        assert main(["serve", *args]) == 2
        err = capsys.readouterr().err
        assert message in err and all(ln.startswith("spmdgpt: error: ") for ln in err.strip().splitlines()), err
    assert "serve pages=" in err and "at most" in err  # (the last: the pool's refusal names what fits)
    taken.close()


# The functions the chat run's tool-call conversations offer (OpenAI's `tools`), bounded so that a call
# of an untrained model ends: integers of at most two digits, no other keys
TOOLS = [{"type": "function", "function": {
             "name": "add", "description": "a + b",
             "parameters": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                                             "b": {"type": "integer", "minimum": 0, "maximum": 99}},
                            "required": ["a", "b"], "additionalProperties": False}}},
         {"type": "function", "function": {
             "name": "neg", "description": "-x",
             "parameters": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 99}},
                            "required": ["x"], "additionalProperties": False}}}]


# a function whose arguments' schema refers to its $defs, as Pydantic writes them (its "$" in the run's characters)
PUT = {"type": "function", "function": {"name": "put", "parameters": {
    "type": "object", "properties": {"at": {"$ref": "#/$defs/l"}}, "required": ["at"], "additionalProperties": False,
    "$defs": {"l": {"enum": [1, 2]}}}}}


def tool_conversation(i: int) -> dict:
    """A training line offering TOOLS: "i plus i?" answered by a call of add, its result, then the answer."""
    call = {"id": f"call_{i}", "type": "function", "function": {"name": "add", "arguments": {"a": i, "b": i}}}
    return {"tools": [*TOOLS, PUT], "messages": [
        {"role": "user", "content": f"{i} plus {i}?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": str(2 * i)},
        {"role": "assistant", "content": json.dumps({"sum": 2 * i, "mode": "odd" if i % 2 else "sane"})}]}


@pytest.fixture(scope="module")
def chat_run(tmp_path_factory):
    """A staircase-sized run fine-tuned for 2 steps on 30 conversations whose answers are JSON
    objects ("3 and 3?" -> {"sum": 6, "mode": "odd"}) and 6 that call a function (TOOLS), so that
    its character vocabulary can write JSON and calls (its context of 1024 characters holds TOOLS'
    ~600): the chat tests', the structured outputs' and the tool calls' (the servers only read it)."""
    return train_chat_run(tmp_path_factory.mktemp("chat"),
                          lambda i: json.dumps({"sum": 2 * i, "mode": "odd" if i % 2 else "sane"}),
                          extra=[tool_conversation(i) for i in range(6)], vocab=64, context=1024)


def test_chat_completions_through_the_runs_template_then_kill_9_mid_answer(tmp_path, chat_run):
    """A run fine-tuned on conversations: /v1/chat/completions renders the messages with its chat
    template and answers as the assistant, its greedy reply the model's continuation of the
    rendered prompt (cut at the end of the turn); streamed, the same reply. Then the same server,
    killed with SIGKILL while it streams an answer, leaves every file of the run directory with its
    bytes and modification time of before: the server only reads the run."""
    import hashlib

    run = chat_run

    def tree():
        return {str(p.relative_to(run)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
                for p in sorted(run.rglob("*")) if p.is_file()}

    from spmdgpt.cli.chat import chat_model
    from spmdgpt.cli.runs import source_params
    from spmdgpt.mesh.sharding import Rules, make_mesh

    cfg, tok = chat_model(str(run), ["mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    messages = [{"role": "user", "content": "3 and 3?"}]
    with jax.set_mesh(mesh):
        rules = Rules(mesh, cfg.sharding, cfg.model)
        _, params = source_params(str(run), cfg, rules)
        new = full_forward_samples(cfg.model, rules, params, [tok.prompt(messages)], 12, vocab_limit=tok.vocab_size,
                                   stop=tok.stop_id)[0]
    want = tok.decode(new[:new.index(tok.stop_id)] if tok.stop_id in new else new)
    before = tree()
    server = Served(run)
    try:
        reply = server.client.chat.completions.create(model="run", messages=messages, max_tokens=12, temperature=0)
        assert reply.object == "chat.completion" and reply.choices[0].message.role == "assistant"
        assert reply.choices[0].message.content == want
        stream = server.client.chat.completions.create(model="run", messages=messages, max_tokens=12, temperature=0,
                                                       stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream) == want
        # as current clients send them: content as a list of text parts; "developer", the API's system role
        parts = [{"role": "user", "content": [{"type": "text", "text": "3 and "}, {"type": "text", "text": "3?"}]}]
        same = server.client.chat.completions.create(model="run", messages=parts, max_completion_tokens=12,
                                                     temperature=0)
        assert same.choices[0].message.content == want
        # max_completion_tokens, the chat API's current name for the length, over max_tokens
        one = server.client.chat.completions.create(model="run", messages=messages, max_completion_tokens=1,
                                                    max_tokens=12, temperature=0)
        assert (one.choices[0].message.content, one.choices[0].finish_reason) == (tok.decode(new[:1]), "length")
        assert one.usage.completion_tokens == 1 and new[1] != tok.stop_id
        # logprobs: each reply token's, with its top_logprobs alternatives (greedy: the first of them)
        scored = server.client.chat.completions.create(model="run", messages=messages, max_tokens=12, temperature=0,
                                                       logprobs=True, top_logprobs=2, metadata={"who": "test"},
                                                       store=False)
        content = scored.choices[0].logprobs.content
        assert "".join(t.token for t in content) == want and len(content) == scored.usage.completion_tokens
        for t in content:
            assert [a.token for a in t.top_logprobs][0] == t.token and t.top_logprobs[0].logprob == t.logprob
            assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob and t.logprob <= 0
            assert bytes(t.bytes).decode() == t.token
        # streamed: each token's log-probability as the engine sampled it, with the chunk of its text
        streamed = [e for c in server.client.chat.completions.create(
            model="run", messages=messages, max_tokens=12, temperature=0, logprobs=True, stream=True)
            if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
        assert [e.token for e in streamed] == [t.token for t in content]
        np.testing.assert_allclose([e.logprob for e in streamed], [t.logprob for t in content], atol=2e-5)
        for request, param in (({"top_logprobs": 2}, "top_logprobs"), ({"logprobs": True, "top_logprobs": 21},
                                                                        "top_logprobs"),
                               ({"logprobs": True, "top_logprobs": 2, "stream": True}, "top_logprobs"),
                               ({"function_call": "auto"}, "function_call"),  # (the API's old name: tools)
                               ({"echo": True}, "echo"), ({"reasoning_effort": "low"}, "reasoning_effort"),
                               ({"messages": [{"role": "bogus", "content": "1"}]}, "messages")):
            got, _, body = _post(server.url + "/v1/chat/completions", {"messages": messages, **request})
            assert (got, body["error"]["param"]) == (400, param), (request, body)
        assert body["error"]["message"] == ("messages: message 0 has role 'bogus'; the roles are system, developer "
                                            "(read as system), user, assistant, tool")
        dev = server.client.chat.completions.with_raw_response.create(
            model="run", messages=[{"role": "developer", "content": "3"}, *messages], max_tokens=4)
        assert dev.http_response.status_code == 200
        # kill -9 mid answer (a long one: up to 100 tokens)
        stream = server.client.completions.create(model="run", prompt="1 and 1?", max_tokens=100, temperature=0,
                                                  stream=True)
        first = next(iter(stream))
        assert first.choices[0].text is not None
        server.proc.send_signal(signal.SIGKILL)
        assert server.proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        code, err = server.close()
    assert code == -signal.SIGKILL and "serving run step 2 (with its chat template)" in err, err
    assert len(before) > 5 and tree() == before
    # exported, hf:DIR is served with the folder's chat template (tokenizer_config.json's): the run's prompt
    # ids, the same reply tokens (the folder's tokenizer writes no special tokens' text)
    assert main(["export", f"run.dir={run}", f"out={tmp_path / 'hf'}"]) == 0
    _, folder_tok = chat_model(f"hf:{tmp_path / 'hf'}", ["mesh.data=1"])
    assert folder_tok.prompt(messages) == tok.prompt(messages)
    cut = new[:new.index(tok.stop_id)] if tok.stop_id in new else new
    server = Served(f"hf:{tmp_path / 'hf'}")
    try:
        reply = server.client.chat.completions.create(model="hf", messages=messages, max_tokens=12, temperature=0)
        assert reply.choices[0].message.content == folder_tok.decode(cut)
        assert reply.usage.completion_tokens == len(cut)
        # structured outputs read the folder's tokenizer too (its decoder one llguidance does not read itself)
        shaped = server.client.chat.completions.create(model="hf", messages=messages, max_tokens=30, temperature=0,
                                                       response_format={"type": "regex", "regex": "(odd|sane) [0-9]"})
        assert shaped.choices[0].message.content in {f"{m} {d}" for m in ("odd", "sane") for d in range(10)}
        # the folder's generation_config.json ends answers at each of its eos ids: the run's end of turn too
        # (sample and chat read them alike)
        from spmdgpt.cli.runs import folder_stops

        assert folder_stops(f"hf:{tmp_path / 'hf'}") == (tok.eos_id, tok.stop_id)
        ended = server.client.chat.completions.create(model="hf", messages=messages, max_tokens=12, temperature=0,
                                                      logit_bias={str(tok.stop_id): 100})
        assert (ended.choices[0].finish_reason, ended.choices[0].message.content, ended.usage.completion_tokens) == (
            "stop", "", 0)
    finally:
        code, err = server.close()
    assert code == 0 and "serving hf (with its chat template)" in err, err


def test_structured_outputs_and_tool_calls_through_the_openai_client(chat_run):
    """response_format: a JSON schema, any JSON object, a regex (vLLM's extension): every answer that
    ends ("stop") parses and validates, sampled or greedy, streamed or not, from a barely trained
    model (2 steps on answers like {"sum": 6, "mode": "odd"}); a schema the grammar library refuses
    and an unknown type are 400s naming response_format. Then tools (`_tool_calls`)."""
    jsonschema = pytest.importorskip("jsonschema")
    pytest.importorskip("llguidance")
    run = chat_run
    # (its keys and values in the characters of the run's vocabulary: ' ",0123456789:?adekmnostu{}')
    schema = {"type": "object", "properties": {"sum": {"type": "integer", "minimum": 0, "maximum": 99},
                                               "mode": {"enum": ["odd", "sane"]}},
              "required": ["sum", "mode"], "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}
    messages = [{"role": "user", "content": "3 and 3?"}]
    server = Served(run)
    try:
        ask = server.client.chat.completions.create
        sampled = ask(model="run", messages=messages, max_tokens=40, temperature=1.0, seed=3, n=4, response_format=fmt)
        greedy = ask(model="run", messages=messages, max_tokens=40, temperature=0, response_format=fmt)
        for choice in [*sampled.choices, *greedy.choices]:
            assert choice.finish_reason == "stop", choice
            jsonschema.validate(json.loads(choice.message.content), schema)
        assert len({c.message.content for c in sampled.choices}) > 1  # (sampled: each its own answer)
        stream = ask(model="run", messages=messages, max_tokens=40, temperature=0, response_format=fmt, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream) == greedy.choices[0].message.content
        # any JSON object: its strings are unbounded, so an answer may run to max_tokens; those that end parse
        free = ask(model="run", messages=messages, max_tokens=60, temperature=1.0, seed=1, n=4,
                   response_format={"type": "json_object"}).choices
        ended = [json.loads(c.message.content) for c in free if c.finish_reason == "stop"]
        assert ended and all(isinstance(d, dict) for d in ended)
        digits = ask(model="run", messages=messages, max_tokens=40, temperature=1.0, seed=1,
                     extra_body={"response_format": {"type": "regex", "regex": "(odd|sane) [0-9]{2}"}})
        assert re.fullmatch("(odd|sane) [0-9]{2}", digits.choices[0].message.content)
        for request, message in (({"response_format": {"type": "json_schema", "json_schema": {"schema": {
                                      "type": "foo"}}}}, "the grammar library refused it"),
                                 ({"response_format": {"type": "xml"}}, "is not one of text, json_object, "
                                                                        "json_schema, regex, grammar"),
                                 ({"response_format": {"type": "json_object", "bogus": 1}}, "takes no bogus"),
                                 ({"response_format": {"type": "regex", "regex": "("}}, "error: unclosed group"),
                                 # (a key of characters the run's vocabulary lacks: the answer cannot be finished)
                                 ({"response_format": {"type": "json_schema", "json_schema": {"schema": {
                                     "type": "object", "properties": {"zebra": {"type": "integer"}},
                                     "required": ["zebra"]}}}}, "before the grammar was complete")):
            got, _, body = _post(server.url + "/v1/chat/completions", {"messages": messages, **request})
            assert (got, body["error"]["param"]) == (400, "response_format") and message in body["error"]["message"]
        got, _, body = _post(server.url + "/v1/completions", {"prompt": "1", "response_format": {"type": "text"}})
        assert got == 400 and "a field of /v1/chat/completions" in body["error"]["message"]
        # (a body nested past Python's recursion limit: a 400, not a plain-text 500)
        deep = ('{"messages": ' + json.dumps(messages) + ', "user": ' + '{"a": [' * 3000 + "1" + "]}" * 3000 + "}")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(server.url + "/v1/chat/completions", deep.encode(),
                                                          {"Content-Type": "application/json"}), timeout=60)
        assert refused.value.code == 400 and json.loads(refused.value.read())["error"]["message"] == (
            "the request body is nested too deep to read")
        assert _get(server.url + "/v1/models/run")[1]["id"] == "run" and _get(server.url + "/v1/models/gpt")[0] is None
        got, _, body = _post(server.url + "/detokenize", {"tokens": "1"})
        assert (got, body["error"]["param"]) == (400, "tokens")
        ids = _post(server.url + "/tokenize", {"prompt": "1<|endoftext|>2"})[2]["tokens"]  # (the end of text's name
        assert _post(server.url + "/detokenize", {"tokens": ids})[2] == {"prompt": "1<|endoftext|>2"}  # both ways)
        _tool_calls(server, jsonschema)
    finally:
        code, err = server.close()
    assert code == 0, err


def _tool_calls(server, jsonschema):
    """tools + tool_choice on the chat run (its template: DEFAULT_TEMPLATE's Hermes-style calls).
    required and a named function: one call, its arguments valid for the function's schema, from a
    barely trained model, finish_reason "tool_calls"; streamed, the same call in a tool_calls delta.
    The call and its result sent back (an assistant message of tool_calls, a tool message) are
    answered. auto: a reply that writes a call (held to one here by a regex) comes back as
    tool_calls, streamed with none of its text as content; none: the text as it is. Bad tools,
    choices and calls: 400s naming the field."""
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    ask = server.client.chat.completions.create
    messages = [{"role": "user", "content": "3 plus 3?"}]
    # no max_tokens (a chat request's default: what the context leaves), a stop string (not applied inside a
    # forced call), a function of no parameters and one whose schema refers to its $defs (PUT)
    for name, want in (("nop", [{}]), ("put", [{"at": 1}, {"at": 2}])):
        r = ask(model="run", messages=messages, tools=[*TOOLS, PUT, {"type": "function", "function": {"name": "nop"}}],
                temperature=1.0, seed=5, stop=['"'], tool_choice={"type": "function", "function": {"name": name}})
        call, = r.choices[0].message.tool_calls
        assert r.choices[0].finish_reason == "tool_calls" and call.function.name == name, r
        assert json.loads(call.function.arguments) in want
    for choice, names in (("required", {"add", "neg"}), ({"type": "function", "function": {"name": "neg"}}, {"neg"})):
        replies = ask(model="run", messages=messages, tools=TOOLS, tool_choice=choice, max_tokens=100, temperature=1.0,
                      seed=2, n=3).choices
        for r in replies:
            assert r.finish_reason == "tool_calls" and r.message.content is None, r
            call, = r.message.tool_calls
            assert call.type == "function" and call.id.startswith("call_") and call.function.name in names
            jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])
    first = replies[0].message.tool_calls[0]
    stream = list(ask(model="run", messages=messages, tools=TOOLS, tool_choice=choice, max_tokens=100,
                      temperature=1.0, seed=2, stream=True))
    deltas = [d for c in stream for d in (c.choices[0].delta.tool_calls or [])]
    assert [(d.index, d.function.name, d.function.arguments) for d in deltas] == [
        (0, "neg", first.function.arguments)]
    assert stream[-1].choices[0].finish_reason == "tool_calls"
    assert not any(c.choices[0].delta.content for c in stream)
    # the call and its result sent back: answered as text (tool_choice none: no call read)
    back = [*messages, replies[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": first.id, "content": "-3"}]
    answer = ask(model="run", messages=back, tools=TOOLS, tool_choice="none", max_tokens=20, temperature=0)
    assert answer.choices[0].message.tool_calls is None and isinstance(answer.choices[0].message.content, str)
    # auto: a reply that is a call (this model writes one only when held to it) is read into tool_calls
    written = '<tool_call>{"name": "add", "arguments": {"a": 3, "b": 3}}</tool_call>'
    pattern = {"response_format": {"type": "regex", "regex": "so " + re.escape(written)}}
    auto = ask(model="run", messages=messages, tools=TOOLS, max_tokens=80, temperature=0, extra_body=pattern)
    assert auto.choices[0].finish_reason == "tool_calls" and auto.choices[0].message.content == "so"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in auto.choices[0].message.tool_calls] == [
        ("add", {"a": 3, "b": 3})]
    streamed = list(ask(model="run", messages=messages, tools=TOOLS, max_tokens=80, temperature=0, stream=True,
                        extra_body=pattern))
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == "so "  # (the call's text never sent)
    assert [(d.function.name, d.function.arguments) for c in streamed for d in c.choices[0].delta.tool_calls or []] == [
        ("add", '{"a": 3, "b": 3}')]
    none = ask(model="run", messages=messages, tools=TOOLS, tool_choice="none", max_tokens=80, temperature=0,
               extra_body=pattern)
    assert none.choices[0].message.content == "so " + written and none.choices[0].finish_reason == "stop"
    url = server.url + "/v1/chat/completions"
    for request, param, message in (
            ({"tools": "add"}, "tools", "tools must be a non-empty list of functions"),
            ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools", "tools[0].function.name must"),
            ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "mul"}}}, "tool_choice",
             "tool_choice names the function 'mul', which tools does not offer (add, neg)"),
            ({"tool_choice": "required"}, "tool_choice", "tool_choice needs tools"),
            ({"tools": TOOLS, "tool_choice": "always"}, "tool_choice", 'tool_choice must be "none", "auto"'),
            ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}},
             "response_format", "cannot both hold the answer"),
            ({"functions": [{"name": "add"}]}, "functions", "functions is not supported by this server"),
            ({"messages": [*messages, {"role": "assistant", "tool_calls": [{"type": "function", "function": {
                "name": "add", "arguments": "{a: 3"}}]}]}, "messages", "tool call 0's arguments are not a JSON object"),
            ({"messages": [{"role": "user", "content": "3?", "tool_calls": []}]}, "messages",
             "only an assistant's message calls functions"),
            ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]}, "tools",
             "tools[0].function.parameters must be a JSON schema of an object"),
            ({"tools": [{"type": "function", "function": {"name": "f", "strict": "yes"}}]}, "tools",
             "tools[0].function.strict must be true or false"),
            ({"messages": [*messages, {"role": "tool", "tool_call_id": 1, "content": "6"}]}, "messages",
             "tool_call_id must be a string"),
            ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": {"a": {"type": "integer", "minimum": 3, "maximum": 1}},
                "required": ["a"]}}}],
              "tool_choice": "required"}, "tools", "tools: a forced call's arguments: the grammar library refused"),
            ({"messages": [*messages, {"role": "assistant", "tool_calls": [{"type": "function", "function": {
                "name": "add", "arguments": "[" * 5000 + "]" * 5000}}]}]}, "messages", "arguments are not a JSON"),
            ({"messages": [{"role": "user", "content": "3" * 1100}]}, "messages", "exceeds the model's context"),
            ({"messages": [*messages, {"role": "assistant", "tool_calls": [{"type": "function", "function": {
                "name": "add", "arguments": {"a": float("nan")}}}]}]}, "messages", "arguments are not a JSON object")):
        got, _, body = _post(url, {"messages": messages, **request})
        assert got == 400 and body["error"]["param"] == param, (request, body)
        assert message in body["error"]["message"], body


def test_the_backend_on_a_mesh_equals_one_device(unit="mla-moe"):
    """The server's model side (serve.Backend, no HTTP; the engine under it is tested for every
    attention unit on a mesh in test_engine) for MLA behind dense-then-MoE layers, the unit whose
    cache and scoring pass have the most sharded parts: one prompt
    sampled once and three times (an odd batch), greedy, with echoed log-probabilities, on one
    device and on data 2 x model 2, the engine's steps at their smaller sizes (`buckets`): the
    same texts, the log-probabilities to float32 rounding."""
    from test_generate import ATTENTION_UNITS

    from spmdgpt.config import load_config
    from spmdgpt.data import CharTokenizer
    from spmdgpt.engine import EngineConfig
    from spmdgpt.engine.server import Backend, Sampling
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.model import init_params

    tok, got, sizes = CharTokenizer("0123456789"), [], []
    for devices, layout in ((1, ["mesh.data=1"]), (4, ["sharding=fsdp_tp", "mesh.data=2", "mesh.model=2"])):
        # (mla-moe in 2 layers, the first dense and the second MoE: test_engine covers its 3)
        cfg = load_config(["+experiment=staircase", "model.init_std=0.2", *ATTENTION_UNITS[unit],
                           *(["model.num_layers=2"] if unit == "mla-moe" else []), *layout])
        mesh = make_mesh(cfg.mesh, jax.devices()[:devices])
        rules = Rules(mesh, cfg.sharding, cfg.model)
        with jax.set_mesh(mesh):
            params = init_params(cfg.model, jax.random.key(0), rules)
        backend = Backend(cfg, rules, mesh, params, tok, "x", engine=EngineConfig(buckets=2))
        answers = []
        for n in (1, 3):
            sp = Sampling(max_tokens=5, temperature=0.0, top_p=1.0, n=n, stop=[], seed=0, stream=False, echo=True,
                          logprobs=2)
            answers.append(backend.complete([tok.encode("0123")], sp))
        (one, used1), (three, used3) = answers
        assert len(one) == 1 and len(three) == 3 and used1 == 5 and used3 == 15
        assert all(c["text"] == one[0]["text"] for c in three) and one[0]["text"].startswith("0123")
        got.append(one[0])
        sizes.append(set(backend.engine.step_sizes))
    assert got[0]["text"] == got[1]["text"]
    # (buckets=2: 4 of the 8 slots' rows decoding, the tables 2 of 4 pages wide; on the mesh too)
    assert sizes[0] == sizes[1] and {(g, r, w) for g, r, w in sizes[0] if g == (True, False)} == {((True, False), 4, 2)}
    assert {w for *_, w in sizes[0]} == {2}
    np.testing.assert_allclose(got[0]["logprobs"]["token_logprobs"][1:], got[1]["logprobs"]["token_logprobs"][1:],
                               atol=1e-5)


def test_a_failed_engine_step_answers_500_and_never_hangs():
    """A step that raises (here: made to, as a device error would): the sequences waiting for it
    end with the error (an in-process caller gets it, an HTTP client a 500 in the API's JSON),
    /health says 503 with the reason, and every later request is 500 at once."""
    from starlette.testclient import TestClient

    from spmdgpt.engine.server import Sampling, Server

    backend, tok = _tiny_backend()

    def broken():
        raise RuntimeError("RESOURCE_EXHAUSTED: out of memory while trying to allocate 1.2GiB\nmore detail")

    backend.engine.step = broken
    sp = Sampling(max_tokens=5, temperature=0.0, top_p=1.0, n=2, stop=[], seed=0, stream=False, echo=False,
                  logprobs=None)
    with pytest.raises(RuntimeError, match=r"^the engine failed: RuntimeError: RESOURCE_EXHAUSTED: out of memory "
                                           r"while trying to allocate 1.2GiB; restart the server$"):
        backend.complete([tok.encode("0123")], sp, timeout=60)
    client = TestClient(Server(backend, log=None).app)
    health = client.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "error"
    answer = client.post("/v1/completions", json={"prompt": "12", "max_tokens": 3})
    assert answer.status_code == 500 and answer.json()["error"]["type"] == "server_error"
    assert answer.json()["error"]["message"].startswith("the engine failed: RuntimeError: RESOURCE_EXHAUSTED")


def _tiny_backend(**kw):
    """A Backend over the staircase model, untrained, on one device, a vocabulary of 10 digits."""
    from spmdgpt.config import load_config
    from spmdgpt.data import CharTokenizer
    from spmdgpt.engine.server import Backend
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.model import init_params

    tok = CharTokenizer("0123456789")
    cfg = load_config(["+experiment=staircase", "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
    return Backend(cfg, rules, mesh, params, tok, "x", **kw), tok


def test_cancellations_free_the_queue_a_gone_client_its_slot_and_logprobs_past_the_vocabulary():
    """(1) Queued sequences cancelled in the worker's one drain of commands, which leaves the
    engine idle (no step to recount the queue), free the queue: the next request is served, not
    refused with 429. (2) A non-streaming client that goes away mid-answer ends its sequences
    within a second or so (they do not decode to the end). Requests compare by identity, and a
    stop string is looked for in the completion's tail. (3) logprobs=20 over a vocabulary of 11
    ids gives the 11, not a plain-text 500."""
    import asyncio
    import threading
    import time

    from starlette.testclient import TestClient

    from spmdgpt.engine.server import DISCONNECT_POLL_S, Sampling, Server

    backend, tok = _tiny_backend(max_queue=2)
    sp = Sampling(max_tokens=5, temperature=0.0, top_p=1.0, n=2, stop=[], seed=0, stream=False)
    gate = threading.Event()
    held = backend.submit(gate.wait, 30)  # (the worker waits here: what follows is one drain)
    queued = backend.requests(tok.encode("0123"), sp)
    backend.start(queued)
    backend.cancel(queued)
    gate.set()
    held.result(30)
    deadline = time.monotonic() + 10
    while backend.waiting and time.monotonic() < deadline:
        time.sleep(0.01)
    assert backend.waiting == 0 and all(r.finish == "cancelled" for r in queued)
    choices, used = backend.complete([tok.encode("0123")], sp, timeout=60)
    assert len(choices) == 2 and used == 10
    # (requests are equal only to themselves: the engine's `r in waiting` compares no prompts)
    twin = backend.requests(tok.encode("0123"), sp)
    assert twin[0] != backend.requests(tok.encode("0123"), sp)[0] and twin[0] == twin[0] and twin[1] not in twin[:1]
    # a stop string is looked for in the completion's tail, not in the whole completion at every token
    r, = backend.requests(tok.encode("0"), Sampling(max_tokens=5, temperature=0.0, top_p=1.0, n=1, stop=["99"],
                                                     seed=0, stream=False))
    r.tokens = tok.encode("12" * 500 + "9")
    decoded, decode = [], backend.tok.decode
    backend.tok.decode = lambda ids: decoded.append(len(ids)) or decode(ids)
    assert not r.stop(r)
    r.tokens += tok.encode("9")
    assert r.stop(r) and decoded == [6, 6]  # (2 bytes of "99" + 4)
    backend.tok.decode = decode

    # (2) 60 tokens at >= 50 ms a step take 3 s or more; the client leaves after 1 s
    step = backend.engine.step
    backend.engine.step = lambda: time.sleep(0.05) or step()
    app = Server(backend, log=None).app
    body = json.dumps({"prompt": "1", "max_tokens": 60, "temperature": 0}).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/completions", "raw_path": b"/v1/completions", "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json")], "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 80)}

    async def a_client_that_leaves():
        sent, start, left = [], time.monotonic(), []

        async def receive():
            if not left:
                left.append(True)
                return {"type": "http.request", "body": body, "more_body": False}
            if time.monotonic() - start < 1.0:
                await asyncio.sleep(3600)  # (as a server's receive: nothing until the client acts)
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        await app(scope, receive, send)
        took = time.monotonic() - start
        while backend.engine.running() and time.monotonic() - start < took + 2:  # (/health's running count)
            await asyncio.sleep(0.01)
        return sent, took, backend.engine.running()

    sent, took, running = asyncio.run(a_client_that_leaves())
    assert sent[0]["status"] == 499 and took < 1.0 + 2 * DISCONNECT_POLL_S + 0.5 and running == 0
    backend.engine.step = step

    # (3)
    answer = TestClient(app).post("/v1/completions", json={"prompt": "12", "max_tokens": 2, "logprobs": 20,
                                                                     "temperature": 0})
    assert answer.status_code == 200, answer.text
    top = answer.json()["choices"][0]["logprobs"]["top_logprobs"]
    # (11 ids: the 10 digits and the end of text, which decodes to "")
    assert tok.vocab_size == 11 and len(top) == 2 and all(set(t) == {*"0123456789", ""} for t in top)


def test_grammar_vocabularies_give_each_ids_bytes_and_masks_allow_what_the_grammar_does():
    """llguidance's view of each kind of tokenizer: GPT-2's tokenizer.json read as a Hugging Face one
    gives every id the bytes tiktoken gives it (byte 0xff too, which llguidance alone takes for a
    special token); a chat tokenizer's template tokens come after the base ids as special tokens;
    a mask row allows exactly the ids the grammar can take next, never a padding id."""
    pytest.importorskip("llguidance")
    from spmdgpt.config import load_config
    from spmdgpt.data import CharTokenizer
    from spmdgpt.data.chat import DEFAULT_TEMPLATE, SPECIAL_TOKENS, ChatTemplate, ChatTokenizer
    from spmdgpt.data.sources import find_data_root
    from spmdgpt.data.tokenizers import GPT2Tokenizer, HFTokenizer, gpt2_cache_dir
    from spmdgpt.engine.grammar import Grammars, token_table

    hf = HFTokenizer.from_file(find_data_root() / "gpt2-tokenizer" / "tokenizer.json")
    gpt2 = GPT2Tokenizer(gpt2_cache_dir(load_config(["+experiment=shakespeare_gpt2"]).data))
    assert token_table(hf) == token_table(gpt2) and token_table(hf)[0][187] == b"\xff"
    chars = CharTokenizer('{}":, 0123456789abc')
    chat = ChatTokenizer(chars, ChatTemplate(DEFAULT_TEMPLATE), SPECIAL_TOKENS)
    tokens, specials = token_table(chat)
    assert tokens[chars.vocab_size:] == [s.encode() for s in SPECIAL_TOKENS] and specials == [19, 20, 21, 22, 23]
    grammars = Grammars(chat, [chat.stop_id], 32)  # (the model's 32 ids: 7 of them padding)
    c = grammars.constraint(grammars.compile({"type": "regex", "regex": "a[bc]{1,2}"}))
    row = np.zeros(grammars.words, np.uint32)

    def allowed():
        c.fill(row)
        return [chat.decode([i]) for i in np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little"))]

    assert allowed() == ["a"] and c.consume(chat.encode("a")[0])
    assert allowed() == ["b", "c"] and c.consume(chat.encode("c")[0]) and not c.finished
    assert allowed() == ["b", "c", "<|end|>"] and c.consume(chat.encode("b")[0]) and c.finished
