// Generation with the KV cache: the prompt in one eager forward pass (prefill), then one token
// per step through the jitted decode step, each step's logits read back to the host to choose
// the next token (spmdgpt sample's loop, for one sequence).

import { disposeCache, fixedCache, forward } from "./model.js";
import { chooseToken, rng } from "./sample.js";

/** The float32 logits of the last position of `logits` [t, V] (consumed). */
async function lastRow(logits) {
  const [t, V] = logits.shape;
  const data = await logits.data();
  return data.subarray((t - 1) * V, t * V);
}

/** Yields new token ids one at a time: up to `maxNewTokens`, stopping after `eosId` when given.
 * `opts`: temperature, topK, topP, seed, vocabLimit (see sample.js; default: the tokenizer's
 * vocabulary, config.json's vocab_limit). */
export async function* generate(model, promptIds, opts) {
  opts = { vocabLimit: model.config.vocab_limit, ...opts };
  const { maxNewTokens = 200, eosId = null, seed = 0 } = opts;
  const limit = model.config.max_seq_len;
  if (promptIds.length === 0) throw new Error("the prompt is empty");
  if (promptIds.length + maxNewTokens > limit) {
    throw new Error(`${promptIds.length} prompt tokens + ${maxNewTokens} new ones exceed the model's ` +
      `context of ${limit} tokens; shorten the prompt or lower max_new_tokens`);
  }
  const random = rng(seed);
  let [logits, cache] = forward(model, promptIds, null);
  cache = fixedCache(model, cache); // decode steps: one jitted program, the same shapes every step
  try {
    for (let i = 0; i < maxNewTokens; i++) {
      const tok = chooseToken(await lastRow(logits), { ...opts, random });
      logits = null;
      yield tok;
      if (tok === eosId || i === maxNewTokens - 1) break;
      [logits, cache] = forward(model, [tok], cache);
    }
  } finally {
    if (logits) logits.dispose();
    disposeCache(cache);
  }
}

/** The logits [t, V] of a whole prompt as a Float32Array (the parity tests' view). */
export async function promptLogits(model, promptIds) {
  const [logits, cache] = forward(model, promptIds, null);
  disposeCache(cache);
  return await logits.data();
}
