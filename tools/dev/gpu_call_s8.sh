#!/usr/bin/env bash
# Session 8's device calls, and later sessions' (run from the repository root on the GPU host, binaries staged by
# tools/stage_gpu.sh into .carry/). Switches:
#   PROBE="1024 64"   tools/dev/conv_engine_probe.cpp at these batch sizes (PROBE_LIMIT s)
#   SUITE=1           the GPU suite (SUITE_LIMIT s)
#   VARIANTS="name=bin[:ENV=val[,ENV=val]] ..." ROUNDS AB_BATCHES AB_OPT_LEVELS (O2,O3)   alternating A/B of `ganengine bench`
#   FIRST=1           process start to first step at batch 64 and 1024 (cold algorithm cache)
#   FULL=1            first step and the benchmark beside PyTorch (FULL_LIMIT s, PT_BUDGET s)
#   NCU_BATCHES="64 1024"  ncu summaries of the O3 step (NCU_LINES lines each)
#   NCU_DETAIL="REGEX" NCU_DETAIL_BATCH=1024 NCU_DETAIL_COUNT=9   ncu --set full of the kernels
#                     matching REGEX in one O3 step, with per-line source counters (first)
# Results and logs under $OUT, packed into $OUT/call.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader

if [ -n "${NCU_DETAIL:-}" ]; then
  echo "== ncu detail ($NCU_DETAIL)"
  gpu_call_ncu_detail "$NCU_DETAIL" ${NCU_DETAIL_BATCH:-1024} ${NCU_DETAIL_COUNT:-9}
fi

if [ -n "${PROBE:-}" ]; then
  echo "== conv engine probe ($PROBE)"
  timeout ${PROBE_LIMIT:-240} .carry/ganengine_conv_probe $PROBE > "$OUT/probe.log" 2>&1
  echo "rc $?"; cat "$OUT/probe.log" | head -${PROBE_LINES:-140} | cut -c1-150
fi

if [ "${SUITE:-0}" = 1 ]; then echo "== GPU suite"; gpu_call_suite; fi

if [ -n "${VARIANTS:-}" ]; then
  echo "== A/B"
  gpu_call_ab
fi

if [ "${FIRST:-0}" = 1 ]; then
  echo "== first step"
  gpu_call_first_step
fi

if [ "${FULL:-0}" = 1 ]; then echo "== beside PyTorch"; gpu_call_pytorch ${FULL_LIMIT:-200} 140; fi
if [ -n "${NCU_BATCHES:-}" ]; then echo "== ncu"; gpu_call_ncu "$NCU_BATCHES" 90 ${NCU_LINES:-30} 150; fi
gpu_call_pack
