// ganengine_fp8_conv_probe [BATCH]: whether cuDNN's graph API runs FP8 convolutions for the
// DCGAN's Tensor Core layer shapes (D's 64->128, 128->256 and 256->512 stride-2 layers at 64x64;
// G's transposed layers are the same passes with forward and backward-data swapped), and how fast
// against the same pass in half. Each pass is built four ways: half in and out; E4M3 inputs
// (E5M2 for the output gradient) with an f32 or half output; and the same with the f32 result
// multiplied by a device-side scale into half in one fused graph (the form XLA's FP8
// convolutions take). For each the heuristics' configurations (mode A, else the fallback list)
// are built and run, and the fastest of up to 8 is reported. docs/performance.md ("FP8
// convolutions") gives the H100's numbers and what they decided. Not part of the training step.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define PROBE_CUDA_CHECK(x)                                             \
  do {                                                                  \
    cudaError_t e_ = (x);                                               \
    if (e_ != cudaSuccess) {                                            \
      std::printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

// A backend descriptor, destroyed with its scope; a failed create leaves it null, and every set
// or finalize on a null one fails.
struct D {
  cudnnBackendDescriptor_t d = nullptr;
  explicit D(cudnnBackendDescriptorType_t t) {
    if (cudnnBackendCreateDescriptor(t, &d) != CUDNN_STATUS_SUCCESS) d = nullptr;
  }
  ~D() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
  D(const D&) = delete;
  bool set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const void* v) {
    return d && cudnnBackendSetAttribute(d, a, t, n, v) == CUDNN_STATUS_SUCCESS;
  }
  bool fin() { return d && cudnnBackendFinalize(d) == CUDNN_STATUS_SUCCESS; }
};

enum Pass { FPROP, DGRAD, WGRAD };
const char* pass_name(Pass p) { return p == FPROP ? "fprop" : p == DGRAD ? "dgrad" : "wgrad"; }

bool tensor(D& t, int64_t uid, cudnnDataType_t dt, int64_t n, int64_t c, int64_t h, int64_t w,
            bool is_virtual = false) {
  int64_t dims[4] = {n, c, h, w};
  int64_t strides[4] = {h * w * c, 1, w * c, c};  // NHWC
  int64_t align = 16;
  bool v = is_virtual;
  return t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt) &&
         t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims) &&
         t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides) &&
         t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) &&
         t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align) &&
         t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v) && t.fin();
}

size_t dsize(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT ? 4 : t == CUDNN_DATA_HALF ? 2 : 1; }

__global__ void fill(unsigned char* p, size_t n, int kind) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = (unsigned)(i * 2654435761u) >> 7;
    if (kind == 1)
      p[i] = (unsigned char)((h & 0x80) | (0x20 + (h & 0x17)));  // fp8, small magnitudes, no NaN
    else if (kind == 2)
      reinterpret_cast<__half*>(p)[i / 2] = __float2half(((h & 255) - 128) / 512.f);
    else
      p[i] = 0;
  }
}

struct Case {
  const char* layer;
  int64_t n, c, h, k, p;  // x N,C,H,H; w K,C,4,4; y N,K,P,P
};

// variant: 0 half in/out; 1 fp8 in, f32 out; 2 fp8 in, half out; 3 fp8 in, f32 virtual -> * scale -> half out
double run_case(cudnnHandle_t handle, const Case& cs, Pass pass, int variant, std::string& info) {
  const cudnnDataType_t e4 = CUDNN_DATA_FP8_E4M3, e5 = CUDNN_DATA_FP8_E5M2, h = CUDNN_DATA_HALF, f = CUDNN_DATA_FLOAT;
  cudnnDataType_t tx, tw, ty;  // x, w, y roles
  cudnnDataType_t out_t = h;   // the pass's output dtype
  if (variant == 0) {
    tx = tw = ty = h;
  } else {
    out_t = variant == 1 ? f : h;
    if (pass == FPROP) {
      tx = e4;
      tw = e4;
      ty = variant == 3 ? f : out_t;
    } else if (pass == DGRAD) {
      tw = e4;
      ty = e5;
      tx = variant == 3 ? f : out_t;
    } else {
      tx = e4;
      ty = e5;
      tw = variant == 3 ? f : out_t;
    }
  }
  const bool fused = variant == 3;
  const int64_t uidX = 1, uidW = 2, uidY = 3, uidS = 4, uidO = 5;
  const bool out_is_x = pass == DGRAD, out_is_w = pass == WGRAD, out_is_y = pass == FPROP;
  D X(CUDNN_BACKEND_TENSOR_DESCRIPTOR), W(CUDNN_BACKEND_TENSOR_DESCRIPTOR), Y(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  bool ok = tensor(X, uidX, tx, cs.n, cs.c, cs.h, cs.h, fused && out_is_x) &&
            tensor(W, uidW, tw, cs.k, cs.c, 4, 4, fused && out_is_w) &&
            tensor(Y, uidY, ty, cs.n, cs.k, cs.p, cs.p, fused && out_is_y);
  if (!ok) {
    info = "tensor descriptors refused";
    return -1;
  }
  D conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  int64_t sd = 2, one[2] = {1, 1}, two[2] = {2, 2}, pad[2] = {1, 1};
  ok = conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp) &&
       conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode) &&
       conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sd) &&
       conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one) &&
       conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, two) &&
       conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad) &&
       conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad) && conv.fin();
  if (!ok) {
    info = "conv descriptor refused";
    return -1;
  }
  float alpha = 1.f, beta = 0.f;
  cudnnBackendDescriptorType_t opt = pass == FPROP   ? CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
                                     : pass == DGRAD ? CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                                                     : CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
  D op(opt);
  if (pass == FPROP)
    ok = op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &X.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &W.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &Y.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta) && op.fin();
  else if (pass == DGRAD)
    ok = op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &X.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &W.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &Y.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta) && op.fin();
  else
    ok = op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &X.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &W.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &Y.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv.d) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha) &&
         op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta) && op.fin();
  if (!ok) {
    info = "operation refused";
    return -1;
  }
  // Optional descale: out = conv * s (s: a 1x1x1x1 f32 tensor in device memory), written as half.
  D S(CUDNN_BACKEND_TENSOR_DESCRIPTOR), O(CUDNN_BACKEND_TENSOR_DESCRIPTOR), pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR),
      pwop(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  D* conv_out = out_is_x ? &X : out_is_w ? &W : &Y;
  if (fused) {
    int64_t od[4];
    if (out_is_x) {
      od[0] = cs.n;
      od[1] = cs.c;
      od[2] = od[3] = cs.h;
    } else if (out_is_w) {
      od[0] = cs.k;
      od[1] = cs.c;
      od[2] = od[3] = 4;
    } else {
      od[0] = cs.n;
      od[1] = cs.k;
      od[2] = od[3] = cs.p;
    }
    cudnnPointwiseMode_t pm = CUDNN_POINTWISE_MUL;
    ok = tensor(S, uidS, f, 1, 1, 1, 1) && tensor(O, uidO, h, od[0], od[1], od[2], od[3]) &&
         pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &pm) &&
         pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &comp) && pw.fin() &&
         pwop.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw.d) &&
         pwop.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv_out->d) &&
         pwop.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &S.d) &&
         pwop.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &O.d) && pwop.fin();
    if (!ok) {
      info = "pointwise refused";
      return -1;
    }
  }
  D graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  cudnnBackendDescriptor_t ops[2] = {op.d, pwop.d};
  ok = graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, fused ? 2 : 1, ops) &&
       graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle) && graph.fin();
  if (!ok) {
    info = "graph refused";
    return -1;
  }
  // Buffers.
  const size_t nx = cs.n * cs.c * cs.h * cs.h, nw = cs.k * cs.c * 16, ny = cs.n * cs.k * cs.p * cs.p;
  size_t bytes[6] = {0, nx * dsize(tx), nw * dsize(tw), ny * dsize(ty), 4, 0};
  if (fused) bytes[5] = (out_is_x ? nx : out_is_w ? nw : ny) * 2;
  void* ptr[6] = {};
  for (int i = 1; i < 6; ++i)
    if (bytes[i] && !(fused && ((i == 1 && out_is_x) || (i == 2 && out_is_w) || (i == 3 && out_is_y)))) {
      PROBE_CUDA_CHECK(cudaMalloc(&ptr[i], bytes[i]));
      cudnnDataType_t t = i == 1 ? tx : i == 2 ? tw : i == 3 ? ty : f;
      fill<<<1024, 256>>>((unsigned char*)ptr[i], bytes[i], t == e4 || t == e5 ? 1 : t == h ? 2 : 0);
    }
  if (ptr[4]) {
    float one_f = 1.f;
    PROBE_CUDA_CHECK(cudaMemcpy(ptr[4], &one_f, 4, cudaMemcpyHostToDevice));
  }
  double best = -1;
  int tried = 0, built = 0;
  std::string best_name;
  for (cudnnBackendHeurMode_t hm : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    D heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    if (!(heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph.d) &&
          heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm) && heur.fin()))
      continue;
    int64_t count = 0;
    cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
    count = std::min<int64_t>(count, 8);
    std::vector<cudnnBackendDescriptor_t> cfgs(count);
    for (auto& c : cfgs) cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c);
    int64_t got = 0;
    cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                             cfgs.data());
    for (int64_t i = 0; i < got; ++i) {
      ++tried;
      D plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      if (!(plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle) &&
            plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]) &&
            plan.fin()))
        continue;
      ++built;
      int64_t ws = 0, wn = 0;
      cudnnBackendGetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &wn, &ws);
      void* wsp = nullptr;
      if (ws > (int64_t(1) << 30)) continue;
      if (ws) PROBE_CUDA_CHECK(cudaMalloc(&wsp, ws));
      int64_t uids[5] = {uidX, uidW, uidY, uidS, uidO};
      void* ptrs[5] = {ptr[1], ptr[2], ptr[3], ptr[4], ptr[5]};
      std::vector<int64_t> u;
      std::vector<void*> pp;
      for (int j = 0; j < 5; ++j)
        if (ptrs[j]) {
          u.push_back(uids[j]);
          pp.push_back(ptrs[j]);
        }
      D vp(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      if (!(vp.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, u.size(), u.data()) &&
            vp.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pp.size(), pp.data()) &&
            vp.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp) && vp.fin())) {
        if (wsp) cudaFree(wsp);
        continue;
      }
      cudnnStatus_t st = cudnnBackendExecute(handle, plan.d, vp.d);
      if (st != CUDNN_STATUS_SUCCESS || cudaDeviceSynchronize() != cudaSuccess) {
        cudaGetLastError();
        if (wsp) cudaFree(wsp);
        continue;
      }
      cudaEvent_t a, b;
      cudaEventCreate(&a);
      cudaEventCreate(&b);
      cudaEventRecord(a);
      const int runs = 20;
      for (int r = 0; r < runs; ++r) cudnnBackendExecute(handle, plan.d, vp.d);
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      ms /= runs;
      if (best < 0 || ms < best) best = ms;
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      if (wsp) cudaFree(wsp);
    }
    for (auto& c : cfgs) cudnnBackendDestroyDescriptor(c);
    if (best > 0) break;
  }
  for (int i = 1; i < 6; ++i)
    if (ptr[i]) cudaFree(ptr[i]);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%d configs listed, %d built", tried, built);
  info = buf;
  return best;
}

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 256;
  cudnnHandle_t handle;
  if (cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS) {
    std::printf("no cuDNN\n");
    return 1;
  }
  std::printf("cuDNN %zu, batch %lld\n", cudnnGetVersion(), (long long)n);
  const Case cases[] = {{"D2 64->128 32x32", n, 64, 32, 128, 16},
                        {"D3 128->256 16x16", n, 128, 16, 256, 8},
                        {"D4 256->512 8x8", n, 256, 8, 512, 4}};
  const char* vname[] = {"half", "fp8 -> f32", "fp8 -> half", "fp8 -> f32 * s -> half"};
  for (const Case& c : cases)
    for (Pass p : {FPROP, DGRAD, WGRAD}) {
      const double flop = 2.0 * c.n * c.k * c.p * c.p * c.c * 16;
      double half_ms = -1;
      for (int v = 0; v < 4; ++v) {
        std::string info;
        const double ms = run_case(handle, c, p, v, info);
        if (v == 0) half_ms = ms;
        if (ms > 0)
          std::printf("%-18s %s %-24s %8.4f ms %7.1f TFLOP/s  x%.2f vs half  (%s)\n", c.layer, pass_name(p), vname[v],
                      ms, flop / ms / 1e9, half_ms > 0 ? half_ms / ms : 0.0, info.c_str());
        else
          std::printf("%-18s %s %-24s unsupported (%s)\n", c.layer, pass_name(p), vname[v], info.c_str());
        std::fflush(stdout);
      }
    }
  cudnnDestroy(handle);
  return 0;
}
