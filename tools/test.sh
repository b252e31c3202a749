#!/usr/bin/env bash
# The test command (README.md, .ci/run): the test names, the formatting (tools/format.sh --check),
# the build with warnings as errors (GE_WERROR=ON), clang-tidy over the host code (tools/tidy.sh),
# the saved weights read by Python, the exported ONNX generator run by onnxruntime, the
# TensorBoard event files read by TensorBoard (and losses.png drawn), then the whole suite with CTest. Without a GPU the GPU cases report "skipped"; tools/gpu_suite.sh runs
# them on one. Then the suite under ASan and UBSan and a bounded fuzzing run of every file
# reader and of the train command's flags (tools/fuzz.sh, a clang build in build-fuzz/).
# The checks after the build all run even when one fails; the exit status is 1 if any did.
# For local runs only, GE_SKIP=format,tidy,sanitizers,fuzz (any of them) leaves those checks
# out; every skip is printed, and with CI set (as CI services do) a skip is refused.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
failed=()
skipped=()
step() { echo; echo "== $* ($((SECONDS - start)) s)"; }

GE_SKIP=${GE_SKIP:-}
GE_SKIP=${GE_SKIP// /}
skip=",$GE_SKIP,"
for s in ${GE_SKIP//,/ }; do
  case "$s" in
    format | tidy | sanitizers | fuzz) ;;
    *) echo "GE_SKIP: unknown check '$s' (format, tidy, sanitizers, fuzz)" >&2; exit 2 ;;
  esac
done
if [ -n "${GE_SKIP:-}" ] && [ -n "${CI:-}" ]; then
  echo "GE_SKIP=$GE_SKIP is for local runs: refused with CI=$CI" >&2
  exit 2
fi
skipping() {
  [[ $skip == *",$1,"* ]] || return 1
  echo "SKIPPED: $1 (GE_SKIP=$GE_SKIP)"
  skipped+=("$1")
}
check() {  # name, then the command
  local name=$1
  shift
  "$@" || failed+=("$name")
}

step "test names"
python3 tools/check_test_names.py  # names must be usable as CTest names and doctest filters
tools/install_deps.sh --lint       # clang-format and clang-tidy, beside what the build needs

step "format"
skipping format || check format tools/format.sh --check

step "build (warnings as errors)"
GE_WERROR=ON tools/build.sh

step "clang-tidy"
skipping tidy || check tidy tools/tidy.sh -p build

step "checkpoints"
check checkpoints tools/check_checkpoints_ci.sh  # the saved weights, read by Python's safetensors library

step "onnx"
check onnx tools/check_onnx_ci.sh  # ganengine export, run by onnxruntime, against ganengine generate

step "tensorboard"
check tensorboard tools/check_tensorboard_ci.sh  # the event files, read by TensorBoard's own reader

step "quality tools"
check quality tools/quality/check_ci.sh  # the sample-quality metrics against closed forms, report.py's bar

step "ctest"
check ctest ctest --test-dir build --output-on-failure -j"$(nproc)"

step "sanitizers"  # the suite again, built by clang under ASan and UBSan into build-fuzz/
skipping sanitizers || check sanitizers tools/fuzz.sh --suite

step "fuzz"  # every reader and the train flags, GE_FUZZ_SECONDS (default 30) each, in the same build
skipping fuzz || check fuzz tools/fuzz.sh "${GE_FUZZ_SECONDS:-30}"

echo
((${#skipped[@]})) && echo "test.sh: SKIPPED (GE_SKIP): ${skipped[*]}"
if ((${#failed[@]})); then
  echo "test.sh: FAILED: ${failed[*]} ($((SECONDS - start)) s)"
  exit 1
fi
echo "test.sh: passed ($((SECONDS - start)) s)"
