// The page of `spmdgpt export format=web` (index.html calls mountPage): a prompt, sampling
// controls, the continuation streamed as it is generated, tokens/s and the backend in use.
// Everything is fetched from the page's own folder: no server beyond static files.
// For tests, `window.spmdgpt` exposes the loaded model: {backend, config, logits(ids), greedy(ids, n)}.

import { generate, promptLogits } from "./generate.js";

const $ = (id) => document.getElementById(id);

async function fetchBytes(name) {
  const resp = await fetch(name);
  if (!resp.ok) throw new Error(`${name}: HTTP ${resp.status}`);
  return new Uint8Array(await resp.arrayBuffer());
}

function number(id) {
  return Number($(id).value);
}

export async function mountPage({ startBackend, loadExport }) {
  const status = $("status");
  try {
    const prefer = new URLSearchParams(location.search).get("backend") || undefined;
    const backend = await startBackend(prefer);
    status.textContent = `loading the model (${backend})...`;
    const { config, tokenizer, model } = await loadExport(fetchBytes);
    $("backend").textContent = backend;
    $("model").textContent = `${config.num_layers} layers x ${config.d_model}, ${config.num_heads} heads, ` +
      `vocabulary ${config.vocab_size}, context ${config.max_seq_len}, ${config.dtype}`;
    status.textContent = "ready";
    const run = $("generate");
    run.disabled = false;
    run.onclick = async () => {
      run.disabled = true;
      const out = $("output");
      out.textContent = "";
      try {
        const prompt = tokenizer.encode($("prompt").value.replaceAll("\\n", "\n"));
        const opts = { maxNewTokens: number("max_new_tokens"), temperature: number("temperature"),
          topK: number("top_k"), topP: number("top_p"), seed: number("seed"), eosId: tokenizer.eosId };
        const ids = [];
        const t0 = performance.now();
        for await (const tok of generate(model, prompt, opts)) {
          ids.push(tok);
          out.textContent = tokenizer.decode(ids);
          const s = (performance.now() - t0) / 1000;
          $("speed").textContent = `${ids.length} tokens, ${(ids.length / s).toFixed(1)} tokens/s`;
        }
        status.textContent = "done";
      } catch (e) {
        status.textContent = `error: ${e.message}`;
        console.error(e);
      } finally {
        run.disabled = false;
      }
    };
    window.spmdgpt = {
      backend, config,
      logits: async (ids) => Array.from(await promptLogits(model, ids)),
      greedy: async (ids, n) => {
        const out = [];
        const t0 = performance.now();
        for await (const tok of generate(model, ids, { maxNewTokens: n, temperature: 0 }))
          out.push(tok);
        return { ids: out, seconds: (performance.now() - t0) / 1000 };
      },
      encode: (text) => tokenizer.encode(text),
      decode: (ids) => tokenizer.decode(ids),
    };
  } catch (e) {
    status.textContent = `error: ${e.message}`;
    console.error(e);
    throw e;
  }
}
