"""The server under load: N raw-HTTP clients against a real `spmdgpt serve` process.

    python benchmarks/serve_load.py RUN [--clients 8] [--requests 64] [--seconds 300] [--rate 0]
                                    [--max-tokens 32] [--port 0] [--serve ARG ...] [--json OUT]

RUN: a run directory (or hf:DIR) to serve; with a chat template, the mix below has chat requests
too. `--clients` threads, each with its own `http.client` connection to the loopback address, send
`--requests` requests in all, one after another (a closed loop: each client sends its next when its
last answer ended), or with `--rate R` as a Poisson process of R requests/s shared by them; nothing
is sent after `--seconds`. The mix (request i takes kind i mod 6, so any run gets the same one):

- completion: /v1/completions, non-streaming;
- completion-stream: the same streamed (stream_options.include_usage for its token count);
- n2: /v1/completions with n=2, seeded at temperature 1;
- chat / chat-stream: /v1/chat/completions, a user message (a run without a chat template: the
  completions above instead);
- hangup: a streamed completion whose client closes the connection after its second chunk (the
  server must end its sequence and free its pages; its time is not counted);
- and with `--structured`, chat answers held to a JSON object (response_format json_object) in
  place of plain chat ones.

Printed, and with `--json` written as one JSON object: requests/s and output tokens/s over the
wall time, p50 and p99 of the time to first token (streamed: the first chunk with text; not
streamed: the whole answer) and of the time per output token after the first, the 2xx / 4xx / 5xx
counts, the hang-ups, and the server's resident memory (VmRSS) before the load, after it, and after
a second identical load (a leak shows as growth between the two loads). The server is ended by PID
(SIGTERM, then SIGKILL), also when the benchmark fails.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

KINDS = ("completion", "completion-stream", "n2", "chat", "chat-stream", "hangup")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def request_body(kind: str, i: int, chat: bool, max_tokens: int, structured: bool) -> tuple:
    """(path, body) of request i of `kind`."""
    prompt = f"{i % 10} and {i % 10}?"
    if kind in ("chat", "chat-stream") and chat:
        body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 0.8,
                "seed": i}
        if structured and kind == "chat":
            body["response_format"] = {"type": "json_object"}
        if kind == "chat-stream":
            body.update(stream=True, stream_options={"include_usage": True})
        return "/v1/chat/completions", body
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.8, "seed": i}
    if kind == "n2":
        body["n"] = 2
    if kind in ("completion-stream", "hangup", "chat-stream"):
        body.update(stream=True, stream_options={"include_usage": True})
    return "/v1/completions", body


def one(port: int, path: str, body: dict, hangup: bool) -> dict:
    """Send one request; its status, time to first token, total time and output tokens."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if not body.get("stream") or resp.status != 200:
            data = json.loads(resp.read() or b"{}")
            done = time.perf_counter()
            tokens = (data.get("usage") or {}).get("completion_tokens", 0)
            return {"status": resp.status, "ttft": done - t0, "total": done - t0, "tokens": tokens}
        first, tokens, chunks = None, 0, 0
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            chunks += 1
            if hangup and chunks >= 2:  # (the client goes away mid-answer)
                conn.sock.close()
                return {"status": 0, "hangup": True}
            choices = event.get("choices") or []
            if first is None and any((c.get("text") or (c.get("delta") or {}).get("content")) for c in choices):
                first = time.perf_counter()
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
        done = time.perf_counter()
        return {"status": resp.status, "ttft": (first or done) - t0, "total": done - t0, "tokens": tokens}
    except (OSError, http.client.HTTPException, ValueError) as e:
        return {"status": -1, "error": f"{type(e).__name__}: {e}"}
    finally:
        conn.close()


def load(port: int, args, chat: bool) -> tuple:
    """Run one load (the module docstring): ([result per request], wall seconds)."""
    rng = random.Random(0)
    arrivals = [0.0] * args.requests
    if args.rate > 0:
        t = 0.0
        for i in range(args.requests):
            t += rng.expovariate(args.rate)
            arrivals[i] = t
    results: list = [None] * args.requests
    lock, counter = threading.Lock(), iter(range(args.requests))
    start = time.perf_counter()

    def client():
        while True:
            with lock:
                i = next(counter, None)
            if i is None or time.perf_counter() - start > args.seconds:
                return
            wait = arrivals[i] - (time.perf_counter() - start)
            if wait > 0:
                time.sleep(wait)
            kind = KINDS[i % len(KINDS)]
            path, body = request_body(kind, i, chat, args.max_tokens, args.structured)
            results[i] = {"kind": kind, **one(port, path, body, kind == "hangup")}

    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None], time.perf_counter() - start


def percentile(values: list, q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def summary(results: list, wall: float) -> dict:
    ok = [r for r in results if r.get("status") == 200]
    tokens = sum(r["tokens"] for r in ok)
    per_token = [(r["total"] - r["ttft"]) / (r["tokens"] - 1) for r in ok
                 if r["kind"] in ("completion-stream", "chat-stream") and r["tokens"] > 1]
    return {"requests": len(results), "wall_s": round(wall, 2), "requests_per_s": round(len(ok) / wall, 3),
            "output_tokens_per_s": round(tokens / wall, 1),
            "ttft_p50_ms": round(1e3 * percentile([r["ttft"] for r in ok], 50), 1),
            "ttft_p99_ms": round(1e3 * percentile([r["ttft"] for r in ok], 99), 1),
            "tpot_p50_ms": round(1e3 * percentile(per_token, 50), 2),
            "tpot_p99_ms": round(1e3 * percentile(per_token, 99), 2),
            "2xx": len(ok), "4xx": sum(400 <= r.get("status", 0) < 500 for r in results),
            "5xx": sum(r.get("status", 0) >= 500 for r in results),
            "failed": sum(r.get("status") == -1 for r in results),
            "hangups": sum(bool(r.get("hangup")) for r in results)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--rate", type=float, default=0.0)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--structured", action="store_true")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--serve", nargs="*", default=[], help="more `spmdgpt serve` arguments (slots=16 ...)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.clients < 1 or args.requests < 1 or args.seconds <= 0 or args.rate < 0 or args.max_tokens < 1:
        ap.error("--clients, --requests and --max-tokens must be >= 1, --seconds > 0 and --rate >= 0")
    port = args.port or free_port()
    log = tempfile.TemporaryFile("w+")  # (the server's console: a line a request, never a full pipe)
    proc = subprocess.Popen([sys.executable, "-m", "spmdgpt", "serve", f"run.dir={args.run}", f"port={port}",
                             f"max_queue={max(64, 2 * args.clients)}", *args.serve],
                            stderr=log, stdout=subprocess.DEVNULL, text=True)
    try:
        deadline = time.time() + 600
        while True:
            if proc.poll() is not None:
                log.seek(0)
                print(f"serve_load: the server ended (exit {proc.returncode}): {log.read()[-2000:]}", file=sys.stderr)
                return 2
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                print("serve_load: the server did not answer /health in 600 s", file=sys.stderr)
                return 2
            time.sleep(0.5)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/v1/chat/completions",
                     json.dumps({"messages": [{"role": "user", "content": "1"}], "max_tokens": 1}),
                     {"Content-Type": "application/json"})
        chat = conn.getresponse().status == 200
        before = rss_mib(proc.pid)
        results, wall = load(port, args, chat)
        after = rss_mib(proc.pid)
        again = summary(*load(port, args, chat))
        out = {**summary(results, wall), "chat": chat, "clients": args.clients, "rate": args.rate,
               "max_tokens": args.max_tokens, "rss_mib_before": round(before, 1), "rss_mib_after": round(after, 1),
               "rss_mib_after_second_load": round(rss_mib(proc.pid), 1), "second_load": again}
        errors = sorted({r["error"] for r in results if "error" in r})
        for key, value in out.items():
            if key != "second_load":
                print(f"{key:28s} {value}")
        print(f"{'second load':28s} {again['requests_per_s']} requests/s, {again['output_tokens_per_s']} tokens/s, "
              f"{again['2xx']} 2xx, {again['4xx']} 4xx, {again['5xx']} 5xx")
        for e in errors[:5]:
            print(f"error: {e}")
        if args.json:
            args.json.write_text(json.dumps(out) + "\n")
        if not out["2xx"]:  # (a load of which nothing was answered measured nothing)
            print("serve_load: no request was answered (see the 4xx / 5xx counts); fix the arguments", file=sys.stderr)
            return 1
        return 0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


if __name__ == "__main__":
    sys.exit(main())
