"""Tools inside rollouts (`rl.tool`): a completion may call a tool mid-answer, and read its output.

The call is the text between `rl.tool_open` and `rl.tool_close` ("<<" and ">>" by default, the
calculator annotations of GSM8K's solutions). When a completion's text ends with the close mark
after an open one, the sequence pauses: the tool is called with the text between them, and
`rl.tool_output` with its result in place of "{}" is appended as tokens that the model reads but
did not sample (the engine's `Request.inject`), then sampling goes on. So "12*34=" may go on
"<<12*34>>408": the model wrote "<<12*34>>", the tool wrote "408". Appended tokens count against
rl.max_new_tokens (one length budget), and carry no loss: the rollout's targets mask them.

A tool is a function text -> text: `calculator` (below), or `module:function` as rewards are.
One that raises gives the model "error: <the exception>" instead (in the characters the
tokenizer has: a character-level vocabulary drops the others); one that runs past
`rl.tool_timeout` seconds gives "error: timeout". Neither stops the run: the first few are said
on the console, and every rollout's row counts them (rl/tool_errors). At most `rl.tool_calls`
calls a completion; a close mark past them is text like any other.
"""

from __future__ import annotations

import ast
import operator
import re
import sys
import threading
from fractions import Fraction
from typing import Callable, List, Optional

from spmdgpt.config import ConfigError
from spmdgpt.rl.rewards import imported

BUILTINS = ("calculator",)
SAID = 3  # tool errors said on the console per run (every one is counted in the metrics)

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_LEADING_ZEROS = re.compile(r"\b0+(\d)")
MAX_LENGTH = 200  # characters of an expression the calculator reads
MAX_MAGNITUDE = 10 ** 30  # the largest value it computes with (a result past it is an error, not a long wait)


class CalculatorError(ValueError):
    """What the calculator cannot compute (its message is what the model reads)."""


def _value(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):  # (not bool, not str)
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        a, b = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow):
            if b.denominator != 1 or abs(b) > 64:
                raise CalculatorError("powers take whole exponents up to 64")
            if a == 0 and b < 0:
                raise CalculatorError("division by zero")
        elif isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
            raise CalculatorError("division by zero")
        out = _BINARY[type(node.op)](a, b)
        if abs(out) > MAX_MAGNITUDE:
            raise CalculatorError("too large")
        return Fraction(out)
    raise CalculatorError("not arithmetic")


def calculator(expression: str) -> str:
    """The value of an arithmetic expression: numbers, + - * / // % ** and parentheses, computed
    exactly (fractions) and written as a whole number or a decimal of up to 6 places ("1/3" ->
    "0.333333"); a trailing "=", spaces and leading zeros ("007") are ignored. Parsed with Python's own parser and
    computed node by node: nothing is evaluated as code. CalculatorError for anything else."""
    text = expression.strip().rstrip("=").strip()
    if not text or len(text) > MAX_LENGTH:
        raise CalculatorError("empty" if not text else "too long")
    text = _LEADING_ZEROS.sub(r"\1", text)  # ("007" is 7, as a person means it; Python's parser refuses it)
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
        kept = []
        for c in text:
            try:
                tokenizer.encode(c)
                kept.append(c)
            except ValueError:
                pass
        return list(tokenizer.encode("".join(kept))) if kept else []


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
        return cls(tool_function(r.tool), tokenizer, r.tool_open, r.tool_close, r.tool_output, r.tool_calls,
                   r.tool_timeout, r.tool)

    def reset(self) -> None:
        self.calls = self.errors = 0
        self._made.clear()

    def call(self, text: str) -> str:
        """The tool's output for the call `text`: its result, or "error: ..." when it raises, returns
        something other than text, or runs past the timeout (a thread of its own, left behind)."""
        box: dict = {}

        def run():
            try:
                box["out"] = self.fn(text)
            except Exception as e:  # (one's own tool: anything it raises is given to the model)
                box["err"] = e

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            return self._error(text, "timeout", f"ran past rl.tool_timeout={self.timeout} s")
        if "err" in box:
            e = box["err"]
            shown = str(e) if isinstance(e, CalculatorError) else f"{type(e).__name__}: {e}"
            return self._error(text, shown, f"raised {type(e).__name__}: {e}")
        if not isinstance(box.get("out"), str):
            return self._error(text, "no text", f"returned {box.get('out')!r}, not text")
        return box["out"]

    def _error(self, text: str, shown: str, said: str) -> str:
        self.errors += 1
        if self.said < SAID:
            self.said += 1
            more = " (further ones are counted in rl/tool_errors)" if self.said == SAID else ""
            reads = self.tokenizer.decode(encodable(self.tokenizer, self.output.replace("{}", f"error: {shown}")))
            print(f"rl.tool={self.name} on {text!r} {said}; the model reads {reads!r}{more}", file=sys.stderr)
        return f"error: {shown}"

    def inject(self, request) -> Optional[List[int]]:
        """The engine's hook: when the request's text since its last call ends with the close mark
        after an open one, the tool's output as tokens; else None."""
        made, start = self._made.get(request.ident, (0, 0))
        if made >= self.max_calls:
            return None
        text = self.tokenizer.decode(request.tokens[start:])
        if not text.endswith(self.close):
            return None
        at = text.rfind(self.open, 0, len(text) - len(self.close))
        if at < 0:
            return None
        self.calls += 1
        result = self.call(text[at + len(self.open): len(text) - len(self.close)])
        out = encodable(self.tokenizer, self.output.replace("{}", result))
        self._made[request.ident] = (made + 1, len(request.tokens) + len(out))  # (the next call's text starts after)
        return out
