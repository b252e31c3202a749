#!/usr/bin/env bash
# The training-quality protocol, on a GPU host with PyTorch:
#   tools/quality/run_protocol.sh OUTDIR [EPOCHS] [SEEDS]      (defaults: 6 epochs, 3 seeds)
# 1. trains the feature classifier once (classifier.py; cached in OUTDIR),
# 2. trains `ganengine train --dataset fashion-mnist` at each opt level for seeds 1..SEEDS and,
#    alongside, PyTorch's autocast + GradScaler DCGAN (pytorch_amp_dcgan.py) for the same seeds,
#    EPOCHS epochs each, default sizes (64x64, batch 64, ngf = ndf = 64, nz = 100),
# 3. scores every run's generator after each epoch from GE_QUALITY_FIRST_EPOCH to EPOCHS, in
#    BatchNorm's training and eval modes (score.py),
# 4. writes OUTDIR/results.jsonl (every record) and OUTDIR/report.md (report.py's tables); the
#    exit status is report.py's: 1 when an opt level misses the bar.
# A run that fails or times out is recorded with its exit status and the protocol goes on; run
# again with the same OUTDIR to redo only the runs that have no status.json / scores.done yet.
#
# Environment:
#   GE_BIN_DIR                the folder holding ganengine (default .carry)
#   GE_QUALITY_DATAROOT       Fashion-MNIST's IDX files (default /usr/share/datasets/fashion-mnist
#                             when it holds them, else .carry/data/fashion-mnist)
#   GE_QUALITY_LEVELS         opt levels (default "O0 O1 O2 O3 O4")
#   GE_QUALITY_FIRST_EPOCH    first epoch scored (default 2)
#   GE_QUALITY_RUN_TIMEOUT    seconds one training run may take (default 300)
#   GE_QUALITY_REFERENCE      0 leaves the PyTorch reference out (default 1)
#   PYTHON                    the Python with PyTorch (default python3)
set -uo pipefail
caller=$PWD
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
# Paths given by the caller are relative to where it ran; the defaults to the repository.
from_caller() { if [[ $1 == /* ]]; then echo "$1"; else echo "$caller/$1"; fi; }

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  echo "usage: $0 OUTDIR [EPOCHS] [SEEDS]" >&2
  exit 2
fi
out=$(from_caller "$1")
epochs=${2:-6}
seeds=${3:-3}
for n in "$epochs" "$seeds"; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
    echo "$0: EPOCHS and SEEDS must be positive integers, got '$n'" >&2
    exit 2
  fi
done
py=${PYTHON:-python3}
ge=.carry/ganengine
[ -n "${GE_BIN_DIR:-}" ] && ge=$(from_caller "$GE_BIN_DIR")/ganengine
levels=${GE_QUALITY_LEVELS:-O0 O1 O2 O3 O4}
first=${GE_QUALITY_FIRST_EPOCH:-2}
run_timeout=${GE_QUALITY_RUN_TIMEOUT:-300}
reference=${GE_QUALITY_REFERENCE:-1}
if [ -n "${GE_QUALITY_DATAROOT:-}" ]; then
  data=$(from_caller "$GE_QUALITY_DATAROOT")
elif compgen -G "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte*" >/dev/null; then
  data=/usr/share/datasets/fashion-mnist
else
  data=.carry/data/fashion-mnist
fi
((first > epochs)) && first=$epochs
start=$SECONDS
log() { printf '[%4d s] %s\n' $((SECONDS - start)) "$*"; }

# Everything checked before the first minute is spent.
problems=()
[ -x "$ge" ] || problems+=("no ganengine at $ge (set GE_BIN_DIR)")
compgen -G "$data/train-images-idx3-ubyte*" >/dev/null || compgen -G "$data/FashionMNIST/raw/train-images-idx3-ubyte*" \
  >/dev/null || problems+=("no Fashion-MNIST IDX files in $data (set GE_QUALITY_DATAROOT)")
"$py" -c 'import torch; assert torch.cuda.is_available(), "no CUDA GPU"' 2>/dev/null ||
  problems+=("$py has no PyTorch with a CUDA GPU (set PYTHON)")
if ((${#problems[@]})); then
  printf '%s: %s\n' "$0" "${problems[@]}" >&2
  exit 2
fi
mkdir -p "$out/runs"
out=$(cd "$out" && pwd)
ge=$(cd "$(dirname "$ge")" && pwd)/ganengine
data=$(cd "$data" && pwd)
cache=$out/classifier_fashion_mnist_64.safetensors
log "ganengine: $ge; data: $data; levels: $levels; seeds 1..$seeds; $epochs epochs, scored from $first"
"$ge" info >"$out/ganengine_info.txt" 2>&1 || true
GE_Q_COMMAND="tools/quality/run_protocol.sh OUTDIR $epochs $seeds" GE_Q_LEVELS="$levels" GE_Q_FIRST=$first \
  "$py" - >"$out/env.json" <<'PY' || true
import json, os, platform, torch
print(json.dumps({"record": "env", "command": os.environ["GE_Q_COMMAND"], "levels": os.environ["GE_Q_LEVELS"],
                  "first_epoch": int(os.environ["GE_Q_FIRST"]), "torch": torch.__version__,
                  "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
                  "python": platform.python_version()}))
PY

log "classifier"
if ! "$py" tools/quality/classifier.py --dataroot "$data" --cache "$cache" >"$out/classifier.json" \
  2> >(tee "$out/classifier.log" >&2); then
  log "classifier failed (see $out/classifier.log): nothing can be scored"
  exit 1
fi
log "classifier: $(cat "$out/classifier.json")"

# status.json of one finished training run: how it ended and how many epochs it wrote.
record_run() {  # dir impl level seed rc seconds
  local dir=$1 written last
  written=$(compgen -G "$dir/netG_epoch_*.safetensors" | wc -l)
  last=$(grep -v '^\s*$' "$dir/train.log" 2>/dev/null | tail -n 1)
  "$py" -c 'import json, sys
a = sys.argv[1:]
print(json.dumps({"record": "run", "impl": a[0], "opt_level": a[1], "seed": int(a[2]), "rc": int(a[3]),
                  "seconds": int(a[4]), "epochs_written": int(a[5]), "dir": a[6], "last_line": a[7]}))' \
    "$2" "$3" "$4" "$5" "$6" "$written" "$dir" "$last" >"$dir/status.json.tmp" &&
    mv "$dir/status.json.tmp" "$dir/status.json"
}

score_run() {  # dir impl level seed
  local dir=$1 files=() e
  [ -e "$dir/scores.done" ] && return 0
  for ((e = first; e <= epochs; e++)); do
    [ -f "$dir/netG_epoch_$((e - 1)).safetensors" ] && files+=("$dir/netG_epoch_$((e - 1)).safetensors")
  done
  if ((${#files[@]} == 0)); then
    log "$2 $3 seed $4: no generator to score"
    return 1
  fi
  rm -f "$dir/scores.jsonl"
  if "$py" tools/quality/score.py --dataroot "$data" --classifier "$cache" --out "$dir/scores.jsonl" \
    --tag "{\"impl\": \"$2\", \"opt_level\": \"$3\", \"seed\": $4}" --netG "${files[@]}" >/dev/null \
    2>"$dir/score.log"; then
    touch "$dir/scores.done"
    log "$2 $3 seed $4: epochs scored: ${#files[@]}"
  else
    log "$2 $3 seed $4: scoring failed (see $dir/score.log)"
  fi
}

train_run() {  # dir impl level seed, then the command
  local dir=$1 impl=$2 level=$3 seed=$4 t0=$SECONDS rc
  shift 4
  if [ -f "$dir/status.json" ]; then
    log "$impl $level seed $seed: trained before, kept"
    return 0
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  timeout --foreground --kill-after=10 "$run_timeout" "$@" >"$dir/train.log" 2>&1
  rc=$?
  record_run "$dir" "$impl" "$level" "$seed" "$rc" $((SECONDS - t0))
  log "$impl $level seed $seed: exit $rc after $((SECONDS - t0)) s, epochs written: $(compgen -G \
    "$dir/netG_epoch_*.safetensors" | wc -l)"
}

# results.jsonl from every record written so far, and report.md from it.
collect() {
  local results=$out/results.jsonl dir
  cat "$out/env.json" "$out/classifier.json" >"$results.tmp" 2>/dev/null
  for dir in "$out"/runs/*; do
    cat "$dir/status.json" "$dir/scores.jsonl" >>"$results.tmp" 2>/dev/null
  done
  mv "$results.tmp" "$results"
  "$py" tools/quality/report.py "$results" >"$out/report.md"
  local rc=$?
  cat "$out/report.md"
  return $rc
}
# Stopped (a time limit's TERM, Ctrl-C): the runs still going are stopped, and what was finished is
# reported. Every process of the protocol stays in its process group (timeout --foreground), so
# a TERM sent to the group reaches them all.
# shellcheck disable=SC2317  # reached through the trap
stopped() {
  trap - TERM INT
  log "stopped: reporting the runs finished so far"
  local pids
  mapfile -t pids < <(jobs -p)
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null
  collect
  exit 124
}
trap stopped TERM INT

# Scoring and PyTorch's training wait on the CPU more than they load the GPU: they run beside
# ganengine's runs, at most this many at a time.
max_jobs=6
throttle() { while (($(jobs -rp | wc -l) >= max_jobs)); do sleep 1; done; }

if [ "$reference" != 0 ]; then
  for ((seed = 1; seed <= seeds; seed++)); do
    dir=$out/runs/pytorch_amp-seed$seed
    (
      train_run "$dir" pytorch AMP "$seed" "$py" tools/quality/pytorch_amp_dcgan.py --dataroot "$data" --outf "$dir" \
        --niter "$epochs" --manualSeed "$seed"
      score_run "$dir" pytorch AMP "$seed"
    ) &
  done
fi

for ((seed = 1; seed <= seeds; seed++)); do
  for level in $levels; do
    dir=$out/runs/ganengine_$level-seed$seed
    train_run "$dir" ganengine "$level" "$seed" "$ge" train --dataset fashion-mnist --dataroot "$data" --device cuda \
      --opt-level "$level" --manualSeed "$seed" --niter "$epochs" --outf "$dir" --no-progress --log-interval 50 \
      --sample-interval 1000000
    throttle
    score_run "$dir" ganengine "$level" "$seed" &
  done
done
log "waiting for the PyTorch runs and the scoring"
wait
collect
status=$?  # report.py's: 1 when an opt level missed the bar
log "done: $out/results.jsonl, $out/report.md (from $repo)"
exit $status
