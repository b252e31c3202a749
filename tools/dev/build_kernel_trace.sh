#!/usr/bin/env bash
# Builds the CUPTI kernel tracer (tools/dev/kernel_trace.cpp) into DIR (default .carry/, what
# the device calls carry), with the CUPTI library it links against beside it.
#   tools/dev/build_kernel_trace.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.carry}
mkdir -p "$dir"
g++ -std=c++17 -O2 -shared -fPIC -I/usr/local/cuda/include tools/dev/kernel_trace.cpp \
  -L/usr/local/cuda/lib -L/usr/local/cuda/lib/stubs -lcupti -lcuda -Wl,-rpath,'$ORIGIN' -o "$dir/kernel_trace.so"
cp -L /usr/local/cuda/lib/libcupti.so.13 "$dir/"
ls -la "$dir/kernel_trace.so" "$dir/libcupti.so.13"
