"""LoRA (model/lora.py): adapters on a frozen model, trained, checkpointed alone, merged on export."""

import json
import shutil

import jax
import numpy as np
import pytest
from conftest import read_jsonl  # noqa: E402

from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.data import Batcher, load_dataset
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import init_params, lora, objective, param_info
from spmdgpt.training.state import init_state
from spmdgpt.training.step import make_train_step, optimizer_of

# one plain SGD step (no momentum, decay or clipping); scale alpha / r = 8 / 4 = 2; a learning rate
# of 100, so that the step moves the weights by ~1e-2 (the identity below holds at any rate)
SGD = ["+experiment=staircase", "optimizer.name=sgd", "optimizer.lr=100", "optimizer.warmup_steps=0",
       "optimizer.schedule=constant", "optimizer.grad_clip=0", "optimizer.weight_decay=0", "optimizer.momentum=0",
       "lora.rank=4", "lora.alpha=8", "lora.targets=[q,v,down]", "data.batch_size=8", "data.seq_len=32"]


def one_lora_step(cfg, devices, full_gradient=True):
    """(base, adapters before, merged weights after one LoRA step, the full model's gradient at
    the base on the same batch (None without `full_gradient`), the adapters' shardings) on a mesh
    of `devices`."""
    mesh = make_mesh(cfg.mesh, devices)
    rules = Rules(mesh, cfg.sharding, cfg.model)
    with jax.set_mesh(mesh):
        base = init_params(cfg.model, jax.random.key(7), rules)
        state = init_state(cfg, rules, optimizer_of(cfg))
        before = jax.device_get(state.params)
        shardings = jax.tree.map(lambda a: a.sharding.spec, state.params)
        data = load_dataset(cfg.data)
        batch = Batcher(data.train, data.weights, cfg.data.seq_len, cfg.data.batch_size, 0,
                        rules.batch_sharding()).train_batch(0)
        state, metrics = make_train_step(cfg, rules, optimizer_of(cfg), base=base)(state, *batch)
        after = lora.merge(param_info(cfg.model), cfg.lora, base, state.params)
        grads = jax.jit(jax.grad(lambda p: objective(cfg.model, rules, p, *batch)[0]))(base) if full_gradient else None
        assert float(metrics["lr"]) == 100
        return jax.device_get((base, before, after, grads)) + (shardings,)


def test_one_step_is_the_full_gradient_projected_on_the_adapters():
    """The known answer of one SGD step from B = 0: B' = -lr s A^T G (G the full model's gradient
    at the base, s = alpha / r), so the merged weight is W - lr s^2 A A^T G: full fine-tuning's
    step with the gradient projected on the column space of A. Exactly that for q and v (the k
    slice of the fused w_qkv, w_o and the MLP's up projection unchanged), the same on a 2 x 2
    FSDP + tensor-parallel mesh, with the adapters sharded by the rule table (A's embed axis over
    the data axis; the rank axis never split)."""
    cfg = load_config(SGD)
    base, a0, after, g, _ = one_lora_step(cfg, jax.devices()[:1])
    lr_s2 = 100 * 2.0 ** 2
    qkv_a = a0.blocks.attn.w_qkv.a  # [L, 2 (q, v), D, r]
    assert qkv_a.shape == (2, 2, 64, 4) and a0.blocks.attn.w_qkv.b.shape == (2, 2, 4, 4, 16)
    assert not np.any(a0.blocks.attn.w_qkv.b) and np.std(qkv_a) == pytest.approx((3 * 64) ** -0.5, rel=0.05)
    for j, slot in ((0, 0), (1, 2)):  # q, v
        a = qkv_a[:, j].astype(np.float64)
        want = base.blocks.attn.w_qkv[:, :, slot] - lr_s2 * np.einsum("ldr,ler,lenh->ldnh", a, a,
                                                                        g.blocks.attn.w_qkv[:, :, slot])
        np.testing.assert_allclose(after.blocks.attn.w_qkv[:, :, slot], want, atol=1e-6)
        assert np.abs(want - base.blocks.attn.w_qkv[:, :, slot]).max() > 5e-3
    a = a0.blocks.mlp.w_down.a.astype(np.float64)  # [L, F, r]
    want = base.blocks.mlp.w_down - lr_s2 * np.einsum("lfr,ler,led->lfd", a, a, g.blocks.mlp.w_down)
    np.testing.assert_allclose(after.blocks.mlp.w_down, want, atol=1e-6)
    assert np.abs(want - base.blocks.mlp.w_down).max() > 5e-3
    np.testing.assert_array_equal(after.blocks.attn.w_qkv[:, :, 1], base.blocks.attn.w_qkv[:, :, 1])
    for frozen in ("embed", "ln_f"):
        np.testing.assert_array_equal(jax.tree.leaves(getattr(after, frozen)), jax.tree.leaves(getattr(base, frozen)))
    np.testing.assert_array_equal(after.blocks.attn.w_o, base.blocks.attn.w_o)
    np.testing.assert_array_equal(after.blocks.mlp.w_up, base.blocks.mlp.w_up)

    sharded = load_config(SGD + ["sharding=fsdp_tp", "mesh.data=2", "mesh.model=2"])
    _, _, after4, _, specs = one_lora_step(sharded, jax.devices()[:4], full_gradient=False)  # (compared to `after`)
    for x, y in zip(jax.tree.leaves(after4), jax.tree.leaves(after)):
        np.testing.assert_allclose(x, y, atol=1e-6)
    assert tuple(specs.blocks.attn.w_qkv.a) == (None, None, ("data", "context"), None)  # [L, q/v, embed, rank]
    assert tuple(specs.blocks.attn.w_qkv.b) == (None, None, None, "model", None)  # [L, q/v, rank, heads, head_dim]


def test_lora_run_checkpoints_adapters_resumes_and_exports_merged(tmp_path, capsys):
    """A LoRA run from a trained run: its checkpoints hold the adapters alone (and Adam's two
    moments of them), a resumed run gives the same losses bitwise, `spmdgpt eval` of the run
    evaluates the base with the adapters merged (its logged val/loss again), and the exported
    weights are base + (alpha / r) A B (float64 reference), the rest the base's bitwise."""
    import orbax.checkpoint as ocp
    from safetensors.numpy import load_file

    from spmdgpt.loop import train

    common = ["+experiment=staircase", "data.batch_size=8", "data.seq_len=32", "train.progress=false",
              "train.log_every=1", "train.eval_every=0", "train.eval_batches=2", "model.mlp=swiglu",
              "model.norm=rmsnorm"]  # (a Llama: exported as LlamaForCausalLM)
    base_dir, run, part = tmp_path / "base", tmp_path / "lora", tmp_path / "part"
    train(load_config(common + ["train.steps=12", f"run.dir={base_dir}"]), argv=["pytest"])
    tune = common + [f"checkpoint.init_from={base_dir}", "lora.rank=2", "lora.alpha=4", "optimizer.lr=1e-2",
            "optimizer.schedule=constant", "optimizer.warmup_steps=0",
                     "checkpoint.every=3"]
    result = train(load_config(tune + ["train.steps=6", f"run.dir={run}"]), argv=["pytest"])
    losses = [r["loss"] for r in read_jsonl(run / "metrics.jsonl") if "loss" in r]
    assert losses[-1] < losses[0]

    meta = ocp.PyTreeCheckpointer().metadata(run / "checkpoints" / "6" / "params").item_metadata.tree
    names = {".".join(k.key for k in path) for path, _ in jax.tree_util.tree_flatten_with_path(meta)[0]}
    weights = ["attn.w_qkv", "attn.w_o", "mlp.w_up", "mlp.w_gate", "mlp.w_down"]
    assert names == {f"blocks.{w}.{ab}" for w in weights for ab in "ab"}
    n_adapter = sum(a.size for a in jax.tree.leaves(result.state.params))
    # layers x rank x (q, k, v: 3 (D + D); o: D + D; up, gate: 2 (D + F); down: F + D), D = 64, F = 256
    assert n_adapter == 2 * 2 * (11 * 64 + 3 * 256)
    assert sum(a.size for a in jax.tree.leaves(result.state.opt_state) if a.ndim) == 2 * n_adapter

    # the run as it stood had it stopped after its checkpoint at step 3, resumed
    shutil.copytree(run, part)
    shutil.rmtree(part / "checkpoints" / "6")
    train(load_config(tune + ["train.steps=6", f"run.dir={part}"]), argv=["pytest"])
    assert (part / "resume-3.yaml").is_file()
    assert [r["loss"] for r in read_jsonl(part / "metrics.jsonl") if "loss" in r] == losses

    val = [r["val/loss"] for r in read_jsonl(run / "metrics.jsonl") if "val/loss" in r][-1]
    assert main(["eval", f"run.dir={run}"]) == 0
    assert json.loads((run / "eval" / "step-6.json").read_text())["results"]["staircase"]["loss"] == pytest.approx(
        val, abs=1e-6
    )

    assert main(["export", f"run.dir={run}", f"out={tmp_path / 'hf'}"]) == 0
    exported = load_file(tmp_path / "hf" / "model.safetensors")
    assert main(["export", f"run.dir={base_dir}", f"out={tmp_path / 'hf-base'}"]) == 0
    plain = load_file(tmp_path / "hf-base" / "model.safetensors")
    ad = jax.tree.map(lambda x: x.astype(np.float64), jax.device_get(result.state.params).blocks)
    for layer in range(2):  # (torch's weights are out x in; v is slot 2 of the fused w_qkv)
        for key, a, b in (("mlp.down_proj", ad.mlp.w_down.a[layer], ad.mlp.w_down.b[layer]),  # [F, r], [r, D]
                          ("self_attn.v_proj", ad.attn.w_qkv.a[layer, 2], ad.attn.w_qkv.b[layer, 2].reshape(2, 64))):
            key = f"model.layers.{layer}.{key}.weight"
            want = plain[key].astype(np.float64) + 2.0 * (a @ b).T
            np.testing.assert_allclose(exported[key], want, atol=1e-6)
            assert np.abs(exported[key] - plain[key]).max() > 1e-4
    for key in plain:
        if "norm" in key or "embed" in key:
            np.testing.assert_array_equal(exported[key], plain[key])
    base_dir.rename(tmp_path / "moved")  # the base gone: one line, exit 2 (not "damaged checkpoints")
    capsys.readouterr()
    assert main(["eval", f"run.dir={run}"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"spmdgpt: error: run.dir={run} trained LoRA adapters on checkpoint.init_from={base_dir}, which holds no "
        f"checkpoint (moved or deleted?); put the base run back there, or set its new place in {run / 'config.yaml'}")


@pytest.mark.parametrize("override,message", [
    ([], "lora.rank=4 adapts a trained model, which stays frozen: set checkpoint.init_from=RUN or hf:DIR"),
    (["checkpoint.init_from=x", "lora.targets=[q,gate]"],
     "lora.targets: gate needs a gated MLP (model.mlp=gelu has none); leave gate out"),
    (["checkpoint.init_from=x", "lora.targets=[q_proj]"],
     "lora.targets=['q_proj']: choose among q, k, v, o, up, gate, down or all"),
    (["checkpoint.init_from=x", "mesh.stage=2", "mesh.data=1"],
     "lora.rank=4 does not work with mesh.stage=2: pipeline stages yet"),
])
def test_bad_lora_settings_are_one_line_exit_2(tmp_path, capsys, override, message):
    assert main(["train", "+experiment=staircase", "lora.rank=4", f"run.dir={tmp_path / 'run'}", *override]) == 2
    err = capsys.readouterr().err
    assert message in err and not (tmp_path / "run").exists()
