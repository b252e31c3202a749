#!/usr/bin/env bash
# Session 8's device calls (run from the repository root on the GPU host, binaries staged by
# tools/stage_gpu.sh into .carry/). Switches:
#   PROBE="1024 64"   tools/dev/conv_engine_probe.cpp at these batch sizes (PROBE_LIMIT s)
#   SUITE=1           the GPU suite (SUITE_LIMIT s)
#   VARIANTS="name=bin[:ENV=val] ..." ROUNDS AB_BATCHES   alternating A/B of `ganengine bench`
#   FIRST=1           process start to first step at batch 64 and 1024 (cold algorithm cache)
#   FULL=1            first step and the benchmark beside PyTorch (FULL_LIMIT s, PT_BUDGET s)
#   NCU_BATCHES="64 1024"  ncu summaries of the O3 step (NCU_LINES lines each)
# Results and logs under $OUT, packed into $OUT/call.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader

if [ -n "${PROBE:-}" ]; then
  echo "== conv engine probe ($PROBE)"
  timeout ${PROBE_LIMIT:-240} .carry/ganengine_conv_probe $PROBE > "$OUT/probe.log" 2>&1
  echo "rc $?"; cat "$OUT/probe.log" | head -${PROBE_LINES:-140} | cut -c1-150
fi

if [ "${SUITE:-0}" = 1 ]; then echo "== GPU suite"; gpu_call_suite; fi

if [ -n "${VARIANTS:-}" ]; then
  echo "== A/B"
  for round in $(seq 1 ${ROUNDS:-2}); do
    for variant in $VARIANTS; do
      name=${variant%%=*} spec=${variant#*=}
      bin=${spec%%:*} envs=$( [[ $spec == *:* ]] && echo "${spec#*:}" )
      env $envs timeout 120 $bin bench --opt-level O2,O3 --batch-sizes ${AB_BATCHES:-64,256,1024} \
        --json "$OUT/ab_${name}_$round.json" > "$OUT/ab_${name}_$round.log" 2>&1
      grep -E "O[23] graph +batch" "$OUT/ab_${name}_$round.log" | cut -c1-60 | sed "s/^/$name $round: /"
    done
  done
fi

if [ "${FIRST:-0}" = 1 ]; then
  echo "== first step"
  for b in 64 1024; do
    timeout 60 $GE train --dataset fake --batchSize $b --opt-level O2 --max-steps 2 --outf /tmp/first_$b > "$OUT/first_step_$b.log" 2>&1
    grep -i "first step\|cuDNN algorithms" "$OUT/first_step_$b.log" | head -3
  done
fi

if [ "${FULL:-0}" = 1 ]; then echo "== beside PyTorch"; gpu_call_pytorch ${FULL_LIMIT:-200} 140; fi
if [ -n "${NCU_BATCHES:-}" ]; then echo "== ncu"; gpu_call_ncu "$NCU_BATCHES" 90 ${NCU_LINES:-30} 150; fi
gpu_call_pack
