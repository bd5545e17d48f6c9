#!/usr/bin/env bash
# The GPU issue's visits (device tool, carry [".gpu"]), the prepared scripts trimmed to a
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
# The fifth visit ran `one` (cut by its limit in the MoE GPT's preflight), the sixth `next` as it
# was then and FP8 on the 1.1B, the seventh `next`, `check` and `two` (BENCHMARKS.md). What is left,
# for the eighth visit, one call of about 8 minutes:
#
#   bash benchmarks/gpu_visit.sh eighth  # the MoE layer's profile with bf16's tuned tiles
#       (grouped.HALF_TILES: splits the roofline's two rates), the MoE GPT-2 124M against the dense
#       one with them (the trainer), the profile of FP8's GPT-2 124M step (why 0.85x bf16), the
#       inference engine's decode rows by the Triton paged-attention kernel against the gather
#   bash benchmarks/gpu_visit.sh tokamax  # (about 6 minutes) tokamax's Mosaic GPU kernels: the fused
#       attention kernels (cuDNN's against tokamax's Mosaic GPU and Triton flash attention, the dense
#       step's largest gap) checked against float32 and timed at 16 x 1024 and 4 x 4096; the MoE
#       kernels checked against the masked reference with tokamax's ragged_dot among them, the layer
#       timed against pallas; GPT-2 124M's trainer with model.attention=tokamax (against the dense
#       trainer row of `eighth`). Needs the tokamax wheels: `gpu_env.sh fetch` again.
#   bash benchmarks/gpu_visit.sh check   # (2 minutes) the kernels against the masked reference, again
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
# the pallas kernels' tiles to time (rows_k,rows_n,weights_k,weights_n,warps,stages; each compiles
# for an H100 on the CPU: python benchmarks/moe.py --target h100 --tokens 16384 --d 1024 --dtype
# bfloat16 --only pallas --tiles "$SWEEP")
SWEEP="64,256,128,128,8,3;64,128,128,128,8,3;128,128,128,128,8,3;64,256,64,128,8,4;32,256,128,64,8,4"
attention() {  # the fused attention kernels, checked and timed (benchmarks/attention_kernels.py)
    python3 benchmarks/attention_kernels.py --json "$out/attention-1k.json"
    python3 benchmarks/attention_kernels.py --batch 4 --seq 4096 --only cudnn,tokamax-mosaic,tokamax-triton \
        --json "$out/attention-4k.json"
}
export out
export -f train attention
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
elif [ "$part" = next ] || [ "$part" = check ]; then
    stage 150 "MoE check, float32 at highest precision, autotuning off" env XLA_FLAGS=--xla_gpu_autotune_level=0 \
        python3 benchmarks/moe.py --check --tokens 2048 --d 256 --tiles "$SWEEP"
    [ "$part" = check ] && stage 120 "MoE check, bfloat16, the kernels' tiles" python3 benchmarks/moe.py --check \
        --tokens 2048 --d 256 --dtype bfloat16 --tiles "$SWEEP"
    [ "$part" = next ] && stage 180 "MoE layer 16384 x 1024, bfloat16, the kernels' tiles" python3 benchmarks/moe.py --tokens 16384 \
        --d 1024 --rounds 5 --dtype bfloat16 --only dense,pallas --tiles "$SWEEP"
elif [ "$part" = eighth ]; then
    stage 120 "MoE layer 16384 x 1024, bfloat16, profiled" python3 benchmarks/moe.py --tokens 16384 --d 1024 \
        --rounds 5 --dtype bfloat16 --only dense,pallas --profile /tmp/moe-trace
    stage 150 "gpt2_124m dense, trainer" train dense
    stage 150 "gpt2_124m MoE (8 experts of half width, top-2), trainer" train moe model.moe.num_experts=8 \
        model.moe.top_k=2 model.moe.mlp_factor=2
    stage 150 "FP8 GPT-2 124M, profiled" python3 benchmarks/gpu.py profile --out "$out" --only \
        jax-cudnn-fp8delayedhead-1k
    stage 120 "engine: paged-attention kernel vs gather, 128 requests" python3 benchmarks/engine.py \
        --only engine,engine-gather --slots 64 --json "$out/engine-kernel.json"
elif [ "$part" = tokamax ]; then
    stage 100 "attention kernels at 16 x 1024 and 4 x 4096: cuDNN, tokamax's Mosaic GPU and Triton" attention
    stage 100 "MoE check, bfloat16 (tokamax's ragged_dot with the others)" python3 benchmarks/moe.py --check \
        --tokens 4096 --d 512 --dtype bfloat16
    stage 100 "MoE layer 16384 x 1024, bfloat16: pallas against tokamax" python3 benchmarks/moe.py --tokens 16384 \
        --d 1024 --rounds 5 --dtype bfloat16 --only dense,pallas,tokamax
    stage 150 "gpt2_124m dense, tokamax's attention, trainer" train dense-tokamax model.attention=tokamax
else  # two
    stage 300 "FP8 on GPT-2 124M against bf16 and PyTorch" python3 benchmarks/gpu.py speed --out "$out" --only \
        jax-cudnn-bf16logits-1k,jax-cudnn-fp8delayedhead-1k,torch-1k
    stage 100 "MoE layer 65536 x 2048, bfloat16" python3 benchmarks/moe.py --tokens 65536 --d 2048 --rounds 3 \
        --dtype bfloat16 --only dense,pallas --tiles "64,256,64,128,8,4"
fi
} 2>&1 | tee "$out/log-$part.txt"
