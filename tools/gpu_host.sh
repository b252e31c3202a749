#!/usr/bin/env bash
# Runs on a GPU host, from the repository root: the checks and measurements named as steps, in
# the order given. Each step writes its logs under $OUT and prints a short summary; a step runs
# even when an earlier one failed.
#   tools/gpu_host.sh [--pack] STEP...
# Steps:
#   suite               the GPU test suite (tools/gpu_suite.sh)                          OUT/suite/
#   tests PATTERN       those doctest cases only (-tc patterns, comma-separated)          OUT/tests.log
#   sanitize PATTERN    those doctest cases under compute-sanitizer: memcheck, racecheck,
#                       initcheck and synccheck                                           OUT/sanitize/
#   sanitize-train      a short training run (fake data, 32x32) at every opt level, eager
#                       and graph, under each compute-sanitizer tool, SANITIZE_JOBS at once OUT/sanitize-train/
#   signal              SIGTERM in the middle of a run on the GPU: exit 143 with the state
#                       saved, and a resume from the state file alone                     OUT/signal/
#   bench               the training benchmarks beside PyTorch (tools/bench_suite.sh)     OUT/bench/
#   first-step          process start to the first step done, at batch 64 and 1024, with
#                       every convolution searched (GANENGINE_CUDNN_CACHE=off)            OUT/first-step/
#   train               every opt level trains on fake data (tools/gpu_train_check.sh)    OUT/train/
#   datasets            one epoch per dataset family (tools/gpu_datasets_check.sh)        OUT/datasets/
#   fp8-conv            the FP8 warpgroup-MMA convolutions against O3's and O4's passes at
#                       batch 256 and 1024 (ganengine_fp8_conv_bench)                   OUT/fp8-conv.log
#   ncu BATCHES         Nsight Compute's per-kernel summary of one O3 step at each batch
#                       size (comma-separated: 64,1024; tools/ncu_kernels.sh)             OUT/ncu/
#   ncu-layers LEVELS BATCH  one eager step (bench --cuda-graph off, with NVTX ranges) at each
#                       opt level (comma-separated: O2,O4), its kernel time by kind of layer, and
#                       each level's per-layer difference from the first (tools/ncu_summary.py
#                       --layers, --diff)                                               OUT/ncu/
#   ab NAME=BIN...      `ganengine bench` of several binaries taking turns, AB_ROUNDS
#                       rounds, then each row's median; BIN is a ganengine binary or the
#                       folder holding one (.carry/base), optionally followed by
#                       :VAR=value[,VAR=value] set for its runs; the first is the baseline  OUT/ab/
#   --pack              (anywhere) at the end, everything under OUT into OUT/gpu-logs.tgz
#                       (for hosts that hand back only a few files)
# Example: tools/gpu_host.sh --pack suite first-step ab base=.carry/base new=.carry/ganengine
#
# The binaries: GE_BIN_DIR, else .carry/ (tools/stage_gpu.sh), else build/ (tools/gpu_env.sh).
# Environment (defaults in brackets):
#   OUT [gpu-logs]
#   time limits in seconds: SUITE_LIMIT [480] TESTS_LIMIT [300] SANITIZE_LIMIT [300, per tool]
#     BENCH_LIMIT [480] FIRST_STEP_LIMIT [90, per run] TRAIN_LIMIT [480] DATASETS_LIMIT [300]
#     NCU_LIMIT [180, per batch size] AB_LIMIT [180, per run] FP8_CONV_LIMIT [120]
#   SANITIZE_TOOLS [memcheck,racecheck,initcheck,synccheck] SANITIZE_LEAKS [0; 1: memcheck's leak check]
#   SANITIZE_JOBS [8]: sanitize-train's runs at once (each is bound by the host's CPU)
#   SANITIZE_LEVELS [O0,O1,O2,O3,O4]: sanitize-train's opt levels
#   BENCH_PT_ARGS [--time-budget 120]: more options for tools/bench_pytorch.py
#   FIRST_STEP_BATCHES [64,1024]
#   AB_ROUNDS [3] AB_BATCHES [64,256,1024] AB_OPT_LEVELS [O2,O3] AB_ARGS (more `bench` options)
# Exit status: 0 when every step passed, 1 when one failed, 2 for a usage error.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

usage() {
  sed -n '2,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() { echo "$0: $*" >&2; exit 2; }

# ---- The command line, checked whole before anything runs.
pack=0
steps=()  # "name" or "name<TAB>argument"
while (($#)); do
  case "$1" in
    --pack) pack=1 ;;
    -h | --help) usage ;;
    suite | bench | first-step | train | datasets | sanitize-train | signal | fp8-conv) steps+=("$1") ;;
    tests | sanitize)
      [ -n "${2:-}" ] || die "$1 needs a PATTERN of doctest cases"
      steps+=("$1"$'\t'"$2")
      shift ;;
    ncu)
      [[ ${2:-} =~ ^[0-9]+(,[0-9]+)*$ ]] || die "ncu needs BATCHES, comma-separated batch sizes (64,1024)"
      steps+=("$1"$'\t'"$2")
      shift ;;
    ncu-layers)
      [[ ${2:-} =~ ^O[0-4](,O[0-4])*$ && ${3:-} =~ ^[0-9]+$ ]] ||
        die "ncu-layers needs LEVELS (comma-separated: O2,O4) and one BATCH size (1024)"
      steps+=("$1"$'\t'"$2 $3")
      shift 2 ;;
    ab)
      variants=()
      while [[ ${2:-} == ?*=?* ]]; do
        variants+=("$2")
        shift
      done
      ((${#variants[@]})) || die "ab needs NAME=BINARY pairs (base=.carry/base new=.carry/ganengine)"
      steps+=("ab"$'\t'"${variants[*]}") ;;
    *) die "unknown step '$1' (run $0 --help)" ;;
  esac
  shift
done
((${#steps[@]})) || usage

OUT=${OUT:-gpu-logs}
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
# cuDNN, cuBLAS and NCCL as PyTorch ships them, NVLink multicast off, GE_BIN_DIR.
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/goldens" GE_BINARY="$GE_BIN_DIR/ganengine"
# Nsight tools: on PATH, else the CUDA toolkit's.
for tool in ncu compute-sanitizer; do
  command -v $tool >/dev/null || [ ! -d /usr/local/cuda/bin ] || PATH=$PATH:/usr/local/cuda/bin
done
# The binaries the steps need, before any step runs (ab names its own).
need=()
for s in "${steps[@]}"; do
  case "${s%%$'\t'*}" in
    suite | tests | sanitize) need+=(ganengine ganengine_tests) ;;
    bench | first-step | train | datasets | ncu | ncu-layers | sanitize-train | signal) need+=(ganengine) ;;
    fp8-conv) need+=(ganengine_fp8_conv_bench) ;;
    ab)
      for v in ${s#*$'\t'}; do
        bin=${v#*=}
        bin=${bin%%:*}
        [ -d "$bin" ] && bin=$bin/ganengine
        [ -x "$bin" ] || die "ab: ${v%%=*}: $bin is not an executable"
      done ;;
  esac
done
((${#need[@]} == 0)) || ge_require_binaries "${need[@]}" || exit 2
status=0
failed=()
fail_step() { failed+=("$1"); status=1; }
header() { echo; echo "== $* ($(date +%H:%M:%S))"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
echo "binaries: $GE_BIN_DIR; logs: $OUT"

# ---- Steps. Each prints its summary and returns non-zero when it failed.
step_suite() {
  timeout "${SUITE_LIMIT:-480}" env OUT="$OUT/suite" tools/gpu_suite.sh >"$OUT/suite.log" 2>&1
  local rc=$?
  grep -E "^(ganengine tests: skipped|GPU suite summary)" "$OUT/suite.log" || tail -1 "$OUT/suite.log"
  ((rc == 124)) && echo "suite: stopped after SUITE_LIMIT=${SUITE_LIMIT:-480} s"
  grep -B3 -A12 "ERROR" "$OUT/suite/tests.log" 2>/dev/null | head -60
  return $rc
}

step_tests() {
  ge_require_binaries ganengine_tests || return 1
  timeout "${TESTS_LIMIT:-300}" "$GE_BIN_DIR/ganengine_tests" -tc="$1" --duration=true >"$OUT/tests.log" 2>&1
  local rc=$?
  echo "exit $rc"
  grep -E "^\[doctest\] (test cases|assertions)" "$OUT/tests.log"
  grep -B3 -A12 "ERROR" "$OUT/tests.log" | head -60
  return $rc
}

step_sanitize() {
  ge_require_binaries ganengine_tests || return 1
  local pattern=$1 tool rc result=0 tools
  mkdir -p "$OUT/sanitize"
  IFS=, read -ra tools <<<"${SANITIZE_TOOLS:-memcheck,racecheck,initcheck,synccheck}"
  for tool in "${tools[@]}"; do
    # Leaks only when asked: cuBLAS's handle and the caching allocator live until exit.
    local extra=()
    [ "$tool" = memcheck ] && [ "${SANITIZE_LEAKS:-0}" = 1 ] && extra=(--leak-check full)
    timeout "${SANITIZE_LIMIT:-300}" compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 3 \
      "$GE_BIN_DIR/ganengine_tests" -tc="$pattern" >"$OUT/sanitize/$tool.log" 2>&1
    rc=$?
    # Exit 3: the sanitizer found errors; 124: the time limit; else the tests' own status.
    echo "$tool: exit $rc; $(grep -E "(ERROR|RACECHECK) SUMMARY" "$OUT/sanitize/$tool.log" | tail -1);" \
      "$(grep -E "^\[doctest\] test cases" "$OUT/sanitize/$tool.log" | tail -1)"
    # The first reports, one line each (their backtraces are in the log).
    ((rc == 0)) || { result=1; grep -E "^========= [A-Z]" "$OUT/sanitize/$tool.log" \
      | grep -vE "COMPUTE-SANITIZER|SUMMARY" | head -8 | cut -c1-160; }
  done
  return $result
}

# One run: TOOL LEVEL MODE (graph or eager) LOG, TOOL "none" for the run outside any sanitizer.
# Exit 3: the sanitizer found errors.
sanitize_one_run() {
  local mode_flag=() wrap=()
  [ "$3" = eager ] && mode_flag=(--no-cuda-graph)
  [ "$1" = none ] || wrap=(compute-sanitizer --tool "$1" --error-exitcode 3)
  timeout "${SANITIZE_LIMIT:-300}" "${wrap[@]}" "$GE_BIN_DIR/ganengine" train \
    --dataset fake --imageSize 32 --ngf 16 --ndf 16 --batchSize 16 --max-steps 3 --no-progress --no-tensorboard \
    --opt-level "$2" "${mode_flag[@]}" --outf "/tmp/ge-sanitize-$1-$2-$3" >"$4" 2>&1
}

step_sanitize_train() {
  local tool level mode runs=() rc result=0 tools levels
  mkdir -p "$OUT/sanitize-train"
  IFS=, read -ra tools <<<"${SANITIZE_TOOLS:-memcheck,racecheck,initcheck,synccheck}"
  IFS=, read -ra levels <<<"${SANITIZE_LEVELS:-O0,O1,O2,O3,O4}"
  for tool in "${tools[@]}"; do
    for level in "${levels[@]}"; do
      for mode in graph eager; do runs+=("$tool $level $mode"); done
    done
  done
  # cuDNN's algorithms are chosen first, outside the sanitizers: the search times candidates in
  # trial graph captures, and a candidate that cannot be captured (one that creates a texture
  # object as it launches) fails its capture on purpose and is dropped; memcheck would report
  # that refused API call. The sanitized runs then take every choice from the algorithm cache.
  for level in "${levels[@]}"; do
    for mode in graph eager; do
      sanitize_one_run none "$level" "$mode" "$OUT/sanitize-train/warm-$level-$mode.log" || {
        echo "warm-up $level $mode failed:"; tail -3 "$OUT/sanitize-train/warm-$level-$mode.log"; result=1; }
    done
  done
  # The runs share the GPU; each is slowed mostly on the host, so several run at once.
  export GE_BIN_DIR
  printf '%s\n' "${runs[@]}" | xargs -P "${SANITIZE_JOBS:-8}" -L 1 bash -c \
    "$(declare -f sanitize_one_run); sanitize_one_run \$0 \$1 \$2 $OUT/sanitize-train/\$0-\$1-\$2.log; \
     echo \$? > $OUT/sanitize-train/\$0-\$1-\$2.rc"
  for r in "${runs[@]}"; do
    read -r tool level mode <<<"$r"
    local base="$OUT/sanitize-train/$tool-$level-$mode"
    rc=$(cat "$base.rc" 2>/dev/null || echo missing)
    local summary
    summary=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$base.log" | tail -1)
    echo "$tool $level $mode: exit $rc; ${summary:-no summary}"
    [ "$rc" = 0 ] || { result=1; grep -E "^========= [A-Z]" "$base.log" | grep -vE "COMPUTE-SANITIZER|SUMMARY" \
      | head -4 | cut -c1-160; tail -2 "$base.log"; }
  done
  return $result
}

step_signal() {
  local dir=/tmp/ge-signal rc pid
  rm -rf "$dir"
  mkdir -p "$OUT/signal"
  "$GE_BIN_DIR/ganengine" train --dataset fake --max-steps 100000 --no-progress --log-interval 10 --outf "$dir" \
    >"$OUT/signal/run.log" 2>&1 &
  pid=$!
  for _ in $(seq 120); do  # until a few steps are logged
    grep -q '"step": *[1-9]' "$dir/metrics.jsonl" 2>/dev/null && break
    sleep 0.5
  done
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  echo "SIGTERM: exit $rc (143 expected); $(grep -ciE "saved|stopped" "$OUT/signal/run.log") lines say it saved"
  tail -3 "$OUT/signal/run.log"
  [ -f "$dir/training_state.safetensors" ] || { echo "no training_state.safetensors written"; return 1; }
  local saved
  saved=$(PYTHONPATH=tools python3 -c 'import sys; from quality.safetensors_io import metadata
print(metadata(sys.argv[1])["global_step"])' "$dir/training_state.safetensors")
  echo "state saved at step $saved"
  "$GE_BIN_DIR/ganengine" train --resume "$dir/training_state.safetensors" --max-steps "$((saved + 2))" \
    >"$OUT/signal/resume.log" 2>&1
  local resume_rc=$?
  echo "resume from the file alone: exit $resume_rc"
  tail -3 "$OUT/signal/resume.log"
  ((rc == 143 && resume_rc == 0))
}

step_bench() {
  mkdir -p "$OUT/bench"
  timeout "${BENCH_LIMIT:-480}" env OUT="$OUT/bench" BENCH_PT_ARGS="${BENCH_PT_ARGS:---time-budget 120}" \
    tools/bench_suite.sh >"$OUT/bench/suite.log" 2>&1
  local rc=$?
  ((rc == 124)) && echo "bench: stopped after BENCH_LIMIT=${BENCH_LIMIT:-480} s"
  # ganengine's rows, then the ratios to PyTorch (bench_compare.md).
  grep -E "^O[0-3] (graph|eager) +batch" "$OUT/bench/bench_ganengine.log" 2>/dev/null | cut -c1-110
  sed -n '/### Ratios/,/### ganengine/p' "$OUT/bench/bench_compare.md" 2>/dev/null | grep -E "^\| [0-9]+ \|"
  tail -1 "$OUT/bench/suite.log"
  return $rc
}

step_first_step() {
  ge_require_binaries ganengine || return 1
  local b rc result=0 batches
  mkdir -p "$OUT/first-step"
  IFS=, read -ra batches <<<"${FIRST_STEP_BATCHES:-64,1024}"
  for b in "${batches[@]}"; do
    rm -rf "/tmp/ge-first-step-$b"
    GANENGINE_CUDNN_CACHE=off timeout "${FIRST_STEP_LIMIT:-90}" "$GE_BIN_DIR/ganengine" train --dataset fake \
      --batchSize "$b" --opt-level O2 --max-steps 2 --no-progress --outf "/tmp/ge-first-step-$b" \
      >"$OUT/first-step/batch_$b.log" 2>&1
    rc=$?
    echo "batch $b: exit $rc; $(grep -m 1 "first step done" "$OUT/first-step/batch_$b.log")"
    ((rc == 0)) || { result=1; tail -3 "$OUT/first-step/batch_$b.log"; }
  done
  return $result
}

step_train() {
  mkdir -p "$OUT/train"
  timeout "${TRAIN_LIMIT:-480}" env OUT="$OUT/train" tools/gpu_train_check.sh >"$OUT/train.log" 2>&1
  local rc=$?
  grep -E "^(train|epoch) |FAILED|failed" "$OUT/train.log" | cut -c1-200
  return $rc
}

step_datasets() {
  mkdir -p "$OUT/datasets"
  timeout "${DATASETS_LIMIT:-300}" env OUT="$OUT/datasets" tools/gpu_datasets_check.sh >"$OUT/datasets.log" 2>&1
  local rc=$?
  grep -E "^(bench-data|epoch) |FAILED" "$OUT/datasets.log" | cut -c1-200
  return $rc
}

step_fp8_conv() {
  timeout "${FP8_CONV_LIMIT:-120}" "$GE_BIN_DIR/ganengine_fp8_conv_bench" 256 1024 >"$OUT/fp8-conv.log" 2>&1
  local rc=$?
  cat "$OUT/fp8-conv.log"
  return $rc
}

step_ncu() {
  ge_require_binaries ganengine || return 1
  local b rc result=0 batches
  mkdir -p "$OUT/ncu"
  IFS=, read -ra batches <<<"$1"
  for b in "${batches[@]}"; do
    timeout "${NCU_LIMIT:-180}" tools/ncu_kernels.sh O3 "$b" "$OUT/ncu/O3_$b" "$GE_BIN_DIR/ganengine" \
      >/dev/null 2>"$OUT/ncu/O3_$b.err"
    rc=$?
    echo "O3 batch $b: exit $rc"
    if ((rc == 0)); then head -"${NCU_LINES:-25}" "$OUT/ncu/O3_$b.txt" | cut -c1-150; else result=1; tail -5 "$OUT/ncu/O3_$b.err"; fi
  done
  return $result
}

step_ncu_layers() {
  local levels batch level first="" rc result=0
  read -r levels batch <<<"$1"
  mkdir -p "$OUT/ncu"
  IFS=, read -ra levels <<<"$levels"
  for level in "${levels[@]}"; do
    local prefix="$OUT/ncu/eager_${level}_$batch"
    timeout "${NCU_LIMIT:-180}" env NCU_NVTX=1 NCU_BENCH_ARGS="--cuda-graph off" \
      tools/ncu_kernels.sh "$level" "$batch" "$prefix" "$GE_BIN_DIR/ganengine" >/dev/null 2>"$prefix.err"
    rc=$?
    echo "$level batch $batch, eager: exit $rc"
    if ((rc != 0)); then
      result=1
      tail -5 "$prefix.err"
      continue
    fi
    python3 tools/ncu_summary.py --layers "$prefix.csv" | tail -6 | tee "$prefix.layers.txt"
    if [ -z "$first" ]; then
      first=$prefix
    else
      python3 tools/ncu_summary.py --diff "$first.csv" "$prefix.csv" >"$prefix.diff.txt"
      echo "the largest differences from ${first##*/eager_} (all: ${prefix##*/}.diff.txt):"
      head -"${NCU_LINES:-12}" "$prefix.diff.txt" | cut -c1-150
    fi
  done
  return $result
}

# Alternating runs: round 1 in the order given, round 2 reversed, and so on, so that a drift of
# the GPU's clocks or temperature over the step weighs on every binary alike.
step_ab() {
  local -a variants names bins envs order
  read -ra variants <<<"$1"
  local v i spec result=0 round rc
  for v in "${variants[@]}"; do
    spec=${v#*=}
    names+=("${v%%=*}")
    local bin=${spec%%:*}
    [ -d "$bin" ] && bin=$bin/ganengine
    [ -x "$bin" ] || { echo "ab: ${v%%=*}: $bin is not an executable"; return 1; }
    bins+=("$bin")
    if [[ $spec == *:* ]]; then envs+=("${spec#*:}"); else envs+=(""); fi
  done
  rm -rf "$OUT/ab" && mkdir -p "$OUT/ab"  # medians of this run's rounds only
  for round in $(seq 1 "${AB_ROUNDS:-3}"); do
    order=("${!names[@]}")
    ((round % 2 == 0)) && mapfile -t order < <(printf '%s\n' "${order[@]}" | sort -rn)
    for i in "${order[@]}"; do
      local log="$OUT/ab/${names[i]}_$round"
      # shellcheck disable=SC2086  # AB_ARGS: several options
      timeout "${AB_LIMIT:-180}" env ${envs[i]//,/ } "${bins[i]}" bench --opt-level "${AB_OPT_LEVELS:-O2,O3}" \
        --batch-sizes "${AB_BATCHES:-64,256,1024}" ${AB_ARGS:-} --json "$log.json" >"$log.log" 2>&1
      rc=$?
      ((rc == 0)) || { echo "ab: ${names[i]} round $round: exit $rc"; tail -3 "$log.log"; result=1; }
    done
  done
  # Each row's median over the rounds, and its ratio to the first binary's.
  python3 - "$OUT/ab" "${names[@]}" <<'PY' | tee "$OUT/ab/medians.txt"
import glob, json, os, statistics, sys
folder, names = sys.argv[1], sys.argv[2:]
runs = {}  # (name, row key) -> [ms per step]
keys = []
rounds = {}  # name -> runs read
for name in names:
    for path in sorted(glob.glob(os.path.join(folder, f"{name}_*.json"))):
        if os.path.basename(path)[len(name) + 1:-5].isdigit():
            try:
                rows = json.load(open(path)).get("rows", [])
            except (OSError, ValueError):
                continue
            rounds[name] = rounds.get(name, 0) + 1
            for r in rows:
                if not r.get("ok"):
                    continue
                key = (r["opt_level"], "graph" if r.get("cuda_graph") else "eager", r["batch"])
                if key not in keys:
                    keys.append(key)
                runs.setdefault((name, key), []).append(r["ms_per_step"])
base = names[0]
print(f"{'row':<24}" + "".join(f"{n[:16]:>18}" for n in names) + "   (median ms/step over rounds; ratio to " + base + ")")
for key in sorted(keys, key=lambda k: (k[0], k[1], k[2])):
    label = f"{key[0]} {key[1]} batch {key[2]}"
    cells = []
    ref = statistics.median(runs[(base, key)]) if (base, key) in runs else None
    for name in names:
        ms = runs.get((name, key))
        if not ms:
            cells.append(f"{'-':>18}")
            continue
        m = statistics.median(ms)
        ratio = f" x{ref / m:.3f}" if ref and name != base else ""
        cells.append(f"{m:>10.3f}{ratio:>8}" if ratio else f"{m:>18.3f}")
    print(f"{label:<24}" + "".join(cells))
print("rounds per binary: " + ", ".join(f"{n} {rounds.get(n, 0)}" for n in names)
      + "; x: the first binary's time over this one's (> 1: faster)")
PY
  return $result
}

# ---- Run them.
for s in "${steps[@]}"; do
  name=${s%%$'\t'*}
  arg=""
  [[ $s == *$'\t'* ]] && arg=${s#*$'\t'}
  header "$name${arg:+ $arg}"
  start=$SECONDS
  fn=step_${name//-/_}
  if [ -n "$arg" ]; then "$fn" "$arg"; else "$fn"; fi
  rc=$?
  echo "-- $name: $( ((rc == 0)) && echo passed || echo "FAILED (exit $rc)"), $((SECONDS - start)) s"
  ((rc == 0)) || fail_step "$name"
done

echo
if ((status)); then echo "gpu_host: failed: ${failed[*]}"; else echo "gpu_host: every step passed"; fi
if ((pack)); then
  tar czf /tmp/gpu-logs.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/gpu-logs.tgz "$OUT/" \
    && echo "logs packed: $OUT/gpu-logs.tgz"
fi
exit $status
