#!/usr/bin/env bash
# Builds here and copies what the GPU host runs into .carry/ (git-ignored: copy the folder to the
# GPU host beside the checkout). The GPU host has its own CUDA driver, cuDNN and cuBLAS.
# Only .carry/ganengine, ganengine_tests and ganengine_fp8_conv_bench are replaced: whatever else
# .carry/ holds (reference binaries in .carry/base/, data in .carry/data/) stays.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh >/dev/null
mkdir -p .carry
for b in ganengine ganengine_tests ganengine_fp8_conv_bench; do
  # A copy beside, then a rename: a binary running from .carry/ keeps its file.
  cp build/$b .carry/$b.new
  strip .carry/$b.new 2>/dev/null || true
  mv -f .carry/$b.new .carry/$b
done
du -sh .carry .carry/ganengine .carry/ganengine_tests .carry/ganengine_fp8_conv_bench
