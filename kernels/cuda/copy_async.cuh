// Asynchronous 16-byte copies from global to shared memory (cp.async, sm_80 and later): loads
// that need no registers while in flight, so a thread can have many outstanding.
#pragma once
#include <cstdint>

namespace ge {
namespace gpu {

// With valid false the 16 bytes are zero-filled and nothing is read.
// The destination as a shared-memory address (shared_address) or as a generic pointer.
__device__ __forceinline__ void copy_async_16(uint32_t smem_address, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address), "l"(global), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ uint32_t shared_address(const void* smem) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(smem));
}
__device__ __forceinline__ void copy_async_16(void* smem, const void* global, bool valid) {
  copy_async_16(shared_address(smem), global, valid);
}
// A 4-byte copy (through L1), zero-filled when valid is false; the destination 4-byte aligned.
__device__ __forceinline__ void copy_async_4(uint32_t smem_address, const void* global, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_address), "l"(global), "r"(valid ? 4 : 0));
}

// An 8-byte copy (through L1), zero-filled when valid is false; both addresses 8-byte aligned.
__device__ __forceinline__ void copy_async_8(uint32_t smem_address, const void* global, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_address), "l"(global), "r"(valid ? 8 : 0));
}

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most `pending` of this thread's committed groups are still in flight.
template <int pending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

}  // namespace gpu
}  // namespace ge
