#!/usr/bin/env bash
# The test command (README.md, .ci/run): the test names, the formatting (tools/format.sh --check),
# the build with warnings as errors (GE_WERROR=ON), clang-tidy over the host code (tools/tidy.sh),
# the saved weights read by Python, then the whole suite with CTest. Without a GPU the GPU cases
# report "skipped"; tools/gpu_suite.sh runs them on one.
# The checks after the build all run even when one fails; the exit status is 1 if any did.
# For local runs only, GE_SKIP=format,tidy (either or both) leaves those checks out; every skip is
# printed, and with CI set (as CI services do) a skip is refused.
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
    format | tidy) ;;
    *) echo "GE_SKIP: unknown check '$s' (format, tidy)" >&2; exit 2 ;;
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

step "ctest"
check ctest ctest --test-dir build --output-on-failure -j"$(nproc)"

echo
((${#skipped[@]})) && echo "test.sh: SKIPPED (GE_SKIP): ${skipped[*]}"
if ((${#failed[@]})); then
  echo "test.sh: FAILED: ${failed[*]} ($((SECONDS - start)) s)"
  exit 1
fi
echo "test.sh: passed ($((SECONDS - start)) s)"
