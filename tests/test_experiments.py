"""Every packaged experiment fits the hardware it is sized for: each one's programs (the step, the
evaluation, and the statistics and rollouts where it asks for them) compiled for that hardware
from abstract shapes, compile-only, and each within a device's memory. The hardware is the one
its YAML header and the README name: one H100 (gpt2_124m, gemma3_1b), one host of 8 H100s (the
Llama configs; gpt_oss_20b), four hosts of 8 H100s (kimi_linear_48b), a v5p-64 slice with 8-way
expert parallelism (mixtral_8x7b), a v5p-128 one (gpt_oss_120b, qwen3_next_80b_a3b), a v5p-512 one
(deepseek_v4_flash), a v5p-1024 slice with 8-way expert parallelism (deepseek_v3); all but Llama 2 7B's only
with SPMDGPT_BIG_PLANS=1 (a minute or more of compilation each), and for the small ones a CPU device of this
machine holding the whole run.

The GPU plans use XLA's attention where cuDNN's library is not installed (CI installs the
gpu-plan extra, not gpu-plan-cudnn): it keeps each layer's attention probabilities where cuDNN's
fused kernel keeps one row statistic, so it needs more memory, and its plan fitting is the
stronger claim."""

import json
import os
from importlib import resources

import jax
import pytest
from conftest import compile_only_or_skip

from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.kinds import run_kind
from spmdgpt.mesh.runtime import host_memory
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.plan.plan import plan_step

HARDWARE = {  # experiment -> the plan's overrides for its hardware
    "gpt2_124m": ["topology=h100"],
    "llama_1b": ["topology=h100-8"],
    "llama3_2_1b": ["topology=h100-8"],
    "llama2_7b": ["topology=h100-8"],
    "llama3_8b": ["topology=h100-8"],
    "mixtral_8x7b": ["topology=v5p-64", "mesh.expert=8"],
    "gemma3_1b": ["topology=h100"],
    "deepseek_v3": ["topology=v5p-1024", "mesh.expert=8"],
    "deepseek_v4_flash": ["topology=v5p-512", "mesh.expert=8"],
    "gpt_oss_20b": ["topology=h100-8"],
    "gpt_oss_120b": ["topology=v5p-128", "mesh.expert=8"],
    "qwen3_next_80b_a3b": ["topology=v5p-128", "mesh.expert=8"],
    "kimi_linear_48b": ["topology=h100-32"],
    "olmo3_7b": ["topology=h100-8"],
    "nanochat_d32": ["topology=h100-8"],
    "llama4_scout": ["topology=v5p-128", "mesh.expert=8"],
    "gemma4_31b": ["topology=v5p-64"],
    "gemma4_26b_a4b": ["topology=v5p-32", "mesh.expert=8"],
    "gemma4_e4b": ["topology=h100-8"],
}
# planned only with SPMDGPT_BIG_PLANS=1: 512 devices, 3 minutes of compilation on a 2-core box (its plan is in
# benchmarks/BENCHMARKS.md)
BIG = {"deepseek_v3", "deepseek_v4_flash", "gpt_oss_20b", "gpt_oss_120b", "mixtral_8x7b", "llama3_2_1b", "llama_1b",
       "llama3_8b", "gemma3_1b", "qwen3_next_80b_a3b", "kimi_linear_48b", "gpt2_124m", "llama2_7b",
       "olmo3_7b", "nanochat_d32",  # (37 and 26 s on 8 H100s, their units against transformers in test_hf, plans in
       "llama4_scout", "gemma4_31b", "gemma4_26b_a4b", "gemma4_e4b"}  # BENCHMARKS; llama4_scout, gemma4_31b,
# gemma4_26b_a4b: minutes for a v5p slice, gemma4_e4b for 8 H100s, their units
# in test_hf, their plans in BENCHMARKS)
# (gemma3_1b: 80-100 s for one H100, the suite's slowest test;
# its windows, post-norms and GeGLU run on the CPU in test_hf (Gemma3ForCausalLM against transformers) and
# test_generate; gpt2_124m: 55-70 s, the suite's slowest then; its plan is in BENCHMARKS and README, and the H100
# compiler runs in test_plan and test_preflight; llama2_7b, 25 s, the last one planned in the suite until the ninth
# session: the same compiler path as test_plan's H100 plans, its plan in BENCHMARKS)
# (gpt-oss: 2 and 4 minutes; Mixtral: 2, the suite's slowest test, its plan in BENCHMARKS.md, test_moe.py plans
# expert parallelism on 8 devices; the Llamas on 8 H100s 25 s to a minute or more each)
# planned on this CPU only with SPMDGPT_BIG_PLANS=1 (15-25 s of compilation each on a 2-core box): each one's
# kind of run and program list is planned here at its published shape by another (text pretraining with MoE:
# shakespeare_moe; the GPT-2 tokenizer's model: shakespeare_gpt2, which gutenberg_gpt2's is), and their attention
# (MLA behind dense-then-MoE layers, Gated DeltaNet, windows and sinks, GQA) runs on the CPU in test_generate and
# test_engine
BIG_ON_THIS_CPU = {"deepseek_v3_small", "deepseek_v32_small", "deepseek_v4_small", "qwen3_5_small", "gpt_oss_small",
                   "gutenberg_gpt2", "shakespeare_gpt2_gqa",
                   "olmo3_small", "nanochat_small", "chain_sft", "chain_grpo", "llama4_small", "gemma4_small",
                   "gemma4_moe_small", "kimi_linear_small"}
ON_THIS_CPU = ["arithmetic_grpo", "arithmetic_sft", "calculator_grpo", "calculator_sft", "chain_grpo", "chain_sft",
               "deepseek_v3_small", "deepseek_v32_small", "deepseek_v4_small", "gemma4_moe_small", "gemma4_small",
               "gpt_oss_small", "gutenberg_gpt2",
               "kimi_linear_small",
               "llama4_small", "nanochat_small", "olmo3_small",
               "qwen3_5_small", "shakespeare_char", "shakespeare_gpt2", "shakespeare_gpt2_gqa", "shakespeare_moe",
               "staircase"]
LADDERS = ["ladder_gutenberg", "ladder_tiny"]  # spmdgpt ladder's grids (of ON_THIS_CPU's models): tests/test_ladder.py


def test_every_packaged_experiment_has_its_hardware():
    packaged = sorted(p.name.removesuffix(".yaml") for p in
                      (resources.files("spmdgpt") / "configs" / "experiment").iterdir() if p.name.endswith(".yaml"))
    assert packaged == sorted([*HARDWARE, *ON_THIS_CPU, *LADDERS])


def _compiler(topology: str):
    compile_only_or_skip(topology)


def _cudnn() -> bool:
    try:
        import nvidia.cudnn  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("name", list(HARDWARE))
def test_experiment_fits_its_hardware(name, capsys):
    if name in BIG and not os.environ.get("SPMDGPT_BIG_PLANS"):
        pytest.skip(f"{name}: set SPMDGPT_BIG_PLANS=1 to plan it (minutes of compilation)")
    overrides = HARDWARE[name]
    topology = overrides[0].split("=")[1]
    _compiler(topology)
    gpu = topology.startswith("h100")
    attention = ["model.attention=xla"] if gpu and not _cudnn() else []
    code = main(["plan", f"+experiment={name}", *overrides, *attention, "format=json"])
    out, err = capsys.readouterr()
    got = json.loads(out.strip().splitlines()[-1])
    assert code == 0, err
    names = [p["name"] for p in got["programs"]]
    assert names[0] == "train_step" and "evaluation" in names
    assert got["fits"] is True and all(p["fits"] for p in got["programs"])
    assert all(0 < p["total_bytes"] <= got["capacity_bytes"] for p in got["programs"])
    if gpu:
        assert got["capacity_bytes"] == int(85017493504 * 0.75)  # (JAX's allocator's share of an H100)


@pytest.mark.parametrize("name", ON_THIS_CPU)
def test_small_experiment_fits_one_cpu_device_of_this_machine(name):
    if name in BIG_ON_THIS_CPU and not os.environ.get("SPMDGPT_BIG_PLANS"):
        pytest.skip(f"{name}: set SPMDGPT_BIG_PLANS=1 to plan it (its kind of run is planned by another here)")
    cfg = load_config([f"+experiment={name}", "mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    with jax.set_mesh(mesh):
        plan = plan_step(cfg, Rules(mesh, cfg.sharding, cfg.model), whole_run=True, kind=run_kind(cfg))
    assert [p.name for p in plan.programs][0] == "train_step"
    for p in plan.programs:
        assert 0 < p.total_bytes <= host_memory() / 4, p.name  # (a quarter of this box: room to spare)
