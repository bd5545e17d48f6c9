// The exported run's tokenizer (tokenizer.json written by `spmdgpt export format=web`):
// - {"kind": "char", "chars": "...", "eos_id": n | null}: one id per character (the ids of
//   spmdgpt.data.CharTokenizer); the end-of-text id decodes to nothing.
// - {"kind": "bpe", "ranks": "<file>", "pattern": "<regex>", "eos_id": n, "special": {...}}:
//   tiktoken-style byte-pair encoding (GPT-2's r50k_base) by @jax-js/loaders' BpeEncoding, the
//   merge ranks read from the exported `.tiktoken` file (base64 token, rank per line).

import { tokenizers } from "@jax-js/loaders";

class CharTokenizer {
  constructor(spec) {
    this.chars = [...spec.chars];
    this.eosId = spec.eos_id ?? null;
    this.vocabSize = this.chars.length + (this.eosId === null ? 0 : 1);
    this.index = new Map(this.chars.map((c, i) => [c, i]));
  }

  encode(text) {
    return [...text].map((c) => {
      const id = this.index.get(c);
      if (id === undefined) throw new Error(`character ${JSON.stringify(c)} is not in the vocabulary`);
      return id;
    });
  }

  decode(ids) {
    return ids.map((i) => (i < this.chars.length ? this.chars[i] : i === this.eosId ? "" : "\ufffd")).join("");
  }
}

function hex(bytes) {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

/** Merge ranks of a `.tiktoken` file's text: "base64 rank" per line -> Map(hex bytes -> rank). */
export function parseRanks(text) {
  const ranks = new Map();
  for (const line of text.split("\n")) {
    if (!line) continue;
    const [b64, rank] = line.split(" ");
    const bin = atob(b64);
    ranks.set(hex(Uint8Array.from(bin, (ch) => ch.charCodeAt(0))), Number(rank));
  }
  return ranks;
}

class BpeTokenizer {
  constructor(spec, ranksText) {
    this.eosId = spec.eos_id ?? null;
    this.enc = new tokenizers.BpeEncoding(parseRanks(ranksText), spec.special ?? {}, new RegExp(spec.pattern, "gu"));
    this.vocabSize = spec.vocab_size;
  }

  encode(text) {
    return this.enc.encode(text);
  }

  decode(ids) {
    return this.enc.decode(ids);
  }

  /** Bytes of ids (a stream of tokens may split a UTF-8 character). */
  decodeBytes(ids) {
    return this.enc.decodeBytes(ids);
  }
}

/** A tokenizer from its spec; `readText(name)` returns a file of the export as text (BPE ranks). */
export async function loadTokenizer(spec, readText) {
  if (spec.kind === "char") return new CharTokenizer(spec);
  if (spec.kind === "bpe") return new BpeTokenizer(spec, await readText(spec.ranks));
  throw new Error(`tokenizer.json: unknown kind ${JSON.stringify(spec.kind)}`);
}
