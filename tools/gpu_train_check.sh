#!/usr/bin/env bash
# On a GPU host: each opt level trains STEPS steps (default 500) on fake data at the reference
# size (64x64, ngf=ndf=64, batch 64); checks every loss is finite, the outputs exist, the saved
# weights strict-load into PyTorch's modules, and --print-precision; prints images/s. LEVELS
# (default "O0 O1 O2 O3 O4") picks the opt levels.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
STEPS=${STEPS:-500}
source tools/gpu_env.sh
[ -n "${GE_BINARY:-}" ] && GE_BIN_DIR=$(dirname "$GE_BINARY")  # as tools/gpu_suite.sh passes it
ge_require_binaries ganengine || exit 2
BIN=$GE_BIN_DIR/ganengine
status=0
for L in ${LEVELS:-O0 O1 O2 O3 O4}; do
  dir=/tmp/ge-train-$L
  rm -rf "$dir"
  "$BIN" train --dataset fake --opt-level $L --niter 1000 --max-steps "$STEPS" --outf "$dir" --log-interval 10 \
      --no-progress >"$OUT/train_$L.log" 2>&1
  rc=$?
  python3 - "$dir/metrics.jsonl" "$L" "$rc" <<'PY' || status=1
import json, math, sys
path, level, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
recs = [json.loads(l) for l in open(path)]
bad = [r["step"] for r in recs if not all(math.isfinite(r[k]) for k in ("loss_D", "loss_G", "D_x"))]
ips = [r["images_per_s"] for r in recs]
print(f"train {level}: exit {rc}, {len(recs)} logged steps up to {recs[-1]['step']}, non-finite at {bad[:5] or 'none'}, "
      f"last Loss_D {recs[-1]['loss_D']:.4f} Loss_G {recs[-1]['loss_G']:.4f}, scales {recs[-1]['loss_scale']}, "
      f"images/s (running mean at the end) {ips[-1]:.0f}")
sys.exit(0 if rc == 0 and not bad else 1)
PY
  grep -E "^done" "$OUT/train_$L.log"
  last=$(ls "$dir"/netG_epoch_*.safetensors | sort -V | tail -1)
  python3 tools/check_checkpoint.py --torch --netG "$last" --netD "${last/netG/netD}" >>"$OUT/checkpoints.log" 2>&1 \
      || { echo "checkpoint check failed for $L"; status=1; }
  "$BIN" train --print-precision --opt-level $L >"$OUT/precision_$L.txt" 2>&1 || status=1
done
# One epoch per opt level at batch 64 (fake data: 1000 images, 16 steps), for images/s.
for L in ${LEVELS:-O0 O1 O2 O3 O4}; do
  "$BIN" train --dataset fake --opt-level $L --niter 1 --outf /tmp/ge-epoch-$L --overwrite --log-interval 1000 --no-progress \
      2>&1 | grep -E "^done" | sed "s/^/epoch $L: /"
done
tail -n 3 "$OUT/checkpoints.log"
exit $status
