// Node side of tests/test_web.py: loads an exported folder with the shipped bundle on jax-js's
// WebAssembly backend and prints, as one JSON line, the logits of a prompt and a greedy
// continuation, the logits of `sequence` computed through the KV cache as generation uses it
// (its first `prefill` tokens in one eager pass, then one token per jitted decode step), and the
// page tokenizer's ids of a text.
//   node tests/web_parity.mjs <folder> '{"prompt": [ids], "new_tokens": n, "sequence": [ids], "prefill": k, "text": "..."}'
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [folder, request] = process.argv.slice(2);
const { prompt, new_tokens: n, sequence, prefill, text } = JSON.parse(request);
const web = await import(pathToFileURL(join(folder, "spmdgpt-web.js")).href);
const backend = await web.startBackend("wasm");
const { tokenizer, model } = await web.loadExport(async (name) => new Uint8Array(await readFile(join(folder, name))));
const logits = Array.from(await web.promptLogits(model, prompt));
const greedy = [];
const t0 = performance.now();
for await (const tok of web.generate(model, prompt, { maxNewTokens: n, temperature: 0 }))
  greedy.push(tok);
const seconds = (performance.now() - t0) / 1000;
const refCounts = web.modelArrays(model).map((a) => a.refCount);
const encoded = tokenizer.encode(text);
let [out, cache] = web.forward(model, sequence.slice(0, prefill), null);
const cached = Array.from(await out.data());
cache = web.fixedCache(model, cache);
for (const tok of sequence.slice(prefill)) {
  [out, cache] = web.forward(model, [tok], cache);
  cached.push(...(await out.data()));
}
web.disposeCache(cache);
console.log(JSON.stringify({ backend, logits, greedy, seconds, refCounts, encoded, cached, decoded: tokenizer.decode(greedy) }));
