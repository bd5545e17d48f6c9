#!/usr/bin/env bash
# The FP8 issue on a lent GPU (device tool, carry [".gpu"]), two calls:
#
#   bash benchmarks/gpu_fp8.sh speed    # GPT-2 124M: bf16, FP8 (current, delayed, delayed + head) and
#       PyTorch in one call; a 1.1B of GPT-2's kind (d 2048, 16 layers) in bf16 and FP8 (about 6 minutes)
#   bash benchmarks/gpu_fp8.sh curves   # 300 steps on the Gutenberg mixture: float32 (the reference),
#       bf16, FP8 and FP8 delayed + head; each against float32, read bf16 against FP8 from curves.json
#       (4 runs of at most 140 s: under the 10-minute call; a run cut short keeps its curve so far)
set -u
source benchmarks/gpu_env.sh
out=${OUT:-gpu-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
quiet() { grep -v "^WARNING\|^I0000\|^W0000"; }
if [ "${1:-}" = speed ]; then
    python3 benchmarks/gpu.py speed --out "$out" --only \
        jax-cudnn-bf16logits-1k,jax-cudnn-bf16logits-fp8-1k,jax-cudnn-bf16logits-fp8delayed-1k,jax-cudnn-fp8delayedhead-1k,torch-1k,jax-1b-bf16logits-1k,jax-1b-fp8delayedhead-1k \
        2>&1 | quiet
    exit
fi
python3 benchmarks/gpu.py curves --out "$out" --steps 300 --run-timeout 140 --only bf16,fp8,fp8-delayed-head 2>&1 | quiet
