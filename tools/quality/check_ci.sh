#!/usr/bin/env bash
# CI's check of the training-quality tools that need no PyTorch: the metrics against closed
# forms (metrics.py --self-test, with scipy's sqrtm as a second opinion) and check_tools.py
# (the safetensors fallback, the IDX reader, report.py's bar). numpy, scipy, safetensors and
# Pillow come from PyPI into <build>/pyenv-quality; GE_BUILD_DIR names the build folder
# (default build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
env=${GE_BUILD_DIR:-build}/pyenv-quality
if [ ! -x "$env/bin/python" ] || ! "$env/bin/python" -c 'import numpy, scipy, safetensors, PIL' 2>/dev/null; then
  python3 -m venv "$env"
  "$env/bin/pip" install -q numpy scipy safetensors pillow
fi
"$env/bin/python" tools/quality/metrics.py --self-test
"$env/bin/python" tools/quality/check_tools.py
