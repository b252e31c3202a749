#!/usr/bin/env bash
# CI's Python check: a short CPU training run, then the saved netG/netD are opened with the
# PyPI safetensors library and must carry exactly the PyTorch Generator/Discriminator keys and
# shapes. Needs only `safetensors` and `numpy` (installed into build/pyenv).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x build/pyenv/bin/python ]; then
  python3 -m venv build/pyenv
  build/pyenv/bin/pip install -q safetensors numpy
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for level in O0 O2; do
  build/ganengine train --dataset fake --device cpu --imageSize 32 --ngf 8 --ndf 8 --batchSize 16 --max-steps 2 \
      --opt-level $level --no-progress --outf "$out/$level" >/dev/null
  build/pyenv/bin/python tools/check_checkpoint.py --netG "$out/$level/netG_epoch_0.safetensors" \
      --netD "$out/$level/netD_epoch_0.safetensors" --ngf 8 --ndf 8 --imageSize 32
done
