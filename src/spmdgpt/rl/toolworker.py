"""The process one's own tool (`rl.tool=module:function`) runs in: `spmdgpt.rl.tools.ToolProcess`
starts this file with the tool's name and sends it calls, so that a call past `rl.tool_timeout`
is ended by ending the process (a thread cannot be stopped, and a tool holding the GIL would
stall the training process with it).

    python toolworker.py module:function

Protocol, one JSON object per line: it answers {"ready": true} once the function is imported
(or {"failed": "..."}); then for each {"text": ...} on stdin one of {"out": text},
{"error": "Type: message"} or {"not_text": "repr"}. It exits when stdin closes (its run ended), or
within a second of its run's death even inside a call that never returns. The tool's own prints go
to stderr: stdout carries the protocol alone.

Run by path, not imported as part of spmdgpt: the standard library only, so that it starts in
tens of milliseconds.
"""

import importlib
import json
import os
import sys
import threading
import time


def _die_with_parent() -> None:
    """End this process when the run that started it dies (kill -9 included), even inside a call
    that never returns: a thread watches for this process being handed to another parent. (Not
    the kernel's parent-death signal: it follows the thread that started the process, and a run's
    rollouts may start it from a worker thread that ends before the run.)"""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def started():
    """(say, the object sys.argv[1] names as module:attr), after answering {"ready": true}; None
    for the object when it failed to import (said as {"failed": ...}). What the worker's code
    prints goes to stderr from here on: stdout carries the protocol alone. (envworker.py's too.)"""
    out = sys.stdout
    sys.stdout = sys.stderr
    _die_with_parent()

    def say(obj) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    module, _, attr = sys.argv[1].partition(":")
    try:
        found = getattr(importlib.import_module(module), attr)
    except Exception as e:  # (the parent checked it imports; say why if it no longer does)
        say({"failed": f"{type(e).__name__}: {e}"})
        return say, None
    say({"ready": True})
    return say, found


def main() -> None:
    say, fn = started()
    if fn is None:
        return
    for line in sys.stdin:
        text = json.loads(line)["text"]
        try:
            result = fn(text)
        except Exception as e:  # (one's own tool: anything it raises is given to the model)
            say({"error": f"{type(e).__name__}: {e}"})
            continue
        say({"out": result} if isinstance(result, str) else {"not_text": repr(result)[:200]})


if __name__ == "__main__":
    main()
