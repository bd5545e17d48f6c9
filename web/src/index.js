// The bundle's entry (built into src/spmdgpt/web/spmdgpt-web.js by `npm run build`): the model,
// its tokenizer and generation as a library (used by the page and by the Node parity test), and
// `mountPage`, the page of `spmdgpt export format=web`.

import { init, defaultDevice } from "@jax-js/jax";
import { safetensors } from "@jax-js/loaders";

import { generate, promptLogits } from "./generate.js";
import { disposeCache, fixedCache, forward, loadModel, modelArrays } from "./model.js";
import { loadTokenizer } from "./tokenizer.js";

export { chooseToken, rng } from "./sample.js";
export { disposeCache, fixedCache, forward, generate, loadModel, loadTokenizer, modelArrays, promptLogits };

/** Start jax-js on the fastest backend it finds (WebGPU, else WebAssembly); returns its name.
 * `prefer` ("wasm" | "webgpu") forces one when available (only it is started). */
export async function startBackend(prefer) {
  const devices = prefer ? await init(prefer) : await init("webgpu", "wasm");
  const name = prefer && devices.includes(prefer) ? prefer : devices.includes("webgpu") ? "webgpu" : "wasm";
  defaultDevice(name);
  return name;
}

/** An exported folder: `read(name)` returns a file's bytes (fetch in a page, fs in Node). */
export async function loadExport(read) {
  const text = async (name) => new TextDecoder().decode(await read(name));
  const config = JSON.parse(await text("config.json"));
  const tokenizer = await loadTokenizer(JSON.parse(await text("tokenizer.json")), text);
  const weights = safetensors.parse(await read("model.safetensors"));
  return { config, tokenizer, model: loadModel(config, weights.tensors) };
}

export { mountPage } from "./page.js";
