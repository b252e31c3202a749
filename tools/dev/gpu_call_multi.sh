#!/usr/bin/env bash
# Device call (nvidia-h200-x2): the whole GPU suite (it includes the two-GPU and mpirun cases),
# then issue 6's measurements: data-parallel scaling (bench --ngpu 2 at 1024 and 2048) and a
# full-size mpirun run against --ngpu 2. Logs under $OUT in one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine" GE_TEACHER_DIR=/tmp/ge-goldens
GE=.carry/ganengine
OUT="$OUT/suite" timeout ${SUITE_LIMIT:-420} tools/gpu_suite.sh | tail -4
grep -E "largest relative|skipped:|test cases" "$OUT/suite/tests.log" | sort | uniq -c | head -20
timeout 90 $GE bench --opt-level O2,O3 --batch-sizes 64,1024 --warmup 8 --steps 20 --windows 3 --json "$OUT/bench_ngpu1.json" > "$OUT/bench_ngpu1.log" 2>&1; grep -E "batch" "$OUT/bench_ngpu1.log"
timeout 90 $GE bench --opt-level O2 --batch-sizes 1024,2048 --ngpu 2 --warmup 8 --steps 20 --windows 3 \
  --json "$OUT/bench_ngpu2.json" > "$OUT/bench_ngpu2.log" 2>&1; grep -E "batch|img" "$OUT/bench_ngpu2.log" | head
common="train --dataset fake --batchSize 128 --max-steps 60 --opt-level O0 --sync-bn --log-interval 1 --no-progress"
TIMEFORMAT="mpirun wall %R s"; time timeout 120 mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
  $GE $common --outf /tmp/full_mpi > "$OUT/mpirun_full.log" 2>&1; echo "mpirun exit $?"
TIMEFORMAT="threads wall %R s"; time timeout 120 $GE $common --ngpu 2 --outf /tmp/full_threads > "$OUT/threads_full.log" 2>&1
echo "threads exit $?"
timeout 120 $GE ${common/--sync-bn/} --outf /tmp/full_one > "$OUT/one_full.log" 2>&1; echo "one gpu exit $?"
cp /tmp/full_mpi/metrics.jsonl "$OUT/metrics_mpirun.jsonl"; cp /tmp/full_threads/metrics.jsonl "$OUT/metrics_threads.jsonl"
cp /tmp/full_one/metrics.jsonl "$OUT/metrics_one.jsonl"
python3 - "$OUT" <<'PY'
import json, sys
o = sys.argv[1]
load = lambda n: [json.loads(l) for l in open(f"{o}/metrics_{n}.jsonl")]
one, thr, mpi = load("one"), load("threads"), load("mpirun")
for name, run in (("2 GPUs --ngpu 2 --sync-bn vs 1 GPU", thr), ("mpirun -np 2 --sync-bn vs --ngpu 2", mpi)):
    ref = one if run is thr else thr
    worst = max(abs(a[k] - b[k]) / max(abs(b[k]), 1e-7) for a, b in zip(run, ref) for k in ("errD_real", "errD_fake", "loss_G"))
    print(f"{name}: {min(len(run), len(ref))} steps, largest relative loss difference {worst:.3g}")
PY
tail -3 "$OUT/mpirun_full.log"
tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"
