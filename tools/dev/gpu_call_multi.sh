#!/usr/bin/env bash
# Device call (nvidia-h200-x2): the multi-GPU and recently changed GPU tests, then training
# with mpirun over both GPUs (Open MPI, if the host has it). Logs under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine"
GE=.carry/ganengine
timeout 200 .carry/ganengine_tests -tc='*data parallel*,*fused*,gpu train cli*,*graph*,*padded*,process group*' \
  > "$OUT/tests.log" 2>&1
grep -E "^\[doctest\] (test cases|assertions)" "$OUT/tests.log"; grep -B2 -A6 "ERROR" "$OUT/tests.log" | head -40
if command -v mpirun > /dev/null; then
  ls -l /usr/lib/x86_64-linux-gnu/libmpi.so.40* >> "$OUT/mpirun.log" 2>&1
  timeout 60 mpirun --allow-run-as-root -np 2 $GE info >> "$OUT/mpirun.log" 2>&1
  timeout 120 mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE $GE train --dataset fake \
    --batchSize 64 --max-steps 8 --opt-level O2 --sync-bn --check-replicas --no-progress --outf /tmp/mpi_out \
    >> "$OUT/mpirun.log" 2>&1
  echo "mpirun train exit $?" >> "$OUT/mpirun.log"; ls /tmp/mpi_out >> "$OUT/mpirun.log" 2>&1
  tail -8 "$OUT/mpirun.log"
fi
tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"
