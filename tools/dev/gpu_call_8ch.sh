#!/usr/bin/env bash
# Device call (nvidia-h200-x2) for the hand-written 8-channel convolution: the whole GPU suite,
# the engine with the kernel off and on side by side, then the side-by-side benchmark with
# PyTorch (tools/bench_suite.sh). Everything under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT/bench"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine" GANENGINE_CUDNN_CACHE=off
GE=.carry/ganengine
OUT="$OUT/suite" timeout ${SUITE_LIMIT:-200} tools/gpu_suite.sh | tail -1
grep -B3 -A8 "ERROR" "$OUT/suite/tests.log" | head -40
for mode in off on; do
  GANENGINE_CONV_8CH=$mode timeout 60 $GE bench --opt-level O2,O3 --batch-sizes 64,1024 --json "$OUT/bench_8ch_$mode.json" \
    > "$OUT/bench_8ch_$mode.log" 2>&1; grep batch "$OUT/bench_8ch_$mode.log" | sed "s/^/8ch $mode: /"
done
OUT="$OUT/bench" BENCH_PT_ARGS="--configs graph_half,autocast,half,graph_fp32,fp32 --time-budget ${PT_BUDGET:-120}" \
  timeout 250 tools/bench_suite.sh > "$OUT/bench/suite.log" 2>&1
sed -n '/### Ratios/,/### ganengine/p' "$OUT/bench/bench_compare.md" | grep -E "^\| (64|256|1024) \| (mixed|half)"
tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"
