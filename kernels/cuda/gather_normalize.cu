// GPU-resident batches: gather a batch's images out of the resident u8 copy, normalise every
// byte exactly as the host Loader does, and round once to the output dtype, in one kernel.
//
// The source holds each image as contiguous HWC bytes. NHWC output (and NCHW output whose
// channel or pixel count is 1) has the source's element order, so an item is one contiguous
// row converted element by element: a thread loads 16 (or 4) bytes in one instruction and
// writes them with vector stores, consecutive threads on consecutive bytes. NCHW output
// transposes HWC -> CHW: a thread takes 4 consecutive pixels, reads their 4*C bytes (a warp
// reads one contiguous span) and writes 4 consecutive elements of each channel plane, so
// the stores, the larger side, stay coalesced.
#include "cuda/aligned.h"
#include "cuda/cuda_util.cuh"
#include "cuda/gather_normalize.h"

namespace ge {
namespace gpu {
namespace {

// ToTensor() then Normalize(0.5, 0.5) of one byte. Each operation is rounded to nearest
// explicitly, as the host's float code rounds it, so no compiler flag or FMA contraction can
// change a bit of the result.
__device__ __forceinline__ float normalised(uint32_t byte) {
  return __fdiv_rn(__fsub_rn(__fdiv_rn(static_cast<float>(byte), 255.0f), 0.5f), 0.5f);
}

// V consecutive output elements, aligned so one store moves up to 16 bytes at a time.
template <class T, int V>
struct alignas(V * sizeof(T) < 16 ? V * sizeof(T) : 16) Pack {
  T v[V];
};

// V consecutive bytes in one load (V = 16 or 4; the address is V-aligned) or a plain byte.
template <int V>
__device__ __forceinline__ void load_bytes(const uint8_t* p, uint32_t (&b)[V]) {
  if constexpr (V == 16) {
    const uint4 w = __ldg(reinterpret_cast<const uint4*>(p));
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 16; ++i) b[i] = (words[i / 4] >> (8 * (i % 4))) & 0xffu;  // little-endian
  } else if constexpr (V == 4) {
    const uint32_t w = __ldg(reinterpret_cast<const unsigned int*>(p));
#pragma unroll
    for (int i = 0; i < 4; ++i) b[i] = (w >> (8 * i)) & 0xffu;
  } else {
    static_assert(V == 1, "load_bytes: V is 16, 4 or 1");
    b[0] = __ldg(p);
  }
}

// Same element order: out item k = row order[k] of the source, `row` bytes, V per thread.
// Blocks in y walk the batch's items, blocks in x an item's row.
template <class T, int V>
__global__ void gather_rows(const uint8_t* __restrict__ images, const int64_t* __restrict__ order, T* __restrict__ out,
                            int64_t n, int64_t row) {
  const int64_t packs = row / V;
  for (int64_t k = blockIdx.y; k < n; k += gridDim.y) {
    const uint8_t* src = images + order[k] * row;
    Pack<T, V>* dst = reinterpret_cast<Pack<T, V>*>(out + k * row);
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < packs;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      uint32_t bytes[V];
      load_bytes<V>(src + i * V, bytes);
      Pack<T, V> p;
#pragma unroll
      for (int j = 0; j < V; ++j) store_float(&p.v[j], normalised(bytes[j]));
      dst[i] = p;
    }
  }
}

// HWC -> CHW: out item k, channel c, pixels [G g, G g + G) from image order[k]. `plane` = S*S
// is a multiple of G. The byte reads (stride C) stay within the thread's 4*C-byte run, which
// the warp's neighbouring runs continue, so L1 serves them from a few contiguous sectors.
template <class T, int G>
__global__ void gather_planes(const uint8_t* __restrict__ images, const int64_t* __restrict__ order,
                              T* __restrict__ out, int64_t n, int64_t plane, int channels) {
  const int64_t row = plane * channels, groups = plane / G;
  for (int64_t k = blockIdx.y; k < n; k += gridDim.y) {
    const uint8_t* src = images + order[k] * row;
    T* dst = out + k * row;
    for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
         g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const uint8_t* pixels = src + g * G * channels;
      for (int c = 0; c < channels; ++c) {
        Pack<T, G> p;
#pragma unroll
        for (int q = 0; q < G; ++q) store_float(&p.v[q], normalised(__ldg(pixels + q * channels + c)));
        reinterpret_cast<Pack<T, G>*>(dst + c * plane)[g] = p;
      }
    }
  }
}

// The smaller of 16 and a pack's size: the alignment Pack<T, V> asks for.
template <class T>
constexpr size_t pack_alignment(int v) {
  return v * sizeof(T) < 16 ? v * sizeof(T) : 16;
}

// Threads per block: 256, or fewer when an item has fewer units of work (small images).
int threads_for(int64_t units) { return static_cast<int>(std::min<int64_t>(kThreads, ceil_div(units, 32) * 32)); }

dim3 grid_for_items(int64_t units, int threads, int64_t n) {
  return dim3(static_cast<unsigned>(std::min<int64_t>(ceil_div(units, threads), 4096)),
              static_cast<unsigned>(std::min<int64_t>(n, 65535)));
}

template <class T>
void launch(const uint8_t* images, const int64_t* order, T* out, int64_t n, int64_t channels, int64_t plane,
            bool same_order, cudaStream_t stream) {
  const int64_t row = plane * channels;
  if (same_order) {
    // Widest load the row length and both buffers' alignment allow (allocations are
    // 256-byte aligned, so only odd image sizes fall back).
    const auto fits = [&](int v) {
      return row % v == 0 && aligned_to(images, size_t(v)) && aligned_to(out, pack_alignment<T>(v));
    };
    if (fits(16)) {
      const int threads = threads_for(row / 16);
      gather_rows<T, 16><<<grid_for_items(row / 16, threads, n), threads, 0, stream>>>(images, order, out, n, row);
    } else if (fits(4)) {
      const int threads = threads_for(row / 4);
      gather_rows<T, 4><<<grid_for_items(row / 4, threads, n), threads, 0, stream>>>(images, order, out, n, row);
    } else {
      const int threads = threads_for(row);
      gather_rows<T, 1><<<grid_for_items(row, threads, n), threads, 0, stream>>>(images, order, out, n, row);
    }
  } else if (plane % 4 == 0 && aligned_to(out, pack_alignment<T>(4))) {
    const int threads = threads_for(plane / 4);
    gather_planes<T, 4><<<grid_for_items(plane / 4, threads, n), threads, 0, stream>>>(images, order, out, n, plane,
                                                                                       static_cast<int>(channels));
  } else {
    const int threads = threads_for(plane);
    gather_planes<T, 1><<<grid_for_items(plane, threads, n), threads, 0, stream>>>(images, order, out, n, plane,
                                                                                   static_cast<int>(channels));
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void gather_normalize(const Tensor& images, const int64_t* order, Tensor& out) {
  GE_CHECK(images.defined() && images.device().is_cuda() && images.dtype() == DType::U8 && images.rank() == 4 &&
               images.format() == MemoryFormat::NHWC,
           "gather_normalize: images must be u8 (N, C, S, S) NHWC on a CUDA device, is ",
           images.defined() ? images.str() : std::string("undefined"));
  check_gpu_float(out, "gather_normalize: out");
  GE_CHECK(out.device() == images.device(), "gather_normalize: out ", out.str(), " and images ", images.str(),
           " on different devices");
  GE_CHECK(out.rank() == 4 && out.dim(1) == images.dim(1) && out.dim(2) == images.dim(2) && out.dim(3) == images.dim(3),
           "gather_normalize: out ", out.str(), " does not hold images of ", images.str());
  if (out.numel() == 0) return;
  GE_CHECK(order != nullptr, "gather_normalize: no order for ", out.dim(0), " items");
  GE_CHECK(out.dim(1) <= INT32_MAX, "gather_normalize: ", out.dim(1), " channels");

  const int64_t n = out.dim(0), channels = out.dim(1), plane = out.dim(2) * out.dim(3);
  // The source is HWC per image: NHWC output has its element order, and so does NCHW output
  // when either the channel axis or the pixel axis is trivial.
  const bool same_order = out.format() == MemoryFormat::NHWC || channels == 1 || plane == 1;
  cudaStream_t stream = context(out.device().index).stream();  // also makes that device current
  GE_DISPATCH_FLOAT(
      out.dtype(), T,
      launch<T>(images.data_as<uint8_t>(), order, out.data_as<T>(), n, channels, plane, same_order, stream));
}

}  // namespace gpu
}  // namespace ge
