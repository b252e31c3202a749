// Multi-tensor launches: one kernel updates a whole list of tensors (all gradients of a
// network, all parameters of an optimizer) instead of one launch per tensor.
//
// The table of tensors travels by value as a kernel parameter (the idea of Apex's
// multi_tensor_apply), so nothing is copied to the device first and the launch can be
// captured in a CUDA graph as is. Each tensor is cut into chunks of kChunkElems elements;
// block b works on one chunk, found from a prefix sum of the chunk counts. A list longer than
// the table's capacity (or with more chunks than a grid holds) is split over several launches.
#pragma once
#include <functional>
#include <vector>

#include "cuda/cuda_util.cuh"

namespace ge {
namespace gpu {

// Elements per block: 16 per thread at 256 threads. Small enough that a DCGAN's 3.6 million
// parameters make some 900 blocks, several per SM (16384 would make about 220, under two per SM).
constexpr int64_t kChunkElems = 4096;
// Elements a thread loads before it uses any (kernels unroll their element loops this deep),
// so several loads per thread are in flight at once.
constexpr int kElemsInFlight = 4;

// B buffers per tensor (e.g. src and dst), up to MaxTensors tensors. Kept well under the
// 4 KiB classic kernel-parameter limit.
template <int B, int MaxTensors>
struct TensorTable {
  void* ptr[B][MaxTensors];
  ElemType type[B][MaxTensors];
  int64_t numel[MaxTensors];
  int first_block[MaxTensors + 1];  // tensor i owns blocks [first_block[i], first_block[i+1])
  int count;
};

// Which tensor and which chunk of kChunk elements of it block `block` handles.
template <int64_t kChunk = kChunkElems, int B, int M>
__device__ __forceinline__ void locate_chunk(const TensorTable<B, M>& table, int block, int& tensor, int64_t& begin,
                                             int64_t& end) {
  int t = 0;
  while (t + 1 < table.count && table.first_block[t + 1] <= block) ++t;
  tensor = t;
  begin = static_cast<int64_t>(block - table.first_block[t]) * kChunk;
  end = min(begin + kChunk, table.numel[t]);
}

// Fills tables from per-tensor buffer lists and calls launch(table, blocks) for each full
// table, a block per chunk of kChunk elements. buffers[b][i] is buffer b of tensor i; all
// buffers of a tensor have numel(i) elements.
template <int B, int M, int64_t kChunk = kChunkElems>
void for_each_table(const std::vector<std::vector<const Tensor*>>& buffers,
                    const std::function<void(const TensorTable<B, M>&, int)>& launch) {
  const size_t n = buffers[0].size();
  constexpr int kMaxBlocks = 1 << 30;
  TensorTable<B, M> table{};
  int blocks = 0;
  auto flush = [&] {
    if (table.count == 0) return;
    table.first_block[table.count] = blocks;
    launch(table, blocks);
    table = TensorTable<B, M>{};
    blocks = 0;
  };
  for (size_t i = 0; i < n; ++i) {
    const int64_t numel = buffers[0][i]->numel();
    if (numel == 0) continue;
    const int64_t chunks = ceil_div(numel, kChunk);
    GE_CHECK(chunks < kMaxBlocks, "multi-tensor op: tensor too large: ", buffers[0][i]->str());
    if (table.count == M || blocks + chunks >= kMaxBlocks) flush();
    const int slot = table.count++;
    for (int b = 0; b < B; ++b) {
      const Tensor* t = buffers[b][i];
      table.ptr[b][slot] = t && t->defined() ? t->data() : nullptr;
      table.type[b][slot] = t && t->defined() ? elem_type(t->dtype()) : ElemType::F32;
    }
    table.numel[slot] = numel;
    table.first_block[slot] = blocks;
    blocks += static_cast<int>(chunks);
  }
  flush();
}

}  // namespace gpu
}  // namespace ge
