#!/usr/bin/env bash
# On a GPU host: one epoch of training per dataset family on synthetic files in the real
# formats (datasets/make_synthetic.py; the LSUN database is carried in .carry/data/lsun where the
# host's Python has no lmdb module), with the input pipeline's own rates from bench-data.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}
source tools/gpu_env.sh
[ -n "${GE_BINARY:-}" ] && GE_BIN_DIR=$(dirname "$GE_BINARY")  # as tools/gpu_suite.sh passes it
ge_require_binaries ganengine || exit 2
BIN=$GE_BIN_DIR/ganengine
DATA=/tmp/ge-data
status=0
python3 datasets/make_synthetic.py "$DATA" --only cifar10,mnist,folder --folder-images 5000 || status=1
# LSUN: the carried database, else one made here where Python has the lmdb module.
if [ -d .carry/data/lsun ]; then
  cp -r .carry/data/lsun "$DATA/"
else
  python3 datasets/make_synthetic.py "$DATA" --only lsun --lsun-images 2000 >/dev/null 2>&1 || rm -rf "$DATA/lsun"
fi
run() {  # name, then dataset flags
  local name=$1
  shift
  "$BIN" bench-data "$@" --workers 8 --seconds 2 2>&1 | sed "s/^/bench-data $name: /"
  "$BIN" train "$@" --workers 8 --niter 1 --opt-level O2 --log-interval 1000 --no-progress \
      --outf "/tmp/ge-ds-$name" --overwrite >"$OUT/ds_$name.log" 2>&1 || { echo "train $name FAILED"; tail -5 "$OUT/ds_$name.log"; status=1; }
  grep -E "^(data:|done)" "$OUT/ds_$name.log" | sed "s/^/epoch $name: /"
}
run cifar10 --dataset cifar10 --dataroot "$DATA/cifar10"
run mnist --dataset mnist --dataroot "$DATA/mnist"
run folder --dataset folder --dataroot "$DATA/folder"
if [ -d "$DATA/lsun" ]; then
  run lsun --dataset lsun --dataroot "$DATA/lsun" --classes bedroom
else
  echo "epoch lsun: skipped: no LSUN database (carry .carry/data/lsun, or pip install lmdb so that" \
    "datasets/make_synthetic.py can write one)"
fi
run fake-gpu --dataset fake --data-on gpu
run fake-host --dataset fake --data-on host
exit $status
