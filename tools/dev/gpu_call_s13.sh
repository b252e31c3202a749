#!/usr/bin/env bash
# Session 13's device calls: gpu_call_s8.sh's switches, and first
#   TESTS="pattern,..."  those doctest cases of .carry/ganengine_tests (TESTS_LIMIT s)
#   SANITIZE="pattern"   those cases again under compute-sanitizer (racecheck, then memcheck)
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/dev/gpu_call_lib.sh
if [ -n "${TESTS:-}" ]; then
  echo "== tests ($TESTS)"
  timeout ${TESTS_LIMIT:-120} .carry/ganengine_tests -tc="$TESTS" > "$OUT/tests.log" 2>&1
  echo "rc $?"; grep -E "^\[doctest\] (test cases|assertions)" "$OUT/tests.log"
  grep -B3 -A12 "ERROR" "$OUT/tests.log" | head -60
fi
if [ -n "${SANITIZE:-}" ]; then
  for tool in racecheck memcheck; do
    echo "== compute-sanitizer $tool ($SANITIZE)"
    timeout ${SANITIZE_LIMIT:-120} compute-sanitizer --tool $tool --error-exitcode 3 \
      .carry/ganengine_tests -tc="$SANITIZE" > "$OUT/sanitize_$tool.log" 2>&1
    echo "rc $?"; grep -E "ERROR SUMMARY|test cases" "$OUT/sanitize_$tool.log" | head -3
  done
fi
exec tools/dev/gpu_call_s8.sh
