#!/usr/bin/env bash
# Session 11's device calls (repository root on the GPU host, binaries staged by
# tools/stage_gpu.sh into .carry/). Switches as gpu_call_s8.sh (SUITE, VARIANTS, ROUNDS,
# AB_BATCHES, FULL, NCU_BATCHES), plus
#   NCU_DETAIL="REGEX" NCU_DETAIL_BATCH=1024 NCU_DETAIL_COUNT=9   ncu --set full of the kernels
#     matching REGEX in one O3 step: details page and the per-line source page (SASS + CUDA).
# Results and logs under $OUT, packed into $OUT/call.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader

if [ -n "${NCU_DETAIL:-}" ]; then
  echo "== ncu detail ($NCU_DETAIL)"
  timeout ${NCU_DETAIL_LIMIT:-240} ncu --clock-control none --profile-from-start off --set full --import-source yes \
    -k "regex:$NCU_DETAIL" -c ${NCU_DETAIL_COUNT:-9} -o "$OUT/detail" \
    $GE bench --opt-level O3 --batch-sizes ${NCU_DETAIL_BATCH:-1024} --warmup 8 --steps 1 --windows 1 --profile \
    > "$OUT/detail_run.log" 2>&1
  echo "rc $?"
  ncu -i "$OUT/detail.ncu-rep" --page details > "$OUT/detail.txt" 2>&1
  ncu -i "$OUT/detail.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/detail_source.csv" 2>&1
  grep -E "^  [a-z_ ]*void|Duration|Registers Per|Achieved Occupancy|DRAM Throughput|Compute \(SM\) Throughput" "$OUT/detail.txt" | cut -c1-140
fi

if [ "${SUITE:-0}" = 1 ]; then echo "== GPU suite"; gpu_call_suite; fi
if [ -n "${VARIANTS:-}" ]; then echo "== A/B"; gpu_call_ab; fi
if [ "${FULL:-0}" = 1 ]; then echo "== beside PyTorch"; gpu_call_pytorch ${FULL_LIMIT:-200} 140; fi
if [ -n "${NCU_BATCHES:-}" ]; then echo "== ncu"; gpu_call_ncu "$NCU_BATCHES" 90 ${NCU_LINES:-30} 150; fi
gpu_call_pack
