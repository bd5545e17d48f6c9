"""Structured outputs: a request's answer held to a JSON schema (or any JSON, a regex, a Lark grammar)
by a token mask per step, from llguidance (Microsoft's grammar engine; the `serve` extra).

A `Grammars` is made once per tokenizer: llguidance's view of the vocabulary, each id's bytes
(`token_table`). `Grammars.compile(response_format)` checks a request's format and gives its
grammar, or GrammarError naming what llguidance refused (the server answers 400). Each sequence
then carries a `Constraint` (`Request.constraint`), an llguidance matcher: before each step the
engine writes the allowed ids of the sequence's next token as a bitmask row (`fill`: bit i of
word i // 32 is id i), which the step applies to the logits before sampling (`paged.sample_rows`):
one fixed-shape program, no compile per request. After the step the sampled token is consumed
(`consume`); when the grammar is complete the mask allows only the end tokens (end of text, or
the chat template's end of turn), so the sequence ends there, and the answer parses. A
preempted sequence keeps its matcher: it goes on from the tokens it has.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from typing import List, Optional, Sequence

import numpy as np

# JSON as Python's json.dumps writes it ({"a": 1, "b": [2, 3]}), no other whitespace: one layout (a
# model that never learnt to stop would otherwise be free to write spaces until max_tokens); a
# schema's own "x-guidance" options come after these
JSON_LAYOUT = {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False}


class GrammarError(ValueError):
    """A response format the server cannot hold an answer to (its message names why)."""


def token_table(tok) -> tuple:
    """(each id's bytes, the special ids) of a spmdgpt tokenizer: a character or digit vocabulary,
    GPT-2's, a Hugging Face tokenizer.json (its bytes as llguidance reads the file), or a chat
    tokenizer over one of them (its template's special tokens after the base ids)."""
    kind = getattr(tok, "kind", None)
    if kind == "chat":
        tokens, specials = token_table(tok.base)
        extra = [s.encode() for s in tok.specials]
        return tokens + extra, specials + list(range(len(tokens), len(tokens) + len(extra)))
    if kind in ("char", "digits"):
        tokens = [c.encode() for c in tok.chars]
        if tok.eos_id is not None:
            return tokens + [b"<|endoftext|>"], [tok.eos_id]
        return tokens, []
    if kind == "gpt2":
        return [tok.token_bytes(i) for i in range(tok.eos_id)] + [b"<|endoftext|>"], [tok.eos_id]
    if kind == "hf":
        import llguidance

        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(tok.spec)
        try:
            bytes_of = llguidance.LLTokenizer(f.name).decode_bytes
        except Exception:  # (a decoder llguidance does not read, e.g. an exported character vocabulary's Fuse)
            bytes_of = None
        finally:
            os.unlink(f.name)
        # (the tokenizer's own special tokens: llguidance also flags a byte-level token of 0xff as one, and
        # gives it no bytes: those come from GPT-2's byte-to-character table)
        specials = {i for i, t in tok._tok.get_added_tokens_decoder().items() if t.special}
        tokens = [tok.token_text(i).encode() if i in specials else (bytes_of and bytes_of([i])) or _byte_level(tok, i)
                  for i in range(tok.vocab_size)]
        return tokens, sorted(specials)
    raise GrammarError(f"structured outputs need a character, GPT-2, Hugging Face or chat tokenizer, not {kind}")


@functools.cache
def _byte_chars() -> dict:
    """GPT-2's byte-level BPE: the character that stands for each byte, inverted ({character: byte})."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = [b for b in range(256) if b not in printable]
    return {**{chr(b): b for b in printable}, **{chr(256 + k): b for k, b in enumerate(extra)}}


def _byte_level(tok, i: int) -> bytes:
    """A token's bytes read from its byte-level text ("Ġthe": b" the"), else its decoded text's."""
    text, table = tok.token_text(i), _byte_chars()
    return bytes(table[c] for c in text) if text and all(c in table for c in text) else tok.decode([i]).encode()


class _Vocabulary:
    """What llguidance's TokenizerWrapper reads of a tokenizer."""

    def __init__(self, tok, tokens: List[bytes], specials: List[int], ends: Sequence[int]):
        self.tokens, self.special_token_ids = tokens, specials
        self.eos_token_id, self.bos_token_id = ends[0], None
        self._tok = tok

    def __call__(self, text) -> List[int]:
        return list(self._tok.encode(text.decode("utf-8", "replace") if isinstance(text, bytes) else text))


class Grammars:
    """llguidance's vocabulary of tokenizer `tok` (made once: 0.12 s for GPT-2's 50k ids), whose sequences end at
    `ends` (the end-of-text id; a chat reply's end of turn), and `width` the model's vocabulary
    (its padding ids are never allowed)."""

    def __init__(self, tok, ends: Sequence[int], width: int):
        import llguidance

        if not ends:
            raise GrammarError("structured outputs need an end token (this tokenizer has no end of text)")
        tokens, specials = token_table(tok)
        # (as many ids as the model's vocabulary, so that a mask is a row of the step's: the padding ids past
        # the tokenizer's are special tokens of their own, which no grammar allows)
        pad = range(len(tokens), max(width, len(tokens)))
        vocab = _Vocabulary(tok, tokens + [f"<|padding {i}|>".encode() for i in pad], specials + list(pad),
                            list(ends))
        try:
            self.tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(vocab), eos_token=list(ends))
        except Exception as e:  # (what the grammar library cannot read of a vocabulary: a 400, not a 500)
            raise GrammarError(f"structured outputs: the grammar library cannot read this tokenizer ({e})") from None
        self.words = (width + 31) // 32

    def compile(self, response_format) -> Optional[str]:
        """The grammar of an OpenAI `response_format` ({"type": "text"} or absent: None; "json_object":
        any JSON object; "json_schema": {"json_schema": {"name", "schema", "strict"}}; and llguidance's
        "regex" and "grammar" (Lark) as vLLM's structured_outputs take them), checked against the
        vocabulary; GrammarError naming the problem."""
        import llguidance

        if response_format is None:
            return None
        kinds = {"text": set(), "json_object": set(), "json_schema": {"json_schema"}, "regex": {"regex"},
                 "grammar": {"grammar"}}
        if not isinstance(response_format, dict) or not isinstance(response_format.get("type"), str):
            raise GrammarError(f"response_format must be an object with a type ({', '.join(kinds)})")
        kind = response_format["type"]
        if kind not in kinds:
            raise GrammarError(f"response_format type {kind!r} is not one of {', '.join(kinds)}")
        other = set(response_format) - {"type"} - kinds[kind]
        if other:
            raise GrammarError(f"response_format of type {kind} takes no {', '.join(sorted(other))}")
        if kind == "text":
            return None
        if kind == "json_object":
            grammar = llguidance.LLMatcher.grammar_from_json_schema({"type": "object"}, JSON_LAYOUT)
        elif kind == "json_schema":
            spec = response_format.get("json_schema")
            schema = spec.get("schema") if isinstance(spec, dict) else None
            if not isinstance(schema, dict):
                raise GrammarError("response_format.json_schema.schema must be a JSON schema (an object)")
            other = set(spec) - {"name", "description", "schema", "strict"}
            if other:
                raise GrammarError(f"response_format.json_schema takes name, description, schema and strict, not "
                                   f"{', '.join(sorted(other))}")
            try:
                grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), JSON_LAYOUT)
            except ValueError as e:
                raise GrammarError(f"response_format.json_schema.schema: {e}") from None
        elif kind in ("regex", "grammar"):
            value = response_format.get(kind)
            if not isinstance(value, str) or not value:
                raise GrammarError(f"response_format of type {kind} needs a non-empty {kind!r} text")
            grammar = (llguidance.LLMatcher.grammar_from_regex(value) if kind == "regex"
                       else llguidance.LLMatcher.grammar_from_lark(value))
        bad, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, self.tokenizer)
        if bad:  # (its first line, and the parser's own "error: ..." line below the caret where there is one)
            lines = [line.strip() for line in messages[0].splitlines() if line.strip()]
            cause = next((line for line in reversed(lines[1:]) if line.startswith("error:")), "")
            raise GrammarError(f"response_format: the grammar library refused it: {lines[0]} {cause}".rstrip())
        return grammar

    def constraint(self, grammar: str) -> "Constraint":
        return Constraint(self, grammar)


@functools.cache
def _executor():
    """llguidance's thread pool for the masks of a step's rows (one per process)."""
    import llguidance

    return llguidance.LLExecutor()


class Constraint:
    """One sequence's matcher (`Request.constraint`): the ids its next token may be, and the tokens it took."""

    def __init__(self, grammars: Grammars, grammar: str):
        import llguidance

        self.matcher = llguidance.LLMatcher(grammars.tokenizer, grammar, log_level=0)
        self.unfinished = False  # (the answer ended before the grammar was complete: `end`)
        if self.matcher.is_error():
            raise GrammarError(f"response_format: {self.matcher.get_error()}")

    def fill(self, row: np.ndarray) -> None:
        """Write the next token's allowed ids into `row` (uint32 [words]: bit i % 32 of word i // 32)."""
        Constraint.fill_rows([(self, 0)], row[None])

    @staticmethod
    def fill_rows(rows: list, allowed: np.ndarray) -> None:
        """`fill` for each (constraint, row index) of `rows` into the bitmask rows `allowed` (uint32
        [b, words]), the masks computed side by side on llguidance's threads."""
        import llguidance.numpy

        index = [k for _, k in rows]
        allowed[index] = 0  # (the words past the tokenizer's ids: the model's padding, never allowed)
        llguidance.numpy.fill_next_token_bitmask_par(_executor(), [(c.matcher, k) for c, k in rows],
                                                     allowed.view(np.int32))

    def consume(self, token: int) -> bool:
        """Take the sampled token; False when the grammar could not (the sequence should end)."""
        ok = self.matcher.consume_token(int(token))
        self.unfinished = self.unfinished or not ok
        return ok

    def end(self) -> None:
        """The sequence took an end token: `unfinished` when the grammar was not complete there (its
        mask allowed nothing else: the vocabulary cannot write what the grammar asks for next)."""
        self.unfinished = self.unfinished or not self.matcher.is_accepting()

    @property
    def finished(self) -> bool:
        """The grammar is complete (only an end token may follow) or broken."""
        return self.matcher.is_stopped() or self.matcher.is_error()
