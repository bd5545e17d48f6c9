// spmdgpt's transformer in jax-js: the computation of spmdgpt.model.forward (pre-norm blocks,
// LayerNorm or RMSNorm, fused QKV with rotate-half RoPE and optional QK-norm, GELU (tanh),
// ReLU² or SwiGLU MLP, tied or untied unembedding, optional logit soft-cap), for one sequence,
// with a KV cache.
//
// jax-js arrays are reference-counted: every function call consumes its array arguments, so a
// value used again later is passed as `x.ref`. Parameters live for the page's lifetime (always
// passed as `.ref`); every intermediate is consumed exactly once, so the decode loop neither
// frees a parameter nor leaks (the Node test checks every parameter's refCount after decoding).

import { nn, numpy as np } from "@jax-js/jax";

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
  const layers = [];
  for (let l = 0; l < L; l++) {
    const p = {};
    for (const [k, make] of Object.entries(parts)) p[k] = make(l);
    layers.push(p);
  }
  const V = c.vocab_size;
  return {
    config: c,
    embed: whole("embed", [V, D]),
    unembed: has("unembed") ? whole("unembed", [D, V]) : null,
    lnf: whole("ln_f.scale", [D]),
    lnfb: has("ln_f.bias") ? whole("ln_f.bias", [D]) : null,
    layers,
  };
}

/** Every array the model holds (to dispose of it, or to count live arrays in a test). */
export function modelArrays(model) {
  const out = [model.embed, model.unembed, model.lnf, model.lnfb];
  for (const p of model.layers) out.push(...Object.values(p));
  return out.filter((a) => a !== null);
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

function rope(x, cos, sin, half) {
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

/** One block on x [t, D] at positions start..: returns [x, k, v] with this layer's cache
 * extended by the t new keys and values ([N, start + t, H]). */
function block(c, p, x, cache, start, rot, mask) {
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
  const kAll = cache ? np.concatenate([cache[0], k], 1) : k; // [N, start + t, H]
  const vAll = cache ? np.concatenate([cache[1], v], 1) : v;
  // (batched matmuls rather than einsum: jax-js's einsum parser needs iterator helpers, which
  // Node 20 lacks)
  const scores = np.matmul(q, kAll.ref.transpose([0, 2, 1])).mul(1 / Math.sqrt(H)).add(mask.ref);
  const probs = nn.softmax(scores, -1);
  const o = np.matmul(probs, vAll.ref).transpose([1, 0, 2]).reshape([t, N * H]);
  let a = np.matmul(o, p.wo.ref);
  if (p.bo) a = a.add(p.bo.ref);
  x = x.add(a);
  x = x.ref.add(mlp(c, p, norm(c, p.ln2, p.ln2b, x)));
  return [x, kAll, vAll];
}

/** tokens (plain numbers) at positions start..start+t-1 -> [logits [t, V] (a jax-js array the
 * caller consumes), the new cache]. `cache`: null (an empty prompt) or the previous call's,
 * {layers: per layer [k, v] of shape [N, start, H], length: start}; it is consumed. */
export function forward(model, tokens, cache) {
  const c = model.config;
  const t = tokens.length;
  const start = cache ? cache.length : 0;
  if (start + t > c.max_seq_len) throw new Error(`context ${start + t} exceeds max_seq_len ${c.max_seq_len}`);
  const ids = np.array(Int32Array.from(tokens), { shape: [t], dtype: np.int32 });
  let x = np.take(model.embed.ref, ids, 0); // [t, D]
  const rot = ropeTables(c, start, t);
  const m = new Float32Array(t * (start + t)); // query i sees keys 0..start+i
  for (let i = 0; i < t; i++) for (let j = start + i + 1; j < start + t; j++) m[i * (start + t) + j] = NEG;
  const mask = np.array(m, { shape: [1, t, start + t] });
  const next = [];
  for (let l = 0; l < c.num_layers; l++) {
    const [y, k, v] = block(c, model.layers[l], x, cache ? cache.layers[l] : null, start, rot, mask);
    x = y;
    next.push([k, v]);
  }
  rot[0].dispose();
  rot[1].dispose();
  mask.dispose();
  x = norm(c, model.lnf, model.lnfb, x);
  let logits = np.matmul(x, model.unembed ? model.unembed.ref : model.embed.ref.transpose());
  if (c.logit_softcap) logits = np.tanh(logits.mul(1 / c.logit_softcap)).mul(c.logit_softcap);
  return [logits, { layers: next, length: start + t }];
}

/** Dispose of a cache (when a generation ends). */
export function disposeCache(cache) {
  if (cache) for (const [k, v] of cache.layers) (k.dispose(), v.dispose());
}
