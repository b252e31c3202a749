#!/usr/bin/env bash
# CI's check of what a run gives to watch it: short CPU training runs (one resumed), then their
# event files are read with TensorBoard's own reader (the PyPI `tensorboard` package, installed
# into build/pyenv-tb) and compared with metrics.jsonl and the sample grids by
# tools/check_tensorboard.py, and tools/plot_metrics.py (matplotlib) draws a run's losses.png.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x build/pyenv-tb/bin/python ] || ! build/pyenv-tb/bin/python -c 'import tensorboard, matplotlib' 2>/dev/null
then
  python3 -m venv build/pyenv-tb
  build/pyenv-tb/bin/pip install -q tensorboard matplotlib
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
tiny=(--dataset fake --device cpu --imageSize 16 --ngf 4 --ndf 4 --nz 8 --no-progress)
# Two epochs of 4 steps (the last a partial batch), a grid every 2 batches, a record every step.
build/ganengine train "${tiny[@]}" --batchSize 300 --niter 2 --sample-interval 2 --outf "$out/whole" >/dev/null
build/pyenv-tb/bin/python tools/check_tensorboard.py "$out/whole"
# Every third batch logged, stopped after 3 steps and resumed: two event files, one restarting.
build/ganengine train "${tiny[@]}" --batchSize 300 --niter 2 --log-interval 3 --max-steps 3 --outf "$out/parts" \
    >/dev/null
build/ganengine train "${tiny[@]}" --batchSize 300 --niter 2 --log-interval 3 --max-steps 8 --outf "$out/parts" \
    --resume "$out/parts/training_state.safetensors" >/dev/null
build/pyenv-tb/bin/python tools/check_tensorboard.py "$out/parts"
build/pyenv-tb/bin/python tools/plot_metrics.py "$out/parts" >/dev/null
build/pyenv-tb/bin/python - "$out/parts/losses.png" <<'PY'
import sys
png = open(sys.argv[1], "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000, "losses.png is not a drawn PNG"
print("plot_metrics: losses.png drawn")
PY
