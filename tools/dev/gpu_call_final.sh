#!/usr/bin/env bash
# The closing device call (nvidia-h200-x2): the tests changed since the last full suite, the
# side-by-side benchmark on cuda:0 (tools/bench_suite.sh), data-parallel scaling, and the
# README's ncu command for O2 and O3. Everything under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT/bench"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine"
GE=.carry/ganengine
timeout 120 .carry/ganengine_tests -tc='*data parallel*,*fused*,gpu train cli*,*graph*,bench cli*' > "$OUT/tests.log" 2>&1
grep -E "^\[doctest\] (test cases|assertions)" "$OUT/tests.log"
OUT="$OUT/bench" BENCH_PT_ARGS="--configs graph_half,autocast,half,graph_fp32,fp32 --time-budget ${PT_BUDGET:-190}" \
  timeout 400 tools/bench_suite.sh > "$OUT/bench/suite.log" 2>&1
sed -n '/### Ratios/,/### ganengine/p' "$OUT/bench/bench_compare.md"
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  timeout 60 $GE bench --opt-level O2 --batch-sizes 1024,2048 --ngpu 2 --warmup 8 --steps 20 --windows 3 \
    --json "$OUT/bench_ngpu2.json" > "$OUT/bench_ngpu2.log" 2>&1; grep batch "$OUT/bench_ngpu2.log"
fi
for level in O3 O2; do
  timeout 60 tools/ncu_kernels.sh $level 1024 "$OUT/ncu_${level}_1024" $GE > /dev/null 2> "$OUT/ncu_$level.err"
  tail -1 "$OUT/ncu_${level}_1024.txt"
done
gzip -f "$OUT"/*.csv
tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"
