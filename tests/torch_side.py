"""The PyTorch side of the tests, run in the PyTorch environment (benchmarks/torch_env.py):
transformers and benchmarks/torch_gpt.py compute what the tests compare spmdgpt with.

A server: one JSON request per line on stdin, one JSON answer per line on the original stdout
(anything the libraries print goes to stderr). Arrays travel as .npy files named in the
request. Requests ({"op": ..., ...}):
  logits      folder, tokens, out: transformers' float32 logits of the tokens [B, T] -> out
  generate    folder, prompt, max_new_tokens: greedy ids and text of AutoTokenizer + generate
  generate_ids folder, prompts (token ids), max_new_tokens: greedy new ids of generate
  tokenize    folder, text: AutoTokenizer's ids, the decoded ids, its end-of-text id and token
  chat_template folder, conversations, add_generation_prompt[, tools]: apply_chat_template's text and ids
  make_model  kind (llama | mistral | qwen2 | qwen3 | mixtral | qwen3_moe | deepseek_v32 | ... | gemma4 |
              kimi_linear | deepseek_v4 | neox), folder, config[, tokens, out]: a random model (every weight
              perturbed) saved with save_pretrained; its logits of the tokens -> out
  torch_gpt   dims, state (a safetensors file of torch_gpt.GPT's state_dict), tokens [B, T+1],
              out: loss of the reference model; its embedding gradient -> out
  lm_eval     folder, tasks, include_path, limit: lm-evaluation-harness's HF backend on the folder
  deepseek_v4 unit (hyper | hyper_head | moe | attention | compressor), config, weights, inputs, out: one of
              transformers' DeepSeek-V4 modules (DeepseekV4HyperConnection and the decoder layer's merge of a
              branch output, DeepseekV4HyperHead, DeepseekV4SparseMoeBlock, DeepseekV4Attention of layer_types[0],
              its DeepseekV4HCACompressor or DeepseekV4CSACompressor with the indexer's picks) with
              the weights of the .npz `weights` on the arrays of the .npz `inputs`, its float32 outputs -> the
              .npz `out`
This file imports nothing of spmdgpt or JAX.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np
import torch
import transformers

ROOT = Path(__file__).resolve().parent.parent


def _model(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def _tokens(path):
    return torch.tensor(np.load(path), dtype=torch.long)


def logits(folder, tokens, out):
    with torch.no_grad():
        np.save(out, _model(folder)(_tokens(tokens)).logits.numpy())
    return {}


def generate(folder, prompt, max_new_tokens):
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    ids = tok(prompt, return_tensors="pt")["input_ids"]
    gen = _model(folder).generate(ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=0)
    return {"prompt_ids": ids.tolist(), "text": tok.decode(gen[0])}


def generate_ids(folder, prompts, max_new_tokens):
    """Greedy generation from token ids (rows of equal length), no tokenizer: the new ids, all
    max_new_tokens of them (no end-of-text token stops a row: a random model's config names one)."""
    ids = torch.tensor(prompts, dtype=torch.long)
    model = _model(folder)
    model.generation_config.eos_token_id = None
    gen = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False,
                         pad_token_id=0)
    return {"ids": gen[:, ids.shape[1]:].tolist()}


def tokenize(folder, text):
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    ids = tok(text)["input_ids"]
    return {"ids": ids, "decoded": tok.decode(ids), "eos_token_id": tok.eos_token_id,
            "eos_token": tok.convert_ids_to_tokens(tok.eos_token_id)}


def make_model(kind, folder, config, tokens=None, out=None):
    torch.manual_seed(0)
    cls = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
           "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
           "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
           "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
           "mixtral": (transformers.MixtralConfig, transformers.MixtralForCausalLM),
           "qwen3_moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM),
           "deepseek_v3": (transformers.DeepseekV3Config, transformers.DeepseekV3ForCausalLM),
           "deepseek_v32": (transformers.DeepseekV32Config, transformers.DeepseekV32ForCausalLM),
           "gemma3": (transformers.Gemma3TextConfig, transformers.Gemma3ForCausalLM),
           "qwen3_5": (transformers.Qwen3_5TextConfig, transformers.Qwen3_5ForCausalLM),
           "gpt_oss": (transformers.GptOssConfig, transformers.GptOssForCausalLM),
           "qwen3_next": (transformers.Qwen3NextConfig, transformers.Qwen3NextForCausalLM),
           "qwen3_5_moe": (transformers.Qwen3_5MoeTextConfig, transformers.Qwen3_5MoeForCausalLM),
           "qwen3_5_vl": (transformers.Qwen3_5Config, transformers.Qwen3_5ForConditionalGeneration),
           "qwen3_5_moe_vl": (transformers.Qwen3_5MoeConfig, transformers.Qwen3_5MoeForConditionalGeneration),
           "gemma3_vl": (transformers.Gemma3Config, transformers.Gemma3ForConditionalGeneration),
           "gemma4": (transformers.Gemma4TextConfig, transformers.Gemma4ForCausalLM),
           "gemma4_vl": (transformers.Gemma4Config, transformers.Gemma4ForConditionalGeneration),
           "olmo2": (transformers.Olmo2Config, transformers.Olmo2ForCausalLM),
           "olmo3": (transformers.Olmo3Config, transformers.Olmo3ForCausalLM),
           "nanochat": (transformers.NanoChatConfig, transformers.NanoChatForCausalLM),
           "llama4": (transformers.Llama4TextConfig, transformers.Llama4ForCausalLM),
           "llama4_vl": (transformers.Llama4Config, transformers.Llama4ForConditionalGeneration),
           "kimi_linear": (transformers.KimiLinearConfig, transformers.KimiLinearForCausalLM),
           "deepseek_v4": (transformers.DeepseekV4Config, transformers.DeepseekV4ForCausalLM),
           "neox": (transformers.GPTNeoXConfig, transformers.GPTNeoXForCausalLM)}[kind]
    model = cls[1](cls[0](**config))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        for name, b in model.named_buffers():  # (DeepSeek's router bias: a buffer, zeros at init; Gemma 4's
            if name.endswith(("e_score_correction_bias", "layer_scalar")):  # layer scalars, ones)
                b.add_(torch.randn_like(b) * 0.1)
            if name.endswith("tid2eid"):  # (DeepSeek-V4's hash table, zeros at init: each id's k distinct experts)
                b.copy_(torch.stack([torch.randperm(model.config.n_routed_experts)[:b.shape[1]] for _ in b]))
        model.save_pretrained(folder)
        if tokens is not None:
            np.save(out, model.eval()(_tokens(tokens)).logits.numpy())
    return {}


def mxfp4(blocks, scales, out):
    """transformers' own dequantization of an MXFP4 tensor (gpt-oss's experts), in float32."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    w = convert_moe_packed_tensors(torch.from_numpy(np.load(blocks)), torch.from_numpy(np.load(scales)),
                                   dtype=torch.float32)
    np.save(out, w.numpy())
    return {}


def torch_gpt(dims, state, tokens, out):
    from safetensors.torch import load_file

    spec = importlib.util.spec_from_file_location("torch_gpt", ROOT / "benchmarks" / "torch_gpt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.GPT(dims["vocab"], dims["d"], dims["heads"], dims["layers"], dims["seq"])
    model.load_state_dict(load_file(state), strict=True)  # every parameter given, no other name
    x = _tokens(tokens)
    loss = model(x[:, :-1].contiguous(), x[:, 1:].contiguous())
    loss.backward()
    np.save(out, model.embed.weight.grad.numpy())
    return {"loss": float(loss.detach())}


def chat_template(folder, conversations, add_generation_prompt=False, tools=None):
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    kw = {"add_generation_prompt": add_generation_prompt, **({"tools": tools} if tools is not None else {})}
    return {"texts": [tok.apply_chat_template(c, tokenize=False, **kw) for c in conversations],
            "ids": [list(map(int, tok.apply_chat_template(c, tokenize=True, return_dict=True, **kw)["input_ids"]))
                    for c in conversations]}


def lm_eval(folder, tasks, include_path, limit):
    """lm-evaluation-harness's own Hugging Face backend (HFLM, float32, CPU) on the folder: each
    task's metrics and each document's answers (resps: [[log-likelihood, greedy]] per choice,
    [log-likelihood] per text, [generation])."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import lm_eval as harness
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    from lm_eval.utils import handle_non_serializable

    model = HFLM(pretrained=folder, dtype="float32", device="cpu", batch_size=8)
    out = harness.simple_evaluate(model=model, tasks=tasks, limit=limit, log_samples=True, bootstrap_iters=0,
                                  task_manager=TaskManager(include_path=include_path, include_defaults=False))
    answers = {task: {d["doc_id"]: d["resps"] for d in docs} for task, docs in out["samples"].items()}
    return json.loads(json.dumps({"results": out["results"], "answers": answers}, default=handle_non_serializable))


def deepseek_v4(unit, config, weights, inputs, out):
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as v4

    cfg = v4.DeepseekV4Config(**config)
    given = {k: torch.from_numpy(v) for k, v in np.load(weights).items()}
    x = {k: torch.from_numpy(v) for k, v in np.load(inputs).items()}
    if unit == "hyper":
        module = v4.DeepseekV4HyperConnection(cfg)
    elif unit == "hyper_head":
        module = v4.DeepseekV4HyperHead(cfg)
    elif unit == "attention":
        cfg._attn_implementation = "eager"
        module = v4.DeepseekV4Attention(cfg, 0)
    elif unit == "compressor":  # (layer 0's: DeepseekV4HCACompressor or DeepseekV4CSACompressor with its indexer)
        module = v4.COMPRESSOR_CLASSES[cfg.layer_types[0]](cfg)
    else:
        module = v4.DeepseekV4SparseMoeBlock(cfg, int(x.pop("layer")))
    state = module.state_dict()
    if set(state) != set(given):
        raise ValueError(f"weights {sorted(given)} for a module of {sorted(state)}")
    module.load_state_dict(given)
    with torch.no_grad():
        if unit == "hyper":  # (the decoder layer's merge: post_k out + sum_j comb_jk streams_j)
            post, comb, collapsed = module(x["streams"])
            merged = post.unsqueeze(-1) * x["branch"].unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2),
                                                                                  x["streams"])
            outs = {"post": post, "comb": comb, "collapsed": collapsed, "merged": merged}
        elif unit == "hyper_head":
            outs = {"folded": module(x["streams"])}
        elif unit == "attention":  # (its window's causal mask; the "main" RoPE, a compressed layer's "compress")
            hidden = x["hidden"]
            b, t = hidden.shape[:2]
            pos = torch.arange(t)[None].expand(b, -1)
            i, j = torch.arange(t)[:, None], torch.arange(t)[None]
            allowed = (j <= i) & (j > i - cfg.sliding_window)
            mask = torch.where(allowed, 0.0, float("-inf"))[None, None].expand(b, 1, t, t)
            rotary = v4.DeepseekV4RotaryEmbedding(cfg)
            ropes = {kind: rotary(hidden, pos, layer_type=kind) for kind in ("main", "compress")}
            outs = {"out": module(hidden, ropes, pos, mask)[0]}
        elif unit == "compressor":  # (no cache: every whole window; the entries, which each query sees, the indexer's)
            hidden, q_residual = x["hidden"], x["q_residual"]
            pos = torch.arange(hidden.shape[1])[None].expand(hidden.shape[0], -1)
            entries, bias = module(hidden, q_residual, pos, None, 0)
            outs = {"entries": entries[:, 0], "visible": (bias[:, 0] == 0).float()}
            if hasattr(module, "indexer"):
                outs["picked"] = module.indexer(hidden, q_residual, pos, None, 0).float()
        else:
            outs = {"out": module(x["hidden"], input_ids=x["ids"])}
    np.savez(out, **{k: v.float().numpy() for k, v in outs.items()})
    return {}


OPS = {f.__name__: f for f in (logits, generate, generate_ids, tokenize, chat_template, make_model, torch_gpt,
                               lm_eval, mxfp4, deepseek_v4)}


def serve() -> None:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # the libraries' prints stay off the answer channel
    os.dup2(sys.stderr.fileno(), 1)
    answers.write(json.dumps({"ready": True, "torch": torch.__version__,
                              "transformers": transformers.__version__}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = {"ok": True, **OPS[request.pop("op")](**request)}
        except Exception:  # the test that asked shows it
            answer = {"ok": False, "error": traceback.format_exc()}
        answers.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    serve()
