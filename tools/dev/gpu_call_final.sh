#!/usr/bin/env bash
# The closing device call (nvidia-h200-x2): the whole GPU suite, the side-by-side benchmark on
# cuda:0 (tools/bench_suite.sh), data-parallel scaling, eager-vs-graph memory, and train's time
# to the first step with and without the cuDNN algorithm cache. Everything under $OUT in one
# archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT/bench"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine"
GE=.carry/ganengine
OUT="$OUT/suite" timeout ${SUITE_LIMIT:-240} tools/gpu_suite.sh | tail -1
grep -E "largest relative" "$OUT/suite/tests.log"
OUT="$OUT/bench" BENCH_PT_ARGS="--configs graph_half,autocast,half,graph_fp32,fp32 --time-budget ${PT_BUDGET:-150}" \
  timeout 300 tools/bench_suite.sh > "$OUT/bench/suite.log" 2>&1
sed -n '/### Ratios/,/### ganengine/p' "$OUT/bench/bench_compare.md" | grep -E "^\| (64|1024) \| (mixed|half)"
# The same engine choosing algorithms with cudnnFind (the earlier default) instead of timing the
# heuristics' shortlist, side by side with the bench_suite rows above.
GANENGINE_CONV_SEARCH=find GANENGINE_CUDNN_CACHE=off timeout 90 $GE bench --opt-level O2,O3 --batch-sizes 64,256,1024 \
  --json "$OUT/bench_find.json" > "$OUT/bench_find.log" 2>&1; grep batch "$OUT/bench_find.log"
timeout 60 $GE bench --opt-level O2 --batch-sizes 1024 --cuda-graph off,on --json "$OUT/bench_memory.json" \
  > "$OUT/bench_memory.log" 2>&1; grep batch "$OUT/bench_memory.log"
timeout 60 $GE bench --opt-level O2 --batch-sizes 1024 --warmup 8 --steps 20 --windows 3 --json "$OUT/bench_ngpu1.json" \
  > "$OUT/bench_ngpu1.log" 2>&1; grep batch "$OUT/bench_ngpu1.log"
timeout 60 $GE bench --opt-level O2 --batch-sizes 1024,2048 --ngpu 2 --warmup 8 --steps 20 --windows 3 \
  --json "$OUT/bench_ngpu2.json" > "$OUT/bench_ngpu2.log" 2>&1; grep batch "$OUT/bench_ngpu2.log"
# Start to first step: with cudnnFind; then batch 64, then 1024 twice sharing a fresh algorithm
# cache file.
export GANENGINE_CUDNN_CACHE=/tmp/algos.txt
rm -f /tmp/algos.txt
GANENGINE_CONV_SEARCH=find GANENGINE_CUDNN_CACHE=off timeout 60 $GE train --dataset fake --batchSize 1024 \
  --opt-level O2 --max-steps 2 --no-progress --outf /tmp/firstfind 2>&1 | grep "first step" | sed "s/^/find, batch 1024: /"
for b in 64 1024 1024; do
  timeout 60 $GE train --dataset fake --batchSize $b --opt-level O2 --max-steps 2 --no-progress --outf /tmp/first$b \
    2>&1 | grep "first step" | sed "s/^/batch $b: /"
done
tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"
