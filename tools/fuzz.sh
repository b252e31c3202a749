#!/usr/bin/env bash
# The readers and the train command's flag parsing under AddressSanitizer and
# UndefinedBehaviorSanitizer, in one clang-14 build (GE_FUZZ=ON, CPU only, optimised) in
# $GE_FUZZ_BUILD (default build-fuzz/):
#   tools/fuzz.sh [SECONDS_PER_TARGET]   (default 30) builds the libFuzzer targets of fuzz/,
#       writes each target's seed corpus (fuzz/make_seeds.cpp) and runs every target for that
#       long, as many at a time as there are cores, with its kept regressions
#       (tests/fuzz_regressions/<target>/) as a second corpus. Prints the executions per
#       target; exits 1 on any crash, hang (>10 s an input), memory blow-up (>2 GB) or
#       sanitizer report, leaving the input under $GE_FUZZ_BUILD/findings/ (add it to
#       tests/fuzz_regressions/<target>/ with the fix).
#   tools/fuzz.sh --suite   builds the test suite and the CLI in the same folder and runs the
#       suite with CTest under the sanitizers, leaving out the tests that GE_SANITIZE_EXCLUDE
#       (a CTest regular expression) names; by default only the mpirun cases (see below).
# GE_FUZZ_JOBS sets the build's and the runs' parallelism (default: the number of cores).
# GE_FUZZ_TARGETS (names without fuzz_, space-separated) runs only those targets, e.g.
# GE_FUZZ_TARGETS=cli_flags tools/fuzz.sh 60 after a change to the train command's flags.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=fuzz
if [ "${1:-}" = --suite ]; then
  mode=suite
  shift
fi
seconds=${1:-30}
build=${GE_FUZZ_BUILD:-build-fuzz}
jobs=${GE_FUZZ_JOBS:-$(nproc)}
case "$seconds" in '' | *[!0-9]*) echo "fuzz.sh: SECONDS_PER_TARGET must be a whole number, got '$seconds'" >&2; exit 2 ;; esac
tools/install_deps.sh --fuzz
# Left out of the sanitizer suite: the cases that start OpenMPI (mpirun), whose own allocations
# at exit LeakSanitizer reports (in libmpi and its plugins, not in ganengine).
default_exclude='^mpirun'

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGE_ENABLE_CUDA=OFF \
  -DGE_ENABLE_ONEDNN=OFF -DGE_FUZZ=ON "${launcher[@]}" >/dev/null
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

if [ "$mode" = suite ]; then
  cmake --build "$build" -j"$jobs" --target ganengine ganengine_tests
  exclude=${GE_SANITIZE_EXCLUDE-$default_exclude}
  echo "fuzz.sh --suite: CTest under ASan and UBSan${exclude:+, leaving out tests matching '$exclude'}"
  ctest --test-dir "$build" --output-on-failure -j"$jobs" ${exclude:+-E "$exclude"}
  exit
fi

cmake --build "$build" -j"$jobs" --target fuzz_targets

corpus=$build/corpus
findings=$build/findings
logs=$build/logs
rm -rf "$corpus" "$findings" "$logs"
mkdir -p "$corpus" "$findings" "$logs"
"$build/fuzz/make_seeds" "$corpus"

run_target() {  # name: fuzz it, then print one line
  local name=$1 extra=() status=0
  [ -d "tests/fuzz_regressions/$name" ] && extra=("tests/fuzz_regressions/$name")
  "$build/fuzz/fuzz_$name" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$findings/$name-" "$corpus/$name" "${extra[@]}" >"$logs/$name.log" 2>&1 || status=$?
  local runs
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$name.log" | tail -1)
  if ((status == 0)); then
    echo "fuzz_$name: ${runs:-?} executions, no findings"
  else
    echo "fuzz_$name: FAILED (exit $status after ${runs:-?} executions); the input is in $findings, the report:"
    grep -E "ERROR|SUMMARY|runtime error|==[0-9]+==|#[0-9]+ 0x" "$logs/$name.log" | head -30
  fi
  return "$status"
}
export -f run_target
export build corpus findings logs seconds

targets=${GE_FUZZ_TARGETS:-$(ls "$corpus")}
for t in $targets; do
  [ -d "$corpus/$t" ] || { echo "fuzz.sh: GE_FUZZ_TARGETS: no target '$t' (the targets: $(ls "$corpus" | xargs))" >&2; exit 2; }
done
echo "fuzz.sh: $(echo "$targets" | wc -w) targets, $seconds s each, $jobs at a time"
if echo "$targets" | xargs -P "$jobs" -I{} bash -c 'run_target "$1"' _ {}; then
  echo "fuzz.sh: passed"
else
  echo "fuzz.sh: FAILED (logs in $logs)" >&2
  exit 1
fi
