"""Rewards for reinforcement learning with verifiable rewards (`rl.reward`): a function of
(prompt, completion, record) -> float, where `record` is the prompt's whole jsonl record (its
`answer` and anything else the reward reads).

Built-ins, on the completion's text (cut at the end-of-turn / end-of-text token by the sampler):

    exact     1.0 when the completion's final answer equals `answer` after normalisation, else 0.0:
              the final answer is the text after the last "answer:" / "answer is" (any case) or
              "####" (GSM8K's mark) or inside the last \\boxed{...}; else the whole completion.
              Normalised: surrounding whitespace and a trailing period dropped, inner
              whitespace runs as one space, case folded.
    numeric   1.0 when the last number in the completion equals the number in `answer` (both
              parsed as decimals, thousands separators dropped; equal within 1e-6 relative),
              else 0.0; a completion without a number scores 0.0.
    digits    partial credit for whole numbers: the share of places, aligned from the right (units
              under units), where the completion's last number has `answer`'s digit, the sign a
              place of its own where there is one: "432" for 432 scores 1.0, "431" and "32" 2/3,
              "1432" and "-432" 3/4; no number 0.0; numbers that are not whole score as numeric.
              A dense signal where exact answers are rare (the arithmetic walk's).
    regex     1.0 when `answer`, a regular expression, matches the whole stripped completion
              (re.fullmatch), else 0.0.

`module:function` names one's own: imported once, called as f(prompt, completion, record) and
returning a number. A reward that raises or returns something else stops the run with one line
naming the record (`RewardError`).
"""

from __future__ import annotations

import importlib
import math
import numbers
import re
from decimal import Decimal, InvalidOperation
from typing import Callable

from spmdgpt.config import ConfigError

BUILTINS = ("exact", "numeric", "digits", "regex")

_FINAL = re.compile(r"(?:answer\s*(?::|is)|####)\s*(.*)$", re.IGNORECASE | re.DOTALL)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")


class RewardError(ValueError):
    """A reward function raised or returned a non-number (the message names the record)."""


def normalise(text: str) -> str:
    return " ".join(str(text).split()).rstrip(".").strip().casefold()


def final_answer(completion: str) -> str:
    """The part of a completion that states its answer (see the module docstring)."""
    boxed = _BOXED.findall(completion)
    if boxed:
        return boxed[-1]
    m = _FINAL.search(completion)
    if m is None:
        return completion
    tail = m.group(1)  # (after the first mark; then after each later one: "answer: 3. answer: 4" -> "4")
    while (m := _FINAL.search(tail)) is not None:
        tail = m.group(1)
    return tail.strip().splitlines()[0] if tail.strip() else ""


def exact(prompt: str, completion: str, record: dict) -> float:
    return float(normalise(final_answer(completion)) == normalise(record["answer"]))


def last_number(text: str):
    """The last decimal number in text (a Decimal), or None."""
    found = _NUMBER.findall(str(text))
    if not found:
        return None
    try:
        return Decimal(found[-1].replace(",", ""))
    except InvalidOperation:
        return None


def numeric(prompt: str, completion: str, record: dict) -> float:
    want, got = last_number(record["answer"]), last_number(completion)
    if want is None or got is None:
        return 0.0
    return float(math.isclose(float(got), float(want), rel_tol=1e-6, abs_tol=0.0) or got == want)


def digits(prompt: str, completion: str, record: dict) -> float:
    want, got = last_number(record["answer"]), last_number(completion)
    if want is None or got is None:
        return 0.0
    if want != want.to_integral_value() or got != got.to_integral_value():
        return numeric(prompt, completion, record)
    w, g = (str(abs(int(x))) for x in (want, got))
    same = sum(a == b for a, b in zip(w[::-1], g[::-1]))  # (units under units)
    if want < 0 or got < 0:  # (the sign: one place more)
        return (same + ((want < 0) == (got < 0))) / (max(len(w), len(g)) + 1)
    return same / max(len(w), len(g))


def regex(prompt: str, completion: str, record: dict) -> float:
    return float(re.fullmatch(str(record["answer"]), completion.strip(), re.DOTALL) is not None)


def reward_function(name: str, field: str = "rl.reward") -> Callable:
    """The reward `field` (rl.reward, rl.val_reward) names: a built-in or `module:function`
    (imported now; a ConfigError naming the field when it does not import or is not callable)."""
    if name in BUILTINS:
        return {"exact": exact, "numeric": numeric, "digits": digits, "regex": regex}[name]
    if ":" not in name:
        raise ConfigError([f"{field}={name}: unknown reward; use one of {', '.join(BUILTINS)} or "
                           "module:function (your own f(prompt, completion, record) -> float)"])
    return imported(name, field)


def imported(name: str, field: str) -> Callable:
    """The function `module:function` names, imported now (a ConfigError naming the field when it
    does not import or is not callable): one's own reward or tool."""
    module, _, attr = name.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except Exception as e:  # (one's own module: ImportError, and whatever its import raises, a SyntaxError too)
        raise ConfigError([f"{field}={name}: cannot import it ({type(e).__name__}: {e}); the module must be "
                           "importable (on PYTHONPATH) and define it"]) from None
    if not callable(fn):
        raise ConfigError([f"{field}={name}: {attr} is not a function"])
    return fn


MAX_REWARD = 1e9  # (a larger one overflows float32's advantages and squares in a group's std)


def score(fn: Callable, prompt: str, completion: str, record: dict, where: str) -> float:
    """fn's reward as a float; RewardError naming `where` (the record) if it raises or returns
    something other than a finite number."""
    try:
        value = fn(prompt, completion, record)
    except Exception as e:  # (one's own reward: any exception is the record's problem)
        raise RewardError(f"the reward raised {type(e).__name__}: {e} on {where}; fix the reward "
                          "function or the record") from None
    if not isinstance(value, numbers.Real) or not abs(value) <= MAX_REWARD:  # (True / False: 1 / 0; nan, inf)
        raise RewardError(f"the reward returned {value!r} on {where}; a reward must be a finite number, at most "
                          f"{MAX_REWARD:g} in size")
    return float(value)
