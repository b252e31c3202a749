#!/usr/bin/env bash
# Installs missing build dependencies, then configures and builds ganengine into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
