#!/usr/bin/env bash
# Installs missing build dependencies, then configures and builds ganengine into build/.
#   tools/build.sh [CMAKE_OPTION...]     e.g. -DGE_WERROR=ON (tools/test.sh builds with it)
# GE_WERROR (ON/OFF, default OFF) sets the option of that name: warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGE_WERROR="${GE_WERROR:-OFF}" "$@" >/dev/null
cmake --build build -j"$(nproc)"
