"""Tiny Shakespeare as conversations, for trying chat fine-tuning (README, "Fine-tuning on
conversations"): each pair of consecutive speeches becomes one conversation, the first speech
as the user's turn and the reply as the assistant's, with a system turn naming who answers.
With --pairs, preference pairs instead: the same prompt, the true reply as the chosen answer
and a speech drawn from elsewhere in the play (seeded) as the rejected one.

    python examples/shakespeare_chat.py [--pairs] [OUT.jsonl]   (default: shakespeare_chat.jsonl)

Reads <data root>/tinyshakespeare/input.txt (data.path's rule: $SPMDGPT_DATA, else the nearest
shared/data above this folder); writes {"messages": [...]} lines.
"""

import json
import random
import sys
from pathlib import Path

from spmdgpt.data.sources import find_data_root


def speeches(text: str):
    """(speaker, speech) of each blank-line-separated block "Speaker:\\nlines"."""
    for block in text.replace("\r\n", "\n").split("\n\n"):
        head, _, body = block.strip().partition("\n")
        if head.endswith(":") and body.strip():
            yield head[:-1], body.strip()


def main() -> None:
    args = sys.argv[1:]
    pairs = "--pairs" in args
    args = [a for a in args if a != "--pairs"]
    out = Path(args[0] if args else "shakespeare_chat.jsonl")
    root = find_data_root()
    if root is None:
        sys.exit("no data root: set SPMDGPT_DATA to the folder holding tinyshakespeare/")
    said = list(speeches((root / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")))
    rng = random.Random(0)
    with open(out, "w", encoding="utf-8") as f:
        for (_, first), (speaker, reply) in zip(said, said[1:]):
            prompt = [{"role": "system", "content": f"You are {speaker}."}, {"role": "user", "content": first}]
            if pairs:
                line = {"prompt": prompt, "chosen": reply, "rejected": rng.choice(said)[1]}
            else:
                line = {"messages": prompt + [{"role": "assistant", "content": reply}]}
            f.write(json.dumps(line) + "\n")
    print(f"{out}: {len(said) - 1} {'pairs' if pairs else 'conversations'}")


if __name__ == "__main__":
    main()
