#!/usr/bin/env bash
# Device call (nvidia-h200-x2) for the 8-channel kernels with fused activations: the whole GPU
# suite, the engine with the hand-written kernels off and on side by side, and an ncu kernel
# summary of the O3 step at batch 1024. Everything under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine" GANENGINE_CUDNN_CACHE=off
GE=.carry/ganengine
OUT="$OUT/suite" timeout ${SUITE_LIMIT:-220} tools/gpu_suite.sh | tail -1
grep -B3 -A12 "ERROR" "$OUT/suite/tests.log" | head -60
for mode in off on; do
  GANENGINE_CONV_8CH=$mode timeout 60 $GE bench --opt-level O2,O3 --batch-sizes 64,1024 --json "$OUT/bench_8ch_$mode.json" \
    > "$OUT/bench_8ch_$mode.log" 2>&1; grep batch "$OUT/bench_8ch_$mode.log" | sed "s/^/8ch $mode: /"
done
timeout 120 tools/ncu_kernels.sh O3 1024 "$OUT/ncu_O3_1024" $GE > /dev/null 2> "$OUT/ncu.err"; head -30 "$OUT/ncu_O3_1024.txt"
timeout 60 tools/ncu_kernels.sh O3 64 "$OUT/ncu_O3_64" $GE > /dev/null 2> "$OUT/ncu64.err"; head -3 "$OUT/ncu_O3_64.txt"
tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"
