#!/usr/bin/env bash
# Device call (nvidia-h200-x2), session 7: the whole GPU suite (SUITE=1); side-by-side benchmark
# rounds of engine variants, alternating so drift hits all alike (VARIANTS: name=binary or
# name=binary:VAR=value, e.g. "before=.carry/ganengine_before new=.carry/ganengine
# one_stage=.carry/ganengine:GANENGINE_DEV_DGRAD_STAGES=1"; AB_BATCHES, ROUNDS); the O2 batch-1024
# peak-memory breakdown (MEM=1); with FULL=1 process start to first step and the benchmark beside
# PyTorch (tools/bench_suite.sh); last, ncu kernel summaries of O3 (NCU_BATCHES). Everything
# under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT/bench"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine" GANENGINE_CUDNN_CACHE=off
GE=.carry/ganengine
if [ "${SUITE:-1}" = 1 ]; then
  OUT="$OUT/suite" timeout ${SUITE_LIMIT:-220} tools/gpu_suite.sh | tail -1
  grep -B3 -A12 "ERROR" "$OUT/suite/tests.log" | head -60
fi
for round in $(seq 1 ${ROUNDS:-2}); do
  for variant in ${VARIANTS-}; do
    name=${variant%%=*} spec=${variant#*=}
    bin=${spec%%:*} envs=$( [[ $spec == *:* ]] && echo "${spec#*:}" )
    env $envs timeout 120 $bin bench --opt-level O2,O3 --batch-sizes ${AB_BATCHES:-64,256,1024} \
      --json "$OUT/ab_${name}_$round.json" > "$OUT/ab_${name}_$round.log" 2>&1
    grep -E "O[23] graph +batch" "$OUT/ab_${name}_$round.log" | cut -c1-60 | sed "s/^/$name $round: /"
  done
done
if [ "${MEM:-0}" = 1 ]; then
  timeout 60 $GE bench --opt-level O2 --batch-sizes 1024 --warmup 6 --steps 5 --windows 2 --memory-breakdown \
    > "$OUT/memory.log" 2>&1
  grep -E "O2 .*batch|peak .*MiB in use" "$OUT/memory.log" | cut -c1-200
fi
if [ "${FULL:-0}" = 1 ]; then
  for b in 64 1024; do
    timeout 60 $GE train --dataset fake --batchSize $b --opt-level O2 --max-steps 2 --outf /tmp/first_$b > "$OUT/first_step_$b.log" 2>&1
    grep -i "first step\|cuDNN algorithms" "$OUT/first_step_$b.log" | head -3
  done
  OUT="$OUT/bench" BENCH_PT_ARGS="--configs graph_half,autocast,half,graph_fp32,fp32 --time-budget ${PT_BUDGET:-120}" \
    timeout ${FULL_LIMIT:-280} tools/bench_suite.sh > "$OUT/bench/suite.log" 2>&1
  sed -n '/### Ratios/,/### ganengine/p' "$OUT/bench/bench_compare.md" | grep -E "^\| (64|256|1024) \| (mixed|half)"
  grep -E "O[0-3] graph +batch" "$OUT/bench/bench_ganengine.log" | cut -c1-150
fi
for b in ${NCU_BATCHES-}; do
  timeout 100 tools/ncu_kernels.sh O3 $b "$OUT/ncu_O3_$b" $GE > /dev/null 2> "$OUT/ncu_$b.err"; head -${NCU_LINES:-24} "$OUT/ncu_O3_$b.txt" | cut -c1-150
done
tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"
