#!/usr/bin/env bash
# The GPU test suite, run on a GPU host from binaries built elsewhere (tools/stage_gpu.sh puts
# them in .carry/) or on the host itself (tools/build.sh: build/). Usage on the GPU host, from
# the repository root:
#   tools/gpu_suite.sh [--goldens] [--train] [--datasets] [--bench]
#     --goldens   first regenerate tests/goldens/golden_*.safetensors with PyTorch
#     --train     also train each opt level on fake data (tools/gpu_train_check.sh)
#     --datasets  also train one epoch per dataset family (tools/gpu_datasets_check.sh)
#     --bench     also run the training benchmarks
# Logs go to $OUT (or ./gpu-logs); the last line is the summary.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
# cuDNN 9.19, cuBLAS 13 and NCCL as PyTorch ships them; NVLink multicast off.
source tools/gpu_env.sh
goldens=0 bench=0 train=0 datasets=0
for a in "$@"; do
  case "$a" in
    --goldens) goldens=1 ;;
    --bench) bench=1 ;;
    --train) train=1 ;;
    --datasets) datasets=1 ;;
    *) echo "unknown option $a" >&2; exit 2 ;;
  esac
done
ge_require_binaries ganengine ganengine_tests || exit 2
export GE_TEST_DATA_DIR="$PWD/tests/goldens" GE_BINARY="$GE_BIN_DIR/ganengine" GE_TEACHER_DIR=/tmp/ge-goldens
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
"$GE_BIN_DIR/ganengine" info | tee -a "$OUT/gpu.txt"
# PyTorch's goldens, made fresh on every run: the step-by-step test needs PyTorch's state before
# each training step (too large to commit). --goldens also replaces the committed files.
PYTHONUNBUFFERED=1 python3 tools/make_goldens.py --out /tmp/ge-goldens --teacher-dir /tmp/ge-goldens/teacher 2>&1 \
  | tee "$OUT/goldens.log"
if ((goldens)); then
  cp /tmp/ge-goldens/golden_*.safetensors tests/goldens/
  mkdir -p "$OUT/data" && cp /tmp/ge-goldens/golden_*.safetensors "$OUT/data/"
fi
# Every test case: GPU cases run here, CPU cases too (same binary), so one summary covers all,
# except the few that read files of Debian packages a GPU host lacks (dataset-fashion-mnist,
# libcurl); CI runs those.
"$GE_BIN_DIR/ganengine_tests" --duration=true -tce='fashion-mnist*,download*,md5*,mnist bad files*' 2>&1 | tee "$OUT/tests.log" | grep -E "^\[doctest\]|^ganengine tests|ERROR|FAILED|CHECK|error" | tail -60
status=${PIPESTATUS[0]}
if ((train)); then
  tools/gpu_train_check.sh 2>&1 | tee "$OUT/train.log" || status=1
fi
if ((datasets)); then
  tools/gpu_datasets_check.sh 2>&1 | tee "$OUT/datasets.log" || status=1
fi
if ((bench)) && [ -x tools/bench_suite.sh ]; then
  tools/bench_suite.sh 2>&1 | tee "$OUT/bench.log"
fi
# The test binary's own count (tests/support/test_skip.h): cases ran, passed, failed and skipped,
# then one line per skip reason; doctest's "skipped" counts the cases the filter above left out.
grep -E '^ganengine tests: skipped' "$OUT/tests.log"
left_out=$(sed -n 's/^\[doctest\] test cases:.*| *\([0-9]*\) skipped.*/\1/p' "$OUT/tests.log")
counts=$(grep -E '^ganengine tests: [0-9]+ ran' "$OUT/tests.log" | sed 's/^ganengine tests: //')
echo "GPU suite summary: ${counts:-no count: the test binary did not finish}; ${left_out:-?} not run here (the cases that read Debian data files, run by CI, and the fixtures of the skip-reporting test); exit=$status"
# Everything under $OUT as one archive, for hosts that hand back only a few files.
if [ -n "${PACK_OUT:-}" ]; then
  tar czf /tmp/gpu-results.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/gpu-results.tgz "$OUT/"
fi
exit "$status"
