#!/usr/bin/env bash
# CI's ONNX check: generators are exported with `ganengine export` and run by onnxruntime (PyPI),
# which must give the images `ganengine generate --save-tensor` gives within 1e-5: a .pth golden
# (PyTorch's file format, read directly) and a generator trained for a few steps on the CPU. Needs
# onnx, onnxruntime, numpy and safetensors, installed into <build>/pyenv. GE_BUILD_DIR names the
# build folder (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GE_BUILD_DIR:-build}
if [ ! -x "$build/pyenv/bin/python" ]; then
  python3 -m venv "$build/pyenv"
fi
if ! "$build/pyenv/bin/python" -c "import onnx, onnxruntime, numpy, safetensors" 2>/dev/null; then
  "$build/pyenv/bin/pip" install -q onnx onnxruntime numpy safetensors
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/ganengine" train --dataset fake --device cpu --imageSize 32 --ngf 8 --ndf 8 --nz 16 --batchSize 16 --max-steps 3 \
  --no-progress --outf "$out/train" >/dev/null
for netG in tests/goldens/pth_netG_nc3_legacy.pth "$out/train/netG_epoch_0.safetensors"; do
  "$build/ganengine" export --netG "$netG" -o "$out/g.onnx" >/dev/null
  "$build/ganengine" generate --netG "$netG" --device cpu -n 6 -o "$out/grid.png" --save-tensor "$out/g.safetensors" \
    >/dev/null
  "$build/pyenv/bin/python" tools/check_onnx.py "$out/g.onnx" "$out/g.safetensors" --tolerance 1e-5
done
