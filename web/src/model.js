// spmdgpt's transformer in jax-js: the computation of spmdgpt.model.forward (pre-norm blocks,
// LayerNorm or RMSNorm, fused QKV with rotate-half RoPE and optional QK-norm, GELU (tanh),
// ReLU² or SwiGLU MLP, tied or untied unembedding, optional logit soft-cap), for one sequence,
// with a KV cache.
//
// jax-js arrays are reference-counted: every function call consumes its array arguments, so a
// value used again later is passed as `x.ref`. Parameters live for the page's lifetime (always
// passed as `.ref`); every intermediate is consumed exactly once, so the decode loop neither
// frees a parameter nor leaks (the Node test checks every parameter's refCount after decoding).

import { jit, nn, numpy as np } from "@jax-js/jax";

const NEG = -1e30; // additive mask of a key a query may not see (finite: exp underflows to 0)

function toFloat32(t) {
  return t.data instanceof Float32Array ? t.data : Float32Array.from(t.data, Number);
}

/** The model's parameters as jax-js arrays, from a safetensors file parsed by
 * @jax-js/loaders (`tensors`: name -> {dtype, shape, data}) and the exported config.json. Stacked
 * [L, ...] block tensors are split into one set of arrays per layer; matrices are reshaped to
 * 2-D ([in, out]) for plain matmuls. */
export function loadModel(config, tensors) {
  const c = config;
  const [L, D, N, H, F] = [c.num_layers, c.d_model, c.num_heads, c.head_dim, c.mlp_hidden];
  const get = (name) => {
    const t = tensors[name];
    if (!t) throw new Error(`weights: tensor ${name} is missing`);
    return toFloat32(t);
  };
  const has = (name) => name in tensors;
  const whole = (name, shape) => np.array(get(name), { shape });
  const layerOf = (name, shape) => {
    const data = get(name);
    const n = data.length / L;
    return (l) => np.array(data.subarray(l * n, (l + 1) * n), { shape });
  };
  const opt = (name, shape) => (has(name) ? layerOf(name, shape) : () => null);
  const parts = {
    ln1: layerOf("blocks.ln1.scale", [D]), ln1b: opt("blocks.ln1.bias", [D]),
    wqkv: layerOf("blocks.w_qkv", [D, 3 * N * H]), bqkv: opt("blocks.b_qkv", [3 * N * H]),
    wo: layerOf("blocks.w_o", [N * H, D]), bo: opt("blocks.b_o", [D]),
    ln2: layerOf("blocks.ln2.scale", [D]), ln2b: opt("blocks.ln2.bias", [D]),
    wup: layerOf("blocks.w_up", [D, F]), bup: opt("blocks.b_up", [F]),
    wgate: opt("blocks.w_gate", [D, F]),
    wdown: layerOf("blocks.w_down", [F, D]), bdown: opt("blocks.b_down", [D]),
  };
  const dropNull = (o) => Object.fromEntries(Object.entries(o).filter(([, a]) => a !== null));
  const layers = [];
  for (let l = 0; l < L; l++) layers.push(dropNull(Object.fromEntries(Object.entries(parts).map(([k, f]) => [k, f(l)]))));
  const V = c.vocab_size;
  const params = dropNull({
    embed: whole("embed", [V, D]),
    unembed: has("unembed") ? whole("unembed", [D, V]) : null,
    lnf: whole("ln_f.scale", [D]),
    lnfb: has("ln_f.bias") ? whole("ln_f.bias", [D]) : null,
    layers,
  });
  return { config: c, params, step: decodeStep(c) };
}

/** Every array the model holds (to dispose of it, or to check refcounts in a test). */
export function modelArrays(model) {
  const { layers, ...top } = model.params;
  return [...Object.values(top), ...layers.flatMap((p) => Object.values(p))];
}

/** The parameters again, each with one more reference (what a jitted call consumes). */
function paramRefs(params) {
  const { layers, ...top } = params;
  const ref = (o) => Object.fromEntries(Object.entries(o).map(([k, a]) => [k, a.ref]));
  return { ...ref(top), layers: layers.map(ref) };
}

function norm(c, scale, bias, x) {
  // LayerNorm or RMSNorm over the last axis: x [t, D]
  if (c.norm === "layernorm") x = x.ref.sub(np.mean(x, -1, { keepdims: true }));
  const inv = np.reciprocal(np.sqrt(np.mean(np.square(x.ref), -1, { keepdims: true }).add(c.norm_eps)));
  let y = x.mul(inv).mul(scale.ref);
  if (bias) y = y.add(bias.ref);
  return y;
}

function rmsNormalize(x, eps) {
  const inv = np.reciprocal(np.sqrt(np.mean(np.square(x.ref), -1, { keepdims: true }).add(eps)));
  return x.mul(inv);
}

/** cos and sin tables [t, 1, H] of rotate-half RoPE at positions start..start+t-1 (computed in
 * float64 on the host and rounded, as close to JAX's float32 angles as float32 allows). */
function ropeTables(c, start, t) {
  const H = c.head_dim;
  const half = H / 2;
  const cos = new Float32Array(t * H);
  const sin = new Float32Array(t * H);
  for (let i = 0; i < t; i++) {
    for (let j = 0; j < half; j++) {
      const invFreq = Math.fround(Math.pow(c.rope_theta, -j / half));
      const a = Math.fround((start + i) * invFreq);
      const [co, si] = [Math.cos(a), Math.sin(a)];
      cos[i * H + j] = co;
      cos[i * H + half + j] = co;
      sin[i * H + j] = -si;
      sin[i * H + half + j] = si;
    }
  }
  return [np.array(cos, { shape: [t, 1, H] }), np.array(sin, { shape: [t, 1, H] })];
}

function rope(x, cos, sin) {
  // x [t, N, H]: x * cos + (x2, x1) * sin
  const [x1, x2] = np.split(x.ref, 2, -1);
  const swapped = np.concatenate([x2, x1], -1);
  return x.mul(cos).add(swapped.mul(sin));
}

function mlp(c, p, x) {
  let h = np.matmul(x.ref, p.wup.ref);
  if (p.bup) h = h.add(p.bup.ref);
  if (c.mlp === "swiglu") h = nn.silu(np.matmul(x, p.wgate.ref)).mul(h);
  else {
    x.dispose();
    h = c.mlp === "relu2" ? np.square(nn.relu(h)) : nn.gelu(h, { approximate: true });
  }
  let out = np.matmul(h, p.wdown.ref);
  if (p.bdown) out = out.add(p.bdown.ref);
  return out;
}

/** Causal attention of q [N, t, H] over the layer's cache extended by k, v [N, t, H] (the
 * queries' own keys): [o [N, t, H], the new cache's k, v]. `bias` [1, t, S] is 0 where a query
 * may see a key, NEG elsewhere. Eager path: the cache grows by concatenation. */
function growingAttention(cache, bias) {
  return (q, k, v) => {
    const kAll = cache ? np.concatenate([cache[0], k], 1) : k; // [N, start + t, H]
    const vAll = cache ? np.concatenate([cache[1], v], 1) : v;
    return [attend(q, kAll.ref, vAll.ref, bias), kAll, vAll];
  };
}

/** The same with a cache of fixed capacity C = max_seq_len (one new token, written where
 * `onehot` [1, C, 1] is 1): every decode step has the same shapes, so it is one jitted program. */
function fixedAttention(cache, onehot, bias) {
  return (q, k, v) => {
    const keep = onehot.ref.mul(-1).add(1);
    const kAll = cache[0].mul(keep.ref).add(k.mul(onehot.ref));
    const vAll = cache[1].mul(keep).add(v.mul(onehot));
    return [attend(q, kAll.ref, vAll.ref, bias), kAll, vAll];
  };
}

function attend(q, k, v, bias) {
  // (batched matmuls rather than einsum: jax-js's einsum parser needs iterator helpers, which
  // Node 20 lacks)
  const scores = np.matmul(q, k.transpose([0, 2, 1])).mul(1 / Math.sqrt(q.shape[2])).add(bias);
  return np.matmul(nn.softmax(scores, -1), v);
}

/** One block on x [t, D]: returns [x, k, v] (the layer's new cache, from `attention`). */
function block(c, p, x, rot, attention) {
  const [t, N, H] = [x.shape[0], c.num_heads, c.head_dim];
  const h = norm(c, p.ln1, p.ln1b, x.ref);
  let qkv = np.matmul(h, p.wqkv.ref);
  if (p.bqkv) qkv = qkv.add(p.bqkv.ref);
  const [qkvq, qkvk, qkvv] = np.split(qkv.reshape([t, 3, N, H]), 3, 1);
  let q = qkvq.reshape([t, N, H]);
  let k = qkvk.reshape([t, N, H]);
  const v = qkvv.reshape([t, N, H]).transpose([1, 0, 2]);
  if (c.qk_norm) {
    q = rmsNormalize(q, c.norm_eps);
    k = rmsNormalize(k, c.norm_eps);
  }
  q = rope(q, rot[0].ref, rot[1].ref).transpose([1, 0, 2]); // [N, t, H]
  k = rope(k, rot[0].ref, rot[1].ref).transpose([1, 0, 2]);
  const [o, kAll, vAll] = attention(q, k, v);
  let a = np.matmul(o.transpose([1, 0, 2]).reshape([t, N * H]), p.wo.ref);
  if (p.bo) a = a.add(p.bo.ref);
  x = x.add(a);
  x = x.ref.add(mlp(c, p, norm(c, p.ln2, p.ln2b, x)));
  return [x, kAll, vAll];
}

/** Embedding, the blocks (attention by `attentionOf(layer)`), final norm and unembedding:
 * ids [t] -> [logits [t, V], per layer [k, v]]. The same code runs eagerly and under jit. */
function run(c, params, ids, rot, attentionOf) {
  let x = np.take(params.embed.ref, ids, 0); // [t, D]
  const next = [];
  for (let l = 0; l < c.num_layers; l++) {
    const [y, k, v] = block(c, params.layers[l], x, rot, attentionOf(l));
    x = y;
    next.push([k, v]);
  }
  x = norm(c, params.lnf, params.lnfb, x);
  let logits = np.matmul(x, params.unembed ? params.unembed.ref : params.embed.ref.transpose());
  if (c.logit_softcap) logits = np.tanh(logits.mul(1 / c.logit_softcap)).mul(c.logit_softcap);
  return [logits, next];
}

/** The jitted decode step on a fixed-capacity cache: one token in, its logits [1, V] and the
 * cache with its keys and values written at the position `onehot` marks. */
function decodeStep(c) {
  return jit((params, cache, ids, onehot, bias, cos, sin) => {
    const out = run(c, params, ids, [cos, sin], (l) => fixedAttention(cache[l], onehot.ref, bias.ref));
    for (const a of [onehot, bias, cos, sin]) a.dispose();
    return out;
  });
}

/** tokens (plain numbers) at positions start..start+t-1 -> [logits [t, V] (a jax-js array the
 * caller consumes), the new cache]. `cache`: null (an empty prompt) or the previous call's,
 * {layers: per layer [k, v], length: start, fixed}; it is consumed. A growing cache ([N, start,
 * H] per layer) takes any number of tokens eagerly; a fixed one (`fixedCache`) takes one token
 * per call through the jitted decode step. */
export function forward(model, tokens, cache) {
  const c = model.config;
  const t = tokens.length;
  const start = cache ? cache.length : 0;
  if (start + t > c.max_seq_len) throw new Error(`context ${start + t} exceeds max_seq_len ${c.max_seq_len}`);
  const ids = np.array(Int32Array.from(tokens), { shape: [t], dtype: np.int32 });
  const rot = ropeTables(c, start, t);
  if (cache && cache.fixed) {
    if (t !== 1) throw new Error("a fixed-capacity cache takes one token per step");
    const C = c.max_seq_len;
    const hot = new Float32Array(C);
    hot[start] = 1;
    const m = new Float32Array(C).fill(NEG, start + 1); // the new token sees keys 0..start
    const [logits, layers] = model.step(paramRefs(model.params), cache.layers, ids, np.array(hot, { shape: [1, C, 1] }),
      np.array(m, { shape: [1, 1, C] }), rot[0], rot[1]);
    return [logits, { layers, length: start + 1, fixed: true }];
  }
  const m = new Float32Array(t * (start + t)); // query i sees keys 0..start+i
  for (let i = 0; i < t; i++) for (let j = start + i + 1; j < start + t; j++) m[i * (start + t) + j] = NEG;
  const bias = np.array(m, { shape: [1, t, start + t] });
  const [logits, layers] = run(c, model.params, ids, rot,
    (l) => growingAttention(cache ? cache.layers[l] : null, bias.ref));
  for (const a of [...rot, bias]) a.dispose();
  return [logits, { layers, length: start + t, fixed: false }];
}

/** A growing cache moved into fixed-capacity buffers [N, max_seq_len, H] (zeros past its
 * length), for the jitted decode steps. The growing cache is consumed. */
export function fixedCache(model, cache) {
  const c = model.config;
  const pad = [c.num_heads, c.max_seq_len - cache.length, c.head_dim];
  const grow = (a) => np.concatenate([a, np.zeros(pad)], 1);
  return { layers: cache.layers.map(([k, v]) => [grow(k), grow(v)]), length: cache.length, fixed: true };
}

/** Dispose of a cache (when a generation ends). */
export function disposeCache(cache) {
  if (cache) for (const [k, v] of cache.layers) (k.dispose(), v.dispose());
}
