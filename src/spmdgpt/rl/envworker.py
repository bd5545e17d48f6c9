"""The process one's own environment (`rl.env=module:Class`) runs in: `spmdgpt.rl.envs.EnvBox`
starts this file with the class's name and sends it each episode's reset and steps, so that a
call past `rl.env_timeout` is ended by ending the process (a thread cannot be stopped).

    python envworker.py module:Class MAX_REWARD

Protocol, one JSON object per line: it answers {"ready": true} once the class is imported (or
{"failed": "..."}); then
    {"clear": true}                                -> {"ok": true}    (a new round: episodes dropped)
    {"reset": i, "prompt": p, "record": r}         -> {"out": text} | {"error": why}
    {"step": i, "action": text}                    -> {"out": [text, reward, done]} | {"error": why}
where i numbers the round's episodes (a fresh instance each) and `why` is what the run reports.
It exits when stdin closes, or within a second of its run's death (toolworker.py's watch). The
environment's own prints go to stderr.

Run by path: the standard library only (and toolworker.py's start). The training process imports
it too, for `step_error`, the one check of a step's answer.
"""

import json
import math
import numbers
import sys

if __package__:  # (imported as spmdgpt.rl.envworker: `step_error` serves the training process's environments too)
    from spmdgpt.rl.toolworker import started
else:  # (run by path: its neighbour in this folder, whose folder is on sys.path)
    from toolworker import started


def step_error(got, most: float):
    """Why `got`, an environment's step's answer, is not (text, a finite number of at most `most` in
    size, a truth value: Python's or NumPy's), or None when it is."""
    ok = (isinstance(got, tuple) and len(got) == 3 and isinstance(got[0], str)
          and isinstance(got[1], numbers.Real) and math.isfinite(got[1]) and abs(got[1]) <= most
          and (isinstance(got[2], bool) or type(got[2]).__module__ == "numpy"
               and type(got[2]).__name__ in ("bool", "bool_")))  # (NumPy's True: np.bool / np.bool_)
    return None if ok else (f"step returned {got!r:.200}, not (text, a finite number of at most {most:g} in "
                            "size, True or False)")


def main() -> None:
    say, cls = started()
    if cls is None:
        return
    most = float(sys.argv[2])
    episodes: dict = {}
    for line in sys.stdin:
        ask = json.loads(line)
        if "clear" in ask:
            episodes.clear()
            say({"ok": True})
        elif "reset" in ask:
            try:
                env = episodes[ask["reset"]] = cls()
                first = env.reset(ask["prompt"], ask["record"])
            except Exception as e:  # (one's own environment: its failure ends its episode, not the run)
                say({"error": f"reset raised {type(e).__name__}: {e}"})
                continue
            say({"out": first} if isinstance(first, str) else
                {"error": f"reset returned {type(first).__name__}, not text"})
        else:
            env = episodes.get(ask["step"])
            if env is None:  # (no reset of that episode this round)
                say({"error": f"no episode {ask['step']} in this process"})
                continue
            try:
                got = env.step(ask["action"])
            except Exception as e:
                say({"error": f"step raised {type(e).__name__}: {e}"})
                continue
            wrong = step_error(got, most)
            say({"error": wrong} if wrong else {"out": [got[0], float(got[1]), bool(got[2])]})


if __name__ == "__main__":
    main()
