# Sourced by the GPU-host scripts: cuDNN 9.19 and cuBLAS 13 as PyTorch ships them (the host's
# own cuDNN is older), and NVLink multicast kept off in NCCL (the device notes say why).
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
for lib in "$NV/cudnn/lib" "$NV/cu13/lib" "$NV/cublas/lib" "$NV/nccl/lib"; do
  [ -d "$lib" ] && export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
done
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Where the GPU-host scripts find ganengine and ganengine_tests: GE_BIN_DIR if set, else .carry/
# (tools/stage_gpu.sh: built on another machine, carried here), else build/ (tools/build.sh run
# on this host). ge_require_binaries names the fix when neither holds them.
if [ -z "${GE_BIN_DIR:-}" ]; then
  if [ -x .carry/ganengine ]; then GE_BIN_DIR=.carry; else GE_BIN_DIR=build; fi
fi
GE_BIN_DIR=$(cd "$GE_BIN_DIR" 2>/dev/null && pwd || echo "$GE_BIN_DIR")
ge_require_binaries() {
  local b
  for b in "$@"; do
    if [ ! -x "$GE_BIN_DIR/$b" ]; then
      echo "$0: $GE_BIN_DIR/$b not found: build it here with tools/build.sh, or run tools/stage_gpu.sh" \
        "on a build machine and bring its .carry/ folder (or set GE_BIN_DIR to the folder that holds it)" >&2
      return 1
    fi
  done
}
