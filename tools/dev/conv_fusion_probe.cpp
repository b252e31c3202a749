// Development probe (GPU): which cuDNN engines run a convolution pass fused with BatchNorm's
// neighbours, and how fast against the same pass alone. For each of the DCGAN's cuDNN-run
// shapes it builds backend operation graphs:
//   - the pass alone;
//   - + statistics: GenStats (per-channel sum and sum of squares) on the pass's output;
//   - + prologue: scale, bias and ReLU / LeakyReLU(0.2) per channel on the activation input
//     (x of a forward or backward-filter pass, dy of a backward-data pass, which is how a
//     transposed convolution's forward runs);
// and times every configuration the heuristics (modes A, B, fallback) list, runtime-compiled
// ones included (their build time printed). One line per graph: the fastest configuration.
//
//   [GE_PROBE_CHUNKS="1 2 4"] [GE_PROBE_PLAIN=1 | GE_PROBE_PROLOGUE_ONLY=1] [GE_PROBE_PROLOGUE_HALF=1]
//   [GE_PROBE_CHECK=1] build/ganengine_fusion_probe [batch ...]   (default: 1024)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "conv_plan.h"
#include "cudnn_backend_desc.h"
#include "ganengine/cuda_context.h"
#include "ganengine/ops.h"
#include "probe_util.h"

using namespace ge;
using namespace ge::gpu;
using namespace ge::gpu::backend;
using namespace ge::probe_util;

namespace {

enum class Prologue { None, Relu, Leaky };

struct Case {
  ConvPass pass;
  bool stats;
  Prologue prologue;
  bool on_dy = false;  // the prologue's input: dy (backward-data, G's backward-filter) or x
};

std::string describe(const Case& c) {
  std::string s = c.pass == ConvPass::Forward ? "fprop" : c.pass == ConvPass::BackwardData ? "dgrad" : "wgrad";
  if (c.prologue != Prologue::None) {
    s += c.prologue == Prologue::Relu ? "+relu" : "+leaky";
    s += c.on_dy ? "(dy)" : "(x)";
  }
  if (c.stats) s += "+genstats";
  return s;
}

// Tensors are named by uid; the builder keeps every descriptor alive as long as the graph.
enum Uid : int64_t { kX = 1, kW, kY, kScale, kBias, kSum, kSqSum, kVirtual = 100 };

struct Builder {
  std::deque<Desc> keep;  // a deque: the references tensor() returns stay valid
  std::deque<Desc> ops;
  int64_t next_virtual = kVirtual;

  const Desc& tensor(int64_t uid, cudnnDataType_t dtype, const int64_t (&dims)[4], bool is_virtual) {
    const int64_t strides[4] = {dims[1] * dims[2] * dims[3], 1, dims[3] * dims[1], dims[1]};  // NHWC
    Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const bool v = is_virtual;
    const bool ok = t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype) &&
                    t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims) &&
                    t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides) &&
                    t.set_int(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid) && t.set_int(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16) &&
                    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v) && t.finalize();
    if (!ok) std::printf("  tensor %lld refused\n", (long long)uid);
    keep.push_back(std::move(t));
    return keep.back();
  }

  // out = mode(in, b) per element in fp32 (b: a per-channel tensor, or none).
  bool pointwise(cudnnPointwiseMode_t mode, const Desc& in, const Desc* b, const Desc& out, float slope = 0.f) {
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    bool ok = pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode) &&
              pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (mode == CUDNN_POINTWISE_RELU_FWD && slope != 0.f) {
      const double s = slope;
      ok = ok && pw.set(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, CUDNN_TYPE_DOUBLE, 1, &s);
    }
    ok = ok && pw.finalize();
    Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    ok = built(op, ok && op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw) &&
                       op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, in) &&
                       (!b || op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b)) &&
                       op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, out));
    keep.push_back(std::move(pw));
    ops.push_back(std::move(op));
    return ok;
  }

  bool genstats(const Desc& x, const Desc& sum, const Desc& sqsum) {
    Desc op(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
    const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    const bool ok = built(op, op.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode) &&
                                  op.set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec) &&
                                  op.set_desc(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, x) &&
                                  op.set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum) &&
                                  op.set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, sqsum));
    ops.push_back(std::move(op));
    return ok;
  }

  // The DCGAN's 4x4 stride-2 pad-1 convolution's pass over x, w, y (forward roles).
  bool conv(ConvPass pass, const Desc& x, const Desc& w, const Desc& y) {
    const int64_t pad[2] = {1, 1};
    Desc cd(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR), op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    const bool ok = conv_operation(pass, x, w, y, 2, pad, pad, 0.f, cd, op);
    keep.push_back(std::move(cd));
    ops.push_back(std::move(op));
    return ok;
  }
};

struct Buffers {
  void* x;
  void* w;
  void* y;
  void* scale;
  void* bias;
  void* sum;
  void* sqsum;
  void* ws;
};

bool notes_runtime_compiled(const Desc& cfg) {
  return has_behavior_note(engine_of(cfg), CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION).value_or(false);
}

int64_t engine_index(const Desc& cfg) { return engine_of(cfg).get_int(CUDNN_ATTR_ENGINE_GLOBAL_INDEX); }

// One operation graph for case c at batch N, and the descriptors it is built from.
struct FusedGraph {
  Builder b;
  Desc graph{CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR};
};

// The graph, or nullptr when cuDNN refuses it. half_prologue: scale, bias and the prologue's
// intermediates in half (the form of cuDNN's own ConvBNfprop samples), else f32 (what our
// normalisation computes in).
std::unique_ptr<FusedGraph> build_graph(int64_t N, int64_t C, int64_t H, const Case& c, bool half_prologue,
                                        cudnnHandle_t handle) {
  const int64_t K = 2 * C, P = H / 2;
  const int64_t xd[4] = {N, C, H, H}, wd[4] = {K, C, 4, 4}, yd[4] = {N, K, P, P};
  // Per-channel tensors of the activation input and of the pass's output.
  const int64_t cd[4] = {1, c.on_dy ? K : C, 1, 1};
  const int64_t sd[4] = {1, c.pass == ConvPass::Forward ? K : C, 1, 1};
  auto g = std::make_unique<FusedGraph>();
  Builder& b = g->b;
  const cudnnDataType_t half = CUDNN_DATA_HALF, f32 = CUDNN_DATA_FLOAT;
  const Desc& x_real = b.tensor(kX, half, xd, false);
  const Desc& w = b.tensor(kW, half, wd, false);
  const Desc& y_real = b.tensor(kY, half, yd, false);
  bool ok = true;
  const Desc* x = &x_real;
  const Desc* y = &y_real;
  if (c.prologue != Prologue::None) {
    const Desc& in = c.on_dy ? y_real : x_real;
    const int64_t(&dims)[4] = c.on_dy ? yd : xd;
    const cudnnDataType_t pt = half_prologue ? half : f32;
    const Desc& scale = b.tensor(kScale, pt, cd, false);
    const Desc& bias = b.tensor(kBias, pt, cd, false);
    const Desc& scaled = b.tensor(b.next_virtual++, pt, dims, true);
    const Desc& shifted = b.tensor(b.next_virtual++, pt, dims, true);
    const Desc& act = b.tensor(b.next_virtual++, pt, dims, true);
    ok = b.pointwise(CUDNN_POINTWISE_MUL, in, &scale, scaled) &&
         b.pointwise(CUDNN_POINTWISE_ADD, scaled, &bias, shifted) &&
         b.pointwise(CUDNN_POINTWISE_RELU_FWD, shifted, nullptr, act, c.prologue == Prologue::Leaky ? 0.2f : 0.f);
    (c.on_dy ? y : x) = &act;
  }
  // The pass's output is real; the prologue's result stands in for its input.
  ok = ok && b.conv(c.pass, *x, w, *y);
  if (c.stats) {
    const Desc& out = c.pass == ConvPass::Forward ? *y : *x;
    const Desc& sum = b.tensor(kSum, f32, sd, false);
    const Desc& sqsum = b.tensor(kSqSum, f32, sd, false);
    ok = ok && b.genstats(out, sum, sqsum);
  }
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const Desc& op : b.ops) ops.push_back(op.get());
  if (!ok || !built(g->graph, g->graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                           static_cast<int64_t>(ops.size()), ops.data()) &&
                                  g->graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle))) {
    std::printf("%-28s N=%lld C=%lld->%lld: graph refused\n", describe(c).c_str(), (long long)N, (long long)C,
                (long long)K);
    return nullptr;
  }
  return g;
}

// Every configuration the heuristics list (modes A, B, fallback; at most 8 of each).
std::vector<Desc> listed_configs(const Desc& graph) {
  std::vector<Desc> cfgs;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK}) {
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    if (!built(heur, heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph) &&
                         heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)))
      continue;
    int64_t count = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr) != CUDNN_STATUS_SUCCESS ||
        count <= 0)
      continue;
    std::vector<Desc> got = fresh(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, count);
    std::vector<cudnnBackendDescriptor_t> r = raw(got);
    int64_t n = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &n,
                                 r.data()) != CUDNN_STATUS_SUCCESS)
      continue;
    for (int64_t i = 0; i < n && i < 8; ++i) cfgs.push_back(std::move(got[i]));
  }
  return cfgs;
}

Desc make_plan(cudnnHandle_t handle, const Desc& cfg) {
  Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  if (!built(plan, plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle) &&
                       plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg)))
    return Desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  return plan;
}

// The variant pack of case c over these buffers (scale, bias, sum, sqsum used as c asks).
Desc make_pack(const Case& c, void* x, void* w, void* y, const Buffers& buf) {
  std::vector<int64_t> uids = {kX, kW, kY};
  std::vector<void*> ptrs = {x, w, y};
  if (c.prologue != Prologue::None)
    uids.push_back(kScale), uids.push_back(kBias), ptrs.push_back(buf.scale), ptrs.push_back(buf.bias);
  if (c.stats) uids.push_back(kSum), uids.push_back(kSqSum), ptrs.push_back(buf.sum), ptrs.push_back(buf.sqsum);
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  void* ws_ptr = buf.ws;
  if (!built(pack, pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, (int64_t)uids.size(), uids.data()) &&
                       pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, (int64_t)ptrs.size(),
                                ptrs.data()) &&
                       pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws_ptr)))
    return Desc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  return pack;
}

// Returns the best time in us, or infinity when no configuration ran.
double probe(int64_t N, int64_t C, int64_t H, const Case& c, const Buffers& buf, CudaContext& ctx, int64_t chunks) {
  const int64_t K = 2 * C, P = H / 2;
  const int64_t batch = N;
  N /= chunks;  // the graph's batch: one chunk of images, run chunk after chunk over the whole batch
  cudnnHandle_t handle = ctx.cudnn();
  // GE_PROBE_PROLOGUE_HALF=1: the prologue in half. The buffers hold f32 values either way: only
  // the times are meant here, no result is checked (GE_PROBE_CHECK does that).
  const std::unique_ptr<FusedGraph> g =
      build_graph(N, C, H, c, std::getenv("GE_PROBE_PROLOGUE_HALF") != nullptr, handle);
  if (!g) return std::numeric_limits<double>::infinity();
  std::vector<Desc> cfgs = listed_configs(g->graph);

  double best = std::numeric_limits<double>::infinity();
  int64_t best_engine = -1;
  bool best_rtc = false;
  int built_plans = 0, timed = 0, compiled = 0;
  double compile_s = 0;
  std::string engines;
  for (Desc& cfg : cfgs) {
    const bool rtc = notes_runtime_compiled(cfg);
    if (rtc && compiled >= 3) continue;  // NVRTC builds take seconds; three say enough
    const auto t0 = std::chrono::steady_clock::now();
    const Desc plan = make_plan(handle, cfg);
    if (!plan.ok()) continue;
    if (rtc) {
      ++compiled;
      compile_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    ++built_plans;
    const int64_t ws = plan.get_int(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE);
    if (ws < 0 || static_cast<size_t>(ws) > kWorkspaceCap) continue;
    std::vector<Desc> packs;
    for (int64_t k = 0; k < chunks; ++k) {
      Desc pack = make_pack(c, static_cast<char*>(buf.x) + k * N * C * H * H * 2, buf.w,
                            static_cast<char*>(buf.y) + k * N * K * P * P * 2, buf);
      if (pack.ok()) packs.push_back(std::move(pack));
    }
    if (static_cast<int64_t>(packs.size()) != chunks) continue;
    const double us = time_us(ctx, [&] {
      bool ok = true;
      for (const Desc& pack : packs)
        ok = ok && cudnnBackendExecute(handle, plan.get(), pack.get()) == CUDNN_STATUS_SUCCESS;
      return ok;
    });
    (void)cudaGetLastError();
    const int64_t e = engine_index(cfg);
    char item[48];
    std::snprintf(item, sizeof item, " e%lld%s:%.0f", (long long)e, rtc ? "r" : "", us);
    engines += item;
    ++timed;
    if (us < best) best = us, best_engine = e, best_rtc = rtc;
  }
  const double flops = 2.0 * batch * P * P * K * C * 16;
  std::printf(
      "%-28s N=%lld x%lld C=%3lld->%3lld: best %7.1f us (%3.0f TFLOP/s) e%lld%s  listed %zu built %d timed %d, "
      "%d runtime-compiled in %.1f s |%s\n",
      describe(c).c_str(), (long long)N, (long long)chunks, (long long)C, (long long)K, best, flops / best * 1e-6,
      (long long)best_engine, best_rtc ? " (runtime-compiled)" : "", cfgs.size(), built_plans, timed, compiled,
      compile_s, engines.c_str());
  return best;
}

// GE_PROBE_CHECK=1: what the half-prologue forward with GenStats (cuDNN's ConvBNfprop form)
// computes, against this engine's numerics: the previous BatchNorm and LeakyReLU as our
// normalise kernel forms them (f32, each operation rounded, the result rounded to half before
// and after the activation) followed by our convolution; the sums against the output's own
// sums in double; and whether a second run repeats every bit.
float round_half(float v) { return __half2float(__float2half(v)); }

// fused: the prologue's activation; ref_slope: the reference's LeakyReLU slope (0: ReLU).
void check_fused_forward(int64_t N, int64_t C, int64_t H, Prologue fused, float ref_slope, CudaContext& ctx) {
  const int64_t K = 2 * C, P = H / 2;
  const Case c{ConvPass::Forward, true, fused};
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> uniform(0.5f, 2.f);
  std::vector<float> mean(C), invstd(C), gamma(C), beta(C), scale(C), bias(C);
  for (int64_t i = 0; i < C; ++i) {
    mean[i] = 0.5f * normal(rng), invstd[i] = uniform(rng), gamma[i] = 1.f + 0.1f * normal(rng);
    beta[i] = 0.1f * normal(rng);
    scale[i] = round_half(static_cast<float>(double(gamma[i]) * invstd[i]));
    bias[i] = round_half(static_cast<float>(double(beta[i]) - double(mean[i]) * gamma[i] * invstd[i]));
  }
  std::vector<float> xv(static_cast<size_t>(N * C * H * H)), wv(static_cast<size_t>(K * C * 16));
  for (float& v : xv) v = round_half(normal(rng));
  for (float& v : wv) v = round_half(0.05f * normal(rng));
  // Logical NCHW order: channel (i / (H * H)) % C.
  std::vector<float> act(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t ch = static_cast<int64_t>(i / (H * H)) % C;
    const float z = round_half(std::fma((xv[i] - mean[ch]) * invstd[ch], gamma[ch], beta[ch]));
    act[i] = round_half(z > 0.f ? z : z * ref_slope);
  }
  const Device d = Device::cuda(0);
  const Tensor x = Tensor::from_floats(xv, {N, C, H, H}, DType::F16, d, MemoryFormat::NHWC);
  const Tensor w = Tensor::from_floats(wv, {K, C, 4, 4}, DType::F16, d, MemoryFormat::NHWC);
  const Tensor a = Tensor::from_floats(act, {N, C, H, H}, DType::F16, d, MemoryFormat::NHWC);
  Tensor y_ref = Tensor::empty({N, K, P, P}, DType::F16, d, MemoryFormat::NHWC);
  ops::conv2d_forward(a, w, y_ref, Conv2dParams{2, 1});
  const Tensor scale_h = Tensor::from_floats(scale, {C}, DType::F16, d);
  const Tensor bias_h = Tensor::from_floats(bias, {C}, DType::F16, d);
  Tensor sums = Tensor::zeros({2, K}, DType::F32, d);
  const Tensor ws = Tensor::empty({static_cast<int64_t>(kWorkspaceCap)}, DType::U8, d);
  Buffers buf{};
  buf.scale = scale_h.data(), buf.bias = bias_h.data();
  buf.sum = sums.data(), buf.sqsum = static_cast<float*>(sums.data()) + K, buf.ws = ws.data();
  cudnnHandle_t handle = ctx.cudnn();
  const std::unique_ptr<FusedGraph> g = build_graph(N, C, H, c, /*half_prologue=*/true, handle);
  if (!g) return;
  std::vector<float> runs[2][2];  // [run][y, sums]
  int64_t engine = -1;
  for (const Desc& cfg : listed_configs(g->graph)) {
    if (notes_runtime_compiled(cfg)) continue;
    const Desc plan = make_plan(handle, cfg);
    const int64_t ws = plan.ok() ? plan.get_int(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) : -1;
    if (ws < 0 || static_cast<size_t>(ws) > kWorkspaceCap) continue;
    Tensor y = Tensor::empty({N, K, P, P}, DType::F16, d, MemoryFormat::NHWC);
    const Desc pack = make_pack(c, x.data(), w.data(), y.data(), buf);
    bool ran = pack.ok();
    for (int r = 0; r < 2 && ran; ++r) {
      ran = cudnnBackendExecute(handle, plan.get(), pack.get()) == CUDNN_STATUS_SUCCESS &&
            cudaStreamSynchronize(ctx.stream()) == cudaSuccess;
      if (ran) runs[r][0] = y.to_floats(), runs[r][1] = sums.to_floats();
    }
    (void)cudaGetLastError();
    if (ran) {
      engine = engine_index(cfg);
      break;
    }
  }
  if (engine < 0) {
    std::printf("check C=%lld: no pre-compiled configuration ran\n", (long long)C);
    return;
  }
  const std::vector<float> ref = y_ref.to_floats();
  const std::vector<float>& yf = runs[0][0];
  const std::vector<float>& sf = runs[0][1];
  double max_ref = 0, max_diff = 0, sq_diff = 0, sq_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double(ref[i])));
    const double dlt = double(yf[i]) - ref[i];
    max_diff = std::max(max_diff, std::fabs(dlt));
    sq_diff += dlt * dlt, sq_ref += double(ref[i]) * ref[i];
  }
  // Per output channel: the fused sums against double sums of the fused output and of the
  // reference, and the biased variance from the sums against the reference's.
  const double M = double(N) * P * P;
  double sum_own = 0, sum_ref = 0, sq_own = 0, var_err = 0;
  for (int64_t k = 0; k < K; ++k) {
    double s_f = 0, q_f = 0, s_r = 0, q_r = 0;
    for (int64_t i = 0; i < N * P * P; ++i) {
      const size_t at = static_cast<size_t>((i / (P * P)) * K * P * P + k * P * P + i % (P * P));
      s_f += yf[at], q_f += double(yf[at]) * yf[at], s_r += ref[at], q_r += double(ref[at]) * ref[at];
    }
    const double scale_s = std::sqrt(q_f) + 1e-30;
    sum_own = std::max(sum_own, std::fabs(sf[k] - s_f) / scale_s);
    sum_ref = std::max(sum_ref, std::fabs(sf[k] - s_r) / scale_s);
    sq_own = std::max(sq_own, std::fabs(sf[K + k] - q_f) / q_f);
    const double var_r = q_r / M - (s_r / M) * (s_r / M);
    const double var_f = double(sf[K + k]) / M - (double(sf[k]) / M) * (double(sf[k]) / M);
    var_err = std::max(var_err, std::fabs(var_f - var_r) / var_r);
  }
  std::printf(
      "check %s, reference slope %.1f: C=%lld->%lld N=%lld (engine %lld): y against our numerics: max |diff| %.3g of "
      "max |y| %.3g "
      "(%.2e), rms %.2e; sums: against the output's own %.2e, against the reference's %.2e (of sqrt(sum y^2)); "
      "squares against their own %.2e; variance against the reference's %.2e; second run bitwise: y %s, sums %s\n",
      describe(c).c_str(), ref_slope, (long long)C, (long long)K, (long long)N, (long long)engine, max_diff, max_ref,
      max_diff / max_ref, std::sqrt(sq_diff / sq_ref), sum_own, sum_ref, sq_own, var_err,
      runs[1][0] == runs[0][0] ? "yes" : "no", runs[1][1] == runs[0][1] ? "yes" : "no");
}

}  // namespace

int main(int argc, char** argv) {
  ProbeArgs args = probe_args(argc, argv);
  if (argc < 2) args.batches = {1024};
  CudaContext& ctx = context(0);
  // GE_PROBE_CHUNKS="1 4": each graph also run as that many batch chunks, one after another
  // (a backward-filter so chunked would accumulate; only its time is meant). GE_PROBE_PLAIN=1:
  // the passes alone, no fused graphs.
  std::vector<int64_t> chunk_counts;
  if (const char* s = std::getenv("GE_PROBE_CHUNKS"))
    for (const char* p = s; *p;) {
      char* end = nullptr;
      const long long v = std::strtoll(p, &end, 10);
      if (end == p) break;
      if (v > 0) chunk_counts.push_back(v);
      p = end;
    }
  if (chunk_counts.empty()) chunk_counts = {1};
  const bool plain_only = std::getenv("GE_PROBE_PLAIN") != nullptr;
  const bool prologue_only = std::getenv("GE_PROBE_PROLOGUE_ONLY") != nullptr;  // the graphs with a prologue
  const std::vector<Case> cases = {
      // D's layers: forward with the previous BatchNorm + LeakyReLU on x and statistics of y.
      {ConvPass::Forward, false, Prologue::None},
      {ConvPass::Forward, true, Prologue::None},
      {ConvPass::Forward, false, Prologue::Leaky},
      {ConvPass::Forward, true, Prologue::Leaky},
      {ConvPass::Forward, false, Prologue::Relu},
      {ConvPass::Forward, true, Prologue::Relu},
      // G's transposed convolutions run as backward-data: BatchNorm + ReLU on dy, statistics of dx.
      {ConvPass::BackwardData, false, Prologue::None},
      {ConvPass::BackwardData, true, Prologue::None},
      {ConvPass::BackwardData, false, Prologue::Relu, true},
      {ConvPass::BackwardData, true, Prologue::Relu, true},
      // Weight gradients reading the activation through the prologue: D's on x, G's on dy.
      {ConvPass::BackwardFilter, false, Prologue::None},
      {ConvPass::BackwardFilter, false, Prologue::Leaky},
      {ConvPass::BackwardFilter, false, Prologue::Relu, true},
  };
  if (std::getenv("GE_PROBE_CHECK")) {
    for (int64_t N : args.batches)
      for (int64_t C : {128, 256}) {
        const int64_t H = 64 * 64 / C / 2;
        check_fused_forward(N, C, H, Prologue::Leaky, 0.2f, ctx);
        check_fused_forward(N, C, H, Prologue::Leaky, 0.f, ctx);  // does the engine take the slope?
        check_fused_forward(N, C, H, Prologue::Relu, 0.f, ctx);
      }
    return 0;
  }
  for_each_layer(args, [&](int64_t N, int64_t C, int64_t H) {
    const int64_t K = 2 * C, P = H / 2;
    const Tensor x = random_half({N, C, H, H}, 1), w = random_half({K, C, 4, 4}, 2), y = random_half({N, K, P, P}, 3);
    // Per-channel f32 values near 1 for the scale, bias and statistics slots.
    auto per_channel = [&](uint32_t seed) {
      std::vector<float> v = random_floats(K, seed);
      for (float& f : v) f = 1.f + 0.1f * f;
      return Tensor::from_floats(v, {K}, DType::F32, Device::cuda(0));
    };
    const Tensor scale = per_channel(4), bias = per_channel(5), sum = per_channel(6), sqsum = per_channel(7);
    const Tensor ws = Tensor::empty({static_cast<int64_t>(kWorkspaceCap)}, DType::U8, Device::cuda(0));
    const Buffers buf{x.data(), w.data(), y.data(), scale.data(), bias.data(), sum.data(), sqsum.data(), ws.data()};
    for (const Case& c : cases)
      if ((!plain_only || (!c.stats && c.prologue == Prologue::None)) &&
          (!prologue_only || c.prologue != Prologue::None))
        for (int64_t k : chunk_counts)
          if (N % k == 0) probe(N, C, H, c, buf, ctx, k);
  });
  return 0;
}
