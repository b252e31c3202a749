#!/usr/bin/env bash
# Device call (nvidia-h200-x2), session 5: the whole GPU suite; an earlier engine
# (.carry/ganengine_before, built here from the commit BENCHMARKS.md names), optionally one in
# between (.carry/ganengine_mid) and this one side by side, alternating so drift hits all alike;
# ncu kernel summaries of the O3 step (NCU_BATCHES, default "1024 64", empty: none); with FULL=1 process start
# to first step and the side-by-side benchmark with PyTorch (tools/bench_suite.sh).
# Everything under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/dev/gpu_call_lib.sh
if [ "${SUITE:-1}" = 1 ]; then gpu_call_suite; fi
if [ -x .carry/ganengine_before ]; then
  for round in 1 2; do
    for which in before $( [ -x .carry/ganengine_mid ] && echo mid ) after; do
      bin=$GE; [ $which = before ] && bin=.carry/ganengine_before; [ $which = mid ] && bin=.carry/ganengine_mid
      timeout 90 $bin bench --opt-level O2,O3 --batch-sizes 64,1024 \
        --json "$OUT/ab_${which}_$round.json" > "$OUT/ab_${which}_$round.log" 2>&1
      grep -E "O[23] graph +batch" "$OUT/ab_${which}_$round.log" | sed "s/^/$which $round: /"
    done
  done
fi
gpu_call_ncu "${NCU_BATCHES-1024 64}" 120 30 0
# Where BatchNorm's kernels spend their time (Speed of Light, occupancy, memory): BN_DETAIL=1.
if [ "${BN_DETAIL:-0}" = 1 ]; then
  timeout 120 ncu --clock-control none --profile-from-start off \
    --kernel-name regex:"reduce_channels|batchnorm_dx|normalize_kernel" --launch-count 26 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    $GE bench --opt-level O3 --batch-sizes ${DETAIL_BATCH:-1024} --warmup 8 --steps 1 --windows 1 --profile \
    > "$OUT/ncu_bn_detail.txt" 2> "$OUT/ncu_bn_detail.err"
  grep -E "reduce_channels|batchnorm_dx|normalize_kernel|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per" \
    "$OUT/ncu_bn_detail.txt" | head -120 > "$OUT/ncu_bn_detail_short.txt"
fi
if [ "${FULL:-0}" = 1 ]; then gpu_call_pytorch 280 0; fi
gpu_call_pack
