#!/usr/bin/env bash
# Session 33's first device call: the tests of what it added (bench --dataset and --tf32, the
# GPU-host scripts' binaries, the loader's drop_last), then `bench --dataset` on synthetic
# CIFAR-10 files in their real format (GPU-resident and host loader) beside the resident batch.
# From the repository root on the GPU host, binaries in .carry/; logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine"
echo "== the new tests"
timeout ${TESTS_LIMIT:-200} .carry/ganengine_tests -tc="${TESTS:-bench cli*,gpu host scripts*,Loader*}" \
  > "$OUT/new_tests.log" 2>&1
echo "rc $?"
grep -E "^\[doctest\] (test cases|assertions)" "$OUT/new_tests.log"
grep -B3 -A15 "ERROR" "$OUT/new_tests.log" | head -80
echo "== bench with and without the input pipeline"
python3 datasets/make_synthetic.py /tmp/ge-data --only cifar10 > "$OUT/make_data.log" 2>&1
echo "make_synthetic rc $?"
for on in ${PLACEMENTS:-none gpu host}; do
  args=()
  [ "$on" != none ] && args=(--dataset cifar10 --dataroot /tmp/ge-data/cifar10 --data-on "$on" --workers 12)
  GANENGINE_CUDNN_CACHE=/tmp/algos.cache timeout ${BENCH_LIMIT:-150} .carry/ganengine bench --opt-level O2,O3 \
    --batch-sizes ${BATCHES:-64,1024} "${args[@]}" --json "$OUT/bench_$on.json" > "$OUT/bench_$on.log" 2>&1
  echo "bench $on rc $?"
  grep -E "graph +batch|data:|input:" "$OUT/bench_$on.log" | cut -c1-220
done
