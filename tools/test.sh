#!/usr/bin/env bash
# The test command (README.md, .ci/run): builds everything, then runs the whole suite with
# CTest. Without a GPU the GPU cases report "skipped"; tools/gpu_suite.sh runs them on one.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 tools/dev/check_test_names.py  # names must be usable as CTest names and doctest filters
tools/build.sh
tools/check_checkpoints_ci.sh  # the saved weights, read by Python's safetensors library
ctest --test-dir build --output-on-failure -j"$(nproc)"
