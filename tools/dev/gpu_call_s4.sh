#!/usr/bin/env bash
# Device call (nvidia-h200-x2), session 4: the whole GPU suite, the hand-written 8-channel
# kernels off and on side by side, ncu kernel summaries of the O3 step at batch 1024 and 64,
# process start to first step, then the side-by-side benchmark with PyTorch
# (tools/bench_suite.sh). Everything under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT/bench"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine" GANENGINE_CUDNN_CACHE=off
GE=.carry/ganengine
OUT="$OUT/suite" timeout ${SUITE_LIMIT:-220} tools/gpu_suite.sh | tail -1
grep -B3 -A12 "ERROR" "$OUT/suite/tests.log" | head -60
for mode in off on; do
  GANENGINE_CONV_8CH=$mode timeout 60 $GE bench --opt-level O2,O3 --batch-sizes 64,1024 --json "$OUT/bench_8ch_$mode.json" \
    > "$OUT/bench_8ch_$mode.log" 2>&1; grep batch "$OUT/bench_8ch_$mode.log" | sed "s/^/8ch $mode: /"
done
timeout 120 tools/ncu_kernels.sh O3 1024 "$OUT/ncu_O3_1024" $GE > /dev/null 2> "$OUT/ncu.err"; head -24 "$OUT/ncu_O3_1024.txt"
timeout 60 tools/ncu_kernels.sh O3 64 "$OUT/ncu_O3_64" $GE > /dev/null 2> "$OUT/ncu64.err"; head -12 "$OUT/ncu_O3_64.txt"
# Where the small and hand-written kernels spend their time (Speed of Light, occupancy, stalls):
# NCU_DETAIL=1 (the third call of session 4 ran it).
if [ "${NCU_DETAIL:-0}" = 1 ]; then
  timeout 120 ncu --clock-control none --profile-from-start off \
    --kernel-name regex:"adam_kernel|conv_8ch|unscale_kernel" --launch-count 12 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    $GE bench --opt-level O3 --batch-sizes ${DETAIL_BATCH:-1024} --warmup 8 --steps 1 --windows 1 --profile \
    > "$OUT/ncu_detail.txt" 2> "$OUT/ncu_detail.err"
fi
for b in 64 1024; do
  timeout 60 $GE train --dataset fake --batchSize $b --opt-level O2 --max-steps 2 --outf /tmp/first_$b > "$OUT/first_step_$b.log" 2>&1
  grep -i "first step\|cuDNN algorithms" "$OUT/first_step_$b.log" | head -3
done
OUT="$OUT/bench" BENCH_PT_ARGS="--configs graph_half,autocast,half,graph_fp32,fp32 --time-budget ${PT_BUDGET:-120}" \
  timeout 280 tools/bench_suite.sh > "$OUT/bench/suite.log" 2>&1
sed -n '/### Ratios/,/### ganengine/p' "$OUT/bench/bench_compare.md" | grep -E "^\| (64|256|1024) \| (mixed|half)"
grep -E "O[0-3] graph +batch" "$OUT/bench/bench_ganengine.log"
tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"
