#!/usr/bin/env bash
# The training benchmarks, ganengine and its PyTorch twin side by side on one GPU, then the
# comparison as markdown for BENCHMARKS.md. On the GPU host, from the repository root, with the
# binaries of tools/stage_gpu.sh in .carry/ or of tools/build.sh in build/ (tools/gpu_env.sh
# says which is taken); tools/gpu_suite.sh --bench runs it.
#   tools/bench_suite.sh
# Writes into $OUT (or ./gpu-logs): bench_ganengine.json/.log, bench_pytorch.json/.log,
# bench_compare.md. Each stage runs even when an earlier one failed; the exit status is 1 if any did.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
# cuDNN 9.19, cuBLAS 13 and NCCL as PyTorch ships them; NVLink multicast off.
source tools/gpu_env.sh
BATCHES=${BENCH_BATCHES:-64,256,1024}
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$OUT/bench_gpu.txt"

echo "== ganengine bench"
if ge_require_binaries ganengine; then
  start=$SECONDS
  "$GE_BIN_DIR/ganengine" bench --opt-level O0,O1,O2,O3 --batch-sizes "$BATCHES" --cuda-graph ${BENCH_GRAPH:-on} \
    --json "$OUT/bench_ganengine.json" 2>&1 \
    | tee "$OUT/bench_ganengine.log"
  rc=${PIPESTATUS[0]}
  echo "ganengine bench: exit $rc, $((SECONDS - start)) s"
  ((rc == 0)) || status=1
else
  status=1
fi

echo "== PyTorch twin"
start=$SECONDS
# BENCH_PT_ARGS: more options for the twin (--configs, --time-budget, ...).
PYTHONUNBUFFERED=1 python3 tools/bench_pytorch.py --batch-sizes "$BATCHES" ${BENCH_PT_ARGS:-} --json "$OUT/bench_pytorch.json" 2>&1 \
  | tee "$OUT/bench_pytorch.log"
rc=${PIPESTATUS[0]}
echo "bench_pytorch: exit $rc, $((SECONDS - start)) s"
((rc == 0)) || status=1

echo "== comparison"
python3 tools/bench_compare.py "$OUT/bench_ganengine.json" "$OUT/bench_pytorch.json" | tee "$OUT/bench_compare.md"
((PIPESTATUS[0] == 0)) || status=1
echo "bench suite: exit $status"
exit "$status"
