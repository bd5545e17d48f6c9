"""Function calling, as the OpenAI Chat Completions API asks for it: `tools` offered to the model
through its chat template, `tool_choice` (auto, none, required, or one named function), and the
model's call text read back into `message.tool_calls`.

A chat template that renders `tools` writes the model's calls in one of two layouts, told apart by
the template's text (`call_format`):

- "hermes": <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Qwen 2.5/3's templates, Hermes',
  and spmdgpt's DEFAULT_TEMPLATE), after any text of the reply, several calls in a row;
- "llama3_json": the reply is {"name": ..., "parameters": {...}} (Llama 3.1-3.3's templates),
  after an optional <|python_tag|>, several calls separated by ";".

`parse` reads a reply's calls (all of them, or none: a call that does not parse leaves the whole
reply as text, as vLLM's parsers do); `sendable` says how much of a reply being streamed is text for
certain (the rest may become a call). `required` and a named function hold the reply to one valid
call by a grammar (`forced_grammar`: the structured outputs' token masks), its arguments to the
function's JSON schema, so the call parses and validates even from an untrained model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import List, Optional, Tuple

from spmdgpt.data.chat import FUNCTION_NAME as NAME
from spmdgpt.data.chat import json_object, reject_constant

CHOICES = ("none", "auto", "required")
OPEN, CLOSE, PYTHON_TAG = "<tool_call>", "</tool_call>", "<|python_tag|>"
# (json.dumps' layout, as the templates' `tojson` writes a call: see grammar.JSON_LAYOUT)
LAYOUT = {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False}
EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}  # (a function of no arguments)


class ToolError(ValueError):
    """A request's tools or tool_choice this server cannot take: (message, the field it names)."""

    def __init__(self, message: str, param: str):
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ToolUse:
    """A chat request's functions, checked: `tools` as the template takes them, `choice` (none,
    auto, required, function), `name` (the function `choice` names), the template's `format`, and
    `around`: the text a "hermes" call's JSON sits between in this template."""

    tools: tuple
    choice: str
    name: Optional[str]
    format: str
    around: Tuple[str, str] = (OPEN, CLOSE)

    @property
    def parsed(self) -> bool:
        """Whether the reply's calls are read into tool_calls (tool_choice none: the text as it is)."""
        return self.choice != "none"

    @property
    def forced(self) -> bool:
        return self.choice in ("required", "function")


def call_format(source: str) -> Optional[str]:
    """The call layout a chat template's text writes (None: neither)."""
    if OPEN in source:
        return "hermes"
    if PYTHON_TAG in source or '"parameters"' in source:
        return "llama3_json"
    return None


def _functions(tools) -> List[dict]:
    if not isinstance(tools, list) or not tools:
        raise ToolError("tools must be a non-empty list of functions "
                        '({"type": "function", "function": {"name": ..., "parameters": {...}}})', "tools")
    names = []
    for j, t in enumerate(tools):
        f = t.get("function") if isinstance(t, dict) else None
        if not isinstance(f, dict) or t.get("type") != "function":
            raise ToolError(f'tools[{j}] must be {{"type": "function", "function": {{"name": ..., ...}}}}', "tools")
        name = f.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ToolError(f"tools[{j}].function.name must be 1-64 letters, digits, _ or - (got {name!r})", "tools")
        if name in names:
            raise ToolError(f"tools[{j}].function.name {name!r} is given twice", "tools")
        other = set(f) - {"name", "description", "parameters", "strict"}
        if other:
            raise ToolError(f"tools[{j}].function takes name, description, parameters and strict, not "
                            f"{', '.join(sorted(other))}", "tools")
        parameters = f.get("parameters")
        if parameters is not None and (not isinstance(parameters, dict)
                                       or parameters.get("type", "object") != "object"):
            raise ToolError(f"tools[{j}].function.parameters must be a JSON schema of an object (the arguments; "
                            'leave it out for none): {"type": "object", "properties": {...}}', "tools")
        if f.get("description") is not None and not isinstance(f["description"], str):
            raise ToolError(f"tools[{j}].function.description must be a string", "tools")
        if f.get("strict") is not None and not isinstance(f["strict"], bool):
            raise ToolError(f"tools[{j}].function.strict must be true or false", "tools")
        names.append(name)
    return tools


def _choice(choice, names: List[str]) -> Tuple[str, Optional[str]]:
    if choice is None:
        return "auto", None
    if isinstance(choice, str) and choice in CHOICES:
        return choice, None
    f = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(f, dict) and choice.get("type") == "function" and isinstance(f.get("name"), str):
        if f["name"] not in names:
            raise ToolError(f"tool_choice names the function {f['name']!r}, which tools does not offer "
                            f"({', '.join(names)})", "tool_choice")
        return "function", f["name"]
    raise ToolError('tool_choice must be "none", "auto", "required" or {"type": "function", "function": '
                    '{"name": ...}}', "tool_choice")


def tool_use(body: dict, template, kind: str = "chat") -> Optional[ToolUse]:
    """The request's functions (None when it offers none), checked against the chat `template` (a
    `ChatTemplate`; `kind` the chat tokenizer's): ToolError naming the field."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if tools is None or tools == []:
        if choice not in (None, "none"):
            raise ToolError("tool_choice needs tools (the functions to choose from)", "tool_choice")
        return None
    if kind == "harmony":
        raise ToolError("tools are not supported for harmony chats yet", "tools")
    tools = _functions(tools)
    choice, name = _choice(choice, [t["function"]["name"] for t in tools])
    fmt = call_format(template.source)
    probe = [{"role": "user", "content": "x"}]
    if fmt is None or template.render(probe, True, tools=tools) == template.render(probe, True):
        raise ToolError("tools: this model's chat template does not offer functions to the model (it renders no "
                        "`tools`, or writes calls in a layout this server does not read)", "tools")
    around = _around(template) if fmt == "hermes" else (OPEN, CLOSE)
    return ToolUse(tuple(tools), choice, name, fmt, around)


def _around(template) -> Tuple[str, str]:
    """The text a "hermes" call's JSON object sits between, as `template` writes a call (Qwen's:
    "<tool_call>\\n" and "\\n</tool_call>"; DEFAULT_TEMPLATE's: none around it)."""
    call = {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}
    text = template.render([{"role": "user", "content": "x"},
                            {"role": "assistant", "content": "", "tool_calls": [call]}])
    start, end = text.rfind(OPEN), text.rfind(CLOSE)
    body = text[start + len(OPEN):end] if 0 <= start < end else ""
    left, right = body.find("{"), body.rfind("}")
    if left < 0 or right < left or body[left:right + 1].strip() == "" or (body[:left] + body[right + 1:]).strip():
        return OPEN, CLOSE
    return OPEN + body[:left], body[right + 1:] + CLOSE


def _dump(value) -> str:
    """JSON text of a decoded value as `json.dumps` writes it, its numbers as the model wrote them
    (decoded as Decimal: 1e400 stays 1E+400, not the Infinity a float would write, which is not JSON)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v) for v in value) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _call(obj, key: str) -> Optional[Tuple[str, str]]:
    """(name, arguments as JSON text) of a decoded call object, or None."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    arguments = obj.get(key, obj.get("arguments", {}))
    if isinstance(arguments, str):  # (some models write the arguments' JSON as a string)
        arguments = json_object(arguments, exact=True)
    if not isinstance(arguments, dict):
        return None
    return obj["name"], _dump(arguments)


def _read_calls(text: str, pos: int, key: str, opener: str, separator: str) -> Optional[List[Tuple[str, str]]]:
    """The calls written from text[pos:] to its end, each `opener` (if any), a JSON object, then
    `separator` (optional after the last: a model that stopped before </tool_call>); None when
    anything else is there or a call does not parse."""
    decoder, calls = json.JSONDecoder(parse_constant=reject_constant, parse_float=Decimal), []  # (NaN: not JSON)
    while pos < len(text):
        if not text.startswith(opener, pos):
            return None
        pos = len(text) - len(text[pos + len(opener):].lstrip())
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return None
        try:
            call = _call(obj, key)
        except RecursionError:  # (arguments nested deeper than they can be written back)
            call = None
        if call is None:
            return None
        calls.append(call)
        rest = text[pos:].lstrip()
        if rest.startswith(separator):
            rest = rest[len(separator):].lstrip()
        elif rest:
            return None
        pos = len(text) - len(rest)
    return calls


def parse(text: str, fmt: str) -> Tuple[Optional[str], List[Tuple[str, str]]]:
    """(the reply's text outside its calls, or None when there is none; its calls as (name,
    arguments JSON)), or (text, []) when it holds no call that parses."""
    if fmt == "hermes":
        first = text.find(OPEN)
        calls = _read_calls(text, first, "arguments", OPEN, CLOSE) if first >= 0 else None
        return (text[:first].strip() or None, calls) if calls else (text, [])
    body = text.strip()
    body = body[len(PYTHON_TAG):].lstrip() if body.startswith(PYTHON_TAG) else body
    calls = _read_calls(body, 0, "parameters", "", ";") if body.startswith("{") else None
    return (None, calls) if calls else (text, [])


def sendable(text: str, fmt: str) -> int:
    """How many characters of a reply being streamed are its text for certain: up to where a call
    begins or may begin (a prefix of <tool_call> at the end is held back; a Llama 3 reply that
    begins with "{" or <|python_tag|> is held whole)."""
    if fmt == "hermes":
        at = text.find(OPEN)
        if at >= 0:
            return at
        for k in range(min(len(OPEN) - 1, len(text)), 0, -1):
            if text.endswith(OPEN[:k]):
                return len(text) - k
        return len(text)
    head = text.lstrip()
    if not head or head.startswith("{") or head.startswith(PYTHON_TAG) or PYTHON_TAG.startswith(head):
        return 0
    return len(text)


def forced_grammar(use: ToolUse) -> str:
    """The Lark grammar (llguidance's, with its %json) of one call of the function tool_choice names,
    or of any offered one (required), in the template's layout, its arguments held to the function's
    parameters schema."""
    key = "parameters" if use.format == "llama3_json" else "arguments"
    schemas, defs = [], {}
    for t in use.tools:
        f = t["function"]
        if use.name is not None and f["name"] != use.name:
            continue
        # (no parameters, or {}: the API's function of no arguments, {}; a schema's $defs move to the call's
        # root, where its "#/$defs/..." references then point, as Pydantic's schemas write them)
        parameters = dict(f.get("parameters") or EMPTY)
        parameters.setdefault("additionalProperties", False)  # (the listed arguments only, as OpenAI's strict
        # function calling holds them: a schema that allows more says so)
        for name, schema in parameters.pop("$defs", {}).items():
            if defs.setdefault(name, schema) != schema:
                raise ToolError(f"tools: two functions define $defs {name!r} differently; a forced call needs each "
                                "name once", "tools")
        schemas.append({"type": "object", "properties": {"name": {"const": f["name"]}, key: parameters},
                        "required": ["name", key], "additionalProperties": False})
    schema = {**(schemas[0] if len(schemas) == 1 else {"anyOf": schemas}), **({"$defs": defs} if defs else {}),
              "x-guidance": LAYOUT}
    call = f"%json {json.dumps(schema)}"
    if use.format == "hermes":
        call = f"{json.dumps(use.around[0])} {call} {json.dumps(use.around[1])}"
    return f"start: {call}\n"


def api_calls(calls: List[Tuple[str, str]], ident) -> List[dict]:
    """The API's tool_calls of parsed calls (ident(): a new call id)."""
    return [{"id": ident(), "type": "function", "function": {"name": name, "arguments": arguments}}
            for name, arguments in calls]
