#!/usr/bin/env bash
# The CPU training step, ganengine's fast backend (`ganengine bench --device cpu`) and its
# PyTorch twin (`tools/bench_pytorch.py --device cpu`) side by side: for each configuration the
# two run alternately, ROUNDS times, with the same thread count, and the median of each is
# compared (alternating spreads a noisy machine's slow moments over both).
#   tools/bench_cpu.sh [build-dir]        (default build/)
# Environment: THREADS (default 2), ROUNDS (default 3), CPU_BENCH_VENV (default
# build/pyenv-cpu-bench), CONFIGS (default "64:64:64 16:32:16": batch:imageSize:ngf=ndf, O0).
# PyTorch comes from PyPI into the venv with a plain `pip install torch`; PyPI's Linux wheel is
# the CUDA build and pulls in NVIDIA's libraries (about 5 GB installed), which the CPU run
# loads but never uses: PyPI serves no CPU-only wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
venv=${CPU_BENCH_VENV:-build/pyenv-cpu-bench}
configs=${CONFIGS:-"64:64:64 16:32:16"}
ge="$build/ganengine"
[[ -x $ge ]] || { echo "bench_cpu.sh: $ge is not built (tools/build.sh)" >&2; exit 2; }
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy
fi
echo "threads $threads, $rounds alternating rounds per configuration; $(nproc --all) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
export OMP_NUM_THREADS=$threads
"$ge" info | grep '^cpu'

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

for c in $configs; do
  IFS=: read -r batch size width <<<"$c"
  # Small steps get more of them per window, so each window lasts about as long.
  steps=$((batch >= 64 ? 3 : 20))
  ours=() theirs=()
  for ((r = 1; r <= rounds; r++)); do
    line=$("$ge" bench --device cpu --threads "$threads" --opt-level O0 --batch-sizes "$batch" --imageSize "$size" \
      --ngf "$width" --ndf "$width" --warmup 2 --steps "$steps" --windows 1 | tail -1)
    ours+=("$(awk '{print $4}' <<<"$line")")
    line=$("$venv/bin/python" tools/bench_pytorch.py --device cpu --threads "$threads" --configs fp32 --layouts NCHW \
      --batch-sizes "$batch" --imageSize "$size" --ngf "$width" --ndf "$width" --warmup 2 --windows 1 \
      --window-steps "$steps" | tail -1)
    theirs+=("$(sed -E 's/.*: ([0-9.]+) ms\/step.*/\1/' <<<"$line")")
  done
  m_ours=$(printf '%s\n' "${ours[@]}" | median)
  m_theirs=$(printf '%s\n' "${theirs[@]}" | median)
  printf 'O0 batch %s, %sx%s, ngf=ndf=%s: ganengine %s ms/step (%s), PyTorch %s ms/step (%s): ratio %.2f\n' \
    "$batch" "$size" "$size" "$width" "$m_ours" "${ours[*]}" "$m_theirs" "${theirs[*]}" \
    "$(awk -v a="$m_ours" -v b="$m_theirs" 'BEGIN {print a / b}')"
done
