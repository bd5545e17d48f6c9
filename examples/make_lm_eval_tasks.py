"""Build the data of the lm-evaluation-harness tasks that spmdgpt ships (src/spmdgpt/tasks/),
from the last tenth of Tiny Shakespeare (deterministic: the files in the package are its output).

    .venv/bin/python examples/make_lm_eval_tasks.py [../shared/data/tinyshakespeare/input.txt]

shakespeare_next_line  multiple choice: two lines of a speech; which of four lines comes next
                       (the true one, three drawn from elsewhere in the text)
shakespeare_ppl        rolling log-likelihood of whole speeches (word / byte perplexity, bits per byte)
shakespeare_speaker    generation: the end of a speech; who speaks next (e.g. "ROMEO:"), exact match
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "src" / "spmdgpt" / "tasks"


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "data"
               / "tinyshakespeare" / "input.txt")
    text = src.read_text(encoding="utf-8")
    tail = text[int(len(text) * 0.9):]
    speeches = [s.strip("\n") for s in tail.split("\n\n")][1:-1]  # (the first and last may be cut)
    speeches = [s for s in speeches if ":" in s.split("\n", 1)[0] and "\n" in s]
    rng = random.Random(0)
    lines = [ln for s in speeches for ln in s.split("\n")[1:]]

    next_line = []
    for s in speeches:
        body = s.split("\n")[1:]
        if len(body) >= 3 and len(next_line) < 100:
            others = rng.sample([ln for ln in lines if ln != body[2]], 3)
            label = rng.randrange(4)
            choices = others[:label] + [body[2]] + others[label:]
            next_line.append({"context": "\n".join(s.split("\n")[:3]), "choices": choices, "label": label})
    ppl = [{"text": s} for s in rng.sample([s for s in speeches if 300 <= len(s) <= 900], 20)]
    speaker = []
    for a, b in zip(speeches, speeches[1:]):
        if len(speaker) < 50 and rng.random() < 0.3:
            speaker.append({"context": "\n".join(a.split("\n")[-3:]) + "\n\n", "speaker": b.split("\n", 1)[0]})
    for name, rows in (("next_line", next_line), ("ppl", ppl), ("speaker", speaker)):
        (OUT / f"shakespeare_{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        print(f"{OUT / f'shakespeare_{name}.jsonl'}: {len(rows)} documents")


if __name__ == "__main__":
    main()
