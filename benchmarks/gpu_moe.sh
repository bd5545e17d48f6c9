#!/usr/bin/env bash
# The GPU MoE issue on a lent GPU (device tool, carry [".gpu"]), one call (about 6 minutes):
#
#   bash benchmarks/gpu_moe.sh
#
# 1. every dropless choice (blocks, ragged_dot, the pallas kernels) against the masked reference
#    on the GPU, float32 and bfloat16 (`benchmarks/moe.py --check`);
# 2. the layer timed against the dense MLP of equal active width at the two shapes
#    (float32, as it measured; a row that does not fit says so);
# 3. an MoE GPT (GPT-2 124M's shape, 8 experts of half width, top-2: the dense model's active
#    parameters) against the dense 124M: the trainer's tokens/s, 20 steps of 16 x 1024 each.
set -u
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
quiet() { grep -v "^WARNING\|^I0000\|^W0000\|sort_rewriter\|To avoid this"; }
python3 benchmarks/moe.py --check --tokens 4096 --d 512 2>&1 | quiet
python3 benchmarks/moe.py --check --tokens 4096 --d 512 --dtype bfloat16 2>&1 | quiet
python3 benchmarks/moe.py --tokens 16384 --d 1024 --rounds 5 2>&1 | quiet
python3 benchmarks/moe.py --tokens 65536 --d 2048 --rounds 3 2>&1 | quiet
for moe in "" "model.moe.num_experts=8 model.moe.top_k=2 model.moe.mlp_factor=2"; do
    echo "== gpt2_124m ${moe:-dense}"
    # shellcheck disable=SC2086
    python3 -m spmdgpt train +experiment=gpt2_124m $moe train.steps=20 train.eval_every=0 train.microbatches=1 \
        data.batch_size=16 checkpoint.enabled=false train.rollout_tokens=0 train.progress=false train.log_every=5 \
        run.dir="/tmp/r-moe-${moe:+moe}" 2>&1 | quiet | tail -6
done
