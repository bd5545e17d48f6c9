"""Collective matmuls (model/collective.py): tensor parallelism with the residual stream split over
the tensor axis, its gathers and reduce-scatters as ppermute loops, equal to one device."""

import re

import jax
import pytest
from jax.sharding import PartitionSpec as P
from layouts import T_LEN, B, assert_matches, cfg_for, reference, run

from spmdgpt.cli import main
from spmdgpt.config import validate
from spmdgpt.mesh.sharding import Rules, make_mesh

CASES = [  # (id, model overrides, layout overrides, check per-token losses and statistics too)
    # both directions on 4 devices (2 hops left, 1 right); the 2 key/value heads replicated over
    # them (w_kv's columns whole on every device), SwiGLU's two input matmuls on one gather
    ("bi-gqa-swiglu-tp-d2m4", ("model.num_kv_heads=2", "model.mlp=swiglu"),
     ("sharding=tp", "mesh.data=2", "mesh.model=4", "model.collective_matmul=bi"), True),
    # one direction, composed with a context ring and FSDP (the stream: data x context x model)
    ("uni-fsdp_tp-c2m4", ("model.loss_block=8",),
     ("sharding=fsdp_tp", "mesh.data=1", "mesh.context=2", "mesh.model=4", "model.collective_matmul=uni"), False),
    # experts: the stream gathered for the router and the experts, the result scattered back
    ("bi-moe-d2e2m2", ("model.moe.num_experts=4", "model.moe.top_k=2"),
     ("sharding=tp", "mesh.data=2", "mesh.expert=2", "mesh.model=2", "model.collective_matmul=bi"), False),
]


def stream_all_reduces(hlo: str, tokens: int, d: int = 32) -> int:
    """All-reduces of [tokens, d] float32 arrays in a compiled step: tensor parallelism's sums of
    partial products."""
    return len(re.findall(rf"= f32\[{tokens},{d}\]\{{1,0\}} all-reduce(-start)?\(", hlo))


@pytest.mark.parametrize("model,layout,full", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_collective_matmuls_equal_one_device(model, layout, full):
    ref = reference(model, full)
    got = run(cfg_for(*model, *layout), full)
    assert_matches(got, ref, full)
    hlo = got[2]
    assert hlo.count("collective-permute") >= 4
    if "mesh.data=2" in layout and "mesh.model=4" in layout:
        # Plain tensor parallelism all-reduces [tokens, d] after each output projection and, in
        # the backward, after the input projections (the layer scan's body once) and for the
        # unembedding's input: 4 here. With the split stream only the last stays (the stream is
        # gathered for the unembedding, JAX's transpose of which XLA:CPU writes as an
        # all-reduce): the units' sums travel as permutes.
        tokens = B * T_LEN // 2
        plain = run(cfg_for(*model, *layout[:-1]))[2]
        assert stream_all_reduces(plain, tokens) >= 4 and "collective-permute" not in plain
        assert stream_all_reduces(hlo, tokens) == 1


def test_the_stream_is_split_over_the_tensor_axis():
    cfg = cfg_for("sharding=tp", "mesh.data=2", "mesh.model=4", "model.collective_matmul=bi")
    mesh = make_mesh(cfg.mesh, jax.devices())
    rules = Rules(mesh, cfg.sharding, cfg.model)
    assert (rules.collective, rules.tensor_axes(), rules.tensor_size()) == ("bi", ("model",), 4)
    tokens = ("data", "expert", "context")  # (the batch's axes, then the sequence's)
    assert rules.spec("stream", "embed") == P(tokens + ("model",), None)
    assert rules.spec("tokens", "mlp") == P(tokens, "model")
    decode = rules.whole_sequences()  # cached decoding: one token per sequence, nothing to split
    assert (decode.collective, decode.spec("stream", "embed")) == ("none", P(("data", "expert"), None))
    assert rules.collective == "bi"  # (a copy)
    plain = Rules(mesh, cfg.sharding, cfg_for("sharding=tp", "mesh.data=2", "mesh.model=4").model)
    assert (plain.collective, plain.spec("stream", "embed")) == ("none", P(tokens, None))


@pytest.mark.parametrize("overrides,message", [
    (("mesh.data=8", "model.collective_matmul=bi"),
     "model.collective_matmul=bi needs tensor parallelism (sharding=dp with mesh.data=8 x mesh.stage=1 x "
     "mesh.expert=1 x "
     "mesh.context=1 x mesh.model=1 splits no attention heads or MLP width over more than one device); use "
     "sharding=tp or fsdp_tp with mesh.model>1, or model.collective_matmul=none"),
    (("sharding=tp", "mesh.data=2", "mesh.model=4", "model.collective_matmul=uni", "data.seq_len=62"),
     "model.collective_matmul=uni splits each device's 62 positions of a sequence (data.seq_len=62) over the 4 "
     "devices of the tensor axis; use a data.seq_len they divide into equal chunks"),
    (("sharding=fsdp_tp", "mesh.data=1", "mesh.context=2", "mesh.model=4", "model.collective_matmul=bi",
      "data.seq_len=60"),
     "model.collective_matmul=bi splits each device's 30 positions of a sequence (data.seq_len=60 / mesh.context=2) "
     "over the 4 devices of the tensor axis; use a data.seq_len they divide into equal chunks"),
])
def test_bad_collective_settings_are_one_line_each(overrides, message):
    assert validate(cfg_for(*overrides), 8) == [message]


def test_collective_matmul_without_a_tensor_axis_exits_2(capsys):
    code = main(["train", "+experiment=staircase", "model.collective_matmul=bi", "run.dir=/nonexistent/never-written"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.collective_matmul=bi needs tensor parallelism" in err[0]
