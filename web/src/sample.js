// Choosing the next token from float32 logits on the host, as spmdgpt.generate.sample_tokens
// does: ids at or above the tokenizer's vocabulary (padding rows) are never chosen; temperature
// 0 is the argmax (the lowest id on ties, like jnp.argmax); otherwise top-k, then top-p (the
// smallest set of most likely tokens whose probability reaches top_p), then a draw from the
// softmax at that temperature. The random stream is the page's own (a seeded mulberry32), so
// sampled text differs from JAX's; greedy text is the same token for token.

/** A seeded uniform [0, 1) generator (mulberry32). */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function argmax(logits, limit) {
  let best = 0;
  for (let i = 1; i < limit; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

/** One token id from `logits` (a Float32Array of the vocabulary). */
export function chooseToken(logits, { temperature = 0.8, topK = 0, topP = 1.0, vocabLimit, random }) {
  const limit = Math.min(vocabLimit ?? logits.length, logits.length);
  if (!(temperature > 0)) return argmax(logits, limit);
  let ids = Array.from({ length: limit }, (_, i) => i).sort((a, b) => logits[b] - logits[a] || a - b);
  if (topK > 0 && topK < limit) {
    const kth = logits[ids[topK - 1]];
    ids = ids.filter((i) => logits[i] >= kth);
  }
  const top = logits[ids[0]];
  let probs = ids.map((i) => Math.exp((logits[i] - top) / temperature));
  const total = probs.reduce((s, p) => s + p, 0);
  probs = probs.map((p) => p / total);
  if (topP < 1) {
    let before = 0;
    let keep = 0;
    while (keep < probs.length && before < topP) before += probs[keep++];
    ids = ids.slice(0, keep);
    probs = probs.slice(0, keep);
    const kept = probs.reduce((s, p) => s + p, 0);
    probs = probs.map((p) => p / kept);
  }
  let u = random();
  for (let j = 0; j < ids.length; j++) {
    u -= probs[j];
    if (u < 0) return ids[j];
  }
  return ids[ids.length - 1];
}
