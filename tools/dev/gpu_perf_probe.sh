#!/usr/bin/env bash
# Development probe on the GPU host (binaries in .carry/): graph-mode tests, the bench grid,
# per-kernel times under ncu, start-up time. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine"
GE=.carry/ganengine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
( time $GE train --dataset fake --niter 1 --max-steps 6 --opt-level O2 --outf /tmp/st1 --no-progress ) > "$OUT/startup.log" 2>&1
( time $GE train --dataset fake --niter 1 --max-steps 6 --opt-level O2 --outf /tmp/st2 --no-progress ) >> "$OUT/startup.log" 2>&1
timeout 200 .carry/ganengine_tests -tc='*graph*,bench cli*,gpu train cli*,gpu trainer*' > "$OUT/tests.log" 2>&1
tail -3 "$OUT/tests.log"
timeout 240 $GE bench --opt-level O0,O1,O2,O3 --batch-sizes 64,256,1024 --cuda-graph off,on --warmup 8 --steps 20 --windows 3 --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
ncu --query-metrics 2>/dev/null | grep -i -E "tensor|hmma|gmma" > "$OUT/ncu_metrics.txt"
for cfg in "O2 1024" "O3 1024" "O2 64"; do
  set -- $cfg
  timeout 120 tools/ncu_kernels.sh $1 $2 "$OUT/ncu_$1_$2" $GE > /dev/null 2> "$OUT/ncu_$1_$2.err" ||
    NCU_METRICS=gpu__time_duration.sum timeout 120 tools/ncu_kernels.sh $1 $2 "$OUT/ncu_$1_$2" $GE > /dev/null 2>> "$OUT/ncu_$1_$2.err"
done
rm -f "$OUT"/*.csv
tar czf /tmp/probe.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/probe.tgz "$OUT/"
