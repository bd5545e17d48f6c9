"""The arithmetic walk's data: sums and differences of two- and three-digit numbers, generated
from a seed and shipped with spmdgpt (spmdgpt/datasets/arithmetic/, read by the arithmetic_sft
and arithmetic_grpo experiments as `spmdgpt:datasets/arithmetic/...`):

    sft.jsonl.gz      {"messages": [{"role": "user", "content": "47+385="},
                      {"role": "assistant", "content": "432"}]} a line: the conversations
                      supervised fine-tuning learns from (the loss on the answers only)
    prompts.jsonl.gz  {"prompt": [{"role": "user", "content": "47+385="}], "answer": "432"} a
                      line: what GRPO samples answers to and scores (rl.reward=numeric)

and the calculator walk's (read by calculator_sft and calculator_grpo), products of two two-digit
numbers, which a model of this size does not learn to compute from a few thousand examples:

    calc_sft.jsonl.gz      2,000 worked products; a quarter of them use the calculator
                           ("47*38=" -> "<<47*38>>1786": the call, then the tool's output, as
                           rl.tool=calculator appends it in a rollout; the output a "tool_output"
                           content part, which SFT reads but does not train on, data/chat.py),
                           the others state the product
    calc_prompts.jsonl.gz  4,000 others, {"prompt": [...], "answer": "1786"}

and the chain walk's (read by chain_sft and chain_grpo, rl.env=chain: spmdgpt.rl.envs), chains of
operations carried out one call at a time, each on the result the environment gave for the last:

    chain_sft.jsonl.gz      2,000 demonstrations of chains of one or two operations ("7 +5 *3" ->
                            "<<7+5>>12<<12*3>>36": each call, then the environment's answer as a
                            "tool_output" part, read and not trained on)
    chain_prompts.jsonl.gz  4,000 chains of two to four operations, {"prompt": [...], "answer": "32"}:
                            longer than any demonstration

`python -m spmdgpt.rl.arithmetic DIR` writes the files into DIR, byte for byte the shipped ones
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
CALC_SFT = 2_000
CALC_TOOL_SHARE = 0.25  # the calculator walk's demonstrations that call the tool
CHAIN_SFT = 2_000


def problems(n: int, seed: int) -> List[Tuple[str, str]]:
    """n (question, answer) pairs: a + b or a - b, each operand of 2 or 3 digits (10..999)."""
    r = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = (r.randint(10, 999) for _ in range(2))
        op = r.choice("+-")
        out.append((f"{a}{op}{b}=", str(a + b if op == "+" else a - b)))
    return out


def products(n: int, seed: int) -> List[Tuple[str, str]]:
    """n (question, answer) pairs a*b, each factor of 2 digits (10..99)."""
    r = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = r.randint(10, 99), r.randint(10, 99)
        out.append((f"{a}*{b}=", str(a * b)))
    return out


def chains(n: int, seed: int, lengths: Tuple[int, int]) -> List[Tuple[str, List[Tuple[str, str]]]]:
    """n chains (text "7 +5 *3", [(each call "7+5", its result "12")]) of lengths[0]..lengths[1]
    operations on a start of 2..20: +N and -N with N in 2..30, *N with N in 2..4."""
    r = random.Random(seed)
    out = []
    for _ in range(n):
        value = r.randint(2, 20)
        text, calls = str(value), []
        for _ in range(r.randint(*lengths)):
            op = r.choice("+-*")
            b = r.randint(2, 4) if op == "*" else r.randint(2, 30)
            result = value + b if op == "+" else value - b if op == "-" else value * b
            text += f" {op}{b}"
            calls.append((f"{value}{op}{b}", str(result)))
            value = result
        out.append((text, calls))
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
    tool = random.Random(5)
    def called(q, a):  # (the call, then the tool's output: a content part that is read, never trained)
        return [{"type": "text", "text": f"<<{q[:-1]}>>"}, {"type": "tool_output", "text": a}]

    calc_sft = [json.dumps({"messages": [user(q), reply(called(q, a) if tool.random() < CALC_TOOL_SHARE else a)]})
                for q, a in products(CALC_SFT, 3)]
    calc_prompts = [json.dumps({"prompt": [user(q)], "answer": a}) for q, a in products(PROMPTS, 4)]
    chain_sft = [json.dumps({"messages": [user(text), reply([part for q, a in calls for part in called(f"{q}=", a)])]})
                 for text, calls in chains(CHAIN_SFT, 6, (1, 2))]
    chain_prompts = [json.dumps({"prompt": [user(text)], "answer": calls[-1][1]})
                     for text, calls in chains(PROMPTS, 7, (2, 4))]
    return {"sft.jsonl.gz": _gzip(sft), "prompts.jsonl.gz": _gzip(prompts), "calc_sft.jsonl.gz": _gzip(calc_sft),
            "calc_prompts.jsonl.gz": _gzip(calc_prompts), "chain_sft.jsonl.gz": _gzip(chain_sft),
            "chain_prompts.jsonl.gz": _gzip(chain_prompts)}


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
