#!/usr/bin/env bash
# One device call (nvidia-h200-x2): the whole GPU test suite, data-parallel scaling with bench
# --ngpu, per-kernel times of one O2 step. Everything under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT/suite"
source tools/gpu_env.sh
OUT="$OUT/suite" timeout ${SUITE_TIMEOUT:-420} tools/gpu_suite.sh | tail -5
GE=.carry/ganengine
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  for n in 1 2; do
    timeout 90 $GE bench --opt-level O2,O3 --batch-sizes 256,1024,2048 --ngpu $n --warmup 8 --steps 20 --windows 3 \
      --json "$OUT/bench_ngpu$n.json" > "$OUT/bench_ngpu$n.log" 2>&1
    grep -E "batch" "$OUT/bench_ngpu$n.log" | tail -6
  done
fi
if [ -n "${WITH_NCU:-}" ]; then
  timeout 90 tools/ncu_kernels.sh O2 1024 "$OUT/ncu_O2_1024" $GE > /dev/null 2> "$OUT/ncu.err"
  head -12 "$OUT/ncu_O2_1024.txt"
fi
gzip -f "$OUT"/*.csv
tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"
