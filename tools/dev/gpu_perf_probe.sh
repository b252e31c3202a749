#!/usr/bin/env bash
# Development probe on the GPU host (binaries in .carry/): targeted tests, the bench grid,
# per-kernel times under ncu, start-up time, multi-GPU scaling. Logs under $OUT (one archive).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine"
GE=.carry/ganengine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
which mpirun >> "$OUT/gpu.txt" 2>&1; ls /opt/torch/.venv/lib/python3.12/site-packages/nvidia/ >> "$OUT/gpu.txt"
( time $GE train --dataset fake --niter 1 --max-steps 6 --opt-level O2 --outf /tmp/st1 --no-progress ) > "$OUT/startup.log" 2>&1
timeout 300 .carry/ganengine_tests -tc="${PROBE_TESTS:-*graph*,bench cli*,gpu train cli*,gpu trainer*,*padded*,*fused*,*data parallel*,gpu cast*,gpu batchnorm*,gpu activation*,golden/gpu*}" > "$OUT/tests.log" 2>&1
tail -3 "$OUT/tests.log"
timeout 200 $GE bench --opt-level O0,O1,O2,O3 --batch-sizes 64,256,1024 --warmup 8 --steps 20 --windows 3 --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
tail -14 "$OUT/bench.log"
for cfg in "O2 1024" "O2 64"; do
  set -- $cfg
  timeout 100 tools/ncu_kernels.sh $1 $2 "$OUT/ncu_$1_$2" $GE > /dev/null 2> "$OUT/ncu_$1_$2.err"
done
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  python3 datasets/make_synthetic.py /tmp/synth --only cifar10 > /dev/null
  for n in 1 2; do
    timeout 100 $GE train --dataset cifar10 --dataroot /tmp/synth/cifar10 --niter 1 --batchSize 2048 --max-steps 60 \
      --log-interval 20 --opt-level O2 --ngpu $n --no-progress --outf /tmp/ngpu$n > "$OUT/ngpu$n.log" 2>&1
    tail -2 "$OUT/ngpu$n.log"
  done
fi
rm -f "$OUT"/*.csv
tar czf /tmp/probe.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/probe.tgz "$OUT/"
