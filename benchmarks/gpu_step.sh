#!/usr/bin/env bash
# The GPU issue on a lent GPU (device tool, carry [".gpu"]), two calls:
#
#   bash benchmarks/gpu_step.sh speed   # GPT-2 124M tokens/s against PyTorch in one call: the head,
#       each of the issue's changes undone alone (-autodiffgelu, -twoexp), XLA settings (-nocmdbuf:
#       no command buffers; -lhs: the latency-hiding scheduler), and PyTorch, at 1k and 4k
#   bash benchmarks/gpu_step.sh train   # `spmdgpt train +experiment=gpt2_124m` itself, 30 steps with
#       two evaluations: the trainer's tokens/s; then one profile of the 1k step
set -u
source benchmarks/gpu_env.sh
out=${OUT:-gpu-out}
mkdir -p "$out"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
if [ "${1:-}" = speed ]; then
    python3 benchmarks/gpu.py speed --out "$out" --only \
        jax-cudnn-bf16logits-1k,torch-1k,jax-cudnn-bf16logits-1k-autodiffgelu,jax-cudnn-bf16logits-1k-twoexp,jax-cudnn-bf16logits-1k-nocmdbuf,jax-cudnn-bf16logits-4k,torch-4k,jax-cudnn-bf16logits-1k-lhs \
        2>&1 | grep -v "^WARNING\|^I0000\|^W0000"
    exit
fi
t0=$EPOCHREALTIME
python3 -m spmdgpt train +experiment=gpt2_124m train.steps=30 train.eval_every=15 checkpoint.enabled=false \
    train.rollout_tokens=0 train.progress=false train.log_every=5 run.dir=/tmp/r-train 2>&1 \
    | grep -v "^WARNING\|^I0000\|^W0000" | tail -20
echo "rc=${PIPESTATUS[0]} wall $(python3 -c "print(round($EPOCHREALTIME - $t0, 1))") s"
cp /tmp/r-train/metrics.jsonl "$out/train-metrics.jsonl"
timeout 150 python3 benchmarks/gpu.py profile --out "$out" --only jax-cudnn-bf16logits-1k 2>&1 \
    | grep -v "^WARNING\|^I0000\|^W0000" | tail -20
