#!/usr/bin/env bash
# Device call (nvidia-h200-x2), session 6: the whole GPU suite; side by side, alternating so
# drift hits all alike: an earlier engine (.carry/ganengine_before, built from the commit
# BENCHMARKS.md names; optionally .carry/ganengine_mid, a later one), this one with its side
# lane off (GANENGINE_SIDE_LANE=off), and this one (side lane on, or LANES_MODE: auto;
# AB_WHICH picks among serial and lanes);
# the peak-memory breakdown of O2 at batch 1024 with the side lane on and off (MEM_LANES); with
# FULL=1 process start to first step and the side-by-side benchmark with PyTorch
# (tools/bench_suite.sh); last, ncu kernel summaries of O3 (NCU_BATCHES, default none).
# Everything under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/dev/gpu_call_lib.sh
if [ "${SUITE:-1}" = 1 ]; then gpu_call_suite; fi
AB_BATCHES=${AB_BATCHES:-64,256,1024}
if [ "${AB:-1}" = 1 ]; then
  for round in 1 2; do
    for which in $( [ -x .carry/ganengine_before ] && echo before ) $( [ -x .carry/ganengine_mid ] && echo mid ) \
        ${AB_WHICH:-serial lanes}; do
      bin=$GE; lane=${LANES_MODE:-on}
      [ $which = before ] && bin=.carry/ganengine_before
      [ $which = mid ] && bin=.carry/ganengine_mid
      [ $which = serial ] && lane=off
      GANENGINE_SIDE_LANE=$lane timeout 120 $bin bench --opt-level O2,O3 --batch-sizes $AB_BATCHES \
        --json "$OUT/ab_${which}_$round.json" > "$OUT/ab_${which}_$round.log" 2>&1
      grep -E "O[23] graph +batch" "$OUT/ab_${which}_$round.log" | sed "s/^/$which $round: /"
    done
  done
fi
if [ "${MEM:-1}" = 1 ]; then
  for lane in ${MEM_LANES:-on off}; do
    GANENGINE_SIDE_LANE=$lane timeout 60 $GE bench --opt-level O2 --batch-sizes 1024 --cuda-graph off,on \
      --warmup 6 --steps 5 --windows 2 --memory-breakdown > "$OUT/memory_lane_$lane.log" 2>&1
    grep -E "O2 .*batch|peak .*MiB in use" "$OUT/memory_lane_$lane.log" | sed "s/^/lane $lane: /"
  done
fi
if [ "${FULL:-0}" = 1 ]; then gpu_call_pytorch 280 0; fi
gpu_call_ncu "${NCU_BATCHES-}" 100 24 150
gpu_call_pack
