"""Tools of the tests' own (`rl.tool=rl_tools:NAME`), in a module of their own: a tool runs in a
worker process that imports its module, and this one imports nothing heavy."""

import time


def length_of_the_call(text):
    """The length of the text it was called with."""
    return str(len(text))


def raising(text):
    raise KeyError(text)


def not_text(text):
    return 7


def forever(text):
    """Never returns: a pure-Python loop that holds the GIL."""
    n = 0
    while True:
        n += 1


def slow_then_prints(text):
    """Sleeps the seconds the text says, printing first (to stdout: it must not reach the protocol)."""
    print("thinking...")
    time.sleep(float(text))
    return "late"


def as_int(text):
    """int() of the text with a stray mark: a ValueError whose message holds the text's digits."""
    return str(int(text + "<"))
