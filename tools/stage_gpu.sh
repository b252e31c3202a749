#!/usr/bin/env bash
# Builds here and copies what the GPU host runs into .carry/ (git-ignored; name it in the
# device tool's `carry`). The GPU host has its own CUDA driver, cuDNN and cuBLAS.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh >/dev/null
rm -rf .carry && mkdir -p .carry
cp build/ganengine build/ganengine_tests build/ganengine_conv_probe .carry/
strip .carry/ganengine .carry/ganengine_tests .carry/ganengine_conv_probe 2>/dev/null || true
du -sh .carry
