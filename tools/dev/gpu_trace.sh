#!/usr/bin/env bash
# On the GPU host: the timeline of graph-replayed training steps, through the CUPTI tracer
# (tools/dev/kernel_trace.cpp, staged by tools/dev/build_kernel_trace.sh).
#   TRACES="O3:64 O2:64 O3:1024"  opt level and batch size of each run
#   BIN=.carry/ganengine  EXTRA_ENV="GANENGINE_X=y"  LAST=20
set -uo pipefail
cd "$(dirname "$0")/../.."
chmod +x .carry/* 2>/dev/null
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry:${LD_LIBRARY_PATH:-}
BIN=${BIN:-.carry/ganengine}
for t in ${TRACES:-O3:64}; do
  opt=${t%%:*}; batch=${t##*:}; tag=${TAG:-trace}_${opt}_${batch}
  echo "== $tag"
  env ${EXTRA_ENV:-} CUDA_INJECTION64_PATH=$PWD/.carry/kernel_trace.so GE_TRACE_OUT=$OUT/$tag.csv \
    timeout 120 $BIN bench --opt-level $opt --batch-sizes $batch --warmup 20 --steps 20 --windows 3 \
    > $OUT/$tag.log 2>&1
  echo "rc $?"; grep -E "ms/step|kernel_trace" $OUT/$tag.log | tail -3
  python3 tools/dev/trace_steps.py $OUT/$tag.csv --last ${LAST:-20} --critical --timeline > $OUT/$tag.txt 2>&1
  head -4 $OUT/$tag.txt; sed -n '/critical path/,/on the path/p' $OUT/$tag.txt | tail -${CRIT_LINES:-3}
  gzip -f $OUT/$tag.csv $OUT/$tag.csv.edges
done
