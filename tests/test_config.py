"""Every config error: a one-line message naming the field, exit code 2, nothing written."""

import subprocess
import sys

import pytest

from spmdgpt.cli import main
from spmdgpt.config import ConfigError, load_config

STAIR = ["+experiment=staircase", "train.steps=5"]
CHAR = ["+experiment=shakespeare_char", "train.steps=5"]

CASES = [
    # (overrides, text the message must contain)
    (STAIR + ["model.num_heads=5"], "model.num_heads=5 does not divide model.d_model=64"),
    (STAIR + ["model.d_model=60", "model.num_heads=4"], "is odd, but RoPE rotates pairs"),
    (STAIR + ["data.batch_size=12"], "data.batch_size=12 is not divisible by the data-parallel size 8"),
    (STAIR + ["mesh.data=3"],
     "mesh.data=3 x mesh.stage=1 x mesh.expert=1 x mesh.context=1 x mesh.model=1 does not fit 8 device(s)"),
    (STAIR + ["mesh.data=4", "mesh.model=4"],
     "mesh.data=4 x mesh.stage=1 x mesh.expert=1 x mesh.context=1 x mesh.model=4 does not fit 8 device(s)"),
    (STAIR + ["mesh.data=2", "mesh.model=2"], "= 4 but there are 8 device(s)"),
    (STAIR + ["mesh.model=0"], "mesh.model=0 must be a positive size or -1"),
    (STAIR + ["data.seq_len=128"], "data.seq_len=128 exceeds model.max_seq_len=64"),
    (CHAR + ["model.vocab_size=50"], "model.vocab_size=50 is smaller than the tokenizer's vocabulary (66"),
    (CHAR + ["model.vocab_size=50304"], "model.vocab_size=50304 but the tokenizer (char) has 66 ids: 50,238 "
                                        "embedding rows would never be used; set model.vocab_size=128"),
    (STAIR + ["model.norm=batchnorm"], "model.norm"),
    (STAIR + ["optimizer.name=lion"], "optimizer.name"),
    (STAIR + ["train.steps=0"], "train.steps=0 must be > 0"),
    (STAIR + ["optimizer.lr=-0.001"], "optimizer.lr=-0.001 must be > 0"),
    (STAIR + ["optimizer.lr=0"], "optimizer.lr=0.0 must be > 0"),
    (STAIR + ["optimizer.lr=inf"], "optimizer.lr=inf must be a finite number > 0"),
    (STAIR + ["optimizer.lr=nan"], "optimizer.lr=nan must be a finite number > 0"),
    (CHAR + ["data.text_file=no/such/file.txt"], "data.text_file=no/such/file.txt: no such file"),
    (CHAR + ["data.path=/nonexistent-data-root"], "looked for /nonexistent-data-root/tinyshakespeare"),
    (STAIR + ["model.no_such_field=1"], "no_such_field"),
    (STAIR + ["train.step=20"], "train.step: no such config field; did you mean train.steps?"),
    (STAIR + ["modle.d_model=64"], "modle.d_model: no such config field; did you mean model.d_model?"),
    (STAIR + ["train.lr=1e-3"], "train.lr: no such config field; did you mean optimizer.lr?"),
    (STAIR + ["+model.colour=1"], "model.colour: no such config field; model's fields: num_layers, num_heads,"),
    (STAIR + ["train.steps=abc"], "train.steps=abc: expected an integer"),
    (STAIR + ["optimizer.name=adam"],
     "optimizer.name=adam: expected one of adamw, sgd, muon, manifold_muon; did you mean optimizer.name=adamw?"),
    (STAIR + ["train.loggers=console"], "train.loggers=console: expected a list, e.g. [a,b]"),
    (STAIR + ["model.bias=maybe"], "model.bias=maybe: expected true or false"),
    (STAIR + ["model.v_norm=2"], "model.v_norm=2: expected true or false"),  # (OmegaConf alone takes it as true)
    (["+experiment=gutenberg_gpt2", "data.text_file=x.txt"], "data.text_file=x.txt is not read: this config's corpus "
     "is data.datasets (books, shakespeare, heldout); add the file as +data.datasets.NAME.paths=[x.txt]"),
    (STAIR + ["data.text_file=x.txt"], "data.text_file=x.txt is not read: data.source=staircase generates its tokens; "
                                        "set data.source=text to train on the file"),
    (["experiment=staircase"], "experiment=staircase: an experiment is added to the defaults, with a leading +: "
                               "+experiment=staircase"),
    (["+experiment=no_such_experiment"], "packaged experiments: arithmetic_grpo, arithmetic_sft, calculator_grpo, "
                                         "calculator_sft, chain_grpo, chain_sft, deepseek_v3, "
                                         "deepseek_v32_small, deepseek_v3_small, deepseek_v4_flash, deepseek_v4_small, "
                                         "gemma3_1b, gemma4_26b_a4b, "
                                         "gemma4_31b, gemma4_e4b, gemma4_moe_small, gemma4_small, "
                                         "gpt2_124m, "
                                         "gpt_oss_120b, gpt_oss_20b, gpt_oss_small, gutenberg_gpt2, kimi_linear_48b, "
                                         "kimi_linear_small, "
                                         "ladder_gutenberg, ladder_tiny, llama2_7b, "
                                         "llama3_2_1b, llama3_8b, llama4_scout, llama4_small, llama_1b, mixtral_8x7b"),
    (STAIR + ["sharding=zero3"], "packaged tables: dp, fsdp, fsdp_tp, tp"),
    (STAIR + ["+sharding.params.embed=rows"], "sharding.params.embed=rows: unknown mesh axis 'rows'"),
    (STAIR + ["sharding=tp", "mesh.model=8", "model.num_heads=4"], "model.num_heads=4 is not divisible by 8"),
    (CHAR + ["sharding=tp", "mesh.model=4"], "model.vocab_size=66 is not divisible by 4"),
    (STAIR + ["data.val_fraction=1.5"], "data.val_fraction=1.5 must be in (0, 1)"),
    (STAIR + ["optimizer.b2=1.0"], "optimizer.b2=1.0 must be in [0, 1)"),
    (STAIR + ["train.eval_every=-1"], "train.eval_every=-1 must be >= 0"),
    (STAIR + ["data.staircase_tokens=50"], "too long for the"),
    (STAIR + ["optimizer.name=manifold_muon", "optimizer.solver=newton"], "optimizer.solver"),
    (STAIR + ["optimizer.name=manifold_muon", "optimizer.rho=0"], "optimizer.rho=0.0 must be > 0"),
    (STAIR + ["optimizer.name=muon", "optimizer.muon_momentum=1"], "optimizer.muon_momentum=1.0 must be in [0, 1)"),
    (STAIR + ["optimizer.name=manifold_muon", "optimizer.solver_steps=-1"], "optimizer.solver_steps=-1 must be >= 0"),
    (STAIR + ["model.attention=cudnn", "model.compute_dtype=bfloat16"], "model.attention=cudnn needs an NVIDIA GPU"),
    (STAIR + ["model.attention=flash"], "model.attention"),
    (STAIR + ["model.attention=cudnn", "model.compute_dtype=bfloat16", "model.sliding_window=16"],
     "model.sliding_window=16 needs model.attention=xla (the cudnn path has no sliding window yet)"),
    (STAIR + ["model.attention=splash"], "model.attention=splash needs data.seq_len a multiple of 128 (got 64)"),
    (STAIR + ["model.attention=splash", "data.seq_len=128", "model.max_seq_len=128"],
     "model.attention=splash needs a TPU (this run's devices are cpu); use model.attention=auto or xla"),
    (STAIR + ["model.compute_dtype=float16"], "model.compute_dtype=float16 needs loss scaling to train"),
    (STAIR + ["optimizer.state_dtype=float16"], "optimizer.state_dtype=float16 cannot hold Adam's second moments"),
    (STAIR + ["model.loss_block=48"], "model.loss_block=48 does not divide data.seq_len=64"),
    # (Gemma 4's global layers of their own geometry: a stack of their own, in groups of k - 1 local layers then one)
    (STAIR + ["model.global_head_dim=32", "model.sliding_window=8", "model.window_pattern=LGL"],
     "model.global_head_dim / global_kv_heads / global_k_eq_v make the G layers a parameter stack of their own, run "
     "as groups of k - 1 local layers and one global: set model.window_pattern to k - 1 L then one G (Gemma 4: "
     "LLLLLG), "
     "model.num_layers a multiple of k and a model.sliding_window (now window_pattern='LGL', num_layers=2, "
     "sliding_window=8)"),
    (STAIR + ["model.global_kv_heads=3"], "model.global_kv_heads=3 must divide model.num_heads=4"),
    # (Gemma 4 E2B's and E4B's layers that read an earlier layer's keys and values; per-layer inputs)
    (STAIR + ["model.kv_shared_layers=1"], "model.kv_shared_layers=1 needs the G layers' own stack"),
    (["+experiment=gemma4_small", "model.kv_shared_layers=1000"], "by at least 4, here none with "
                                                                  "model.num_layers=4 (set model.kv_shared_layers=0"),
    (["+experiment=gemma4_small", "model.kv_shared_layers=1000", "model.num_layers=24"], "here one of 4, 8, 12, 16, "
                                                                                          "20 (Gemma 4 E2B"),
    (STAIR + ["model.kv_shared_wide_mlp=true"], "model.kv_shared_wide_mlp=true widens the MLPs of the layers that "
                                               "share keys and values: set model.kv_shared_layers > 0"),
    (STAIR + ["model.per_layer_dim=16", "model.mtp_depth=1"], "model.per_layer_dim and model.mtp_depth do not "
                                                              "combine yet"),
    (STAIR + ["train.microbatches=3"], "train.microbatches=3 does not divide data.batch_size=16"),
    # (sampling values a text run does not use are checked too: a NaN is a typo wherever it is)
    (STAIR + ["rl.temperature=nan"], "rl.temperature=nan must be a number in [0, 2] (0 = greedy)"),
    (STAIR + ["train.rollout_temperature=inf"], "train.rollout_temperature=inf must be a number in [0, 2]"),
    (STAIR + ["run.name=it's mine"], "run.name=it's mine (a value with a quote, bracket or other special character "
                                     "goes in quotes for Hydra, and those in quotes for the shell: "
                                     "\"run.name=\\\"...\\\"\")"),
]


@pytest.mark.parametrize("overrides,expected", CASES, ids=[c[1][:40] for c in CASES])
def test_config_error(tmp_path, capsys, overrides, expected):
    run_dir = tmp_path / "run"
    code = main(["train", *overrides, f"run.dir={run_dir}"])
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("spmdgpt: error: ") for ln in lines), err
    assert "Traceback" not in err
    assert not run_dir.exists()  # nothing written


def test_several_errors_are_all_reported(capsys, tmp_path):
    code = main(["train", *STAIR, "train.steps=-1", "optimizer.lr=0", f"run.dir={tmp_path / 'r'}"])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 2
    assert "train.steps=-1" in err[1] or "train.steps=-1" in err[0]


def test_existing_run_is_not_overwritten(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}\n')
    code = main(["train", *STAIR, f"run.dir={run_dir}"])
    assert code == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (run_dir / "metrics.jsonl").read_text() == '{"step": 1, "loss": 1.0}\n'
    assert sorted(p.name for p in run_dir.iterdir()) == ["metrics.jsonl"]


def test_console_script_exit_code_and_no_traceback(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "spmdgpt", "train", "+experiment=staircase", "model.num_heads=3",
         f"run.dir={tmp_path / 'r'}"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "spmdgpt: error: model.num_heads=3 does not divide model.d_model=64; "
        "choose num_heads among the divisors of d_model, or give model.head_dim"
    )
    assert not (tmp_path / "r").exists()


def test_no_command_prints_usage(capsys):
    assert main([]) == 2
    assert "spmdgpt <command>" in capsys.readouterr().err
    assert main(["--help"]) == 0 and "spmdgpt <command>" in capsys.readouterr().out
    assert main(["train", "+experiment=staircase", "--help"]) == 0  # (not Hydra's lexer error)
    assert capsys.readouterr().out.startswith("spmdgpt train: train a model: spmdgpt train +experiment=")


def test_config_is_a_leaf_package():
    """spmdgpt.config imports nothing from spmdgpt outside itself (choices, section, units, schema, derived, load,
    validate)."""
    code = "import sys, spmdgpt.config; print(sorted(m for m in sys.modules if m.startswith('spmdgpt')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == str(["spmdgpt", "spmdgpt.config", "spmdgpt.config.choices", "spmdgpt.config.derived",
                                      "spmdgpt.config.load", "spmdgpt.config.schema", "spmdgpt.config.section",
                                      "spmdgpt.config.units", "spmdgpt.config.validate"])


def test_one_argument_parser_for_every_command(capsys):
    """cli.args.parse: a command's own keys (typed, literal), the rest config overrides; launch's
    --flag spellings normalised; unknown commands and bare keys: one line, exit 2."""
    from spmdgpt.cli.args import parse
    from spmdgpt.cli.launch import LaunchArgs, split_command
    from spmdgpt.cli.sample import SampleArgs

    args, overrides = parse(["run.dir=r", "prompt=a=b: c", "top_k=5", "temperature=0.5",
                             "mesh.data=2", "sharding=tp", "+experiment=x"], SampleArgs)
    assert (args.run_dir, args.prompt, args.top_k, args.temperature) == ("r", "a=b: c", 5, 0.5)
    assert overrides == ["mesh.data=2", "sharding=tp", "+experiment=x"]
    assert parse(["model.d_model=8", "sharding=fsdp"]) == (None, ["model.d_model=8", "sharding=fsdp"])
    with pytest.raises(ConfigError) as e:
        parse(["top_k=many", "colour=red", "prompt"], SampleArgs)
    assert e.value.messages[0] == "top_k=many is not a valid int"
    assert [m.split(":")[0] for m in e.value.messages[1:]] == ["'colour=red'", "'prompt'"]
    own, cmd = split_command(["--nproc", "2", "--devices-per-proc=4", "--", "train", "--x", "a=b"])
    assert own == ["nproc=2", "devices_per_proc=4"] and cmd == ["train", "--x", "a=b"]
    assert split_command(["nproc=3", "sample", "run.dir=r"]) == (["nproc=3"], ["sample", "run.dir=r"])
    assert parse(["nproc=3"], LaunchArgs)[0] == LaunchArgs(nproc=3, devices_per_proc=1)
    assert main(["fly"]) == 2
    assert capsys.readouterr().err == ("spmdgpt: error: unknown command 'fly'; commands: train, sample, chat, lm-eval, "
                                       "prepare, tokenizer, eval, viz, plot, export, launch, serve, ladder, config, "
                                       "plan (spmdgpt --help)\n")
    assert main(["launch", "nproc=0", "--", "train"]) == 2
    assert capsys.readouterr().err.startswith("spmdgpt: error: launch: nproc=0 must be >= 1")


def test_overrides_apply_on_a_resolved_config():
    """apply_overrides (sample's config overrides on top of a run's config.yaml)."""
    from spmdgpt.config import apply_overrides

    base = load_config(["+experiment=staircase"])
    cfg = apply_overrides(base, ["mesh.data=2", "mesh.model=4", "sharding=tp", "model.attention=xla"])
    assert (cfg.mesh.data, cfg.mesh.model, cfg.sharding.name, cfg.model.attention.value) == (2, 4, "tp", "xla")
    assert cfg.sharding.params == {
        "experts": "expert",
        "layers": "stage",
        "heads": "model",
        "kv_heads": "model",
        "mlp": "model",
        "vocab": "model",
    }
    assert cfg.model.d_model == base.model.d_model == 64
    for bad, msg in ((["sharding=nope"], "sharding=nope: no such rule table (packaged tables: dp, fsdp"),
                     (["+experiment=staircase"], "+experiment=staircase: only key=value overrides"),
                     (["model.d_model=abc"], "model.d_model=abc: expected an integer"),
                     (["model.num_kv_heads=x"], "model.num_kv_heads=x: expected an integer or null"),
                     (["colour=red"], "colour: no such config field; the sections: model, data, optimizer,")):
        with pytest.raises(ConfigError) as e:
            apply_overrides(base, bad)
        assert e.value.messages[0].startswith(msg), e.value.messages


def test_public_api_names_resolve():
    """Every name in spmdgpt.__all__ resolves, and spmdgpt.train stays the function after the
    loop's module has been imported (a submodule named `train` would replace it)."""
    import spmdgpt
    import spmdgpt.loop  # noqa: F401

    assert all(getattr(spmdgpt, name) is not None for name in spmdgpt.__all__)
    assert callable(spmdgpt.train) and spmdgpt.train is spmdgpt.loop.train


def test_validation_by_section_and_cross_checks_need_both_sections():
    from spmdgpt.config import SECTIONS, validate

    cfg = load_config([*STAIR, "model.num_heads=5", "data.val_fraction=1.5", "model.loss_block=48",
                       "optimizer.lr=0", "mesh.data=3"])
    heads = ("model.num_heads=5 does not divide model.d_model=64; choose num_heads among the divisors of d_model, or "
             "give model.head_dim")
    block = ("model.loss_block=48 does not divide data.seq_len=64; choose a divisor of the sequence length "
             "(or 0 = off)")
    assert validate(cfg, 8, sections=("model",)) == [heads]
    assert validate(cfg, 8, sections=("model", "batch")) == [heads, block]
    assert validate(cfg, 8, sections=("corpus",)) == ["data.val_fraction=1.5 must be in (0, 1), e.g. 0.1"]
    assert validate(cfg, 8, sections=("optimizer",)) == ["optimizer.lr=0.0 must be > 0"]
    assert validate(cfg, 8, sections=("layout",)) == [
        "mesh.data=3 x mesh.stage=1 x mesh.expert=1 x mesh.context=1 x mesh.model=1 does not fit 8 device(s); the "
        "product of the fixed sizes must "
        "divide the device count (use -1 for one axis)"]
    assert len(validate(cfg, 8)) == 5 and validate(cfg, 8) == validate(cfg, 8, sections=SECTIONS)
    with pytest.raises(ValueError, match="unknown config sections"):
        validate(cfg, 8, sections=("modle",))


def test_config_sections_are_frozen_after_validation():
    import dataclasses

    from spmdgpt.config import freeze, validate

    cfg = load_config(STAIR)
    cfg.model.d_model = 128  # loading and overriding: still mutable
    cfg.model.d_model = 64
    assert validate(cfg, 8) == [] and freeze(cfg) is cfg
    for section, name in ((cfg, "model"), (cfg.model, "d_model"), (cfg.train, "steps"), (cfg.mesh, "data")):
        with pytest.raises(dataclasses.FrozenInstanceError, match="frozen after validation"):
            setattr(section, name, getattr(section, name))
    longer = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=9))  # a change: a new config
    assert longer.train.steps == 9 and cfg.train.steps == 5 and longer.model is cfg.model
    longer.train.steps = 10  # not validated yet, so not frozen


def test_config_command_prints_the_config_or_a_sections_fields(capsys):
    """`spmdgpt config`: the resolved config as YAML; with a section, one line a field (its value
    under the overrides, the schema's comment); a bad section and Hydra's --cfg are one line, exit 2."""
    import yaml

    assert main(["config", "+experiment=staircase", "model.d_model=96"]) == 0
    got = yaml.safe_load(capsys.readouterr().out)
    assert got["model"]["d_model"] == 96 and got["rl"]["group_size"] == 8
    assert main(["config", "rl", "rl.group_size=4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# Reinforcement learning with verifiable rewards")
    assert any(ln.startswith("rl.group_size = 4 ") and ln.endswith("# completions sampled per prompt (data.batch_size "
                                                                   "/ group_size prompts a step)") for ln in lines)
    assert sum(ln.startswith("rl.") for ln in lines) == len(__import__("dataclasses").fields(load_config([]).rl))
    assert main(["config", "model.moe", "+experiment=deepseek_v3_small"]) == 0
    moe = capsys.readouterr().out  # (a comment that goes on over lines, joined)
    assert "model.moe.num_experts = 8 " in moe and "its first_k_dense_replace; MaxText: first_num_dense_layers)" in moe
    assert main(["config", "model"]) == 0  # (a section without a docstring of its own: no header line)
    assert capsys.readouterr().out.startswith("model.num_layers = ")
    # a config that train refuses is refused, not printed (but for the mesh against the devices)
    assert main(["config", "model.num_heads=5"]) == 2
    refused = capsys.readouterr()
    assert refused.out == "" and "model.num_heads=5" in refused.err and refused.err.startswith("spmdgpt: error: ")
    # a model past any machine (XLA's shapes would overflow in int64: a traceback) is refused in one line
    assert main(["config", "model.d_model=1000000000"]) == 2
    assert "about 4.8e+19 parameters, past what any machine holds (1e+15)" in capsys.readouterr().err
    assert main(["config", "mesh.data=3"]) == 0  # (8 devices here; `config` does not know the machine's)
    capsys.readouterr()
    assert main(["config", "modle"]) == 2
    assert capsys.readouterr().err.startswith("spmdgpt: error: 'modle' is not a config section; sections: model, data")
    assert main(["train", "--cfg", "job"]) == 2
    assert capsys.readouterr().err == ("spmdgpt: error: --cfg is Hydra's flag, which spmdgpt's commands do not take; "
                                       "spmdgpt config [SECTION] [overrides] prints the resolved config or a section's "
                                       "fields\n")
