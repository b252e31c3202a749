// cudnn_engine.h through cuDNN's backend descriptors. Every descriptor is owned by a Desc; a
// failure to build one means "this configuration does not exist here", never an error: the
// caller falls back to the legacy API.
#include "cuda/conv/cudnn_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "cuda/conv/cudnn_backend_desc.h"

namespace ge {
namespace gpu {

namespace {

using backend::built;
using backend::conv_operation;
using backend::Desc;
using backend::engine_of;
using backend::fresh;
using backend::has_behavior_note;
using backend::raw;

enum TensorUid : int64_t { kUidX = 1, kUidW = 2, kUidY = 3 };

Desc make_tensor(int64_t uid, cudnnDataType_t dtype, const int64_t (&dims)[4], const int64_t (&strides)[4]) {
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t alignment = kEngineAlignment;
  const bool ok = t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype) &&
                  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims) &&
                  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides) &&
                  t.set_int(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid) &&
                  t.set_int(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, alignment) && t.finalize();
  return ok ? std::move(t) : Desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
}

// The operation graph of one convolution pass, and what it is built from (the graph refers to them).
struct OpGraph {
  Desc x{CUDNN_BACKEND_TENSOR_DESCRIPTOR}, w{CUDNN_BACKEND_TENSOR_DESCRIPTOR}, y{CUDNN_BACKEND_TENSOR_DESCRIPTOR};
  Desc conv{CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR};
  Desc op{CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR};
  Desc graph{CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR};
};

std::unique_ptr<OpGraph> make_graph(cudnnHandle_t handle, const EngineConv& c) {
  auto g = std::make_unique<OpGraph>();
  g->x = make_tensor(kUidX, c.dtype, c.x_dims, c.x_strides);
  g->w = make_tensor(kUidW, c.dtype, c.w_dims, c.w_strides);
  g->y = make_tensor(kUidY, c.dtype, c.y_dims, c.y_strides);
  if (!g->x.ok() || !g->w.ok() || !g->y.ok()) return nullptr;

  if (!conv_operation(c.pass, g->x, g->w, g->y, c.stride, c.pre_pad, c.post_pad, c.beta, g->conv, g->op))
    return nullptr;
  if (!built(g->graph, g->graph.set_desc(CUDNN_ATTR_OPERATIONGRAPH_OPS, g->op) &&
                           g->graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)))
    return nullptr;
  return g;
}

// ---- configurations by name: engine index and knob choices

struct Config {
  int64_t engine = -1;
  std::vector<std::pair<int64_t, int64_t>> knobs;  // (knob type, value), sorted by type
};

std::string name_of(const Config& c) {
  std::string s = "e" + std::to_string(c.engine);
  for (const auto& [type, value] : c.knobs) s += "," + std::to_string(type) + "=" + std::to_string(value);
  return s;
}

bool parse_name(const std::string& name, Config& c) {
  std::istringstream in(name);
  char e = 0;
  if (!(in >> e >> c.engine) || e != 'e' || c.engine < 0) return false;
  char comma = 0, eq = 0;
  int64_t type = 0, value = 0;
  while (in >> comma) {
    if (comma != ',' || !(in >> type >> eq >> value) || eq != '=') return false;
    c.knobs.emplace_back(type, value);
  }
  std::sort(c.knobs.begin(), c.knobs.end());
  return true;
}

// Whether an engine's notes let it run here (EngineFilter).
bool engine_allowed(const Desc& engine, const EngineFilter& filter) {
  cudnnBackendNumericalNote_t numerical[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t n = 0;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, numerical) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < n; ++i) {
    if (numerical[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
        numerical[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS || numerical[i] == CUDNN_NUMERICAL_NOTE_FFT ||
        numerical[i] == CUDNN_NUMERICAL_NOTE_WINOGRAD)
      return false;
    if (filter.deterministic_only && numerical[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return false;
    if (filter.fma_only && numerical[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE) return false;
  }
  return has_behavior_note(engine, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) == std::optional<bool>(false);
}

Desc make_engine(const OpGraph& g, int64_t index) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  if (!built(engine, engine.set_desc(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, g.graph) &&
                         engine.set_int(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, index)))
    return Desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  return engine;
}

// (type, min, max, stride) of each knob the engine has.
struct KnobRange {
  int64_t type, min, max, stride;
};

std::vector<KnobRange> knob_ranges(const Desc& engine) {
  std::vector<Desc> infos = fresh(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, CUDNN_KNOB_TYPE_COUNTS);
  std::vector<cudnnBackendDescriptor_t> r = raw(infos);
  int64_t n = 0;
  std::vector<KnobRange> out;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               static_cast<int64_t>(r.size()), &n, r.data()) != CUDNN_STATUS_SUCCESS)
    return out;
  for (int64_t i = 0; i < n; ++i) {
    cudnnBackendKnobType_t type;
    int64_t got = 0;
    if (cudnnBackendGetAttribute(infos[i].get(), CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got, &type) !=
        CUDNN_STATUS_SUCCESS)
      continue;
    const int64_t lo = infos[i].get_int(CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE);
    const int64_t hi = infos[i].get_int(CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE);
    const int64_t stride = infos[i].get_int(CUDNN_ATTR_KNOB_INFO_STRIDE);
    if (hi >= lo && stride > 0) out.push_back({static_cast<int64_t>(type), lo, hi, stride});
  }
  return out;
}

// A heuristics result as a Config; false when its engine is filtered out.
bool config_of(const Desc& cfg, const EngineFilter& filter, Config& c) {
  const Desc engine = engine_of(cfg);
  if (!engine.ok() || !engine_allowed(engine, filter)) return false;
  c.engine = engine.get_int(CUDNN_ATTR_ENGINE_GLOBAL_INDEX);
  std::vector<Desc> choices = fresh(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, CUDNN_KNOB_TYPE_COUNTS);
  std::vector<cudnnBackendDescriptor_t> r = raw(choices);
  int64_t n = 0;
  if (cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               static_cast<int64_t>(r.size()), &n, r.data()) != CUDNN_STATUS_SUCCESS)
    return false;
  c.knobs.clear();
  for (int64_t i = 0; i < n; ++i) {
    cudnnBackendKnobType_t type;
    int64_t got = 0;
    if (cudnnBackendGetAttribute(choices[i].get(), CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got,
                                 &type) != CUDNN_STATUS_SUCCESS)
      return false;
    c.knobs.emplace_back(static_cast<int64_t>(type), choices[i].get_int(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE));
  }
  std::sort(c.knobs.begin(), c.knobs.end());
  return c.engine >= 0;
}

std::vector<Config> heuristic_configs(const OpGraph& g, cudnnBackendHeurMode_t mode, const EngineFilter& filter) {
  std::vector<Config> out;
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  if (!built(heur, heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g.graph) &&
                       heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)))
    return out;
  int64_t count = 0;
  if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                               nullptr) != CUDNN_STATUS_SUCCESS ||
      count <= 0)
    return out;
  std::vector<Desc> cfgs = fresh(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, count);
  std::vector<cudnnBackendDescriptor_t> r = raw(cfgs);
  int64_t n = 0;
  if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &n,
                               r.data()) != CUDNN_STATUS_SUCCESS)
    return out;
  for (int64_t i = 0; i < n; ++i) {
    Config c;
    if (config_of(cfgs[i], filter, c)) out.push_back(std::move(c));
  }
  return out;
}

// Values tried per knob, and listed configurations timed before the knobs move.
constexpr int64_t kValuesPerKnob = 12;
constexpr size_t kListedTimed = 4;

// The cluster-shape knobs move only to powers of two. Timed alone, other cluster sizes can be a
// little faster, but inside the step, beside the other lane's kernels, they run slower, and
// searches so limited settle on the faster steps far more reliably (docs/performance.md).
bool cluster_knob(int64_t type) { return type == CUDNN_KNOB_TYPE_TILE_CGA_M || type == CUDNN_KNOB_TYPE_TILE_CGA_N; }
bool power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

struct EnginePlan::Parts {
  std::unique_ptr<OpGraph> graph;
  Desc engine{CUDNN_BACKEND_ENGINE_DESCRIPTOR};
  std::vector<Desc> knobs;
  Desc cfg{CUDNN_BACKEND_ENGINECFG_DESCRIPTOR};
  Desc plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  size_t workspace_bytes = 0;
  std::string name;
  ConvPass pass = ConvPass::Forward;
};

EnginePlan::EnginePlan(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
EnginePlan::~EnginePlan() = default;
size_t EnginePlan::workspace_bytes() const { return parts_->workspace_bytes; }
const std::string& EnginePlan::name() const { return parts_->name; }

cudnnStatus_t EnginePlan::run(cudnnHandle_t handle, const void* x, const void* w, const void* y, void* out,
                              void* workspace) const {
  const ConvPass pass = parts_->pass;
  for (const void* p : {x, w, y, static_cast<const void*>(out)})
    if (!engine_aligned(p)) return CUDNN_STATUS_BAD_PARAM;
  void* ptrs[3] = {pass == ConvPass::BackwardData ? out : const_cast<void*>(x),
                   pass == ConvPass::BackwardFilter ? out : const_cast<void*>(w),
                   pass == ConvPass::Forward ? out : const_cast<void*>(y)};
  const int64_t uids[3] = {kUidX, kUidW, kUidY};
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  if (!built(pack, pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids) &&
                       pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs) &&
                       pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)))
    return CUDNN_STATUS_BAD_PARAM;
  return cudnnBackendExecute(handle, parts_->plan.get(), pack.get());
}

EngineConv engine_conv(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p,
                       float beta) {
  EngineConv c;
  c.pass = pass;
  c.dtype = cudnn_data_type(x.dtype());
  c.pre_pad[0] = c.pre_pad[1] = c.post_pad[0] = c.post_pad[1] = p.pad;
  c.stride = p.stride;
  c.beta = beta;
  auto describe = [](const Tensor& t, int64_t(&dims)[4], int64_t(&strides)[4]) {
    const int64_t N = t.dim(0), C = t.dim(1), H = t.dim(2), W = t.dim(3);
    dims[0] = N, dims[1] = C, dims[2] = H, dims[3] = W;
    if (t.format() == MemoryFormat::NHWC)
      strides[0] = H * W * C, strides[1] = 1, strides[2] = W * C, strides[3] = C;
    else
      strides[0] = C * H * W, strides[1] = H * W, strides[2] = W, strides[3] = 1;
  };
  describe(x, c.x_dims, c.x_strides);
  describe(w, c.w_dims, c.w_strides);
  describe(y, c.y_dims, c.y_strides);
  return c;
}

EngineSearchResult search_engine_config(cudnnHandle_t handle, const EngineConv& conv, const EngineFilter& filter,
                                        const std::function<double(const EnginePlan&)>& time_ms, double budget_s) {
  const auto start = std::chrono::steady_clock::now();
  auto out_of_time = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > budget_s;
  };
  EngineSearchResult best;
  best.ms = std::numeric_limits<double>::infinity();
  std::set<std::string> tried;
  auto consider = [&](const Config& c) {
    const std::string name = name_of(c);
    if (!tried.insert(name).second) return false;
    const std::unique_ptr<EnginePlan> plan = build_engine_plan(handle, conv, name, filter);
    if (!plan) return false;
    const double ms = time_ms(*plan);
    ++best.timed;
    if (!(ms < best.ms)) return false;
    best.ms = ms;
    best.name = name;
    return true;
  };

  const std::unique_ptr<OpGraph> g = make_graph(handle, conv);
  if (!g) return best;
  std::vector<Config> listed = heuristic_configs(*g, CUDNN_HEUR_MODE_A, filter);
  for (Config& c : heuristic_configs(*g, CUDNN_HEUR_MODE_B, filter)) listed.push_back(std::move(c));
  Config current;
  for (size_t i = 0; i < listed.size() && i < kListedTimed && !out_of_time(); ++i)
    if (consider(listed[i])) current = listed[i];
  if (best.name.empty()) return best;

  const Desc engine = make_engine(*g, current.engine);
  std::vector<KnobRange> knobs = knob_ranges(engine);
  auto rank = [](int64_t type) {
    switch (type) {
      case CUDNN_KNOB_TYPE_TILE_SIZE: return 0;
      case CUDNN_KNOB_TYPE_TILE_CGA_N: return 1;
      case CUDNN_KNOB_TYPE_TILE_CGA_M: return 2;
      default: return 3;
    }
  };
  std::stable_sort(knobs.begin(), knobs.end(),
                   [&](const KnobRange& a, const KnobRange& b) { return rank(a.type) < rank(b.type); });
  for (const KnobRange& k : knobs) {
    int64_t at = k.min;
    for (const auto& [type, value] : current.knobs)
      if (type == k.type) at = value;
    // The values nearest the current one first (tile-size knobs can have hundreds).
    std::vector<int64_t> values;
    for (int64_t v = k.min; v <= k.max; v += k.stride)
      if (!cluster_knob(k.type) || power_of_two(v)) values.push_back(v);
    std::stable_sort(values.begin(), values.end(),
                     [&](int64_t a, int64_t b) { return std::llabs(a - at) < std::llabs(b - at); });
    if (static_cast<int64_t>(values.size()) > kValuesPerKnob) values.resize(kValuesPerKnob);
    const Config base = current;
    for (int64_t v : values) {
      if (out_of_time()) return best;
      Config c = base;
      bool replaced = false;
      for (auto& kv : c.knobs)
        if (kv.first == k.type) kv.second = v, replaced = true;
      if (!replaced) c.knobs.emplace_back(k.type, v);
      std::sort(c.knobs.begin(), c.knobs.end());
      if (consider(c)) current = c;
    }
  }
  return best;
}

std::unique_ptr<EnginePlan> build_engine_plan(cudnnHandle_t handle, const EngineConv& conv, const std::string& name,
                                              const EngineFilter& filter) {
  Config c;
  if (!parse_name(name, c)) return nullptr;
  auto parts = std::make_unique<EnginePlan::Parts>();
  parts->graph = make_graph(handle, conv);
  if (!parts->graph) return nullptr;
  parts->engine = make_engine(*parts->graph, c.engine);
  if (!parts->engine.ok() || !engine_allowed(parts->engine, filter)) return nullptr;
  for (const auto& [type, value] : c.knobs) {
    Desc k(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    const cudnnBackendKnobType_t t = static_cast<cudnnBackendKnobType_t>(type);
    if (!built(k, k.set(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &t) &&
                      k.set_int(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, value)))
      return nullptr;
    parts->knobs.push_back(std::move(k));
  }
  std::vector<cudnnBackendDescriptor_t> knobs = raw(parts->knobs);
  if (!built(parts->cfg,
             parts->cfg.set_desc(CUDNN_ATTR_ENGINECFG_ENGINE, parts->engine) &&
                 (knobs.empty() || parts->cfg.set(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                  static_cast<int64_t>(knobs.size()), knobs.data()))))
    return nullptr;
  if (!built(parts->plan, parts->plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle) &&
                              parts->plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, parts->cfg)))
    return nullptr;
  const int64_t ws = parts->plan.get_int(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE);
  if (ws < 0) return nullptr;
  parts->workspace_bytes = static_cast<size_t>(ws);
  parts->name = name;
  parts->pass = conv.pass;
  return std::make_unique<EnginePlan>(std::move(parts));
}

const EnginePlan* EngineChoice::plan(cudnnHandle_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(handle);
  if (it == plans_.end()) it = plans_.emplace(handle, build_engine_plan(handle, conv_, name_, filter_)).first;
  return it->second.get();
}

}  // namespace gpu
}  // namespace ge
