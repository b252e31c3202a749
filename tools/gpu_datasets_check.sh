#!/usr/bin/env bash
# On a GPU host: one epoch of training per dataset family on synthetic files in the real
# formats (datasets/make_synthetic.py; the LSUN database is carried in .carry/data/lsun since
# the host has no lmdb module), with the input pipeline's own rates from bench-data.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}
BIN=${GE_BINARY:-.carry/ganengine}
DATA=/tmp/ge-data
status=0
python3 datasets/make_synthetic.py "$DATA" --only cifar10,mnist,folder --folder-images 5000 || status=1
[ -d .carry/data/lsun ] && cp -r .carry/data/lsun "$DATA/"
run() {  # name, then dataset flags
  local name=$1
  shift
  "$BIN" bench-data "$@" --workers 8 --seconds 2 2>&1 | sed "s/^/bench-data $name: /"
  "$BIN" train "$@" --workers 8 --niter 1 --opt-level O2 --log-interval 1000 --no-progress \
      --outf "/tmp/ge-ds-$name" >"$OUT/ds_$name.log" 2>&1 || { echo "train $name FAILED"; tail -5 "$OUT/ds_$name.log"; status=1; }
  grep -E "^(data:|done)" "$OUT/ds_$name.log" | sed "s/^/epoch $name: /"
}
run cifar10 --dataset cifar10 --dataroot "$DATA/cifar10"
run mnist --dataset mnist --dataroot "$DATA/mnist"
run folder --dataset folder --dataroot "$DATA/folder"
run lsun --dataset lsun --dataroot "$DATA/lsun" --classes bedroom
run fake-gpu --dataset fake --data-on gpu
run fake-host --dataset fake --data-on host
exit $status
