#!/usr/bin/env bash
# The GPU issue's fifth visit (device tool, carry [".gpu"]), the prepared scripts trimmed to a
# 15-minute lease, in the issue's order of value, each stage under its own `timeout` so that a
# slow one cannot take the next ones with it:
#
#   bash benchmarks/gpu_visit.sh one   # (a) the MoE kernels against the masked reference (fp32,
#       bf16), the layer at 16,384 x 1,024 (bf16, fp32), the MoE GPT-2 124M against the dense one
#       (the trainer, 20 steps of 16 x 1024); (b) FP8 on GPT-2 124M: bf16, FP8 current, FP8
#       delayed + head and PyTorch in one call (about 8 minutes)
#   bash benchmarks/gpu_visit.sh two   # FP8 on the 1.1B of GPT-2's kind (bf16, FP8 delayed + head),
#       the MoE layer at 65,536 x 2,048 (bf16), FP8 delayed without the head on the 124M
#
# The fifth visit ran `one` (cut by its limit in the MoE GPT's preflight: BENCHMARKS.md). What it
# left, for the next visit's first call (about 8 minutes):
#
#   bash benchmarks/gpu_visit.sh next  # the kernels' float32 check at highest precision (1e-5),
#       the bf16 layer's dense and pallas rows with each one's device time by kernel, and the MoE
#       GPT-2 124M's bare step against the dense one (gpu.py speed: no trainer preflight)
#
# Everything printed goes to $OUT/log-<part>.txt as well (a stage killed by its timeout says so).
set -u
source benchmarks/gpu_env.sh
out=${OUT:-gpu-out}
mkdir -p "$out"
part=${1:-one}
quiet() { grep -v "^WARNING\|^I0000\|^W0000\|sort_rewriter\|To avoid this"; }
stage() {  # seconds, label, command...: one stage, its wall time and exit code
    local limit=$1 label=$2; shift 2
    local t0=$EPOCHREALTIME
    echo "== $label"
    timeout "$limit" bash -c '"$@"' _ "$@" 2>&1 | quiet
    echo "-- rc=${PIPESTATUS[0]} wall $(python3 -c "print(round($EPOCHREALTIME - $t0, 1))") s"
}
train() {  # name, overrides...: the trainer's tokens/s, 20 steps of 16 x 1024
    local name=$1; shift
    python3 -m spmdgpt train +experiment=gpt2_124m "$@" train.steps=20 train.eval_every=0 train.microbatches=1 \
        data.batch_size=16 checkpoint.enabled=false train.rollout_tokens=0 train.progress=false \
        train.log_every=5 run.dir="/tmp/r-$name" | tail -8
    cp "/tmp/r-$name/metrics.jsonl" "$out/$name-metrics.jsonl"
}
export out
export -f train
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
if [ "$part" = one ]; then
    stage 100 "MoE check, float32" python3 benchmarks/moe.py --check --tokens 4096 --d 512
    stage 100 "MoE check, bfloat16" python3 benchmarks/moe.py --check --tokens 4096 --d 512 --dtype bfloat16
    stage 100 "MoE layer 16384 x 1024, bfloat16" python3 benchmarks/moe.py --tokens 16384 --d 1024 --rounds 5 \
        --dtype bfloat16
    stage 100 "MoE layer 16384 x 1024, float32" python3 benchmarks/moe.py --tokens 16384 --d 1024 --rounds 5
    stage 150 "gpt2_124m dense, trainer" train dense
    stage 150 "gpt2_124m MoE (8 experts of half width, top-2), trainer" train moe model.moe.num_experts=8 \
        model.moe.top_k=2 model.moe.mlp_factor=2
    stage 240 "FP8 speed, GPT-2 124M" python3 benchmarks/gpu.py speed --out "$out" --only \
        jax-cudnn-bf16logits-1k,jax-cudnn-bf16logits-fp8-1k,jax-cudnn-fp8delayedhead-1k,torch-1k
elif [ "$part" = next ]; then
    stage 120 "MoE check, float32 at highest precision" python3 benchmarks/moe.py --check --tokens 4096 --d 512
    stage 120 "MoE layer 16384 x 1024, bfloat16, profiled" python3 benchmarks/moe.py --tokens 16384 --d 1024 \
        --rounds 5 --dtype bfloat16 --only dense,pallas --profile /tmp/moe-profile
    stage 130 "GPT-2 124M dense, bare step" python3 benchmarks/gpu.py speed --out /tmp/dense --only \
        jax-cudnn-bf16logits-1k
    stage 150 "GPT-2 124M MoE (8 experts of half width, top-2), bare step" python3 benchmarks/gpu.py speed \
        --out /tmp/moe --only jax-cudnn-bf16logits-1k --set model.moe.num_experts=8 model.moe.top_k=2 \
        model.moe.mlp_factor=2
else
    stage 240 "FP8 speed, 1.1B" python3 benchmarks/gpu.py speed --out "$out" --only \
        jax-1b-bf16logits-1k,jax-1b-fp8delayedhead-1k
    stage 100 "MoE layer 65536 x 2048, bfloat16" python3 benchmarks/moe.py --tokens 65536 --d 2048 --rounds 3 \
        --dtype bfloat16
    cp "$out/speed.json" "$out/speed-1b.json"
    stage 100 "FP8 delayed, GPT-2 124M" python3 benchmarks/gpu.py speed --out "$out" --only \
        jax-cudnn-bf16logits-fp8delayed-1k
fi
} 2>&1 | tee "$out/log-$part.txt"
