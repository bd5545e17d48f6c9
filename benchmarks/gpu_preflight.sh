#!/usr/bin/env bash
# The preflight issue on a lent GPU (device tool, carry [".gpu"]):
#
#   bash benchmarks/gpu_preflight.sh         # docs/gpu.md's gpt2_124m command, shortened to 6 steps with
#       two evaluations, trains and evaluates to the end (it died at its first evaluation before the
#       evaluation ran in the step's microbatches); the preflight's compile time with XLA's
#       autotuning and without; train.microbatches=1 refused before step 1, exit 2
#   bash benchmarks/gpu_preflight.sh cache   # the same 6 steps three times over one persistent
#       compilation cache: cold, warm (the executables loaded), and with another learning rate (a
#       new program: compiled again, XLA's per-fusion autotuning results reused)
set -u
source benchmarks/gpu_env.sh
short=(+experiment=gpt2_124m train.steps=6 train.eval_every=3 train.eval_batches=2 checkpoint.enabled=false
       train.rollout_tokens=0 train.progress=false train.log_every=1)
train() {  # name, extra overrides...: one short run, its preflight line, exit code and wall time
    local name=$1; shift
    local t0=$EPOCHREALTIME
    python3 -m spmdgpt train "${short[@]}" run.dir=/tmp/r-$name "$@" 2>&1 | grep -v "^WARNING\|^I0000\|^W0000" | tail -14
    echo "rc=${PIPESTATUS[0]} wall $(python3 -c "print(round($EPOCHREALTIME - $t0, 1))") s"
    grep val/loss /tmp/r-$name/metrics.jsonl
}
if [ "${1:-}" = cache ]; then
    export SPMDGPT_COMPILE_CACHE=/tmp/spmdgpt-xla-cache
    echo "== cold cache"; train cold
    echo "== warm cache"; train warm
    echo "== warm cache, optimizer.lr=3e-4 (another program)"; train lr optimizer.lr=3e-4
    du -sh $SPMDGPT_COMPILE_CACHE
    exit
fi
export SPMDGPT_COMPILE_CACHE=off
echo "== gpt2_124m, 6 steps"; train default
echo "== gpt2_124m, 6 steps, XLA_FLAGS=--xla_gpu_autotune_level=0"; XLA_FLAGS=--xla_gpu_autotune_level=0 train autotune0
echo "== train.microbatches=1: refused before step 1"
t0=$EPOCHREALTIME
python3 -m spmdgpt train +experiment=gpt2_124m train.microbatches=1 run.dir=/tmp/r-refused 2>&1 | grep -v "^WARNING" | tail -3
echo "rc=${PIPESTATUS[0]} wall $(python3 -c "print(round($EPOCHREALTIME - $t0, 1))") s; run.dir: $(ls /tmp/r-refused 2>&1)"
