"""The arithmetic walk's data: sums and differences of two- and three-digit numbers, generated
from a seed and shipped with spmdgpt (spmdgpt/datasets/arithmetic/, read by the arithmetic_sft
and arithmetic_grpo experiments as `spmdgpt:datasets/arithmetic/...`):

    sft.jsonl.gz      {"messages": [{"role": "user", "content": "47+385="},
                      {"role": "assistant", "content": "432"}]} a line: the conversations
                      supervised fine-tuning learns from (the loss on the answers only)
    prompts.jsonl.gz  {"prompt": [{"role": "user", "content": "47+385="}], "answer": "432"} a
                      line: what GRPO samples answers to and scores (rl.reward=numeric)

`python -m spmdgpt.rl.arithmetic DIR` writes both files into DIR, byte for byte the shipped ones
(gzip without a timestamp); a test checks that they are.
"""

from __future__ import annotations

import gzip
import json
import random
import sys
from pathlib import Path
from typing import List, Tuple

SFT_PROBLEMS = 20_000
PROMPTS = 4_000


def problems(n: int, seed: int) -> List[Tuple[str, str]]:
    """n (question, answer) pairs: a + b or a - b, each operand of 2 or 3 digits (10..999)."""
    r = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = (r.randint(10, 999) for _ in range(2))
        op = r.choice("+-")
        out.append((f"{a}{op}{b}=", str(a + b if op == "+" else a - b)))
    return out


def _gzip(lines: List[str]) -> bytes:
    return gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=9, mtime=0)


def files() -> dict:
    """{file name: bytes} of the shipped data (SFT from seed 1, prompts from seed 2)."""
    def user(q):
        return {"role": "user", "content": q}

    def reply(a):
        return {"role": "assistant", "content": a}

    sft = [json.dumps({"messages": [user(q), reply(a)]}) for q, a in problems(SFT_PROBLEMS, 1)]
    prompts = [json.dumps({"prompt": [user(q)], "answer": a}) for q, a in problems(PROMPTS, 2)]
    return {"sft.jsonl.gz": _gzip(sft), "prompts.jsonl.gz": _gzip(prompts)}


def main(argv: List[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m spmdgpt.rl.arithmetic DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files().items():
        (out / name).write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
