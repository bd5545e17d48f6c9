"""Tools inside rollouts (`rl.tool`): a completion may call a tool mid-answer, and read its output.

The call is the text between `rl.tool_open` and `rl.tool_close` ("<<" and ">>" by default, the
calculator annotations of GSM8K's solutions). When a completion's text ends with the close mark
after an open one, the sequence pauses: the tool is called with the text between them, and
`rl.tool_output` with its result in place of "{}" is appended as tokens that the model reads but
did not sample (the engine's `Request.inject`), then sampling goes on. So "12*34=" may go on
"<<12*34>>408": the model wrote "<<12*34>>", the tool wrote "408". Appended tokens count against
rl.max_new_tokens (one length budget), and carry no loss: the rollout's targets mask them.

A tool is a function text -> text: `calculator` (below), or `module:function` as rewards are.
One that raises gives the model "error: <the exception>" instead (where the tokenizer cannot spell
it whole, a character-level vocabulary, what it holds of "error" alone: never the exception's
digits, which would read like an answer); one that runs past
`rl.tool_timeout` seconds gives "error: timeout". Neither stops the run: the first few are said
on the console, and every rollout's row counts them (rl/tool_errors). At most `rl.tool_calls`
calls a completion; a close mark past them is text like any other.

The calculator runs in the training process: its work is bounded (the length of an expression,
the size of every intermediate value). One's own `module:function` runs in a worker process of
its own (`ToolProcess`, started at the first call and reused): a call past the timeout ends that
process, which the next call starts again, so nothing is left running and the training process
never waits on it past the timeout. A call costs a round trip through a pipe (well under a
millisecond) beside the tool's own time; a restart after a timeout, the worker's start-up (tens
of milliseconds) and the import of the tool's module.
"""

from __future__ import annotations

import ast
import json
import operator
import os
import re
import select
import subprocess
import sys
import threading
import time
import weakref
from fractions import Fraction
from pathlib import Path
from typing import Callable, List, Optional

from spmdgpt.config import ConfigError
from spmdgpt.rl.rewards import imported

BUILTINS = ("calculator",)
SAID = 3  # tool errors said on the console per run (every one is counted in the metrics)

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
# the leading zeros of a number's integer part ("007"), not those after a decimal point ("1.05") or
# inside a number ("100", "1e05")
_LEADING_ZEROS = re.compile(r"(?<![\w.])0+(?=\d)")
MAX_LENGTH = 200  # characters of an expression the calculator reads
MAX_MAGNITUDE = 10 ** 30  # the largest value it computes with (a result past it is an error, not a long wait)
# the most bits of a value's numerator or denominator: ((1/7)**64)**64 stays far under MAX_MAGNITUDE while
# its denominator grows 64x in bits; each * / ** is refused before it would pass this (~300 digits)
MAX_BITS = 1024


class CalculatorError(ValueError):
    """What the calculator cannot compute (its message is what the model reads)."""


def _bits(x: Fraction) -> int:
    return max(x.numerator.bit_length(), x.denominator.bit_length())


def _value(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):  # (not bool, not str)
        if isinstance(node.value, float):  # (the decimal as written, exactly: 0.1 is 1/10)
            try:
                value = Fraction(repr(node.value))
            except ValueError:  # (inf: a literal past float's range)
                raise CalculatorError("too large") from None
        else:
            value = Fraction(node.value)
        if abs(value) > MAX_MAGNITUDE:
            raise CalculatorError("too large")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        a, b = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow):
            if b.denominator != 1 or abs(b) > 64:
                raise CalculatorError("powers take whole exponents up to 64")
            if a == 0 and b < 0:
                raise CalculatorError("division by zero")
            if _bits(a) * abs(b) > MAX_BITS:  # (before computing it: a**b has about b times a's bits)
                raise CalculatorError("too many digits")
        elif isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
            raise CalculatorError("division by zero")
        if _bits(a) + _bits(b) > MAX_BITS:  # (a product's or quotient's parts have at most the sum of the bits)
            raise CalculatorError("too many digits")
        out = Fraction(_BINARY[type(node.op)](a, b))
        if abs(out) > MAX_MAGNITUDE:
            raise CalculatorError("too large")
        return out
    raise CalculatorError("not arithmetic")


def calculator(expression: str) -> str:
    """The value of an arithmetic expression: numbers, + - * / // % ** and parentheses, computed
    exactly (fractions; decimals as written) and written as a whole number or a decimal of up to 6
    places ("1/3" -> "0.333333"); a trailing "=", spaces and the leading zeros of an integer part
    ("007") are ignored. Parsed with Python's own parser and computed node by node: nothing is
    evaluated as code. Values stay under MAX_MAGNITUDE and MAX_BITS (so every call is quick).
    CalculatorError for anything else."""
    text = expression.strip().rstrip("=").strip()
    if not text or len(text) > MAX_LENGTH:
        raise CalculatorError("empty" if not text else "too long")
    text = _LEADING_ZEROS.sub("", text)  # ("007" is 7, as a person means it; Python's parser refuses it)
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        raise CalculatorError("not arithmetic") from None
    value = _value(tree.body)
    if value.denominator == 1:
        return str(value.numerator)
    out = f"{float(value):.6f}".rstrip("0").rstrip(".")
    return "0" if out in ("-0", "") else out


def tool_function(name: str, field: str = "rl.tool") -> Callable[[str], str]:
    """The tool `name` names: a built-in or `module:function` (imported now; a ConfigError naming
    the field when it does not import or is not callable)."""
    if name in BUILTINS:
        return calculator
    if ":" not in name:
        raise ConfigError([f"{field}={name}: unknown tool; use calculator or module:function (your own f(text) -> "
                           "text)"])
    return imported(name, field)


def encodable(tokenizer, text: str) -> List[int]:
    """text's tokens; where the tokenizer cannot take a character (a character-level vocabulary),
    without that character."""
    try:
        return list(tokenizer.encode(text))
    except ValueError:
        def takes(c: str) -> bool:
            try:
                tokenizer.encode(c)
                return True
            except ValueError:
                return False

        kept = {c for c in set(text) if takes(c)}  # (each character tried once: a long text stays quick)
        text = "".join(c for c in text if c in kept)
        return list(tokenizer.encode(text)) if text else []


def marked(tokenizer, tokens, open_mark: str, close_mark: str) -> Optional[str]:
    """The text between the marks when `tokens`' text ends with the close mark after an open one
    (a call, or an environment's action, just written); else None."""
    text = tokenizer.decode(tokens)
    if not text.endswith(close_mark):
        return None
    at = text.rfind(open_mark, 0, len(text) - len(close_mark))
    return None if at < 0 else text[at + len(open_mark): len(text) - len(close_mark)]


def check_marks(cfg, tokenizer, what: str) -> None:
    """ConfigError when rl.tool_open or rl.tool_close holds characters the run's tokenizer cannot
    write (a character vocabulary built from data without them): no completion could ever `what`."""
    for field, mark in (("rl.tool_open", cfg.rl.tool_open), ("rl.tool_close", cfg.rl.tool_close)):
        if tokenizer.decode(encodable(tokenizer, mark)) != mark:
            raise ConfigError([f"{field}={mark!r}: this run's tokenizer ({tokenizer.kind}, {tokenizer.vocab_size} ids) "
                               f"cannot write it, so no completion could {what}; choose marks of characters its "
                               "vocabulary has (or fine-tune from data that holds them)"])


class Toolbox:
    """A run's tool (rl.tool_*): `inject` is the engine's hook for each rollout's request."""

    def __init__(self, fn: Callable[[str], str], tokenizer, open_mark: str = "<<", close_mark: str = ">>",
                 output: str = "{}", calls: int = 4, timeout: float = 1.0, name: str = "tool"):
        self.fn, self.tokenizer, self.open, self.close = fn, tokenizer, open_mark, close_mark
        self.output, self.max_calls, self.timeout, self.name = output, calls, timeout, name
        self.calls = self.errors = 0  # (counted since `reset`: one step's rollouts)
        self.said = 0
        self._made: dict = {}  # request ident -> (calls made, where the text after its last call starts)

    @classmethod
    def of(cls, cfg, tokenizer) -> Optional["Toolbox"]:
        """The run's toolbox, or None without rl.tool."""
        r = cfg.rl
        if not r.tool:
            return None
        fn = tool_function(r.tool)  # (imported here too: a ConfigError now rather than errors at every call)
        check_marks(cfg, tokenizer, f"call rl.tool={r.tool}")
        if fn is not calculator:
            fn = ToolProcess(r.tool)
        return cls(fn, tokenizer, r.tool_open, r.tool_close, r.tool_output, r.tool_calls, r.tool_timeout, r.tool)

    def reset(self) -> None:
        self.calls = self.errors = 0
        self._made.clear()

    def call(self, text: str) -> str:
        """The tool's output for the call `text`: its result, or "error: ..." when it raises, returns
        something other than text, or runs past the timeout. The calculator runs here (its work
        is bounded); a ToolProcess in its process (ended at a timeout); any other function (one
        given through Python, not the config) in a thread, which a timeout leaves behind."""
        if self.fn is calculator:
            try:
                return calculator(text)
            except CalculatorError as e:
                return self._error(text, str(e), f"raised CalculatorError: {e}")
        if isinstance(self.fn, ToolProcess):
            kind, value = self.fn.call(text, self.timeout)
        else:
            kind, value = _in_thread(self.fn, text, self.timeout)
        if kind == "timeout":
            return self._error(text, "timeout", f"ran past rl.tool_timeout={self.timeout} s")
        if kind == "error":
            return self._error(text, value, f"raised {value}")
        if kind == "not_text":
            return self._error(text, "no text", f"returned {value}, not text")
        return value

    def end_worker(self) -> None:
        """End the tool's worker process, if it has one (a later call starts another)."""
        if isinstance(self.fn, ToolProcess):
            self.fn.close()

    def _spelled(self, result: str, error: bool) -> List[int]:
        """The tokens of rl.tool_output around `result`, in the characters the tokenizer has. An
        error the vocabulary cannot spell whole is "error" alone (what the vocabulary holds of it):
        filtered, int()'s "... '1039<'" would read "1039", which a reward could take for an answer."""
        out = encodable(self.tokenizer, self.output.replace("{}", result))
        if error and self.tokenizer.decode(out) != self.output.replace("{}", result):
            out = encodable(self.tokenizer, self.output.replace("{}", "error"))
        return out

    def _error(self, text: str, shown: str, said: str) -> str:
        self.errors += 1
        if self.said < SAID:
            self.said += 1
            more = " (further ones are counted in rl/tool_errors)" if self.said == SAID else ""
            reads = self.tokenizer.decode(self._spelled(f"error: {shown}", True))
            print(f"rl.tool={self.name} on {text!r} {said}; the model reads {reads!r}{more}", file=sys.stderr)
        return f"error: {shown}"

    def inject(self, request) -> Optional[List[int]]:
        """The engine's hook: when the request's text since its last call ends with the close mark
        after an open one, the tool's output as tokens; else None."""
        made, start = self._made.get(request.ident, (0, 0))
        if made >= self.max_calls:
            return None
        call = marked(self.tokenizer, request.tokens[start:], self.open, self.close)
        if call is None:
            return None
        self.calls += 1
        errors = self.errors
        result = self.call(call)
        out = self._spelled(result, self.errors > errors)
        self._made[request.ident] = (made + 1, len(request.tokens) + len(out))  # (the next call's text starts after)
        return out


def _in_thread(fn: Callable[[str], str], text: str, timeout: float) -> tuple:
    """(kind, value) of fn(text) run in a thread: ("out", text), ("error", "Type: message"),
    ("not_text", repr) or ("timeout", None) (the thread is left behind)."""
    box: dict = {}

    def run():
        try:
            out = fn(text)
            box["out" if isinstance(out, str) else "not_text"] = out if isinstance(out, str) else repr(out)[:200]
        except Exception as e:  # (one's own tool: anything it raises is given to the model)
            box["error"] = f"{type(e).__name__}: {e}"

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return "timeout", None
    (kind, value), = box.items()
    return kind, value


WORKER = Path(__file__).with_name("toolworker.py")
START_S = 60.0  # seconds a worker may take to start and import the tool's module (not counted in the call's timeout)


class ToolProcess:
    """`module:function` run in a worker process (rl/toolworker.py), started at the first call and
    reused; a call past its timeout kills the process (the next call starts another). The worker
    imports the tool from the same sys.path as this process, and exits when this process does
    (its stdin closes). `script`, `args` and `what`: another worker of the same kind (an
    environment's, rl/envworker.py: `ask`)."""

    def __init__(self, name: str, script: Path = WORKER, args: tuple = (), what: str = "rl.tool"):
        self.name, self.script, self.args, self.what = name, script, args, what
        self.proc: Optional[subprocess.Popen] = None
        self._buffer = b""
        self._finalizer = None
        self._ended = False  # (the worker closed its stdout: it exited)

    def _start(self) -> None:
        path = os.pathsep.join(p or os.getcwd() for p in sys.path)
        self.proc = subprocess.Popen([sys.executable, "-u", str(self.script), self.name, *self.args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env={**os.environ, "PYTHONPATH": path})
        self._buffer, self._ended = b"", False
        self._finalizer = weakref.finalize(self, _end, self.proc)
        answer = self._read(START_S)
        if answer is None or "ready" not in answer:
            self.close()
            why = "did not start" if answer is None else f"could not import it ({answer.get('failed', answer)})"
            raise RuntimeError(f"{self.what}={self.name}: its worker process {why}")

    def _read(self, timeout: float) -> Optional[dict]:
        """The worker's next answer, or None if none came within `timeout` seconds (or it died)."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:  # (it exited)
                self._ended = True
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def ask(self, message: dict, timeout: float) -> tuple:
        """("answer", the worker's answer to `message`), ("timeout", None) or ("exited", None); a
        timeout (or a worker that died) ends the worker (the next message starts another)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write((json.dumps(message, default=str) + "\n").encode())  # (a record's odd values as text)
            self.proc.stdin.flush()
        except OSError:  # (it died between calls)
            self.close()
            return "exited", None
        answer = self._read(timeout)
        if answer is None:
            died = self._ended or self.proc.poll() is not None
            self.close()
            return ("exited" if died else "timeout"), None
        return "answer", answer

    def call(self, text: str, timeout: float) -> tuple:
        """(kind, value) as `_in_thread`'s."""
        kind, answer = self.ask({"text": text}, timeout)
        if kind != "answer":
            return ("error", "the tool's process exited") if kind == "exited" else ("timeout", None)
        (kind, value), = answer.items()
        return kind, value

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # (kills and reaps the process, once)
        self.proc = self._finalizer = None


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for f in (proc.stdin, proc.stdout):
        f.close()
