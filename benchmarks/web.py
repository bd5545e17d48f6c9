"""Decode speed of `spmdgpt export format=web` in headless Chromium, and the export's size.

    python benchmarks/web.py --run-dir runs/shakespeare_char [--tokens 200] [--repeats 3] [--dtype float32,float16]

Exports the run (each dtype) into a temporary folder, serves it with a plain static file server,
opens the page in Debian's `chromium` (headless, driven by Playwright) and times greedy decoding
of --tokens new tokens through the page's own model (`window.spmdgpt.greedy`: prefill of the
prompt, then one token per step, each read back to the page), after one warm-up generation.
Prints the backend the page chose, tokens/s per repeat and their median, and the folder's size.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def folder_bytes(folder: Path) -> dict:
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run-dir", required=True, help="a training run (e.g. make train's runs/shakespeare_char)")
    ap.add_argument("--tokens", type=int, default=200, help="new tokens per timed generation")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", default="float32,float16")
    ap.add_argument("--prompt", default="ROMEO:")
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("needs Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    from spmdgpt.web import static_server

    print(f"run {args.run_dir}, prompt {args.prompt!r}, {args.tokens} new tokens, {args.repeats} repeats")
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in args.dtype.split(","):
            out = Path(tmp) / dtype
            subprocess.run([sys.executable, "-m", "spmdgpt", "export", f"run.dir={args.run_dir}", f"out={out}",
                            "format=web", f"dtype={dtype}"], check=True, stdout=subprocess.DEVNULL)
            sizes = folder_bytes(out)
            with static_server(out) as url, sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                try:
                    tab = browser.new_page()
                    tab.goto(url)
                    tab.wait_for_function("window.spmdgpt !== undefined", timeout=300_000)
                    backend = tab.evaluate("window.spmdgpt.backend")
                    ids = tab.evaluate("t => window.spmdgpt.encode(t)", args.prompt)
                    run = "ids => window.spmdgpt.greedy(ids, %d)" % args.tokens
                    tab.evaluate(run, ids)  # warm-up: kernels compiled, buffers allocated
                    speeds = [args.tokens / tab.evaluate(run, ids)["seconds"] for _ in range(args.repeats)]
                finally:
                    browser.close()
            print(f"{dtype}: backend {backend}, tokens/s {', '.join(f'{s:.1f}' for s in speeds)} "
                  f"(median {statistics.median(speeds):.1f}); export {sum(sizes.values()) / 1e6:.2f} MB "
                  f"(model.safetensors {sizes['model.safetensors'] / 1e6:.2f} MB, "
                  f"spmdgpt-web.js {sizes['spmdgpt-web.js'] / 1e6:.2f} MB)", flush=True)


if __name__ == "__main__":
    main()
