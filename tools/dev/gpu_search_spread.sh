#!/usr/bin/env bash
# On the GPU host: how much the engine search's own choices move the step. Runs `ganengine bench`
# in N fresh processes, each searching every convolution for itself into its own cache file, and
# prints each process's ms/step; tools/dev/search_spread.py then lists the cache entries in which
# the processes differ, beside their step times.
#   N=10 BATCHES=64 LEVELS=O2,O3 ENV="GANENGINE_X=y" OUT=out bash tools/dev/gpu_search_spread.sh
# Results: $OUT/spread/b<i>.log (bench output) and c<i>.txt (the process's cache file).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu_env.sh
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT/spread"
chmod +x .carry/* 2>/dev/null
for i in $(seq 1 "${N:-10}"); do
  env ${ENV:-} GANENGINE_CUDNN_CACHE="$OUT/spread/c$i.txt" timeout 90 .carry/ganengine bench \
    --opt-level "${LEVELS:-O2,O3}" --batch-sizes "${BATCHES:-64}" > "$OUT/spread/b$i.log" 2>&1
  echo "$i $(grep -E 'graph +batch' "$OUT/spread/b$i.log" | awk '{print $1, $4, $5}' | tr '\n' ' ')"
done
rm -f "$OUT"/spread/*.lock
