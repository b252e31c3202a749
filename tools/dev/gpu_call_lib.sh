# Sourced by the per-session device-call scripts (tools/dev/gpu_call_s5.sh and later), from the
# repository root on the GPU host: the environment every call sets up and the steps they share.
# Everything goes under $OUT; gpu_call_pack leaves it as one archive, $OUT/call.tgz.
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT/bench"
source tools/gpu_env.sh
export GE_TEST_DATA_DIR="$PWD/tests/data" GE_BINARY="$PWD/.carry/ganengine" GANENGINE_CUDNN_CACHE=off
GE=.carry/ganengine

# Lines cut to $1 columns (0: whole).
gpu_call_cut() { if [ "$1" -gt 0 ]; then cut -c1-"$1"; else cat; fi; }

# The whole GPU suite (at most SUITE_LIMIT seconds): its summary line and the first errors.
gpu_call_suite() {
  OUT="$OUT/suite" timeout ${SUITE_LIMIT:-220} tools/gpu_suite.sh | tail -1
  grep -B3 -A12 "ERROR" "$OUT/suite/tests.log" | head -60
}

# Process start to first step at batch 64 and 1024 (GANENGINE_CUDNN_CACHE=off: every
# convolution searched, as on a fresh machine).
gpu_call_first_step() {
  local b
  for b in 64 1024; do
    timeout 60 $GE train --dataset fake --batchSize $b --opt-level O2 --max-steps 2 --outf /tmp/first_$b > "$OUT/first_step_$b.log" 2>&1
    grep -i "first step\|cuDNN algorithms" "$OUT/first_step_$b.log" | head -3
  done
}

# Alternating `ganengine bench` runs of VARIANTS ("name=binary[:ENV=value]" ...), ROUNDS rounds
# (2) at AB_BATCHES (64,256,1024): each run's log and JSON, and its O2/O3 lines.
gpu_call_ab() {
  local round variant name spec bin envs
  for round in $(seq 1 ${ROUNDS:-2}); do
    for variant in ${VARIANTS-}; do
      name=${variant%%=*} spec=${variant#*=}
      bin=${spec%%:*} envs=$( [[ $spec == *:* ]] && echo "${spec#*:}" )
      envs=${envs//,/ }  # name=bin:A=1,B=2 sets both
      env $envs timeout 120 $bin bench --opt-level ${AB_OPT_LEVELS:-O2,O3} --batch-sizes ${AB_BATCHES:-64,256,1024} \
        --json "$OUT/ab_${name}_$round.json" > "$OUT/ab_${name}_$round.log" 2>&1
      grep -E "O[0-3] graph +batch" "$OUT/ab_${name}_$round.log" | cut -c1-60 | sed "s/^/$name $round: /"
    done
  done
}

# Process start to first step at batch 64 and 1024, then the benchmark beside PyTorch
# (tools/bench_suite.sh, at most $1 seconds, PT_BUDGET seconds for PyTorch's configurations):
# the ratio rows of both precisions and ganengine's lines, cut to $2 columns (0: whole).
gpu_call_pytorch() {
  local limit=$1 width=$2
  gpu_call_first_step
  OUT="$OUT/bench" BENCH_PT_ARGS="--configs graph_half,autocast,half,graph_fp32,fp32 --time-budget ${PT_BUDGET:-120}" \
    timeout $limit tools/bench_suite.sh > "$OUT/bench/suite.log" 2>&1
  sed -n '/### Ratios/,/### ganengine/p' "$OUT/bench/bench_compare.md" | grep -E "^\| (64|256|1024) \| (mixed|half)"
  grep -E "O[0-3] graph +batch" "$OUT/bench/bench_ganengine.log" | gpu_call_cut $width
}

# ncu kernel summaries of the O3 step at each batch size in $1 (at most $2 seconds each): the
# first $3 lines of each, cut to $4 columns (0: whole).
gpu_call_ncu() {
  local batches=$1 limit=$2 lines=$3 width=$4 b
  for b in $batches; do
    timeout $limit tools/ncu_kernels.sh O3 $b "$OUT/ncu_O3_$b" $GE > /dev/null 2> "$OUT/ncu_$b.err"
    head -$lines "$OUT/ncu_O3_$b.txt" | gpu_call_cut $width
  done
}

# ncu --set full of the kernels matching regex $1 in one O3 step at batch $2 (at most $3 of them):
# the details page and the per-line source page (CUDA + SASS, with stall reasons), then the
# headline numbers of each kernel.
gpu_call_ncu_detail() {
  local regex=$1 batch=$2 count=$3
  timeout ${NCU_DETAIL_LIMIT:-240} ncu --clock-control none --profile-from-start off --set full --import-source yes \
    -k "regex:$regex" -c $count -o "$OUT/detail" \
    $GE bench --opt-level O3 --batch-sizes $batch --warmup 8 --steps 1 --windows 1 --profile \
    > "$OUT/detail_run.log" 2>&1
  echo "rc $?"
  ncu -i "$OUT/detail.ncu-rep" --page details > "$OUT/detail.txt" 2>&1
  ncu -i "$OUT/detail.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/detail_source.csv" 2>&1
  grep -E "^  [a-z_ ]*void|Duration|Registers Per|Achieved Occupancy|DRAM Throughput|Compute \(SM\) Throughput" \
    "$OUT/detail.txt" | cut -c1-140
}

# Everything under $OUT into $OUT/call.tgz (the device tool returns a limited number of files).
gpu_call_pack() { tar czf /tmp/call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/call.tgz "$OUT/"; }
