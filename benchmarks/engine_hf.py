"""benchmarks/engine.py's workload on transformers' generation, in the PyTorch side environment
(`.venv-torch`; engine.py runs this as a child process with the exported model and the workload):

    python benchmarks/engine_hf.py --model DIR --work WORK.json [--only cb,padded] [--slots 16]
                                   [--page 16] [--chunk 128] [--batch 16] [--threads 2]

- cb: transformers' continuous batching (`ContinuousBatchingManager`, the engine under
  `generate_batch`; paged KV, SDPA over the pages): requests enter as they arrive, at most
  `--slots` in a batch, at most `--chunk` + `--slots` tokens a forward pass, pages of `--page`
  tokens, as many pages as `--slots` sequences of the model's whole context need (engine.py's
  engine has the same budget). Each token's time is the manager's own timestamp.
- padded: `model.generate` on batches of `--batch` requests in arrival order, left-padded to the
  longest prompt and run for the longest output (the padded sampler's timeline: a batch starts
  when the previous one ended and its last request arrived; its tokens arrive at its end).

Sampling at temperature 1 with no top-k or top-p filter, each request to its length (no stop
token). Prints one JSON object per system on its last lines: the output tokens' arrival times
(seconds from the first arrival) from which engine.py computes the same summary as for its own
systems.
"""

from __future__ import annotations

import argparse
import json
import time


def run_cb(model, work, args) -> dict:
    from transformers import ContinuousBatchingConfig, GenerationConfig

    context = model.config.max_position_embeddings
    gen = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, eos_token_id=-1, pad_token_id=0)
    cb = ContinuousBatchingConfig(page_size=args.page, num_blocks=args.slots * -(-context // args.page),
                                  max_batch_tokens=args.chunk + args.slots, max_requests_per_batch=args.slots,
                                  allow_block_sharing=False, seed=0)
    manager = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cb)
    t = time.perf_counter()
    manager.warmup()
    manager.start()
    try:  # (a small untimed workload first, as engine.py's engine gets: first-call costs left out)
        for i in range(4):
            manager.add_request(work[i][1][:40], request_id=f"warm{i}", max_new_tokens=4)
        for _ in range(4):
            manager.get_result(timeout=600)
        compile_s = time.perf_counter() - t
        start = time.perf_counter()
        pending, results = list(enumerate(work)), {}
        while len(results) < len(work):
            now = time.perf_counter() - start
            while pending and pending[0][1][0] <= now:
                i, (_, prompt, n) = pending.pop(0)
                manager.add_request(prompt, request_id=f"r{i}", max_new_tokens=n, record_timestamps=True)
            if not manager.is_running():
                raise RuntimeError("transformers' continuous batching thread died (its log above says why)")
            r = manager.get_result(timeout=0.01 if pending else 1.0)
            if r is not None and r.is_finished():
                results[r.request_id] = r
        wall = time.perf_counter() - start
    finally:
        manager.stop(block=True, timeout=30)
    outs = [results[f"r{i}"] for i in range(len(work))]
    for r, (_, _, n) in zip(outs, work, strict=True):
        assert r.error is None and len(r.generated_tokens) == n, (r.error, len(r.generated_tokens), n)
    return {"system": "hf-cb", "wall": wall, "compile_s": compile_s,
            "firsts": [r.timestamps[0] - start for r in outs], "lasts": [r.timestamps[-1] - start for r in outs],
            "outs": [len(r.generated_tokens) for r in outs]}


def run_padded(model, work, args) -> dict:
    import torch

    clock, firsts, outs, seen, compile_s = 0.0, [], [], set(), 0.0
    for b in range(0, len(work), args.batch):
        group = work[b: b + args.batch]
        width, new = max(len(p) for _, p, _ in group), max(n for *_, n in group)
        ids = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, (_, p, _) in enumerate(group):  # (left padding)
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1

        def generate():
            torch.manual_seed(b)
            return model.generate(ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                  max_new_tokens=new, min_new_tokens=new, pad_token_id=0, eos_token_id=None)

        if not seen:  # (the first call's one-time costs, untimed)
            t = time.perf_counter()
            model.generate(ids[:, -8:], attention_mask=mask[:, -8:], max_new_tokens=2, pad_token_id=0)
            compile_s = time.perf_counter() - t
            seen.add(True)
        t = time.perf_counter()
        out = generate()
        clock = max(clock, group[-1][0]) + time.perf_counter() - t
        assert out.shape[1] == width + new
        for _, _, n in group:
            firsts.append(clock)
            outs.append(n)
    return {"system": "hf-padded", "wall": clock, "compile_s": compile_s, "firsts": firsts, "lasts": firsts,
            "outs": outs}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default="cb,padded")
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--chunk", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=0, help="torch's intra-op threads (0: its default)")
    args = ap.parse_args()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    if args.threads:
        torch.set_num_threads(args.threads)
    work = [tuple(w) for w in json.load(open(args.work))]
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32, attn_implementation="sdpa").eval()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.get_num_threads()} threads",
          flush=True)
    for system in args.only.split(","):
        with torch.no_grad():  # (not inference_mode: the manager's thread updates its tensors in place)
            row = run_cb(model, work, args) if system == "cb" else run_padded(model, work, args)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
