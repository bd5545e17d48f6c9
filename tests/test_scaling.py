"""μP and CompleteP (`model.parametrization`, spmdgpt.model.parametrization) and the coordinate
check (spmdgpt.scaling.size)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from spmdgpt.config import load_config
from spmdgpt.model import is_info, param_info
from spmdgpt.model.info import by_name
from spmdgpt.scaling.size import coordinate_check, growth

UNTIED = ["+experiment=staircase", "model.tie_embeddings=false", "optimizer.warmup_steps=0", "optimizer.lr=3e-3",
          "data.batch_size=8", "data.seq_len=32", "model.scan_unroll=false"]


def test_mup_init_and_learning_rates_by_fan_in():
    """4x the base width: hidden matrices' init std / 2 and AdamW rate / 4, the readout's std and
    rate / 4, the embedding and norms unchanged; completep at 4x the base depth keeps the base
    depth's residual init and (alpha = 1) the width rates."""
    def infos(*extra):
        cfg = load_config(["+experiment=staircase", "model.tie_embeddings=false", "model.d_model=128", *extra]).model
        return {n: (i.std, i.lr_scale) for n, i in by_name(param_info(cfg), is_leaf=is_info).items()}

    std, mup = infos(), infos("model.parametrization=mup", "model.base_width=32")
    assert std["blocks.attn.w_qkv"] == (0.02, 1.0) and std["blocks.mlp.w_down"] == (0.01, 1.0)
    assert mup["blocks.attn.w_qkv"] == (0.01, 0.25) and mup["blocks.mlp.w_up"] == (0.01, 0.25)
    assert mup["blocks.attn.w_o"] == (0.005, 0.25) and mup["blocks.mlp.w_down"] == (0.005, 0.25)
    assert mup["unembed"] == (0.005, 0.25)
    assert mup["embed"] == std["embed"] == (0.02, 1.0) and mup["blocks.ln1.scale"] == std["blocks.ln1.scale"]
    deep = infos("model.parametrization=completep", "model.base_width=32", "model.base_depth=1", "model.num_layers=4")
    assert deep["blocks.attn.w_o"] == pytest.approx((0.02 / 2 ** 0.5 / 2, 0.25))  # (init_std / sqrt(2 x 1) / 2)
    half = infos("model.parametrization=completep", "model.base_depth=1", "model.num_layers=4", "model.depth_alpha=0.5")
    assert half["blocks.mlp.w_up"] == pytest.approx((0.02, 4 ** -0.5))  # ((L / L0)^(alpha - 1))
    # at the base shape every rule is the identity
    assert infos("model.parametrization=completep") == std


def test_optimizer_scales_each_adamw_update_by_its_lr_scale():
    """The AdamW update of a μP hidden matrix is 1/4 of standard's at 4x width (same gradient);
    under Muon its matrices keep Muon's rate and only the readout is scaled."""
    from spmdgpt.optim import build_optimizer

    def first_updates(*extra):
        cfg = load_config(["+experiment=staircase", "model.tie_embeddings=false", "model.d_model=128",
                           "optimizer.warmup_steps=0", *extra])
        info = param_info(cfg.model)
        params = jax.tree.map(lambda i: jnp.ones(i.shape), info, is_leaf=is_info)
        grads = jax.tree.map(lambda p: jnp.full(p.shape, 0.5) + jnp.arange(p.size).reshape(p.shape) % 3, params)
        opt = build_optimizer(cfg.optimizer, info, 10)
        return by_name(opt.update(grads, opt.init(params), params)[0])

    std, mup = first_updates(), first_updates("model.parametrization=mup", "model.base_width=32")
    for name in ("blocks.attn.w_qkv", "blocks.mlp.w_down", "unembed"):
        np.testing.assert_allclose(np.asarray(mup[name]), np.asarray(std[name]) / 4, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(mup["embed"]), np.asarray(std["embed"]))
    muon_std = first_updates("optimizer.name=muon")
    muon_mup = first_updates("optimizer.name=muon", "model.parametrization=mup", "model.base_width=32")
    np.testing.assert_array_equal(np.asarray(muon_mup["blocks.mlp.w_up"]), np.asarray(muon_std["blocks.mlp.w_up"]))
    np.testing.assert_allclose(np.asarray(muon_mup["unembed"]), np.asarray(muon_std["unembed"]) / 4, rtol=1e-6)


def test_mup_attention_scores_by_one_over_head_dim():
    """Queries times sqrt(base head_dim / head_dim): scores sqrt(8) / 32 at head_dim 32 from a
    base of 8, the usual 1 / sqrt(head_dim) when the heads keep their width."""
    from spmdgpt.model.attention import query_scale

    q = jnp.ones((1, 2, 4, 32))
    cfg = load_config(["+experiment=staircase", "model.tie_embeddings=false", "model.d_model=128",
                       "model.parametrization=mup", "model.base_width=32"]).model
    assert float(query_scale(cfg, q)[0, 0, 0, 0]) == pytest.approx((8 / 32) ** 0.5)
    fixed = load_config(["+experiment=staircase", "model.tie_embeddings=false", "model.d_model=128",
                         "model.head_dim=16", "model.num_heads=8", "model.parametrization=mup",
                         "model.base_width=32"]).model
    assert float(query_scale(fixed, q[..., :16])[0, 0, 0, 0]) == 1.0


def test_coordinate_check_widths():
    """Widths 64 and 512, AdamW at lr 3e-3: after each of 3 steps, under μP every layer's
    attention and MLP output, the residual stream and the logits stay within 2x of the base
    width's (measured: 1.50x at worst); under standard parametrization they grow with the width
    (measured after 3 steps: attention 96x, MLP 30x, residual 23x, logits 4.4x). At the base width
    the two are the same model, bitwise. (Widths to 1,024: benchmarks/coord_check.py.)"""
    mup = coordinate_check([*UNTIED, "model.parametrization=mup"], (64, 512), steps=3)
    std = coordinate_check([*UNTIED, "model.parametrization=standard"], (64, 512), steps=3)
    assert mup[64] == std[64]
    for q in ("attn", "mlp", "resid", "logits"):
        for step in (1, 2, 3):
            assert 0.5 < growth(mup, q, step) < 2.0, (q, step, growth(mup, q, step))
    assert growth(std, "attn") > 50 and growth(std, "mlp") > 15 and growth(std, "resid") > 15
    assert growth(std, "logits") > 3


def test_coordinate_check_depths():
    """Depths 2 to 16 (width 64) after 3 steps: under CompleteP (branches x 2 / L) the residual
    stream the head reads and the logits stay within 2x; under standard the stream grows with
    the depth (a sum of L branches: > 4x)."""
    deep = [*UNTIED, "model.d_model=64"]
    completep = coordinate_check([*deep, "model.parametrization=completep"], (2, 16), steps=3, axis="depth")
    std = coordinate_check([*deep, "model.parametrization=standard"], (2, 16), steps=3, axis="depth")
    assert completep[2] == std[2]
    assert 0.5 < growth(completep, "resid") < 2.0 and 0.5 < growth(completep, "logits") < 2.0
    assert growth(std, "resid") > 4.0
    assert growth(completep, "mlp") < 0.25  # (each branch x 2 / 16)


def test_bad_parametrizations_are_one_line_exit_2(tmp_path, capsys):
    from spmdgpt.cli import main

    cases = {
        "model.parametrization=mup": "model.parametrization=mup needs model.tie_embeddings=false (μP's readout rule "
        "is the unembedding's own init and learning rate, which a tied embedding cannot take)",
        "model.parametrization=mup model.tie_embeddings=false model.base_width=30": "model.base_width=30 is not "
        "divisible by model.num_heads=4 (the base shape keeps the heads); choose a multiple of num_heads, or give "
        "model.head_dim",
        "model.parametrization=completep model.tie_embeddings=false optimizer.name=sgd": "model.parametrization="
        "completep scales AdamW's learning rates (μP's Adam rules); optimizer.name=sgd would need SGD's: use adamw, "
        "muon or manifold_muon",
        "model.base_depth=0": "model.base_depth=0 must be > 0, or null for the model's own",
    }
    for args, line in cases.items():
        run = tmp_path / str(abs(hash(args)))
        code = main(["train", "+experiment=staircase", f"run.dir={run}", *args.split()])
        assert code == 2 and not run.exists()
        assert capsys.readouterr().err.strip().splitlines()[-1] == f"spmdgpt: error: {line}"


@pytest.mark.parametrize("extra", [[], ["model.num_kv_heads=2", "model.bias=true"],
                                   ["model.qk_norm=true", "model.qk_norm_scale=true", "model.norm=rmsnorm"],
                                   ["model.post_norms=true", "model.norm_plus_one=true", "model.norm=rmsnorm"]],
                         ids=["fused", "gqa-bias", "qk-norm", "post-norms"])
def test_folded_weights_compute_the_run_without_multipliers(extra):
    """Export's fold (`parametrization.folded`, inside `hf.export.to_tensors`): a completep model 4x
    its base width and depth (queries x 0.5, branches x 1/4) gives the same logits as the
    standard model of the same shape run on the folded weights."""
    import dataclasses

    from spmdgpt.config import Parametrization
    from spmdgpt.mesh.sharding import Rules, make_mesh
    from spmdgpt.model import forward, init_params
    from spmdgpt.model.parametrization import attention_factor, branch_multiplier, folded

    cfg = load_config(["+experiment=staircase", "model.tie_embeddings=false", "model.d_model=128", "model.num_layers=4",
                       "model.parametrization=completep", "model.base_width=32", "model.base_depth=1", *extra])
    assert (attention_factor(cfg.model), branch_multiplier(cfg.model)) == (0.5, 0.25)
    plain = dataclasses.replace(cfg.model, parametrization=Parametrization.standard)
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    tokens = jnp.asarray(np.arange(2 * 16).reshape(2, 16) % 10)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        params = jax.tree.map(lambda a: a + 0.05 * jnp.sin(jnp.arange(a.size).reshape(a.shape)), params)  # (no 0/1s)
        want = forward(cfg.model, rules, params, tokens)[0]
        host = jax.tree.map(np.asarray, params)
        got = forward(plain, rules, jax.tree.map(jnp.asarray, folded(cfg.model, host)), tokens)[0]
        unfolded = forward(plain, rules, params, tokens)[0]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    assert float(jnp.max(jnp.abs(unfolded - want))) > 1e-2  # (the multipliers matter)


def test_size_knob_and_tokens_per_param(tmp_path, capsys):
    """model.size=N: N layers of 64 N, heads of 64, a field given on the command line kept, the
    learning rates as configured;
    train.tokens_per_param: the steps from the matmul parameters (rounded up), the experiment's
    time budget off; both printed before training; bad values one line, exit 2."""
    from spmdgpt.cli import main
    from spmdgpt.plan.flops import matmul_params
    from spmdgpt.scaling.size import size_line, with_token_budget

    cfg = with_token_budget(load_config(["+experiment=shakespeare_char", "model.size=3", "train.tokens_per_param=20"]))
    m = cfg.model
    assert (m.num_layers, m.d_model, m.num_heads, m.head_dim) == (3, 192, 3, None)
    per_step = cfg.data.batch_size * cfg.data.seq_len
    assert cfg.train.steps == -(-20 * matmul_params(m) // per_step) and cfg.train.time_budget is None
    assert (cfg.train.steps - 1) * per_step < 20 * matmul_params(m) <= cfg.train.steps * per_step
    kept = load_config(["+experiment=shakespeare_char", "model.size=3", "model.num_heads=2",
                        "model.num_layers=5"]).model
    assert (kept.num_layers, kept.d_model, kept.num_heads) == (5, 192, 2)
    assert (m.base_width, cfg.optimizer.muon_lr, cfg.optimizer.lr) == (None, 0.05, 2e-3)  # (no rule: see SIZE_RULES)
    own = load_config(["+experiment=shakespeare_char"]).model
    for par, base in {"mup": (own.d_model, None), "completep": (own.d_model, own.num_layers)}.items():
        mup = load_config(["+experiment=shakespeare_char", "model.size=4", f"model.parametrization={par}"])
        assert (mup.model.d_model, mup.model.base_width, mup.model.base_depth) == (256, *base)  # (the rates' shape)
        assert size_line(mup).endswith(f"{par} against base width {own.d_model}"
                                       + (f" and depth {own.num_layers}" if base[1] else ""))
    # the knob widens by heads of 64: the base has fewer of the same width, so attention's 1/d scale is the same
    # at every size (the base's own heads would have made it x sqrt(base_width / heads / 64): 0.71 at 4, 0.5 at 8)
    from spmdgpt.model.parametrization import attention_factor

    for size in (2, 4, 8):
        sized = load_config(["+experiment=shakespeare_char", f"model.size={size}", "model.parametrization=mup"]).model
        assert (sized.num_heads, sized.base_head_dim, attention_factor(sized)) == (size, 64, 1.0)
    given = load_config(["+experiment=shakespeare_char", "model.size=3", "model.parametrization=mup",
                         "model.base_width=64"]).model
    assert (given.d_model, given.base_width) == (192, 64)
    # the warmup: a share of the steps with tokens_per_param (SIZE_WARMUP_SHARE unless given); steps given beat
    # a share the config sets; the share's steps rounded, at most the run
    from spmdgpt.config.load import SIZE_WARMUP_SHARE
    from spmdgpt.optim import learning_rate_schedule, warmup_steps

    assert (cfg.optimizer.warmup_share, warmup_steps(cfg.optimizer, 1000)) == (SIZE_WARMUP_SHARE,
                                                                               round(1000 * SIZE_WARMUP_SHARE))
    assert cfg.optimizer.warmup_steps == round(SIZE_WARMUP_SHARE * cfg.train.steps)  # (recorded: config.yaml's)
    assert size_line(cfg).endswith(f"warmup {round(SIZE_WARMUP_SHARE * cfg.train.steps)} steps "
                                   f"(optimizer.warmup_share={SIZE_WARMUP_SHARE:g})")
    for extra, share, steps in ((["optimizer.warmup_share=0.25"], 0.25, (250, 1)),
                                (["optimizer.warmup_steps=7"], None, (7, 5))):
        o = load_config(["+experiment=shakespeare_char", "train.tokens_per_param=20", *extra]).optimizer
        assert (o.warmup_share, warmup_steps(o, 1000), warmup_steps(o, 5)) == (share, *steps)
        schedule = learning_rate_schedule(o, 1000)  # (the schedule's own warmup: linear up to the peak at its end)
        assert float(schedule(steps[0] // 2)) == pytest.approx(o.lr * (steps[0] // 2) / steps[0], rel=1e-6)
        assert float(schedule(steps[0])) == pytest.approx(o.lr, rel=1e-6)
    assert load_config(["+experiment=shakespeare_char"]).optimizer.warmup_share is None  # (no token budget)
    import dataclasses

    from spmdgpt.config.load import sized

    filed = load_config(["+experiment=shakespeare_char", "optimizer.warmup_share=0.1"])  # (as a config file's)
    o = sized(dataclasses.replace(filed, optimizer=dataclasses.replace(filed.optimizer, warmup_steps=7)),
              ["optimizer.warmup_steps=7"]).optimizer
    assert (o.warmup_share, warmup_steps(o, 1000)) == (None, 7)
    run = tmp_path / "run"
    code = main(["train", "+experiment=shakespeare_char", "model.size=1", "train.tokens_per_param=0.1",
                 "train.eval_every=0", "train.rollout_tokens=0", "checkpoint.enabled=false", f"run.dir={run}"])
    out = capsys.readouterr().out
    assert code == 0 and out.splitlines()[0].startswith(
        "model.size=1: num_layers 1, d_model 64, num_heads 1; train.tokens_per_param=0.1: 2 steps of 4096 tokens")
    for args, line in {("model.size=0",): "model.size=0 must be a depth > 0 (num_layers = size, d_model = 64 x size), "
                       "or null for the fields as they are",
                       ("train.tokens_per_param=20", "train.steps=5"): "train.tokens_per_param=20 sets the steps, "
                       "and train.steps was given too: choose one",
                       ("optimizer.warmup_share=0.1", "optimizer.warmup_steps=5"): "optimizer.warmup_steps and "
                       "optimizer.warmup_share were both given: choose one (the share of the run's steps, when set, is "
                       "the warmup)",
                       ("model.size=3", "model.parametrization=mup"): "model.size=3 under mup: the config's d_model "
                       "128, the base the knob keeps, cannot be μP's base of this size: model.base_width=128 is not "
                       "divisible by model.num_heads=3 (the base shape keeps the heads); give model.base_width=144 "
                       "(the nearest that fits), or another size",
                       ("optimizer.warmup_share=1",): "optimizer.warmup_share=1.0 must be a share of the run's steps "
                       "in [0, 1), or null for optimizer.warmup_steps"}.items():
        assert main(["train", "+experiment=shakespeare_char", f"run.dir={tmp_path / 'bad'}", *args]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == f"spmdgpt: error: {line}"
        assert not (tmp_path / "bad").exists()


def test_a_completep_run_exports_to_what_it_computes(tmp_path, capsys):
    """`spmdgpt export` of a completep model (4x its base width and depth: queries x 0.5,
    branches x 1/4, folded into the weights) and of a model.size one: `spmdgpt eval` of the
    Hugging Face folder gives the run's own loss on the same text."""
    from spmdgpt.cli import main

    text = tmp_path / "held.txt"
    text.write_text("0123456789876543210" * 40)
    losses = {}
    for name, extra in {"completep": ["model.parametrization=completep", "model.d_model=128", "model.base_width=32",
                                      "model.num_layers=4", "model.base_depth=1"],
                        "size": ["model.size=2"]}.items():
        run, out = tmp_path / name, tmp_path / f"{name}-hf"
        assert main(["train", "+experiment=staircase", "model.tie_embeddings=false", "train.steps=3",
                     "train.eval_every=0", "checkpoint.every=3", f"run.dir={run}", *extra]) == 0
        assert main(["export", f"run.dir={run}", f"out={out}"]) == 0
        for where in (run, f"hf:{out}"):
            capsys.readouterr()
            assert main(["eval", f"run.dir={where}", f"text_file={text}"]) == 0
            losses[name, str(where).startswith("hf:")] = capsys.readouterr().out
    for name in ("completep", "size"):
        own, hf = (float(losses[name, h].strip().splitlines()[-1].split()[2]) for h in (False, True))  # (loss)
        assert hf == pytest.approx(own, rel=1e-5) and own > 0
