#!/usr/bin/env bash
# The closing device call (nvidia-h200-x2): the tests changed since the last full suite, the
# side-by-side benchmark on cuda:0 (tools/bench_suite.sh), eager-vs-graph memory, train's start
# time and logging cost, and the README's ncu command for O3. Everything under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT/bench"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine"
GE=.carry/ganengine
timeout 150 .carry/ganengine_tests -tc="${FINAL_TESTS:-*data parallel*,*readback*,pending logs*,training state*}" \
  > "$OUT/tests.log" 2>&1
grep -E "^\[doctest\] (test cases|assertions)|largest relative" "$OUT/tests.log"
OUT="$OUT/bench" BENCH_PT_ARGS="--configs graph_half,autocast,half,graph_fp32,fp32 --time-budget ${PT_BUDGET:-190}" \
  timeout 400 tools/bench_suite.sh > "$OUT/bench/suite.log" 2>&1
sed -n '/### Ratios/,/### ganengine/p' "$OUT/bench/bench_compare.md"
timeout 60 $GE bench --opt-level O2 --batch-sizes 1024 --cuda-graph off,on --json "$OUT/bench_memory.json" \
  > "$OUT/bench_memory.log" 2>&1; grep batch "$OUT/bench_memory.log"
# train: start to first step at 64 and 1024; logging every step against every 1000th on 900
# steps of one epoch (random 28x28 images in an IDX file, so no epoch ends inside the window).
for b in 64 1024; do
  timeout 60 $GE train --dataset fake --batchSize $b --opt-level O2 --max-steps 2 --no-progress --outf /tmp/first$b \
    2>&1 | grep "first step"
done
mkdir -p /tmp/idx && python3 -c "
import numpy as np, struct
n = 60000
open('/tmp/idx/train-images-idx3-ubyte', 'wb').write(struct.pack('>IIII', 0x803, n, 28, 28) +
    np.random.default_rng(1).integers(0, 256, n * 784, dtype=np.uint8).tobytes())"
for li in 1 1000; do
  timeout 90 $GE train --dataset mnist --dataroot /tmp/idx --batchSize 64 --opt-level O2 --niter 1 --max-steps 900 \
    --sample-interval 100000 --log-interval $li --no-progress --outf /tmp/li$li > "$OUT/train_log_interval_$li.log" 2>&1
  echo "--log-interval $li: $(grep '^done' "$OUT/train_log_interval_$li.log")"
done
timeout 70 tools/ncu_kernels.sh O3 1024 "$OUT/ncu_O3_1024" $GE > /dev/null 2> "$OUT/ncu_O3.err"
tail -1 "$OUT/ncu_O3_1024.txt"
gzip -f "$OUT"/*.csv 2>/dev/null
tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"
