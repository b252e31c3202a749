#!/usr/bin/env bash
# Per-kernel time and Tensor Core activity of the timed steps of one `ganengine bench`
# configuration, with Nsight Compute. Usage (GPU host):
#   tools/ncu_kernels.sh OPT_LEVEL BATCH OUT_PREFIX [ganengine binary]
# NCU_NVTX=1 adds each launch's NVTX range stack (phase and layer) to the CSV rows; NCU_BENCH_ARGS
# adds `bench` options (--cuda-graph off: an eager step, whose launches carry those ranges).
# Writes OUT_PREFIX.csv (ncu's raw rows) and OUT_PREFIX.txt (tools/ncu_summary.py's table).
set -euo pipefail
level=$1 batch=$2 prefix=$3 bin=${4:-build/ganengine}
# The warm-up runs outside the profiler's window (bench --profile starts it for the timed steps
# only); one window of one step is one replay of the captured training step.
ncu --clock-control none --profile-from-start off --csv ${NCU_NVTX:+--nvtx} \
    --metrics "${NCU_METRICS:-gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active}" \
    "$bin" bench --opt-level "$level" --batch-sizes "$batch" --warmup 8 --steps 1 --windows 1 --profile \
    ${NCU_BENCH_ARGS:-} > "$prefix.csv"
python3 "$(dirname "$0")/ncu_summary.py" "$prefix.csv" | tee "$prefix.txt"
