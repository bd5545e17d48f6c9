"""Tiny Shakespeare as conversations, for trying chat fine-tuning (README, "Fine-tuning on
conversations"): each pair of consecutive speeches becomes one conversation, the first speech
as the user's turn and the reply as the assistant's, with a system turn naming who answers.

    python examples/shakespeare_chat.py [OUT.jsonl]     (default: shakespeare_chat.jsonl)

Reads <data root>/tinyshakespeare/input.txt (data.path's rule: $SPMDGPT_DATA, else the nearest
shared/data above this folder); writes {"messages": [...]} lines.
"""

import json
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
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "shakespeare_chat.jsonl")
    root = find_data_root()
    if root is None:
        sys.exit("no data root: set SPMDGPT_DATA to the folder holding tinyshakespeare/")
    said = list(speeches((root / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")))
    with open(out, "w", encoding="utf-8") as f:
        for (_, first), (speaker, reply) in zip(said, said[1:]):
            messages = [{"role": "system", "content": f"You are {speaker}."},
                        {"role": "user", "content": first}, {"role": "assistant", "content": reply}]
            f.write(json.dumps({"messages": messages}) + "\n")
    print(f"{out}: {len(said) - 1} conversations")


if __name__ == "__main__":
    main()
