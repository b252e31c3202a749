#!/usr/bin/env bash
# One device call (one H200): the whole GPU test suite, then ganengine and its PyTorch twin side
# by side (tools/bench_suite.sh), a Tensor-Core-only algorithm experiment, per-kernel times and
# the ncu Tensor Core metric for the README. Everything under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT/suite" "$OUT/bench"
source tools/gpu_env.sh
OUT="$OUT/suite" timeout 200 tools/gpu_suite.sh | tail -2
GE=.carry/ganengine
OUT="$OUT/bench" BENCH_PT_ARGS="--configs graph_half,autocast,half,graph_fp32,fp32 --time-budget ${PT_BUDGET:-200}" \
  timeout 420 tools/bench_suite.sh > "$OUT/bench/suite.log" 2>&1
tail -40 "$OUT/bench/bench_compare.md"
GE_CONV_TENSOR_OP_ONLY=1 timeout 60 $GE bench --opt-level O2 --batch-sizes 64,1024 --warmup 8 --steps 20 --windows 3 \
  > "$OUT/tensor_op_only.log" 2>&1; grep batch "$OUT/tensor_op_only.log"
for cfg in "O3 1024" "O2 1024" "O2 64"; do set -- $cfg
  timeout 60 tools/ncu_kernels.sh $1 $2 "$OUT/ncu_$1_$2" $GE > /dev/null 2> "$OUT/ncu_$1_$2.err"; tail -1 "$OUT/ncu_$1_$2.txt"
done
gzip -f "$OUT"/*.csv
tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"
