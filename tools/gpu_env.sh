# Sourced by the GPU-host scripts: cuDNN 9.19 and cuBLAS 13 as PyTorch ships them (the host's
# own cuDNN is older), and NVLink multicast kept off in NCCL (the device notes say why).
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
for lib in "$NV/cudnn/lib" "$NV/cu13/lib" "$NV/cublas/lib" "$NV/nccl/lib"; do
  [ -d "$lib" ] && export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
done
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
