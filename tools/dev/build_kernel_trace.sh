#!/usr/bin/env bash
# Builds the CUPTI kernel tracer (tools/dev/kernel_trace.cpp) into .carry/, with the CUPTI
# library it links against (the GPU host's Python packages hold one too, of another path).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .carry
g++ -std=c++17 -O2 -shared -fPIC -I/usr/local/cuda/include tools/dev/kernel_trace.cpp \
  -L/usr/local/cuda/lib -L/usr/local/cuda/lib/stubs -lcupti -lcuda -Wl,-rpath,'$ORIGIN' -o .carry/kernel_trace.so
cp -L /usr/local/cuda/lib/libcupti.so.13 .carry/
ls -la .carry/kernel_trace.so .carry/libcupti.so.13
