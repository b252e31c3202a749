#!/usr/bin/env bash
# Device call (nvidia-h200-x2), session 7: the whole GPU suite (SUITE=1); side-by-side benchmark
# rounds of engine variants, alternating so drift hits all alike (VARIANTS: name=binary or
# name=binary:VAR=value, e.g. "before=.carry/ganengine_before new=.carry/ganengine
# serial=.carry/ganengine:GANENGINE_SIDE_LANE=off"; AB_BATCHES, ROUNDS); the O2 batch-1024
# peak-memory breakdown (MEM=1); with FULL=1 process start to first step and the benchmark beside
# PyTorch (tools/bench_suite.sh); last, ncu kernel summaries of O3 (NCU_BATCHES). Everything
# under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/dev/gpu_call_lib.sh
if [ "${SUITE:-1}" = 1 ]; then gpu_call_suite; fi
gpu_call_ab
if [ "${MEM:-0}" = 1 ]; then
  timeout 60 $GE bench --opt-level O2 --batch-sizes 1024 --warmup 6 --steps 5 --windows 2 --memory-breakdown \
    > "$OUT/memory.log" 2>&1
  grep -E "O2 .*batch|peak .*MiB in use" "$OUT/memory.log" | cut -c1-200
fi
if [ "${FULL:-0}" = 1 ]; then gpu_call_pytorch "${FULL_LIMIT:-280}" 150; fi
gpu_call_ncu "${NCU_BATCHES-}" 100 "${NCU_LINES:-24}" 150
gpu_call_pack
